package postgres

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/internal/chunk"
	"github.com/claudectl/claudectl/store/internal/searchtext"
)

// Search: the text of each event worth finding (store/internal/searchtext)
// is kept in search_docs with its words as a tsvector (migration 11). The
// indexer fills it in the background, a session at a time, in
// transactions of its own: the event writer never decodes a line for the
// index nor waits for it. Daemons sharing the database share the work:
// each locks the progress row of the session it indexes (SKIP LOCKED).

// When the indexer looks for sessions to index, and how much it takes at
// once: indexSessions sessions a look, indexChunks chunks a transaction.
const (
	indexTick     = 250 * time.Millisecond
	indexSessions = 32
	indexChunks   = 64
)

type indexer struct {
	db         *DB
	stop, done chan struct{}
	poke       chan struct{} // capacity 1: index now (tests)
	passes     atomic.Int64  // transactions that indexed something (tests)
}

func newIndexer(db *DB) *indexer {
	ix := &indexer{db: db, stop: make(chan struct{}), done: make(chan struct{}), poke: make(chan struct{}, 1)}
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
	for {
		select {
		case <-ix.stop:
			return
		case <-t.C:
		case <-ix.poke:
		}
		// Best effort: a failed pass (the server away) is tried again at
		// the next tick; the store's health reports the server.
		for {
			n, err := ix.pass(ctx)
			if err != nil || n == 0 {
				break
			}
		}
	}
}

// pass indexes what is new in up to indexSessions sessions and returns
// how many transactions indexed something.
func (ix *indexer) pass(ctx context.Context) (int, error) {
	db := ix.db
	qctx, cancel := db.ctx(ctx)
	rows, err := db.pool.Query(qctx, `SELECT s.pk, s.id, COALESCE(p.indexed_seq, 0) FROM sessions s
		LEFT JOIN search_progress p ON p.session = s.pk
		WHERE s.last_seq > COALESCE(p.indexed_seq, 0) ORDER BY s.pk LIMIT $1`, indexSessions)
	if err != nil {
		cancel()
		return 0, err
	}
	type todo struct {
		pk  int64
		id  string
		seq int64
	}
	var list []todo
	for rows.Next() {
		var t todo
		if err := rows.Scan(&t.pk, &t.id, &t.seq); err != nil {
			rows.Close()
			cancel()
			return 0, err
		}
		list = append(list, t)
	}
	rows.Close()
	cancel()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, t := range list {
		did, err := ix.session(ctx, t.pk, t.id)
		if err != nil {
			return n, err
		}
		if did {
			n++
		}
	}
	return n, nil
}

