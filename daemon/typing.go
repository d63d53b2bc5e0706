package daemon

import (
	"context"
	"errors"
	"time"
)

// Typing is told that someone is about to write to session id (the web
// page's first keystroke in its composer, attach's first byte typed). A
// suspended session is resumed then, in the background, so that the
// prompt that follows finds its CLI started and initialized instead of
// waiting a second for it: the CLI starts while the person types. A
// resume that no prompt follows is an idle session like any other, and
// sessions.idle_timeout suspends it again.
//
// It reports whether a resume was started. A session with a CLI is left
// as it is, except that its idle time starts again (someone is about to
// use it: the idle timer and the eviction for a queued session pass it
// over); so is one that no prompt would resume (closed, failed, held by a
// spend cap, stopped by the store), one that runs on another daemon, and
// any session while no slot is free (sessions.max_running): a keystroke
// suspends nobody to make room, a prompt does. Errors: store.ErrNotFound
// for an unknown session; the resume's own failures are logged.
func (d *Daemon) Typing(ctx context.Context, id string) (bool, error) {
	d.mu.Lock()
	a, closed := d.actors[id], d.closed
	d.mu.Unlock()
	if closed {
		return false, ErrClosed
	}
	if a != nil {
		select {
		case <-a.ready:
		default:
			return false, nil // its CLI is being started already
		}
		if a.live.Load() {
			a.touch()
			return false, nil
		}
		select { // its CLI has just ended (suspended): resume once it is gone
		case <-a.done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	s, err := d.stored(ctx, id)
	if err != nil {
		return false, err
	}
	if d.ownedElsewhere(ctx, id) != nil || d.stoppedByStore(id) != "" || d.runsElsewhere(s) {
		return false, nil
	}
	s = d.orphaned(ctx, s)
	if !s.Status.Resumable() || !d.slots.free() {
		return false, nil
	}
	if _, err := resumable(s, "resume"); err != nil && s.ClaudeSessionID != "" {
		return false, nil // its budget is spent, its worktree discarded: the prompt says so
	}
	d.mu.Lock()
	if d.closed { // Close waits for the resumes begun before it
		d.mu.Unlock()
		return false, ErrClosed
	}
	d.typing.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.typing.Done()
		_, err := d.resume(context.WithoutCancel(d.ctx), s, "", true)
		switch {
		case err == nil:
			d.log.Info("session resumed for someone typing", "session", id)
		case errors.Is(err, ErrAlreadyRunning), errors.Is(err, ErrClosed):
		default:
			d.log.Warn("resuming a session for someone typing", "session", id, "err", err)
		}
	}()
	return true, nil
}

// touch starts an idle session's idle time again: someone is about to
// write to it.
func (a *actor) touch() {
	if since := a.idleSince.Load(); since != 0 {
		a.idleSince.CompareAndSwap(since, time.Now().UnixNano())
	}
}
