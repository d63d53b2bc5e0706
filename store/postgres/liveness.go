package postgres

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Leases bound to their owner's life. A time lease alone makes a killed
// daemon's sessions wait out store.lease_ttl before another daemon may run
// them. So each DB that acquires leases also holds, on a connection of its
// own, a session-level advisory lock keyed by its owner name
// (hashtextextended(owner, 0)), and Acquire and LeaseOf treat a lease whose
// owner holds no such lock as free (ownerGone). PostgreSQL drops the lock
// the moment that connection ends: a killed daemon's sockets are closed by
// the kernel, and the backend, idle reading the connection, sees the end
// of the stream and exits, so the next Acquire by another daemon succeeds
// at once (TestDeadOwnersLeaseIsFree).
//
// The time lease stays for what the lock cannot see. A daemon cut from the
// server (its connection half-open: its backend lives until TCP gives up)
// or paused (SIGSTOP: its sockets stay open) keeps its lock, and its leases
// run until lease_until as before. Fencing does not depend on the lock:
// whoever takes a lease, for whichever reason, moves the row's fence on,
// and every write of the previous owner carries its old fence in the
// statement that writes, so it is refused however long it was paused
// (TestStaleOwnerIsFenced, TestOwnerWithoutLockIsFenced). A lock lost while
// its daemon lives (the server ended the connection) only makes that
// daemon's leases free early: another daemon may take them, and this one's
// writes are refused from then on, as after a lease expired.
//
// The lock is per database (pg_locks.database), so several claudectl
// databases on one server keep theirs apart; a 64-bit hash collision
// between two names would only make a dead daemon's leases wait for their
// time again.

// ownerGone is a condition, in a statement over sessions, that holds when
// the row's owner holds no liveness lock in this database: its daemon is
// gone (or lost its connection). pg_locks shows a bigint advisory key as
// its high and low 32 bits (classid, objid) with objsubid 1.
const ownerGone = `NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND l.classid = ((hashtextextended(sessions.owner, 0) >> 32) & 4294967295)::oid
		AND l.objid = (hashtextextended(sessions.owner, 0) & 4294967295)::oid)`

// liveness holds the owner's advisory lock on a connection of its own,
// taking it again when the connection fails, until the DB closes.
type liveness struct {
	held atomic.Bool // the lock is held (as far as this side knows)

	mu      sync.Mutex
	started bool
	ready   chan struct{} // closed after the first try, whatever its outcome
	cancel  context.CancelFunc
	done    chan struct{}
	gate    chan struct{} // tests: a retry waits until it is closed
}

// live starts holding the liveness lock, once, and waits (bounded by ctx
// and by liveWait) for the first try, so that the first lease acquired is
// already bound to this daemon's life. A lease acquired without the lock is
// valid: its owner just looks gone to other daemons, which may take it over
// at once.
func (db *DB) live(ctx context.Context) {
	l := &db.liveLock
	l.mu.Lock()
	if !l.started && !db.closed.Load() {
		l.started = true
		lctx, cancel := context.WithCancel(context.Background())
		l.cancel, l.done, l.ready = cancel, make(chan struct{}), make(chan struct{})
		go l.run(lctx, db)
	}
	ready := l.ready
	l.mu.Unlock()
	if ready == nil {
		return
	}
	t := time.NewTimer(liveWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-ctx.Done():
	case <-t.C: // a pool busy to its last connection: go on without
	}
}

// liveWait bounds how long the first acquisition waits for the lock.
const liveWait = 2 * time.Second

// run holds the lock until ctx ends, taking it again with backoff.
func (l *liveness) run(ctx context.Context, db *DB) {
	defer close(l.done)
	var once sync.Once
	ready := func() { once.Do(func() { close(l.ready) }) }
	defer ready()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		held, err := l.hold(ctx, db, ready)
		ready()
		if ctx.Err() != nil {
			return
		}
		if held {
			backoff = 100 * time.Millisecond
		}
		db.log("holding this daemon's liveness lock failed (other daemons may take its sessions over until it holds it again); retrying", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		l.mu.Lock()
		gate := l.gate
		l.mu.Unlock()
		if gate != nil {
			select {
			case <-ctx.Done():
				return
			case <-gate:
			}
		}
	}
}

// errLockHeld says the liveness lock is held by another connection.
var errLockHeld = errors.New("another connection holds this daemon's liveness lock: another daemon of the same name (store.daemon_name) runs, or this daemon's previous connection has not ended yet")

// hold takes the lock on a connection of its own and keeps it until the
// connection fails or ctx ends; held says whether it got the lock.
func (l *liveness) hold(ctx context.Context, db *DB, ready func()) (held bool, err error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	// The connection is the lock's for good: closing it releases the lock.
	c := conn.Hijack()
	defer c.Close(context.Background())
	var ok bool
	if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, db.owner).Scan(&ok); err != nil {
		return false, err
	}
	if !ok {
		return false, errLockHeld
	}
	l.held.Store(true)
	defer l.held.Store(false)
	ready()
	// Nothing is LISTENed on this connection: the wait returns only when
	// the connection fails (the server ended it, the link broke) or ctx
	// ends, and reading is what notices the end of the connection.
	_, err = c.WaitForNotification(ctx)
	return true, err
}

func (l *liveness) stop() {
	l.mu.Lock()
	started, cancel, done := l.started, l.cancel, l.done
	l.mu.Unlock()
	if started {
		cancel()
		<-done
	}
}
