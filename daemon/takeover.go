package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/relay"
	"github.com/claudectl/claudectl/store"
)

// Taking over a session whose CLI runs on a remote worker, without
// restarting the CLI, when the daemon that ran it died (or this daemon
// restarted). While a worker session runs, its relay state is stored
// (store.Relay: the worker, the relay session, and how many of the
// worker's frames are stored); the daemon holds each line on the worker
// until its event is stored (claude.WorkerTransport.Hold; the relay count
// rises in the event's transaction, Event.RelayFrame). The worker, cut
// from its daemon, dials its other addresses; a daemon that does not serve
// the relay session asks adopt, which takes the session over once the dead
// owner's lease has expired: the worker then sends again every line after
// the stored count, so the log goes on with no gap and no repeat, and the
// CLI — its pid, its conversation, its turn under way — is untouched.

// name is the daemon's name in leases, or "this daemon".
func (d *Daemon) name() string {
	if n, _ := d.Lease(); n != "" {
		return n
	}
	return "this daemon"
}

// recordRelay stores the relay state of a session whose CLI a worker runs
// on conn, once it has started (a CLI taken over keeps its state).
func (a *actor) recordRelay(ctx context.Context, conn claude.Conn) error {
	rs, ok := conn.(interface {
		RelaySession() string
		RelaySecretHash() string
	})
	if !ok {
		return nil
	}
	if a.launch.takeover != nil {
		a.sent.Store(a.launch.sent)
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	// The secret's hash, not the secret: a worker coming back to this
	// daemon restarted, or to another, proves itself with the secret.
	r := &store.Relay{Worker: a.d.workerOf(a.id), Session: rs.RelaySession(), SecretHash: rs.RelaySecretHash()}
	s, err := a.d.db.Session(ctx, a.id)
	if err == nil {
		r.Since = s.LastSeq // the lines written to this CLI are the ToCLI events after it
		_, err = a.d.db.UpdateSession(ctx, a.id, store.SessionUpdate{Relay: r})
	}
	if err != nil {
		return fmt.Errorf("daemon: recording the link to the CLI on worker %s: %w", r.Worker, err)
	}
	return nil
}

// recordWorkerLink notes the worker that runs the session's CLI on conn
// (a remote one's) and stores the relay state (recordRelay).
func (a *actor) recordWorkerLink(ctx context.Context, conn claude.Conn) error {
	if name, ok := workerName(conn); ok {
		a.d.setWorkerOf(a.id, name)
	}
	return a.recordRelay(ctx, conn)
}

// unsent returns the lines written to session s's CLI over its relay
// that the worker did not receive: the ToCLI events after s.Relay.Since
// numbered (from 1) above has, up to s.Relay.Sent.
func (d *Daemon) unsent(ctx context.Context, s *store.Session, has uint64) ([][]byte, error) {
	if s.Relay.Sent <= int64(has) {
		return nil, nil
	}
	var out [][]byte
	n := int64(0)
	for ev, err := range d.db.Events(ctx, s.ID, s.Relay.Since) {
		if err != nil {
			return nil, err
		}
		if ev.Direction != store.ToCLI {
			continue
		}
		if n++; n > int64(has) && n <= s.Relay.Sent {
			out = append(out, ev.Raw)
		}
		if n >= s.Relay.Sent {
			break
		}
	}
	return out, nil
}

// clearRelay forgets the relay session once the session's CLI has ended
// here: a worker coming back for it later is told the session is over. The
// worker's name stays: the session's transcript is there, where a resume
// must run (workerOf).
func (a *actor) clearRelay(ctx context.Context) {
	if !a.remote() || a.takenOver.Load() {
		return
	}
	r := &store.Relay{Worker: a.d.workerOf(a.id)}
	if _, err := a.d.db.UpdateSession(ctx, a.id, store.SessionUpdate{Relay: r}); err != nil {
		a.d.log.Warn("forgetting the link to an ended CLI", "session", a.id, "err", err)
	}
}

// adopt is the worker listener's Adopt: r's worker came back for a relay
// session this daemon does not serve. It takes the session over when its
// stored relay state names that relay session, the worker presented the
// session's secret (its hash is stored), the session is not over, and no
// live daemon holds its lease; ErrUnknownRelaySession makes the
// worker stop the CLI, any other error makes it try again (elsewhere).
func (d *Daemon) adopt(ctx context.Context, r *claude.WorkerReturn) error {
	unknown := func(why string) error {
		return fmt.Errorf("%w: %s (worker %s): %s", claude.ErrUnknownRelaySession, relay.Clip(r.Session), r.Worker, why)
	}
	id := claude.RelayTag(r.Session)
	if !plausibleID(id) {
		return unknown("not a session of a daemon")
	}
	s, err := d.db.Session(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return unknown("no such session")
	case err != nil:
		return fmt.Errorf("reading session %s: %w", id, err)
	case s.Relay.Session != r.Session:
		return unknown("session " + id + " does not run that CLI any more")
	case !r.Proves(s.Relay.SecretHash):
		// Checked before anything waits: the session's id is in logs and
		// the store, and any holder of the worker token may name it.
		return unknown("the connection did not present the secret of the worker that runs session " + id + "'s CLI")
	case s.Relay.Worker != "" && s.Relay.Worker != r.Worker:
		return unknown("session " + id + "'s CLI runs on worker " + s.Relay.Worker)
	case terminal(s.Status):
		return unknown("session " + id + " is " + string(s.Status))
	}
	if err := d.awaitLease(ctx, id); err != nil {
		return err // its owner lives: the worker goes back to it
	}
	o, err := decodeOptions(s.ID, s.Options)
	if err != nil {
		return unknown(err.Error())
	}
	if o.Cwd == "" {
		o.Cwd = s.Cwd
	}
	o.Model, o.PermissionMode = s.Model, s.PermissionMode
	midTurn := s.Status == store.StatusRunning || s.Status == store.StatusInterrupted || s.Status == store.StatusStarting
	unsent, err := d.unsent(ctx, s, r.WorkerHas)
	if err != nil {
		return fmt.Errorf("reading the lines session %s's worker did not receive: %w", id, err)
	}
	d.setWorkerOf(id, r.Worker)
	d.log.Info("taking over a session whose worker came back", "session", id, "worker", r.Worker,
		"previous_owner", s.Owner, "stored_frames", s.Relay.Received, "unsent_lines", len(unsent), "mid_turn", midTurn)
	start := time.Now()
	_, err = d.launch(ctx, s, o, launch{resume: s.ClaudeSessionID, process: s.Process, midTurn: midTurn,
		sent:     max(s.Relay.Sent, int64(r.WorkerHas)),
		takeover: &claude.WorkerResume{Session: r.Session, SecretHash: s.Relay.SecretHash, Received: uint64(s.Relay.Received), Unsent: unsent}}, "")
	if err != nil {
		return fmt.Errorf("taking session %s over: %w", id, err)
	}
	d.log.Info("session taken over", "session", id, "worker", r.Worker, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// awaitLease returns once no other daemon holds session id's lease,
// waiting for one that expires before ctx does (a dead owner's: the worker
// comes back before the lease ends); a lease renewed meanwhile, or one
// outlasting ctx, is an *OwnedElsewhereError. It asks again every
// leasePoll meanwhile: a lease is free as soon as its owner's daemon is
// gone (its connection to the store ended), and the worker usually comes
// back just before the store has seen that.
func (d *Daemon) awaitLease(ctx context.Context, id string) error {
	for {
		err := d.ownedElsewhere(ctx, id)
		var oe *OwnedElsewhereError
		if err == nil || !errors.As(err, &oe) {
			return err
		}
		wait := time.Until(oe.Until) + 50*time.Millisecond
		if dl, ok := ctx.Deadline(); !ok || time.Now().Add(wait).After(dl.Add(-time.Second)) {
			return err
		}
		t := time.NewTimer(min(wait, leasePoll))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// leasePoll is how often awaitLease asks whether a lease is free.
const leasePoll = 100 * time.Millisecond

// plausibleID reports whether id may be a session id (1–128 printable
// ASCII bytes), before the store is asked about what a worker sent.
func plausibleID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}
