package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claudectl/claudectl/store"
)

// Request states. A request is withdrawn by its caller (queued → cancelled)
// or taken by the writer (queued → taken), never both: that is what lets
// Append promise "a seq if and only if the event is stored".
const (
	queued int32 = iota
	taken
	cancelled
)

// An appendRequest is one Append or AppendBatch call, or one
// DeleteSession, waiting for the writer.
type appendRequest struct {
	evs []*store.Event
	// deleteSession, when set, makes the request a deletion of that
	// session; it runs in the writer so that the writer's cache of last
	// sequence numbers never outlives a session.
	deleteSession string
	// then, when set, runs in the transaction after the request's events
	// are inserted (seq is the last one's); an error fails the request
	// alone. It may run more than once (a batch is written again when one
	// of its requests fails), so it must write only through tx and set its
	// results afresh each time.
	then  func(ctx context.Context, tx dbtx, seq int64) error
	state atomic.Int32
	// notify is called once, on the writer goroutine, with the outcome of
	// a request the writer took. It must not block.
	notify func(error)
}

// sessionState is what the writer knows of a session's log.
type sessionState struct {
	pk   int64 // sessions.pk; -1: no such session (only within a batch)
	last int64 // seq of its last event
}

// An appender is the single goroutine that writes events: it takes every
// request queued since its last commit, up to maxBatch events, and stores
// them in one transaction (group commit).
type appender struct {
	// committed, if set, is called after each commit; it must not block.
	committed func()

	w       *sql.DB
	insert  *sql.Stmt // one row
	insertN *sql.Stmt // insertRows rows
	lookup  *sql.Stmt
	// stmts are the statements of session updates and the usage ledger
	// that run in the writer's transactions, prepared on first use
	// (outside a transaction: the writer has one connection).
	stmts    map[string]*sql.Stmt
	maxBatch int
	// sessions caches the committed state of the sessions appended to, so
	// a batch costs no query per session. Only the run goroutine touches
	// it; it is right because every event and every session deletion is
	// written by that goroutine.
	sessions map[string]sessionState
	// changed and args are write's scratch space, kept between batches.
	changed map[string]sessionState
	args    []any
	health  *health
	commits atomic.Int64 // batches written (for tests)

	mu     sync.RWMutex // held for reading while sending on in; for writing to close it
	closed bool         // guarded by mu
	in     chan *appendRequest
	exited chan struct{}
}

func newAppender(w *sql.DB, maxBatch int, h *health) (*appender, error) {
	ctx := context.Background()
	a := &appender{
		w:        w,
		health:   h,
		sessions: make(map[string]sessionState),
		changed:  make(map[string]sessionState),
		args:     make([]any, 0, 8*insertRows),
		maxBatch: maxBatch,
		in:       make(chan *appendRequest, 1024),
		exited:   make(chan struct{}),
	}
	// Rows go in by insertRows per statement: the per-statement cost of
	// database/sql and SQLite is then paid once for many rows.
	const row = "(?, ?, ?, ?, ?, ?, ?, ?)"
	const insert = `INSERT INTO events (session, seq, time, direction, type, subtype, raw, original_size) VALUES `
	var err error
	if a.insert, err = w.PrepareContext(ctx, insert+row); err != nil {
		return nil, err
	}
	if a.insertN, err = w.PrepareContext(ctx, insert+strings.Repeat(row+", ", insertRows-1)+row); err != nil {
		a.insert.Close()
		return nil, err
	}
	// No row: no such session.
	if a.lookup, err = w.PrepareContext(ctx, `SELECT pk, COALESCE((SELECT MAX(seq) FROM events WHERE session = sessions.pk), 0)
		FROM sessions WHERE id = ?`); err != nil {
		a.insert.Close()
		a.insertN.Close()
		return nil, err
	}
	if err := a.prepareKnown(ctx); err != nil {
		a.insert.Close()
		a.insertN.Close()
		a.lookup.Close()
		for _, st := range a.stmts {
			st.Close()
		}
		return nil, err
	}
	go a.run()
	return a, nil
}

// cachedTx runs statements in tx, prepared once for the writer's life when
// their text is one of the known ones (preparing costs more than running
// a small statement).
type cachedTx struct {
	tx *sql.Tx
	a  *appender
}

