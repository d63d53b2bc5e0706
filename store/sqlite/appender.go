package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/internal/groupcommit"
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
	// alone. The events it returns, of the same session, are stored right
	// after the request's own (prepared: store.PrepareEvent). It may run
	// more than once (a batch is written again when one of its requests
	// fails), so it must write only through tx and set its results afresh
	// each time.
	then func(ctx context.Context, tx cachedTx, seq int64) ([]*store.Event, error)
	groupcommit.Base
}

// sessionState is what the writer knows of a session's log.
type sessionState struct {
	pk   int64 // sessions.pk; -1: no such session (only within a batch)
	last int64 // seq of its last event
	// ledger is the last ledger entry's process and cumulative counters
	// (what the next turn's share is computed from); nil: not known yet,
	// read from the file. Replaced, never changed in place.
	ledger *ledgerState
}

type ledgerState struct {
	process    int64
	cumulative store.Cumulative
}

// An appender is the single goroutine that writes events: it takes every
// request queued since its last commit, up to maxBatch events, and stores
// them in one transaction (group commit).
type appender struct {
	// cp is told of each commit and of the writer going idle, and may hold
	// the writer off between two commits for a checkpoint (checkpointer).
	cp *checkpointer

	w *sql.DB // one connection, which the writer takes for each batch
	// raw is the write connection's driver connection and the statements
	// the writer keeps prepared on it (see rawConn).
	raw      rawConn
	maxBatch int
	// sessions caches the committed state of the sessions appended to
	// (their last seq and ledger snapshot), so a batch costs no query per
	// session. Only the run goroutine touches it; it is right because
	// every event, ledger entry and session deletion is written by that
	// goroutine.
	sessions map[string]sessionState
	// changed and chunks are write's scratch space, kept between batches:
	// the batch's changes to sessions, and the chunk of each session the
	// batch appends to (by sessions.pk), reused from batch to batch.
	changed map[string]sessionState
	chunks  map[int64]*chunkWriter
	open    []*chunkWriter // the chunks holding events not inserted yet, in order of their first event
	free    []*chunkWriter // chunk writers to reuse, at most maxFreeChunks
	health  *store.HealthTracker
	commits atomic.Int64 // batches written (for tests)
	stats   store.WriterStats

	q *groupcommit.Queue[*appendRequest]
}

func newAppender(w *sql.DB, maxBatch int, h *store.HealthTracker, cp *checkpointer) (*appender, error) {
	ctx := context.Background()
	a := &appender{
		cp:       cp,
		w:        w,
		health:   h,
		sessions: make(map[string]sessionState),
		changed:  make(map[string]sessionState),
		chunks:   make(map[int64]*chunkWriter),
		maxBatch: maxBatch,
	}
	a.q = groupcommit.New(1024, maxBatch, groupcommit.Kind[*appendRequest]{
		Base:  func(r *appendRequest) *groupcommit.Base { return &r.Base },
		Size:  func(r *appendRequest) int { return len(r.evs) },
		Key:   func(r *appendRequest) string { return groupcommit.SessionKey(r.deleteSession, r.evs) },
		Heavy: func(r *appendRequest) bool { return groupcommit.SessionHeavy(r.deleteSession, r.then != nil) },
	})
	if err := a.prepareKnown(ctx); err != nil {
		a.closeRaw()
		return nil, err
	}
	go a.run()
	return a, nil
}

// cachedTx runs statements in the writer's transaction, on its
// connection, prepared once for the writer's life (preparing costs more
// than running a small statement; see rawConn).
type cachedTx struct {
	c *rawConn
	a *appender
}

// QueryRow runs q and returns its first row (sql.ErrNoRows without one).
func (c cachedTx) QueryRow(ctx context.Context, q string, args ...any) rawRow {
	return c.c.queryRow(ctx, q, args...)
}

// Exec runs q, which returns no rows.
func (c cachedTx) Exec(ctx context.Context, q string, args ...any) (driver.Result, error) {
	return c.c.exec(ctx, q, args...)
}

// current returns session id's state as the batch being written left it,
// or as the last commit did (zero if the writer does not know it).
func (a *appender) current(id string) sessionState {
	if st, ok := a.changed[id]; ok {
		return st
	}
	return a.sessions[id]
}

// lastCumulative returns the cumulative counters of the last ledger entry
// of session id's CLI process (zero for its first turn): from the
// writer's cache when it has them, else from the file. Called after the
// request's events of that session were added to the batch.
func (c cachedTx) lastCumulative(ctx context.Context, id string, process int64) (_ store.Cumulative, found bool, _ error) {
	if l := c.a.current(id).ledger; l != nil && l.process == process {
		return l.cumulative, true, nil
	}
	return c.readCumulative(ctx, qUsagePrev, id, process)
}