// session indexes the next chunks of session pk after its progress, in
// one transaction; false when another daemon holds it or nothing was new.
func (ix *indexer) session(ctx context.Context, pk int64, id string) (bool, error) {
	db := ix.db
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO search_progress (session) SELECT pk FROM sessions WHERE pk = $1
		ON CONFLICT DO NOTHING`, pk); err != nil {
		return false, err
	}
	var from int64
	var firstPrompt string
	switch err := tx.QueryRow(ctx, `SELECT indexed_seq, first_prompt FROM search_progress WHERE session = $1
		FOR UPDATE SKIP LOCKED`, pk).Scan(&from, &firstPrompt); {
	case err == pgx.ErrNoRows:
		return false, nil // another daemon indexes it, or it was deleted
	case err != nil:
		return false, err
	}
	rows, err := tx.Query(ctx, `SELECT first_seq, events FROM event_chunks WHERE session = $1 AND last_seq > $2
		ORDER BY last_seq LIMIT $3`, pk, from, indexChunks)
	if err != nil {
		return false, err
	}
	var (
		docs  []searchtext.Doc
		seqs  []int64
		times []int64
		top   = from
		title string
	)
	for rows.Next() {
		var first int64
		var data []byte
		if err := rows.Scan(&first, &data); err != nil {
			rows.Close()
			return false, err
		}
		// A damaged chunk is left out of the index, not allowed to stop it.
		_ = chunk.Decode(id, first, data, from+1, func(ev store.Event) bool {
			top = max(top, ev.Seq)
			d := searchtext.Extract(&ev)
			if d.Title != "" {
				title = cleanText(d.Title)
			}
			if d.Prompt != "" && firstPrompt == "" {
				firstPrompt = cleanText(d.Prompt)
			}
			if d.Kind != "" {
				docs, seqs, times = append(docs, d), append(seqs, ev.Seq), append(times, ev.Time.UnixNano())
			}
			return true
		})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	if top == from {
		return false, nil
	}
	b := &pgx.Batch{}
	for i, d := range docs {
		text := cleanText(store.SearchableText(d.Text))
		b.Queue(`INSERT INTO search_docs (session, seq, time, kind, text, words)
			VALUES ($1, $2, $3, $4, $5, to_tsvector('simple', $6)) ON CONFLICT DO NOTHING`,
			pk, seqs[i], times[i], d.Kind, text, strings.Join(store.SearchTerms(text), " "))
	}
	set := `indexed_seq = $2, first_prompt = $3`
	args := []any{pk, top, firstPrompt}
	if title != "" {
		set += `, title = $4`
		args = append(args, title)
	}
	b.Queue(`UPDATE search_progress SET `+set+` WHERE session = $1`, args...)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, err
	}
	ix.passes.Add(1)
	return true, nil
}

// Search implements [store.Store].
func (db *DB) Search(ctx context.Context, q store.SearchQuery) (_ []*store.SearchHit, err error) {
	defer wrap(&err, "postgres: Search")
	if err := db.check(); err != nil {
		return nil, err
	}
	terms, limit, err := store.ParseSearch(q)
	if err != nil {
		return nil, err
	}
	defer db.health.TrackRead(ctx, &err)
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	// plainto_tsquery ANDs the words and takes no operator from them (they
	// hold only letters and digits anyway).
	where, args := `d.words @@ plainto_tsquery('simple', $1)`, []any{strings.Join(terms, " "), limit}
	if q.SessionID != "" {
		if text("session id", q.SessionID) != nil {
			return nil, nil
		}
		where += ` AND s.id = $3`
		args = append(args, q.SessionID)
	}
	rows, err := db.pool.Query(ctx, `SELECT s.id, d.seq, d.time, d.kind,
		ts_headline('simple', d.text, plainto_tsquery('simple', $1),
			'StartSel=' || chr(2) || ', StopSel=' || chr(3) || ', MaxWords=30, MinWords=12, ShortWord=0, MaxFragments=1, FragmentDelimiter=" … "')
		FROM search_docs d JOIN sessions s ON s.pk = d.session
		WHERE `+where+` ORDER BY d.time DESC, d.seq DESC LIMIT $2`, args...)
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

// UsageSince implements [store.Store].
func (db *DB) UsageSince(ctx context.Context, since time.Time, limit int) (_ []*store.UsageRecord, err error) {
	defer wrap(&err, "postgres: UsageSince")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	q := `SELECT session_id, turn, process, event_seq, time, subtype, is_error, duration_ms,
		cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, models
		FROM usage WHERE time >= $1 ORDER BY time, session_id, turn`
	args := []any{since.UnixNano()}
	if limit > 0 {
		q += ` LIMIT $2`
		args = append(args, limit)
	}
	rows, err := db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []*store.UsageRecord
	for rows.Next() {
		r := &store.UsageRecord{}
		var t int64
		var models string
		if err := rows.Scan(&r.SessionID, &r.Turn, &r.Process, &r.EventSeq, &t, &r.Subtype, &r.IsError, &r.DurationMS,
			&r.CostUSD, &r.InputTokens, &r.OutputTokens, &r.CacheReadTokens, &r.CacheWriteTokens, &models); err != nil {
			return nil, err
		}
		r.Time = fromNanos(t)
		if err := decodeModels(models, r); err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}
