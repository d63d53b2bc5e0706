package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// Several daemons on one store (a store.Leaser, such as PostgreSQL): each
// session's CLI runs under one daemon at a time. A daemon acquires the
// session's lease before it starts the CLI, renews its leases every third
// of LeaseTTL, and releases a lease when the CLI is gone. A session whose
// lease another daemon holds is not started here (an *OwnedElsewhereError);
// a daemon that finds a lease lost (it was paused, or cut from the
// database, longer than the lease, and another daemon took the session
// over) stops the session's CLI here without writing: the store refuses its
// writes anyway (store.ErrNotOwner), so nothing it did after losing the
// lease interleaves with the new owner's log.
//
// A store may also end a lease with its daemon (PostgreSQL does: a lease
// whose owner's connection ended is free), so a killed daemon's sessions
// move at the next acquisition rather than after LeaseTTL; the fencing is
// the same either way.

// DefaultLeaseTTL is how long a session's lease lasts unless renewed.
const DefaultLeaseTTL = 15 * time.Second

// An OwnedElsewhereError says a session runs under another daemon, which
// holds its lease. It wraps store.ErrNotOwner.
type OwnedElsewhereError struct {
	Session string
	Owner   string    // the daemon's name ("" when the store did not say)
	Until   time.Time // when its lease expires unless renewed
	Err     error     // the store's error, when it refused a lease
}

func (e *OwnedElsewhereError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("session %s runs under another daemon: %v", e.Session, e.Err)
	}
	return fmt.Sprintf("session %s runs under daemon %s (its lease runs until %s unless renewed): send it commands through that daemon",
		e.Session, e.Owner, e.Until.UTC().Format(time.RFC3339))
}

func (e *OwnedElsewhereError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return store.ErrNotOwner
}

// Lease returns this daemon's name in the session leases and how long a
// lease lasts, or "" and 0 when the store has no leases.
func (d *Daemon) Lease() (name string, ttl time.Duration) {
	if d.lease == nil {
		return "", 0
	}
	return d.lease.Owner(), d.leaseTTL
}

// acquire takes session id's lease, when the store has leases.
func (d *Daemon) acquire(ctx context.Context, id string) error {
	if d.lease == nil {
		return nil
	}
	if _, err := d.lease.Acquire(ctx, id, d.leaseTTL); err != nil {
		if errors.Is(err, store.ErrNotOwner) {
			oe := &OwnedElsewhereError{Session: id, Err: err}
			if owner, until, lerr := d.lease.LeaseOf(ctx, id); lerr == nil && owner != "" {
				oe.Owner, oe.Until = owner, until
			}
			return oe
		}
		return fmt.Errorf("daemon: taking session %s's lease: %w", id, err)
	}
	return nil
}

// ownedElsewhere returns an *OwnedElsewhereError when another daemon
// holds session id's lease, nil otherwise.
func (d *Daemon) ownedElsewhere(ctx context.Context, id string) error {
	if d.lease == nil {
		return nil
	}
	owner, until, err := d.lease.LeaseOf(ctx, id)
	if err != nil || owner == "" || owner == d.lease.Owner() {
		return nil
	}
	return &OwnedElsewhereError{Session: id, Owner: owner, Until: until}
}

// releaseLease gives session id's lease up once its CLI is gone here.
func (d *Daemon) releaseLease(id string) {
	if d.lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 5*time.Second)
	defer cancel()
	if err := d.lease.Release(ctx, id); err != nil {
		d.log.Warn("releasing a session's lease", "session", id, "err", err)
	}
}

// heartbeat renews the daemon's leases until it closes.
func (d *Daemon) heartbeat() {
	defer close(d.heartbeatDone)
	t := time.NewTicker(d.leaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(d.ctx, d.leaseTTL/3)
		lost, err := d.lease.Renew(ctx, d.leaseTTL)
		cancel()
		if err != nil {
			d.log.Warn("renewing the sessions' leases", "err", err)
		}
		for _, id := range lost {
			d.takenOver(id, fmt.Errorf("%w: its lease passed to another daemon", store.ErrNotOwner))
		}
	}
}

// takenOver stops session id's CLI here, without writing, because another
// daemon owns the session now.
func (d *Daemon) takenOver(id string, why error) {
	d.mu.Lock()
	a := d.actors[id]
	d.mu.Unlock()
	if a == nil || !a.takenOver.CompareAndSwap(false, true) {
		return
	}
	d.log.Warn("session taken over by another daemon: stopping its CLI here", "session", id, "err", why)
	go func() {
		a.do(func(st *actorState) {
			st.shutdown = true // leave its status to the owner
			a.beginClose(st)
		})
		a.failSubscribers(fmt.Errorf("session %s moved to another daemon (%v): subscribe again to follow it there", id, why))
	}()
}

// orphaned returns s, marked interrupted when it is stored as running
// (starting, queued) while no daemon runs it: the daemon that did died and
// its lease expired. The next prompt through any daemon then resumes it.
func (d *Daemon) orphaned(ctx context.Context, s *store.Session) *store.Session {
	if d.lease == nil || (s.Status != store.StatusRunning && s.Status != store.StatusStarting && s.Status != store.StatusQueued) {
		return s
	}
	d.mu.Lock()
	local := d.actors[s.ID] != nil
	d.mu.Unlock()
	if local || d.ownedElsewhere(ctx, s.ID) != nil {
		return s
	}
	st := store.StatusInterrupted
	ev, err := newEvent(s.ID, &StatusChange{Status: st,
		Detail: "the daemon that ran the session stopped and its lease expired; the next prompt resumes it"})
	if err == nil {
		err = appendUpdate(ctx, d.db, &ev.Event, store.SessionUpdate{Status: &st})
	}
	if err != nil {
		d.log.Warn("marking a session whose daemon died interrupted", "session", s.ID, "err", err)
		return s
	}
	d.log.Info("session interrupted by its daemon's end", "session", s.ID)
	c := *s
	c.Status = st
	return &c
}

// syncRules keeps the permission engine in step with the rules other
// daemons sharing the store add and remove, until the daemon closes.
func (d *Daemon) syncRules(w store.Watcher) {
	defer close(d.rulesDone)
	wake, stop := w.WatchRules()
	defer stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-wake:
		}
		rules, err := d.db.Rules(d.ctx)
		if err != nil {
			if d.ctx.Err() == nil {
				d.log.Warn("reloading the rules after another daemon changed them", "err", err)
			}
			continue
		}
		var prs []permission.Rule
		for _, r := range rules {
			if r.SessionID != "" && !d.hosts(r.SessionID) {
				continue // loaded when the session's CLI starts here
			}
			pr, err := RuleFromStore(r)
			if err != nil {
				continue // logged when loaded at start
			}
			prs = append(prs, pr)
		}
		if err := d.engine.Replace(prs); err != nil {
			d.log.Warn("reloading the rules after another daemon changed them", "err", err)
		}
	}
}

// hosts reports whether session id has a CLI (or a launch) here.
func (d *Daemon) hosts(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.actors[id] != nil
}

// runsElsewhere reports whether, as stored, another daemon holds s's lease
// (its CLI runs there).
func (d *Daemon) runsElsewhere(s *store.Session) bool {
	return d.lease != nil && s.Owner != "" && s.Owner != d.lease.Owner() && s.LeaseUntil.After(time.Now())
}