// sessionCumulative returns the cumulative counters of the last ledger
// entry of session id, whatever its process (zero without one): those a
// CLI resuming its conversation may restore.
func (c cachedTx) sessionCumulative(ctx context.Context, id string) (store.Cumulative, error) {
	if l := c.a.current(id).ledger; l != nil {
		return l.cumulative, nil
	}
	cum, _, err := c.readCumulative(ctx, qUsageLast, id)
	return cum, err
}

// readCumulative reads the cumulative counters q selects; found is false
// when it selects no row.
func (c cachedTx) readCumulative(ctx context.Context, q string, args ...any) (_ store.Cumulative, found bool, _ error) {
	var prev store.Cumulative
	var prevJSON string
	err := c.QueryRow(ctx, q, args...).Scan(&prevJSON)
	switch {
	case errors.Is(err, sql.ErrNoRows): // the process's first turn (or no such session: the caller finds out)
		return prev, false, nil
	case err != nil:
		return prev, false, err
	}
	if json.Unmarshal([]byte(prevJSON), &prev) != nil {
		// Unreadable (not written by this store): count the turn from
		// zero rather than fail the transaction it shares.
		prev = store.Cumulative{}
	}
	return prev, true, nil
}

// noteCumulative records cum as the counters of the last ledger entry of
// session id's process, in the batch's state of the session: the cache
// has them once the batch commits, and loses them with it.
func (c cachedTx) noteCumulative(id string, process int64, cum store.Cumulative) {
	st, ok := c.a.changed[id]
	if !ok {
		return // not of this batch: the next turn reads the file
	}
	cum.Models = maps.Clone(cum.Models) // the caller's map may change
	st.ledger = &ledgerState{process: process, cumulative: cum}
	c.a.changed[id] = st
}

// lookupSQL reads a session's pk and last seq (no row: no such session).
const lookupSQL = `SELECT pk, ` + lastSeqSQL + ` FROM sessions WHERE id = ?`

// prepareKnown prepares, when the writer starts, the statements of every
// batch and those the daemon makes at every turn (session updates, the
// usage ledger's), so that a mistake in one fails the store's Open; others
// are prepared at their first run.
func (a *appender) prepareKnown(ctx context.Context) error {
	status := store.StatusIdle
	known := []string{sqlBegin, sqlCommit, sqlRollback, insertChunkSQL, queueChunkSQL, lookupSQL,
		first(updateSQL(store.SessionUpdate{Status: &status}, time.Time{}, "")),
		first(updateSQL(store.SessionUpdate{Status: &status, Error: new(string)}, time.Time{}, "")),
		first(updateSQL(store.SessionUpdate{ClaudeSessionID: new(string)}, time.Time{}, "")),
	}
	known = append(known, usageStatements()...)
	return a.withRaw(ctx, func(c *rawConn) error {
		for _, q := range known {
			if _, _, err := c.prepare(ctx, q); err != nil {
				return fmt.Errorf("preparing %q: %w", q, err)
			}
		}
		return nil
	})
}

func first[T, U any](t T, _ U) T { return t }

// enqueue queues r for the writer (groupcommit.Queue.Enqueue).
func (a *appender) enqueue(ctx context.Context, r *appendRequest) error { return a.q.Enqueue(ctx, r) }

// submit queues r and waits for its outcome (groupcommit.Queue.Submit).
func (a *appender) submit(ctx context.Context, r *appendRequest) error { return a.q.Submit(ctx, r) }

// close stops taking requests, lets the writer commit those already queued
// and waits for it to exit.
func (a *appender) close() {
	a.q.Close()
	a.closeRaw()
}

