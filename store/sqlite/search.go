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
// writer only queues, in search_queue, the chunks holding an event the
// index may take (a test of each event's type: searchtext.Indexable);
// the indexer decodes them and fills the index in the background, on the
// write connection between two of the writer's batches, waiting for a
// quiet moment of the writer (at most indexMaxGap), in short
// transactions.

// When the indexer looks for chunks to index: once the writer has been
// quiet (no commit, nothing queued) for indexQuiet, looking every
// indexTick; while the writer never is, every indexMaxGap at least (how
// late search may be under a sustained burst). It takes indexChunks chunks
// a transaction.
const (
	indexTick   = 25 * time.Millisecond
	indexQuiet  = 50 * time.Millisecond
	indexMaxGap = 3 * time.Second
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
	commits, quietSince := ix.cp.commits.Load(), time.Now()
	for {
		select {
		case <-ix.stop:
			return
		case <-t.C:
			if n := ix.cp.commits.Load(); n != commits || !ix.cp.writerIdle.Load() {
				commits, quietSince = n, time.Now()
			}
			if time.Since(quietSince) < indexQuiet && time.Since(last) < indexMaxGap {
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

// step indexes the next chunks of the queue and returns how many it
// read.
func (ix *indexer) step(ctx context.Context) (int, error) {
	db := ix.db
	docs, ids, err := readDocs(ctx, db.r, `SELECT c.id, c.session, s.id, c.first_seq, c.events
		FROM search_queue q JOIN event_chunks c ON c.id = q.chunk JOIN sessions s ON s.pk = c.session
		ORDER BY q.chunk LIMIT ?`, indexChunks)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if err := writeDocs(ctx, tx, docs); err != nil {
		return 0, err
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `DELETE FROM search_queue WHERE chunk = ?`, id); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	ix.passes.Add(1)
	return len(ids), nil
}

// querier is what readDocs and writeDocs need of a *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// readDocs reads the chunks query selects (id, session pk, session id,
// first seq, events) and returns the documents of their events and the
// chunks' ids.
func readDocs(ctx context.Context, q querier, query string, args ...any) (docs []doc, ids []int64, err error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, pk, first int64
			sid           string
			data          sql.RawBytes // decoded before the next row: no copy
		)
		if err := rows.Scan(&id, &pk, &sid, &first, &data); err != nil {
			return nil, nil, err
		}
		ids = append(ids, id)
		// A damaged chunk is left out of the index, not allowed to stop it.
		_ = decodeChunk(sid, first, data, first, func(ev store.Event) bool {
			if d := searchtext.Extract(&ev); d.Kind != "" || d.Title != "" {
				docs = append(docs, doc{pk: pk, seq: ev.Seq, time: ev.Time.UnixNano(), Doc: d})
			}
			return true
		})
	}
	return docs, ids, rows.Err()
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
		docs, ids, err := readDocs(ctx, tx, `SELECT c.id, c.session, s.id, c.first_seq, c.events
			FROM event_chunks c JOIN sessions s ON s.pk = c.session WHERE c.id > ? ORDER BY c.id LIMIT 1024`, mark)
		if err != nil {
			return fmt.Errorf("reading the events to index: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		if err := writeDocs(ctx, tx, docs); err != nil {
			return fmt.Errorf("indexing the events: %w", err)
		}
		mark = ids[len(ids)-1]
	}
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

// queueChunkSQL queues the chunk the writer just inserted for the indexer.
const queueChunkSQL = `INSERT OR IGNORE INTO search_queue (chunk) VALUES (last_insert_rowid())`

// IndexNow makes the indexer look for events to index at once, instead of
// at its next tick (tests).
func (db *DB) IndexNow() {
	select {
	case db.ix.poke <- struct{}{}:
	default:
	}
}
