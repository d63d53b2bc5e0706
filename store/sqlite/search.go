package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/internal/searchtext"
)

// Search: the text of each event worth finding (store/internal/searchtext)
// is kept in search_docs with an FTS5 index over it (migration 12). The
// indexer fills them in the background, from the chunks the writer
// committed, on the write connection between two of the writer's
// batches: the writer never decodes a line for the index, and under a
// burst of lines the indexer waits for a quiet moment (at most
// indexMaxGap), then takes its batch in one short transaction.

// When the indexer looks for chunks to index: every indexTick while the
// writer is quiet, at least every indexMaxGap while it is busy; it takes
// indexChunks chunks a transaction.
const (
	indexTick   = 100 * time.Millisecond
	indexMaxGap = time.Second
	indexChunks = 256
)

type indexer struct {
	db         *DB
	cp         *checkpointer
	stop, done chan struct{}
	poke       chan struct{} // capacity 1: index now (tests, Search)
	passes     atomic.Int64  // transactions that indexed something (tests)
}

func newIndexer(db *DB, cp *checkpointer) *indexer {
	ix := &indexer{db: db, cp: cp, stop: make(chan struct{}), done: make(chan struct{}), poke: make(chan struct{}, 1)}
	go ix.run()
	return ix
}

func (ix *indexer) close() {
	close(ix.stop)
	<-ix.done
}

func (ix *indexer) run() {
	defer close(ix.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-ix.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(indexTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ix.stop:
			return
		case <-t.C:
			if !ix.cp.writerIdle.Load() && time.Since(last) < indexMaxGap {
				continue
			}
		case <-ix.poke:
		}
		last = time.Now()
		for {
			n, err := ix.step(ctx)
			// Best effort: a failed pass (a full disk) is tried again at
			// the next tick; the writer's health reports the disk.
			if err != nil || n < indexChunks {
				break
			}
		}
	}
}

// A doc is one row of search_docs to insert, with what its event tells
// of its session.
type doc struct {
	pk, seq, time int64
	searchtext.Doc
}

// step indexes the next chunks after the mark and returns how many it
// read.
func (ix *indexer) step(ctx context.Context) (int, error) {
	db := ix.db
	var mark int64
	if err := db.r.QueryRowContext(ctx, `SELECT last_chunk FROM search_state`).Scan(&mark); err != nil {
		return 0, err
	}
	docs, top, n, err := readDocs(ctx, db.r, mark, indexChunks)
	if err != nil || n == 0 {
		return 0, err
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	// A session deleted meanwhile may have taken the mark back (its
	// chunks' ids may be given again): index from there next time.
	var now int64
	if err := tx.QueryRowContext(ctx, `SELECT last_chunk FROM search_state`).Scan(&now); err != nil {
		return 0, err
	}
	if now != mark {
		return 0, nil
	}
	if err := writeDocs(ctx, tx, docs); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE search_state SET last_chunk = ?`, top); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	ix.passes.Add(1)
	return n, nil
}

// querier is what readDocs and writeDocs need of a *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// readDocs reads up to limit chunks after chunk id mark and returns the
// documents of their events, the id of the last chunk read and how many
// were read.
func readDocs(ctx context.Context, q querier, mark int64, limit int) (docs []doc, top int64, n int, err error) {
	rows, err := q.QueryContext(ctx, `SELECT c.id, c.session, s.id, c.first_seq, c.events
		FROM event_chunks c JOIN sessions s ON s.pk = c.session WHERE c.id > ? ORDER BY c.id LIMIT ?`, mark, limit)
	if err != nil {
		return nil, 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, pk, first int64
			sid           string
			data          []byte
		)
		if err := rows.Scan(&id, &pk, &sid, &first, &data); err != nil {
			return nil, 0, 0, err
		}
		top, n = id, n+1
		// A damaged chunk is left out of the index, not allowed to stop it.
		_ = decodeChunk(sid, first, data, first, func(ev store.Event) bool {
			if d := searchtext.Extract(&ev); d.Kind != "" || d.Title != "" {
				docs = append(docs, doc{pk: pk, seq: ev.Seq, time: ev.Time.UnixNano(), Doc: d})
			}
			return true
		})
	}
	return docs, top, n, rows.Err()
}

// writeDocs stores docs (those of a session deleted meanwhile are left
// out) and the titles and first prompts they give.
func writeDocs(ctx context.Context, q querier, docs []doc) error {
	for _, d := range docs {
		if d.Kind != "" {
			if _, err := q.ExecContext(ctx, `INSERT OR IGNORE INTO search_docs (session, seq, time, kind, text)
				SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM sessions WHERE pk = ?1)`,
				d.pk, d.seq, d.time, d.Kind, store.SearchableText(d.Text)); err != nil {
				return err
			}
		}
		if d.Title != "" {
			if _, err := q.ExecContext(ctx, `UPDATE sessions SET title = ? WHERE pk = ?`, d.Title, d.pk); err != nil {
				return err
			}
		}
		if d.Prompt != "" {
			if _, err := q.ExecContext(ctx, `UPDATE sessions SET first_prompt = ? WHERE pk = ? AND first_prompt = ''`, d.Prompt, d.pk); err != nil {
				return err
			}
		}
	}
	return nil
}

// indexExisting is migration 12's Go step: it indexes the logs already
// stored, so that search finds the sessions of before the upgrade.
func indexExisting(ctx context.Context, tx *sql.Tx) error {
	var mark int64
	for {
		docs, top, n, err := readDocs(ctx, tx, mark, 1024)
		if err != nil {
			return fmt.Errorf("reading the events to index: %w", err)
		}
		if n == 0 {
			break
		}
		if err := writeDocs(ctx, tx, docs); err != nil {
			return fmt.Errorf("indexing the events: %w", err)
		}
		mark = top
	}
	_, err := tx.ExecContext(ctx, `UPDATE search_state SET last_chunk = ?`, mark)
	return err
}

// Search implements [store.Store].
func (db *DB) Search(ctx context.Context, q store.SearchQuery) (_ []*store.SearchHit, err error) {
	defer wrap(&err, "sqlite: Search")
	if err := db.check(); err != nil {
		return nil, err
	}
	terms, limit, err := store.ParseSearch(q)
	if err != nil {
		return nil, err
	}
	defer db.health.TrackRead(ctx, &err)
	// Each word a quoted string: FTS5 takes nothing in it as an operator
	// (the words hold only letters and digits anyway).
	match := `"` + strings.Join(terms, `" "`) + `"`
	where, args := `search_fts MATCH ?`, []any{match}
	if q.SessionID != "" {
		where += ` AND s.id = ?`
		args = append(args, q.SessionID)
	}
	args = append(args, limit)
	rows, err := db.r.QueryContext(ctx, `SELECT s.id, d.seq, d.time, d.kind,
		snippet(search_fts, 0, char(2), char(3), '…', 24)
		FROM search_fts JOIN search_docs d ON d.id = search_fts.rowid JOIN sessions s ON s.pk = d.session
		WHERE `+where+` ORDER BY d.time DESC, d.id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hits []*store.SearchHit
	for rows.Next() {
		var h store.SearchHit
		var t int64
		if err := rows.Scan(&h.SessionID, &h.Seq, &t, &h.Kind, &h.Snippet); err != nil {
			return nil, err
		}
		h.Time = fromNanos(t)
		hits = append(hits, &h)
	}
	return hits, rows.Err()
}

// IndexNow makes the indexer look for events to index at once, instead of
// at its next tick (tests).
func (db *DB) IndexNow() {
	select {
	case db.ix.poke <- struct{}{}:
	default:
	}
}