// run is the writer's goroutine. After each commit it yields its
// processor (runtime.Gosched), so that what the commit woke runs before
// the next batch is written.
//
// The writer never parks while it has batches to write: SQLite here is Go
// code and short system calls. Busy batch after batch, as when a hundred
// sessions end their turns at once, it kept its processor for up to the
// runtime's 10 ms time slice. What its commits woke (the subscribers the
// events were published to, the callers waiting for an outcome) waited in
// that processor's run queue behind it, and so did the readers whose
// pipes had become readable, as the runtime polls for those only when a
// processor runs out of work. A yield costs well under a microsecond when
// nothing else is runnable. With 100 sessions streaming in lockstep on 2
// cores, the p99 from a CLI's line to its subscriber was lower in 9 of 11
// paired runs of 40 turns: 7.4-17.3 ms (mean 11.5) before, 6.9-14.9 ms
// (mean 10.1) after; the mid-turn p99 was lower in each of the 8 pairs
// that recorded it. The burst throughput did not fall (181-260k events/s
// before, 200-305k after, five pairs): readers that run sooner fill the
// next batch.
func (a *appender) run() {
	a.q.Run(func(batch []*appendRequest) {
		a.cp.commit(func() { a.commit(batch) })
		runtime.Gosched()
	}, a.cp.idle)
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
		if r.Take() {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	a.commits.Add(1)
	failed := make([]error, len(live))
	start := time.Now()
	err := a.write(live, failed, false)
	if _, ok := err.(requestError); ok {
		clear(failed)
		err = a.write(live, failed, true)
	}
	if err == nil {
		a.stats.Committed(storedEvents(live, failed), time.Since(start))
	}
	if err != nil {
		// The transaction rolled back; what the cache says may be wrong
		// (another process wrote to the file, say): read it afresh.
		clear(a.sessions)
		if werr := a.health.Classify(store.ErrWriteFailed, err); werr != nil {
			err = werr
			a.health.Failed(err)
		}
		err = fmt.Errorf("sqlite: append: %w", err)
	} else {
		a.health.OK()
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

// A requestError is a failure of one request of a batch written without
// savepoints: the batch is written again with them.
type requestError struct{ error }

func (e requestError) Unwrap() error { return e.error }

// write writes live in one transaction, setting failed[i] for each request
// that fails alone. Without careful, a request's failure ends the
// transaction with a requestError; with careful, each request runs in a
// savepoint and its failure rolls back to it. An error that is a failure of
// the disk or the file (see storageFailure) is never a request's: it fails the
// batch, as SQLite itself may have rolled the transaction back.
func (a *appender) write(live []*appendRequest, failed []error, careful bool) error {
	// The batch is not the caller's to cancel: one caller giving up must
	// not undo the others' events.
	ctx := context.Background()
	return a.withRaw(ctx, func(c *rawConn) error { return a.writeTx(ctx, c, live, failed, careful) })
}

// writeTx is write on the writer's connection.
func (a *appender) writeTx(ctx context.Context, tx *rawConn, live []*appendRequest, failed []error, careful bool) error {
	if err := tx.begin(ctx); err != nil {
		return err
	}
	ended := false // committed, or rolled back by a failed commit
	defer func() {
		if !ended {
			tx.rollback(ctx)
		}
	}()
	// flush inserts the open chunks, or, without all, those full enough.
	flush := func(all bool) error {
		kept := a.open[:0]
		for _, c := range a.open {
			if !all && len(c.Buf) < maxChunkBytes {
				kept = append(kept, c)
				continue
			}
			if _, err := tx.exec(ctx, insertChunkSQL, c.PK, c.First, c.Last, c.Buf); err != nil {
				a.dropChunks()
				return err
			}
			if c.Text { // for the search indexer (search.go)
				if _, err := tx.exec(ctx, queueChunkSQL); err != nil {
					a.dropChunks()
					return err
				}
			}
			c.Reset(c.PK, c.Last+1)
		}
		a.open = kept
		return nil
	}
	defer a.dropChunks() // let the events' payloads be collected
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
		switch err := tx.queryRow(ctx, lookupSQL, id).Scan(&st.pk, &st.last); {
		case errors.Is(err, sql.ErrNoRows):
			st.pk = -1
		case err != nil:
			return st, err
		}
		changed[id] = st
		return st, nil
	}
	// one writes request i; a non-nil error is the request's own unless
	// storageFailure says otherwise.
	one := func(i int, r *appendRequest) error {
		if id := r.deleteSession; id != "" {
			if err := flush(true); err != nil { // the session's events go with it
				return err
			}
			res, err := tx.exec(ctx, `DELETE FROM sessions WHERE id = ?`, id)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				failed[i] = store.ErrNotFound
			}
			changed[id] = sessionState{pk: -1}
			return nil
		}
		// add numbers evs after their sessions' last events and adds them
		// to the sessions' open chunks; false when a session is unknown
		// (failed[i] says so).
		add := func(evs []*store.Event) (bool, error) {
			for _, ev := range evs {
				st, err := state(ev.SessionID)
				if err != nil {
					return false, err
				}
				if st.pk < 0 {
					failed[i] = fmt.Errorf("sqlite: append: session %q: %w", ev.SessionID, store.ErrNotFound)
					return false, nil
				}
			}
			for _, ev := range evs {
				st := a.current(ev.SessionID)
				st.last++
				c := a.chunks[st.pk]
				if c == nil {
					c = a.newChunk()
					c.Reset(st.pk, st.last)
					a.chunks[st.pk] = c
				}
				if c.Empty() {
					if c.First != st.last {
						c.Reset(st.pk, st.last)
					}
					a.open = append(a.open, c)
				}
				c.Add(ev, st.last)
				if len(c.Buf) >= maxChunkBytes {
					if err := flush(false); err != nil {
						return false, err
					}
				}
				changed[ev.SessionID] = st
				ev.Seq = st.last
			}
			return true, nil
		}
		if ok, err := add(r.evs); !ok || err != nil {
			return err
		}
		if r.then != nil {
			more, err := r.then(ctx, cachedTx{tx, a}, r.evs[len(r.evs)-1].Seq)
			if err != nil {
				return err
			}
			// more is of r's session, known now (ResultFollow.Make checks).
			if _, err := add(more); err != nil {
				return err
			}
		}
		if careful {
			// The request's rows go in inside its savepoint.
			if err := flush(true); err != nil {
				return err
			}
		}
		return nil
	}
	for i, r := range live {
		if !careful {
			if err := one(i, r); err != nil {
				if storageFailure(err) != "" {
					return err
				}
				return requestError{err}
			}
			continue
		}
		saved := a.saveStates(r)
		if _, err := tx.exec(ctx, `SAVEPOINT request`); err != nil {
			return err
		}
		err := one(i, r)
		if err != nil {
			if storageFailure(err) != "" {
				return err
			}
			if _, err := tx.exec(ctx, `ROLLBACK TO request`); err != nil {
				return err
			}
			a.dropChunks() // what the request added and did not insert
			a.restoreStates(saved)
			for _, ev := range r.evs {
				ev.Seq = 0
				delete(a.sessions, ev.SessionID) // read its state afresh next time
			}
			failed[i] = fmt.Errorf("sqlite: append: %w", err)
		}
		if _, err := tx.exec(ctx, `RELEASE request`); err != nil {
			return err
		}
	}
	if err := flush(true); err != nil {
		if storageFailure(err) == "" {
			return requestError{err}
		}
		return err
	}
	if err := raiseRelay(ctx, tx, live, failed, changed); err != nil {
		return err
	}
	ended = true
	if err := tx.commit(ctx); err != nil {
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

// maxFreeChunks bounds the chunk writers kept between batches, and
// maxFreeChunkBytes the buffer of each: a batch of ten thousand sessions
// or of one 10 MiB line does not stay in memory after it.
const (
	maxFreeChunks     = 256
	maxFreeChunkBytes = 2 * maxChunkBytes
)

// newChunk returns a chunk writer, reused when one is free.
func (a *appender) newChunk() *chunkWriter {
	if n := len(a.free); n > 0 {
		c := a.free[n-1]
		a.free[n-1] = nil
		a.free = a.free[:n-1]
		return c
	}
	return new(chunkWriter)
}

// dropChunks forgets the batch's chunks, inserted or not, keeping some
// writers for the next batches.
func (a *appender) dropChunks() {
	for _, c := range a.chunks {
		if len(a.free) < maxFreeChunks && cap(c.Buf) <= maxFreeChunkBytes {
			c.Buf = c.Buf[:0]
			a.free = append(a.free, c)
		}
	}
	clear(a.chunks)
	clear(a.open)
	a.open = a.open[:0]
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

// raiseRelay raises the relay counts of the sessions whose appended lines
// went over a worker's relay (store.Event.RelayFrame), for the requests
// of live that did not fail.
func raiseRelay(ctx context.Context, tx *rawConn, live []*appendRequest, failed []error, changed map[string]sessionState) error {
	type counts struct{ received, sent int64 }
	var frames map[int64]counts
	for i, r := range live {
		if failed[i] != nil {
			continue
		}
		for _, ev := range r.evs {
			if ev.RelayFrame <= 0 {
				continue
			}
			pk := changed[ev.SessionID].pk
			if frames == nil {
				frames = map[int64]counts{}
			}
			c := frames[pk]
			if ev.Direction == store.ToCLI {
				c.sent = max(c.sent, ev.RelayFrame)
			} else {
				c.received = max(c.received, ev.RelayFrame)
			}
			frames[pk] = c
		}
	}
	for pk, c := range frames {
		if _, err := tx.exec(ctx, `UPDATE sessions SET relay_received = MAX(relay_received, ?),
			relay_sent = MAX(relay_sent, ?) WHERE pk = ?`, c.received, c.sent, pk); err != nil {
			return err
		}
	}
	return nil
}

// storedEvents counts the events of the requests of live that did not
// fail (the events a request's then adds are not counted: the daemon's
// own few at a turn's end).
func storedEvents(live []*appendRequest, failed []error) int {
	n := 0
	for i, r := range live {
		if failed[i] == nil {
			n += len(r.evs)
		}
	}
	return n
}