func (c cachedTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := c.a.stmts[q]; st != nil {
		return c.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return c.tx.QueryRowContext(ctx, q, args...)
}

func (c cachedTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := c.a.stmts[q]; st != nil {
		return c.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return c.tx.ExecContext(ctx, q, args...)
}

// prepareKnown prepares the statements cachedTx knows: the session
// updates the daemon makes at every turn and the usage ledger's.
func (a *appender) prepareKnown(ctx context.Context) error {
	a.stmts = map[string]*sql.Stmt{}
	status := store.StatusIdle
	known := []string{
		first(updateSQL(store.SessionUpdate{Status: &status}, time.Time{}, "")),
		first(updateSQL(store.SessionUpdate{Status: &status, Error: new(string)}, time.Time{}, "")),
		first(updateSQL(store.SessionUpdate{ClaudeSessionID: new(string)}, time.Time{}, "")),
	}
	known = append(known, usageStatements...)
	for _, q := range known {
		st, err := a.w.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		a.stmts[q] = st
	}
	return nil
}

func first[T, U any](t T, _ U) T { return t }

// insertRows is the number of rows of the multi-row insert. 64 rows
// (512 arguments) cost the writer less CPU per event than 16 in the
// daemon's benchmark.
const insertRows = 64

// enqueue queues r for the writer. It fails if ctx ends before r could be
// queued (the queue is full: the writer is behind) or the appender is
// closed.
func (a *appender) enqueue(ctx context.Context, r *appendRequest) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return store.ErrClosed
	}
	select {
	case a.in <- r:
		return nil
	default:
	}
	select {
	case a.in <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// submit queues r, waits until it is committed or failed, and returns the
// outcome. If ctx ends while r is still queued, r is withdrawn and ctx's
// error returned; once the writer has taken r, submit waits for the
// transaction to end, which takes one commit at most.
func (a *appender) submit(ctx context.Context, r *appendRequest) error {
	done := make(chan error, 1)
	r.notify = func(err error) { done <- err }
	if err := a.enqueue(ctx, r); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		if r.state.CompareAndSwap(queued, cancelled) {
			return ctx.Err()
		}
		return <-done
	}
}

// close stops taking requests, lets the writer commit those already queued
// and waits for it to exit.
func (a *appender) close() {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.in)
	}
	a.mu.Unlock()
	<-a.exited
	a.insert.Close()
	a.insertN.Close()
	a.lookup.Close()
	for _, st := range a.stmts {
		st.Close()
	}
}

func (a *appender) run() {
	defer close(a.exited)
	var batch []*appendRequest
	for {
		r, ok := <-a.in
		if !ok {
			return
		}
		// Take what queued while the last batch committed: that is the
		// group commit. Waiting for more was measured to lose throughput:
		// the callers being woken re-queue faster than any fixed delay.
		batch = append(batch[:0], r)
		n := len(r.evs)
	gather:
		for n < a.maxBatch {
			select {
			case r, ok := <-a.in:
				if !ok {
					break gather // commit this batch; the next receive ends the loop
				}
				batch = append(batch, r)
				n += len(r.evs)
			default:
				break gather
			}
		}
		a.commit(batch)
		if a.committed != nil {
			a.committed()
		}
		clear(batch) // let the requests be collected
	}
}

