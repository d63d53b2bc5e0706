package daemon

import (
	"slices"

	"github.com/claudectl/claudectl/claude"
)

// This file holds what the daemon knows of its remote workers: which one
// runs each session, and the list of the registered ones.

// setWorkerOf records that session id's CLI runs on the worker named.
func (d *Daemon) setWorkerOf(id, worker string) {
	if worker == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.workerNames == nil {
		d.workerNames = map[string]string{}
	}
	d.workerNames[id] = worker
}

// workerOf returns the remote worker session id's CLI ran on last, "" if
// none since the daemon started (a local session, or one not run yet).
func (d *Daemon) workerOf(id string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.workerNames[id]
}

// WorkerOf returns the name of the remote worker that runs session id's
// CLI, or ran it last since the daemon started ("" for a local session;
// the store's Session.Relay.Worker names the one that ran it last, across
// restarts and daemons).
func (d *Daemon) WorkerOf(id string) string { return d.workerOf(id) }

// ListWorkers returns the registered remote workers, sorted by name, each
// with the ids of the daemon's sessions it runs; nil when the daemon
// accepts no workers.
func (d *Daemon) ListWorkers() []WorkerStatus {
	if d.workers == nil {
		return nil
	}
	ws := d.workers.Workers() // the daemon tags its sessions with their ids
	spare := d.spareIDs()
	out := make([]WorkerStatus, len(ws))
	for i, w := range ws {
		n := len(w.Sessions)
		w.Sessions = slices.DeleteFunc(w.Sessions, func(id string) bool { return spare[id] })
		out[i] = WorkerStatus{WorkerInfo: w, SpareCLIs: n - len(w.Sessions)}
	}
	return out
}

// WorkerStatus is a registered worker as ListWorkers shows it: its
// Sessions are the daemon's sessions, without the spare CLIs waiting on it
// (pool.go), which SpareCLIs counts.
type WorkerStatus struct {
	claude.WorkerInfo
	SpareCLIs int
}
