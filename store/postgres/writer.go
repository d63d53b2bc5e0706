package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/internal/chunk"
	"github.com/claudectl/claudectl/store/internal/groupcommit"
)

// A request is one Append, AppendBatch or AppendAsync call (with the
// session update or ledger entry riding with it), or one DeleteSession.
type request struct {
	evs           []*store.Event
	deleteSession string
	// then, when set, runs in the transaction after the request's events
	// are inserted (seq is the last one's); an error fails the request
	// alone. The events it returns, of the same session, are stored right
	// after the request's own (prepared); only a request with follows set
	// may return any. It may run more than once (a batch is written again
	// when one of its requests fails), so it must set its results afresh
	// each time.
	then    func(ctx context.Context, tx pgx.Tx, seq int64) ([]*store.Event, error)
	follows bool
	groupcommit.Base
}

// The appender is the goroutine that writes events: it takes every
// request queued since its last commit, up to maxBatch events, and stores
// them in one transaction.
type appender struct {
	db       *DB
	maxBatch int
	commits  atomic.Int64
	stats    store.WriterStats
	closing  atomic.Bool // Close was called: no more retries
	q        *groupcommit.Queue[*request]
}

func newAppender(db *DB, maxBatch int) *appender {
	a := &appender{db: db, maxBatch: maxBatch}
	a.q = groupcommit.New(1024, maxBatch, groupcommit.Kind[*request]{
		Base:  func(r *request) *groupcommit.Base { return &r.Base },
		Size:  func(r *request) int { return len(r.evs) },
		Key:   func(r *request) string { return groupcommit.SessionKey(r.deleteSession, r.evs) },
		Heavy: func(r *request) bool { return groupcommit.SessionHeavy(r.deleteSession, r.then != nil) },
	})
	go a.q.Run(a.commit, nil)
	return a
}

func (a *appender) enqueue(ctx context.Context, r *request) error { return a.q.Enqueue(ctx, r) }
func (a *appender) submit(ctx context.Context, r *request) error  { return a.q.Submit(ctx, r) }

func (a *appender) close() {
	a.closing.Store(true)
	a.q.Close()
}

// requestError is a failure of one request in a batch written without
// savepoints: the batch is written again with them.
type requestError struct{ error }

func (e requestError) Unwrap() error { return e.error }

// commit stores the requests of batch that were not withdrawn, in one
// transaction, and tells each caller the outcome. See the package doc.
func (a *appender) commit(batch []*request) {
	live := batch[:0]
	careful := false
	for _, r := range batch {
		if r.Take() {
			live = append(live, r)
			careful = careful || r.deleteSession != ""
		}
	}
	if len(live) == 0 {
		return
	}
	a.commits.Add(1)
	failed := make([]error, len(live))
	h := a.db.health
	var err error
	start := time.Now()
	retryUntil := start.Add(a.db.retryFor)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		clear(failed)
		err = a.write(live, failed, careful)
		if _, ok := err.(requestError); ok {
			clear(failed)
			err = a.write(live, failed, true)
		}
		var ce commitError
		if errors.As(err, &ce) && ce.m.xid != "" {
			// The link failed during COMMIT: ask the server, once it is
			// back, whether that transaction committed.
			o := a.outcome(ce.m, retryUntil)
			switch o {
			case "committed":
				err = nil
			case "aborted":
				err = ce.error // nothing stored: written again below
			}
		}
		// The server went away before the commit (it restarts, the link
		// blinked): nothing of the batch is stored, so it is written
		// again, its callers waiting, until the server is back or the
		// retry time is spent. A failed COMMIT is written again only
		// when the server says its transaction aborted.
		if err == nil || !retryable(err) || time.Now().Add(wait).After(retryUntil) || a.closing.Load() {
			break
		}
		if werr := h.Classify(store.ErrWriteFailed, err); werr != nil {
			h.Failed(werr)
		}
		time.Sleep(wait)
	}
	if err != nil {
		if werr := h.Classify(store.ErrWriteFailed, err); werr != nil {
			err = werr
			h.Failed(err)
		}
		err = fmt.Errorf("postgres: append: %w", err)
	} else {
		h.OK()
		n := 0
		for i, r := range live {
			if failed[i] == nil {
				n += len(r.evs)
			}
		}
		a.stats.Committed(n, time.Since(start))
	}
	for i, r := range live {
		e := err
		if e == nil {
			e = failed[i]
		}
		if e != nil {
			for _, ev := range r.evs {
				ev.Seq = 0
			}
		}
		r.Notify(e)
	}
}