// commit stores the events of every request in batch that its caller has
// not withdrawn, in one transaction, and tells each caller the outcome.
//
// A request fails alone when its own events or its then fail (a missing
// session, a constraint, a ledger error): the batch is first written with
// no per-request cost; if a request fails, the transaction is rolled back
// and the batch written again with a savepoint around each request, so
// that the failing ones are rolled back to their savepoint and the others
// commit. Only an error of the transaction itself (BEGIN, COMMIT, a full
// disk, I/O) fails the whole batch.
func (a *appender) commit(batch []*appendRequest) {
	live := batch[:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(queued, taken) {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	a.commits.Add(1)
	failed := make([]error, len(live))
	err := a.write(live, failed, false)
	if _, ok := err.(requestError); ok {
		clear(failed)
		err = a.write(live, failed, true)
	}
	if err != nil {
		// The transaction rolled back; what the cache says may be wrong
		// (another process wrote to the file, say): read it afresh.
		clear(a.sessions)
		if werr := a.health.classify(err); werr != nil {
			err = werr
			a.health.failed(err)
		}
		err = fmt.Errorf("sqlite: append: %w", err)
	} else {
		a.health.ok()
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
		r.notify(e)
	}
}

// A requestError is a failure of one request of a batch written without
// savepoints: the batch is written again with them.
type requestError struct{ error }

func (e requestError) Unwrap() error { return e.error }

// write writes live in one transaction, setting failed[i] for each request
// that fails alone. Without careful, a request's failure ends the
// transaction with a requestError; with careful, each request runs in a
// savepoint and its failure rolls back to it. An error that is a failure of
// the disk or the file (see writeFailure) is never a request's: it fails the
// batch, as SQLite itself may have rolled the transaction back.
func (a *appender) write(live []*appendRequest, failed []error, careful bool) error {
	// The batch is not the caller's to cancel: one caller giving up must
	// not undo the others' events.
	ctx := context.Background()
	tx, err := a.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	insert := tx.StmtContext(ctx, a.insert)
	insertN := tx.StmtContext(ctx, a.insertN)
	lookup := tx.StmtContext(ctx, a.lookup)
	buf := a.args[:0]
	args := buf // rows not inserted yet
	flush := func(all bool) error {
		if len(args) == cap(buf) {
			_, err := insertN.ExecContext(ctx, args...)
			args = buf[:0]
			return err
		}
		if !all {
			return nil
		}
		for rest := args; len(rest) > 0; rest = rest[8:] {
			if _, err := insert.ExecContext(ctx, rest[:8]...); err != nil {
				return err
			}
		}
		args = buf[:0] // the whole array again, for the next full insert
		return nil
	}
	defer clear(buf[:cap(buf)]) // let the events' payloads be collected
	// changed holds this batch's changes to a.sessions, merged on commit.
	changed := a.changed
	clear(changed)
	state := func(id string) (sessionState, error) {
		if st, ok := changed[id]; ok {
			return st, nil
		}
		if st, ok := a.sessions[id]; ok {
			return st, nil
		}
		var st sessionState
		switch err := lookup.QueryRowContext(ctx, id).Scan(&st.pk, &st.last); {
		case errors.Is(err, sql.ErrNoRows):
			st.pk = -1
		case err != nil:
			return st, err
		}
		changed[id] = st
		return st, nil
	}
	// one writes request i; a non-nil error is the request's own unless
	// writeFailure says otherwise.
	one := func(i int, r *appendRequest) error {
		if id := r.deleteSession; id != "" {
			res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				failed[i] = store.ErrNotFound
			}
			changed[id] = sessionState{pk: -1}
			return nil
		}
		for _, ev := range r.evs {
			st, err := state(ev.SessionID)
			if err != nil {
				return err
			}
			if st.pk < 0 {
				failed[i] = fmt.Errorf("sqlite: append: session %q: %w", ev.SessionID, store.ErrNotFound)
				return nil
			}
		}
		for _, ev := range r.evs {
			st := changed[ev.SessionID]
			if _, ok := changed[ev.SessionID]; !ok {
				st = a.sessions[ev.SessionID]
			}
			st.last++
			args = append(args, st.pk, st.last, ev.Time.UnixNano(), int64(ev.Direction),
				ev.Type, ev.Subtype, ev.Raw, ev.OriginalSize)
			if err := flush(false); err != nil {
				return err
			}
			changed[ev.SessionID] = st
			ev.Seq = st.last
		}
		if r.then != nil || careful {
			if err := flush(true); err != nil { // then may read them
				return err
			}
		}
		if r.then != nil {
			return r.then(ctx, cachedTx{tx, a}, r.evs[len(r.evs)-1].Seq)
		}
		return nil
	}
	for i, r := range live {
		if !careful {
			if err := one(i, r); err != nil {
				if writeFailure(err) != "" {
					return err
				}
				return requestError{err}
			}
			continue
		}
		saved := a.saveStates(r)
		if _, err := tx.ExecContext(ctx, `SAVEPOINT request`); err != nil {
			return err
		}
		err := one(i, r)
		if err != nil {
			if writeFailure(err) != "" {
				return err
			}
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO request`); err != nil {
				return err
			}
			args = buf[:0] // the request flushed or failed flushing: nothing of it is pending
			a.restoreStates(saved)
			for _, ev := range r.evs {
				ev.Seq = 0
				delete(a.sessions, ev.SessionID) // read its state afresh next time
			}
			failed[i] = fmt.Errorf("sqlite: append: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `RELEASE request`); err != nil {
			return err
		}
	}
	if err := flush(true); err != nil {
		if writeFailure(err) == "" {
			return requestError{err}
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if len(a.sessions)+len(changed) > maxCachedSessions {
		// Forget them all rather than grow with every session ever
		// written to: each is looked up again at its next event.
		clear(a.sessions)
	}
	for id, st := range changed {
		if st.pk < 0 {
			delete(a.sessions, id)
		} else {
			a.sessions[id] = st
		}
	}
	return nil
}

// A savedState is an entry of the batch's changes before a request: ok
// false means it had none.
type savedState struct {
	id string
	st sessionState
	ok bool
}

// saveStates returns the batch's changes to the sessions r touches, for
// restoreStates to undo r's.
func (a *appender) saveStates(r *appendRequest) []savedState {
	var saved []savedState
	add := func(id string) {
		for _, s := range saved {
			if s.id == id {
				return
			}
		}
		st, ok := a.changed[id]
		saved = append(saved, savedState{id, st, ok})
	}
	if r.deleteSession != "" {
		add(r.deleteSession)
	}
	for _, ev := range r.evs {
		add(ev.SessionID)
	}
	return saved
}

func (a *appender) restoreStates(saved []savedState) {
	for _, s := range saved {
		if s.ok {
			a.changed[s.id] = s.st
		} else {
			delete(a.changed, s.id)
		}
	}
}

// maxCachedSessions bounds the appender's cache of session states: a
// daemon that has run 10,000 sessions keeps the state of a few hundred.
const maxCachedSessions = 1024
