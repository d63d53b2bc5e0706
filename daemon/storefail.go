package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/claudectl/claudectl/store"
)

// When the store cannot write (a full disk, say), the daemon stops the
// sessions whose events it could not store, loudly: each is suspended (its
// CLI closed; the next prompt resumes it), its subscribers get the error,
// Health reports the store as failing, and the lines written to a CLI are
// refused rather than sent unrecorded. The events lost are counted per
// session; once the store writes again, each such session's log gets a gap
// record saying how many, between when and why, before its suspended
// status — never a silent jump in the log.

// lostEvents is what a session lost while the store failed.
type lostEvents struct {
	n        int64
	from, to time.Time
	cause    error  // the latest failure, in the store's words (storeError)
	reason   string // cause's text
}

// storeError returns the part of err, a write failure, that says why in
// the store's words ("the store cannot write: disk full (data dir …)"),
// without the layers that wrapped it on the way ("sqlite: append: "):
// what a client is told, and what the session's gap record keeps. The log
// keeps err whole.
func storeError(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), store.ErrWriteFailed.Error()) && errors.Is(e, store.ErrWriteFailed) {
			return e
		}
	}
	return err
}

// stoppedError is what session id's clients are told once the store has
// stopped it: why, in the store's words (wrapping store.ErrWriteFailed):
// its recorded failure, else err's, else the bare sentinel.
func (d *Daemon) stoppedError(id string, err error) error {
	d.failures.mu.Lock()
	var cause error
	if l := d.failures.lost[id]; l != nil {
		cause = l.cause
	}
	d.failures.mu.Unlock()
	switch {
	case cause != nil:
	case errors.Is(err, store.ErrWriteFailed):
		cause = storeError(err)
	default:
		cause = store.ErrWriteFailed
	}
	return fmt.Errorf("session %s was stopped: its events could not be stored: %w", id, cause)
}

// storeFailures tracks the sessions that lost events, until their gap
// records are stored.
type storeFailures struct {
	writeMu sync.Mutex // held while a gap record is written
	mu      sync.Mutex
	lost    map[string]*lostEvents // session id → what it lost
	probing bool                   // a goroutine writes the gap records
}

// lostReason says why session id's events could not be stored, for an
// error message.
func (d *Daemon) lostReason(id string) string {
	d.failures.mu.Lock()
	defer d.failures.mu.Unlock()
	if l := d.failures.lost[id]; l != nil {
		return "its events could not be stored: " + l.reason
	}
	return "its events could not be stored"
}

// suspendedFor is the detail of a session the store stopped; why is the
// store's failure, in its words.
func suspendedFor(why string) string {
	return "suspended: its events could not be stored (" + why + "); the next prompt resumes it once the store writes again"
}

// stoppedByStore says why session id was stopped because its events could
// not be stored, while its gap record waits for the store; "" otherwise.
func (d *Daemon) stoppedByStore(id string) string {
	d.failures.mu.Lock()
	defer d.failures.mu.Unlock()
	if l := d.failures.lost[id]; l != nil {
		return suspendedFor(l.reason)
	}
	return ""
}

// writeFailed reports whether err is the store failing to write.
func writeFailed(err error) bool { return errors.Is(err, store.ErrWriteFailed) }

// StoreHealth returns whether the store writes, and how many sessions wait
// for their gap records.
func (d *Daemon) StoreHealth() (store.WriteHealth, int) {
	h := d.db.WriteHealth()
	d.failures.mu.Lock()
	defer d.failures.mu.Unlock()
	return h, len(d.failures.lost)
}

// lost notes that an event of the actor's session could not be stored.
// It never blocks: it runs on the store's writer goroutine too. The first
// loss stops the session.
func (a *actor) lost(err error) {
	if errors.Is(err, store.ErrNotOwner) {
		// Not lost: another daemon owns the session and writes its log.
		a.d.takenOver(a.id, err)
		return
	}
	now := time.Now()
	f := &a.d.failures
	f.mu.Lock()
	if f.lost == nil {
		f.lost = map[string]*lostEvents{}
	}
	l := f.lost[a.id]
	if l == nil {
		l = &lostEvents{from: now}
		f.lost[a.id] = l
	}
	l.n++
	l.to, l.cause = now, storeError(err)
	l.reason = l.cause.Error()
	f.mu.Unlock()
	if a.storeFailed.CompareAndSwap(false, true) {
		go a.stopForStore(err)
	}
}

// stopForStore suspends the session because its events cannot be stored,
// tells its subscribers, and starts writing gap records once the store
// recovers.
func (a *actor) stopForStore(err error) {
	a.d.log.Error("the store cannot write: suspending the session", "session", a.id, "err", err)
	reason := suspendedFor(storeError(err).Error())
	a.do(func(st *actorState) {
		if st.closing {
			return
		}
		st.suspendMsg = reason
		a.beginClose(st)
	})
	a.failSubscribers(a.d.stoppedError(a.id, err))
	a.d.probeStore()
}

// probeStore starts the goroutine that writes the gap records, unless it
// runs.
func (d *Daemon) probeStore() {
	f := &d.failures
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.probing {
		return
	}
	f.probing = true
	go d.writeGaps()
}