// write writes live in one transaction. Without careful, all the events
// go in with two statements and a request's failure ends the transaction
// with a requestError; with careful, each request runs in a savepoint and
// its failure (failed[i]) rolls back to it. A failure of the server or the
// link fails the batch.
func (a *appender) write(live []*request, failed []error, careful bool) error {
	// The batch is not one caller's to cancel; the timeout keeps a server
	// that stopped answering from hanging the writer.
	ctx, cancel := a.db.ctx(context.Background())
	defer cancel()
	tx, err := a.db.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	var m mark // what tells whether the transaction committed, once it wrote
	if !careful && slices.ContainsFunc(live, func(r *request) bool { return r.follows }) {
		// Events that follow a request's then go right after its own, so
		// the requests go in one by one, in order.
		for _, r := range live {
			if err := a.one(ctx, tx, r, &m); err != nil {
				return asRequestError(err)
			}
		}
		if err := notify(ctx, tx, live, nil); err != nil {
			return err
		}
		return commit(ctx, tx, m)
	}
	if !careful {
		var evs []*store.Event
		for _, r := range live {
			evs = append(evs, r.evs...)
		}
		if err := appendEvents(ctx, tx, evs, a.db, &m); err != nil {
			return asRequestError(err)
		}
		for _, r := range live {
			if r.then != nil {
				if _, err := r.then(ctx, tx, r.evs[len(r.evs)-1].Seq); err != nil {
					return asRequestError(err)
				}
			}
		}
		if err := notify(ctx, tx, live, nil); err != nil {
			return err
		}
		return commit(ctx, tx, m)
	}
	for i, r := range live {
		if _, err := tx.Exec(ctx, `SAVEPOINT request`); err != nil {
			return err
		}
		before := m
		err := a.one(ctx, tx, r, &m)
		if err != nil {
			if storageFailure(err) != "" {
				return err
			}
			if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT request`); err != nil {
				return err
			}
			m.pk, m.first, m.data = before.pk, before.first, before.data // its chunks are gone
			for _, ev := range r.evs {
				ev.Seq = 0
			}
			failed[i] = err
		}
		if _, err := tx.Exec(ctx, `RELEASE SAVEPOINT request`); err != nil {
			return err
		}
	}
	if err := notify(ctx, tx, live, failed); err != nil {
		return err
	}
	return commit(ctx, tx, m)
}

// A commitError is a failed COMMIT: whether the transaction committed is
// unknown until the server says what became of it (m), so its batch is not
// written again before that.
type commitError struct {
	error
	m mark
}

func (e commitError) Unwrap() error { return e.error }

func commit(ctx context.Context, tx pgx.Tx, m mark) error {
	if err := tx.Commit(ctx); err != nil {
		return commitError{err, m}
	}
	return nil
}

// A mark is what tells, once its COMMIT was cut, whether a transaction
// committed: its id and the first chunk of events it inserted (and kept).
//
// The id alone cannot tell. A server that crashes before any of a
// transaction's records reached its WAL comes back with its next id at or
// below that transaction's, and gives the id to a new transaction: the
// server then calls it committed when the new one commits, though nothing
// of the cut one was stored (an acknowledged event was missing from the
// log after a restart under load). The chunk can: the cut transaction
// committed exactly when its chunk, the same bytes in the same place, is
// in the table.
type mark struct {
	xid       string // the transaction's id; "" before it wrote
	pk, first int64  // the chunk's session and first seq
	data      []byte // the chunk; nil when the transaction kept none
}

// outcome asks the server what became of the transaction m whose COMMIT
// failed: "committed", "aborted", or "" when that cannot be known before
// until (the server stays away) or at all (the server forgot the id and
// the chunk was pruned since).
func (a *appender) outcome(m mark, until time.Time) string {
	if m.data == nil {
		// It kept no event (each request failed alone): writing the
		// batch again stores nothing twice.
		return "aborted"
	}
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		ctx, cancel := a.db.ctx(context.Background())
		o, err := a.ask(ctx, m)
		cancel()
		switch {
		case err == nil && o != "in progress":
			return o
		case err != nil && storageFailure(err) == "":
			return ""
		}
		if time.Now().Add(wait).After(until) || a.closing.Load() {
			return ""
		}
		time.Sleep(wait)
	}
}

// ask asks the server once what became of m: "committed", "aborted", "in
// progress" (wait and ask again) or "" (it cannot tell).
func (a *appender) ask(ctx context.Context, m mark) (string, error) {
	// The id's status first: a transaction still in progress is waited
	// for, so that the chunk, read after it ended, is there if it
	// committed.
	var status *string
	err := a.db.pool.QueryRow(ctx, `SELECT pg_xact_status($1::xid8)`, m.xid).Scan(&status)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "22023" && strings.Contains(pe.Message, "in the future"):
		// The server came back from a crash with its next id at or below
		// the transaction's: nothing of it reached the disk.
		return "aborted", nil
	case err != nil:
		return "", err
	case status != nil && *status != "committed":
		// "in progress", or "aborted": an id given again after a crash
		// is one whose first holder left nothing on disk, so an aborted
		// holder of it means the first one did not commit either.
		return *status, nil
	}
	// Committed (by this transaction, or by another given its id after a
	// crash), or too old to tell: the chunk says which.
	var found bool
	var pruned int64
	err = a.db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM event_chunks WHERE session = $1 AND first_seq = $2 AND events = $3),
		COALESCE((SELECT pruned_seq FROM sessions WHERE pk = $1), 0)`, m.pk, m.first, m.data).Scan(&found, &pruned)
	switch {
	case err != nil:
		return "", err
	case found:
		return "committed", nil
	case pruned >= m.first:
		return "", nil // pruned since, perhaps
	}
	return "aborted", nil
}

// retryable reports whether a batch that failed with err can be written
// again: the server or the link failed, before the commit (or during a
// commit the server says was aborted).
func retryable(err error) bool {
	var ce commitError
	return !errors.As(err, &ce) && storageFailure(err) != ""
}

// notify tells the daemons listening that the sessions live appended to
// (but the failed requests') have new events; delivered at commit.
func notify(ctx context.Context, tx pgx.Tx, live []*request, failed []error) error {
	seen := map[string]bool{}
	var ids []string
	for i, r := range live {
		if failed != nil && failed[i] != nil {
			continue
		}
		for _, ev := range r.evs {
			if !seen[ev.SessionID] {
				seen[ev.SessionID] = true
				ids = append(ids, ev.SessionID)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, notifyStatement, ids)
	return err
}

// asRequestError marks err as a request's own unless the server or the
// link caused it.
func asRequestError(err error) error {
	if storageFailure(err) != "" {
		return err
	}
	return requestError{err}
}

// one writes one request inside the batch's transaction.
func (a *appender) one(ctx context.Context, tx pgx.Tx, r *request, m *mark) error {
	if id := r.deleteSession; id != "" {
		tag, err := tx.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		return nil
	}
	if err := appendEvents(ctx, tx, r.evs, a.db, m); err != nil {
		return err
	}
	if r.then != nil {
		more, err := r.then(ctx, tx, r.evs[len(r.evs)-1].Seq)
		if err != nil || len(more) == 0 {
			return err
		}
		return appendEvents(ctx, tx, more, a.db, m)
	}
	return nil
}

// appendEvents numbers evs (of any sessions, in order) after their
// sessions' last events and inserts them: one UPDATE of the sessions'
// last_seq, which locks their rows until the transaction ends and checks
// the fencing number of the sessions db holds a lease of, and one COPY of
// a chunk per session. m notes the transaction's id and its first chunk.
func appendEvents(ctx context.Context, tx pgx.Tx, evs []*store.Event, db *DB, m *mark) error {
	var ids []string
	counts := make(map[string]int64)
	for _, ev := range evs {
		if counts[ev.SessionID] == 0 {
			ids = append(ids, ev.SessionID)
		}
		counts[ev.SessionID]++
	}
	relay, sent := map[string]int64{}, map[string]int64{}
	for _, ev := range evs {
		m := relay
		if ev.Direction == store.ToCLI {
			m = sent
		}
		if ev.RelayFrame > m[ev.SessionID] {
			m[ev.SessionID] = ev.RelayFrame
		}
	}
	ns := make([]int64, len(ids))
	fences := make([]int64, len(ids))
	ttls := make([]int64, len(ids))
	frames := make([]int64, len(ids))
	sents := make([]int64, len(ids))
	for i, id := range ids {
		ns[i] = counts[id]
		fences[i], ttls[i] = db.lease(id)
		frames[i], sents[i] = relay[id], sent[id]
	}
	// A fenced session's lease is extended as its events are written
	// (writing is being alive), so that Renew may skip the rows a batch
	// holds locked instead of waiting for them: a renewal waiting on a
	// batch's rows while the batch waits on the renewal's is a deadlock,
	// which PostgreSQL breaks only after deadlock_timeout (1s).
	rows, err := tx.Query(ctx, `UPDATE sessions s SET last_seq = s.last_seq + v.n,
		lease_until = CASE WHEN v.fence <= 0 THEN s.lease_until
			ELSE GREATEST(s.lease_until, (extract(epoch from clock_timestamp()) * 1e9)::bigint + v.ttl) END,
		relay_received = GREATEST(s.relay_received, v.frame), relay_sent = GREATEST(s.relay_sent, v.sent)
		FROM unnest($1::text[], $2::bigint[], $3::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) AS v(id, n, fence, ttl, frame, sent)
		WHERE s.id = v.id AND (v.fence = 0 OR (s.fence = v.fence AND s.owner = $4))
		RETURNING s.id, s.pk, s.last_seq, pg_current_xact_id()::text`, ids, ns, fences, db.owner, ttls, frames, sents)
	if err != nil {
		return err
	}
	type next struct{ pk, seq int64 }
	at := make(map[string]next, len(ids))
	for rows.Next() {
		var id string
		var pk, last int64
		if err := rows.Scan(&id, &pk, &last, &m.xid); err != nil {
			rows.Close()
			return err
		}
		at[id] = next{pk, last - counts[id] + 1}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(at) < len(ids) {
		var missing []string
		for _, id := range ids {
			if _, ok := at[id]; !ok {
				missing = append(missing, id)
			}
		}
		return notWritable(ctx, tx, missing)
	}
	// Number the events and encode each session's run as chunks (a new
	// chunk past chunk.MaxBytes).
	writers := make(map[string]*chunk.Writer, len(ids))
	var rowsOut [][]any
	emit := func(c *chunk.Writer) {
		rowsOut = append(rowsOut, []any{c.PK, c.First, c.Last, c.Buf})
	}
	for _, ev := range evs {
		n := at[ev.SessionID]
		ev.Seq = n.seq
		n.seq++
		at[ev.SessionID] = n
		c := writers[ev.SessionID]
		if c == nil {
			c = new(chunk.Writer)
			c.Reset(n.pk, ev.Seq)
			writers[ev.SessionID] = c
		}
		c.Add(ev, ev.Seq)
		if len(c.Buf) >= chunk.MaxBytes {
			emit(c)
			writers[ev.SessionID] = nil // the next event starts a new chunk
		}
	}
	for _, id := range ids {
		if c := writers[id]; c != nil && !c.Empty() {
			emit(c)
		}
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"event_chunks"}, []string{"session", "first_seq", "last_seq", "events"},
		pgx.CopyFromRows(rowsOut))
	if err == nil && m.data == nil && len(rowsOut) > 0 {
		m.pk, m.first, m.data = rowsOut[0][0].(int64), rowsOut[0][1].(int64), rowsOut[0][3].([]byte)
	}
	return err
}
