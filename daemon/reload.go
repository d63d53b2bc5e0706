package daemon

import "time"

// The settings a daemon takes while it runs (claudectl reload, SIGHUP):
// each setter applies from the next time the setting is read.

// SetIdleTimeout changes sessions.idle_timeout (0: never): a session that
// becomes idle from now on is suspended after t; one idle already is
// after t from when it became idle, checked when its timer fires.
func (d *Daemon) SetIdleTimeout(t time.Duration) { d.idleTimeout.Store(int64(max(t, 0))) }

// idle returns sessions.idle_timeout, 0 for never.
func (d *Daemon) idle() time.Duration { return time.Duration(d.idleTimeout.Load()) }

// SetMaxRunning changes sessions.max_running (0: no limit). A higher
// limit starts queued sessions at once; a lower one suspends nobody: the
// sessions running go on, and launches queue until enough have ended (or
// are suspended, idle, to make room).
func (d *Daemon) SetMaxRunning(n int) {
	d.slots.setMax(n)
	d.evictIdle()
}
