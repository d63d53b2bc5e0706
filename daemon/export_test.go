package daemon

import (
	"context"
	"time"
)

// InterruptForTest ends session id's CLI as a daemon shutdown does
// (status interrupted, resumable by the next prompt) while the daemon goes
// on: the path an idle suspension takes. It waits for the end.
func InterruptForTest(d *Daemon, id string) {
	d.mu.Lock()
	a := d.actors[id]
	d.mu.Unlock()
	if a != nil {
		a.close(true, "")
	}
}

// HubsForTest returns how many hubs the daemon keeps.
func HubsForTest(d *Daemon) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.hubs)
}

// SuspendForTest starts suspending session id's CLI, as an idle timeout
// does, without waiting for its end.
func SuspendForTest(d *Daemon, id, reason string) {
	d.mu.Lock()
	a := d.actors[id]
	d.mu.Unlock()
	if a != nil {
		a.suspend(reason)
	}
}

// WaitSparesForTest waits for the spare worktrees being made (none may
// start meanwhile).
func WaitSparesForTest(d *Daemon) { d.spares.wg.Wait() }

// HasRuleForTest reports whether the daemon's permission engine holds the
// stored rule id: one another daemon added reaches it through the store's
// rule watch, some time after AddRule returned there.
func HasRuleForTest(d *Daemon, id int64) bool {
	for _, r := range d.engine.Rules() {
		if r.ID == id {
			return true
		}
	}
	return false
}

// SparePIDsForTest returns the process ids of the spare CLIs that are
// ready (pool.go).
func SparePIDsForTest(d *Daemon) []int {
	d.pool.mu.Lock()
	defer d.pool.mu.Unlock()
	var pids []int
	for _, sp := range d.pool.spares {
		if sp.ready {
			pids = append(pids, sp.sess.PID())
		}
	}
	return pids
}

// SparesForTest returns how many spares the pool holds, starting or ready.
func SparesForTest(d *Daemon) int {
	d.pool.mu.Lock()
	defer d.pool.mu.Unlock()
	return len(d.pool.spares)
}

// InitializedForTest waits until session id has a CLI that has answered
// its initialize request.
func InitializedForTest(ctx context.Context, d *Daemon, id string) error {
	for {
		d.mu.Lock()
		a := d.actors[id]
		d.mu.Unlock()
		if a != nil {
			select {
			case <-a.ready:
			case <-ctx.Done():
				return ctx.Err()
			}
			if a.sess == nil {
				return ErrNotRunning
			}
			_, err := a.sess.Initialize(ctx)
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