// storeWarnEvery is how often writeGaps logs that the store still cannot
// write.
const storeWarnEvery = time.Minute

// writeGaps tries, every storeProbeInterval, to store the gap record and
// suspended status of each session that lost events and whose CLI is
// gone, until none is left or the daemon closes.
func (d *Daemon) writeGaps() {
	t := time.NewTicker(d.storeProbe)
	defer t.Stop()
	// One warning when the probes start failing, then one a minute with
	// how many failed meanwhile: a disk full for hours must not fill the
	// journal at one line a second.
	var warned time.Time
	failed := 0
	for {
		select {
		case <-d.ctx.Done():
			d.failures.mu.Lock()
			d.failures.probing = false
			d.failures.mu.Unlock()
			return
		case <-t.C:
		}
		f := &d.failures
		f.mu.Lock()
		pending := make(map[string]bool, len(f.lost))
		for id := range f.lost {
			pending[id] = true
		}
		f.mu.Unlock()
		for id := range pending {
			d.mu.Lock()
			live := d.actors[id] != nil
			d.mu.Unlock()
			if live {
				continue // its end is still being recorded (or lost)
			}
			if err := d.recordGap(id); err != nil {
				if failed++; warned.IsZero() || time.Since(warned) >= storeWarnEvery {
					d.log.Warn("the store still cannot write", "session", id, "tries", failed, "err", err)
					warned, failed = time.Now(), 0
				}
				break
			}
		}
		f.mu.Lock()
		if len(f.lost) == 0 {
			f.probing = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
	}
}

// writeGap stores session id's gap record and sets its status to
// suspended, in one commit; then the status event, which may fail without
// harm (the stored status is right).
func (d *Daemon) writeGap(id string, l lostEvents) error {
	ctx := context.WithoutCancel(d.ctx)
	gap, err := newEvent(id, &Gap{Lost: l.n, From: l.from, To: l.to, Reason: l.reason})
	if err != nil {
		return err
	}
	st := store.StatusSuspended
	if err := appendUpdate(ctx, d.db, &gap.Event, store.SessionUpdate{Status: &st}); err != nil {
		return err
	}
	status, err := newEvent(id, &StatusChange{Status: st,
		Detail: fmt.Sprintf("suspended while the store could not write (%d events lost); the next prompt resumes it", l.n)})
	if err == nil {
		_, err = d.db.Append(ctx, &status.Event)
	}
	if err != nil {
		d.log.Warn("recording a session's status after its gap", "session", id, "err", err)
	}
	return nil
}

// appendUpdate stores ev and applies upd to its session in one commit.
func appendUpdate(ctx context.Context, db interface {
	AppendUpdateAsync(context.Context, func(error), *store.Event, store.SessionUpdate) error
}, ev *store.Event, upd store.SessionUpdate) error {
	done := make(chan error, 1)
	if err := db.AppendUpdateAsync(ctx, func(err error) { done <- err }, ev, upd); err != nil {
		return err
	}
	return <-done
}

// storeWrites returns nil if the store writes, or why it does not. While
// the store is known to fail it tries a harmless write (the session's
// updated time), so that a recovery is seen without waiting for an event.
func (d *Daemon) storeWrites(ctx context.Context, sessionID string) error {
	h, _ := d.StoreHealth()
	if h.Err == nil {
		return nil
	}
	s, err := d.db.Session(ctx, sessionID)
	if err != nil {
		return err
	}
	if _, err := d.db.UpdateSession(ctx, sessionID, store.SessionUpdate{Error: &s.Error}); err != nil {
		if writeFailed(err) {
			return err
		}
		return fmt.Errorf("%w: %v", store.ErrWriteFailed, h.Err)
	}
	return nil
}

// settleLost makes sure session id, without a CLI, does not wait for its
// gap record: it writes it now if the session lost events, and fails
// (ErrWriteFailed) while the store still cannot write.
func (d *Daemon) settleLost(id string) error {
	if err := d.recordGap(id); err != nil {
		return fmt.Errorf("daemon: session %s was stopped because its events could not be stored, and they still cannot be: %w", id, storeError(err))
	}
	return nil
}

// recordGap writes the gap record of session id if it lost events, once:
// the retrying goroutine and a prompt may both try.
func (d *Daemon) recordGap(id string) error {
	f := &d.failures
	f.writeMu.Lock()
	defer f.writeMu.Unlock()
	f.mu.Lock()
	l, ok := f.lost[id]
	var snap lostEvents
	if ok {
		snap = *l
	}
	f.mu.Unlock()
	if !ok {
		return nil
	}
	if err := d.writeGap(id, snap); err != nil {
		return err
	}
	d.log.Info("the store writes again: gap recorded", "session", id, "lost", snap.n, "from", snap.from, "to", snap.to)
	f.mu.Lock()
	if cur := f.lost[id]; cur != nil && cur.n == snap.n {
		delete(f.lost, id)
	} else if cur != nil { // lost more meanwhile: those go in a later record
		cur.n -= snap.n
		cur.from = snap.to
	}
	f.mu.Unlock()
	d.feed.changed(id) // its stored status is now what it was shown as
	return nil
}
