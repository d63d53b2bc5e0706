package daemon

import (
	"context"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// Watching the session list (WatchSessions) and what waits for a person
// (WatchPending), for clients that show them live, such as the web page.

// WatchSessionsInterval is the least time between two updates a session
// watcher is sent: changes in between are merged, so that a hundred
// streaming sessions cost a watcher a few reads a second, not one per
// line.
const WatchSessionsInterval = 250 * time.Millisecond

// maxDirty bounds the sessions a watcher remembers as changed; past it, it
// is sent a new snapshot instead.
const maxDirty = 4096

// A SessionsChange is what WatchSessions yields: every session when
// Snapshot (replacing what the watcher has), else those that changed.
type SessionsChange struct {
	Snapshot bool
	Sessions []*store.Session
}

// sessionFeed tells session watchers which sessions changed. changed is
// called on the store's writer path: it never blocks beyond a map insert
// per watcher, and costs an atomic load when nobody watches.
type sessionFeed struct {
	n        atomic.Int32 // watchers
	mu       sync.Mutex
	watchers map[*sessionWatch]struct{}
}

type sessionWatch struct {
	dirty    map[string]struct{} // guarded by the feed's mu
	overflow bool                // guarded by the feed's mu: send a snapshot
	wake     chan struct{}       // cap 1
}

func (f *sessionFeed) changed(id string) {
	if f.n.Load() == 0 {
		return
	}
	f.mu.Lock()
	for w := range f.watchers {
		if len(w.dirty) >= maxDirty {
			w.overflow = true
		} else {
			w.dirty[id] = struct{}{}
		}
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	f.mu.Unlock()
}

func (f *sessionFeed) add() *sessionWatch {
	w := &sessionWatch{dirty: map[string]struct{}{}, wake: make(chan struct{}, 1)}
	f.mu.Lock()
	if f.watchers == nil {
		f.watchers = map[*sessionWatch]struct{}{}
	}
	f.watchers[w] = struct{}{}
	f.n.Add(1)
	f.mu.Unlock()
	return w
}

func (f *sessionFeed) remove(w *sessionWatch) {
	f.mu.Lock()
	delete(f.watchers, w)
	f.n.Add(-1)
	f.mu.Unlock()
}

// take returns the sessions changed since the last take, or snapshot.
func (f *sessionFeed) take(w *sessionWatch) (ids []string, snapshot bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.overflow {
		w.overflow = false
		clear(w.dirty)
		return nil, true
	}
	for id := range w.dirty {
		ids = append(ids, id)
	}
	clear(w.dirty)
	return ids, false
}

// WatchSessions yields every session, then the sessions that change, as
// ListSessions and Session report them (a session with a pending request
// is waiting), at most every WatchSessionsInterval, until ctx ends (the
// last pair then carries ctx's error) or the daemon closes. A session that
// cannot be read any more (deleted) is left out. A watcher costs the
// sessions nothing: it reads them from the store when it has time.
func (d *Daemon) WatchSessions(ctx context.Context) iter.Seq2[SessionsChange, error] {
	return func(yield func(SessionsChange, error) bool) {
		w := d.feed.add()
		defer d.feed.remove(w)
		snapshot := true
		var ids []string
		for {
			var ch SessionsChange
			if snapshot {
				all, err := d.Sessions(ctx, store.SessionFilter{})
				if err != nil {
					yield(SessionsChange{}, err)
					return
				}
				ch = SessionsChange{Snapshot: true, Sessions: all}
			} else {
				for _, id := range ids {
					if s, err := d.Session(ctx, id); err == nil {
						ch.Sessions = append(ch.Sessions, s)
					} else if ctx.Err() != nil {
						yield(SessionsChange{}, ctx.Err())
						return
					}
				}
			}
			if (ch.Snapshot || len(ch.Sessions) > 0) && !yield(ch, nil) {
				return
			}
			select { // merge what changes in the next moment
			case <-time.After(WatchSessionsInterval):
			case <-ctx.Done():
				yield(SessionsChange{}, ctx.Err())
				return
			case <-d.ctx.Done():
				return
			}
			select {
			case <-w.wake:
			case <-ctx.Done():
				yield(SessionsChange{}, ctx.Err())
				return
			case <-d.ctx.Done():
				return
			}
			ids, snapshot = d.feed.take(w)
		}
	}
}

// A PendingChange is what WatchPending yields: every pending request when
// Snapshot (replacing what the watcher has), else one new request
// (Pending) or one that ended (Settled).
type PendingChange struct {
	Snapshot bool
	Pending  []permission.Pending
	Settled  *Settled
}

// Settled is a pending request that ended, and how.
type Settled struct {
	RequestID, SessionID string
	// Outcome is "allowed", "denied", "expired" or "withdrawn".
	Outcome string
	By      string
	At      time.Time
}

// WatchPending yields the requests pending for sessionID ("" for every
// session), then each new one and each one that ends, until ctx ends (the
// last pair then carries ctx's error) or the daemon closes. A watcher that
// falls behind is sent a new snapshot rather than dropped. While it
// lasts, the sessions count as watched for the requests' expiry.
func (d *Daemon) WatchPending(ctx context.Context, sessionID string) iter.Seq2[PendingChange, error] {
	return func(yield func(PendingChange, error) bool) {
		// The requests other daemons sharing the store hold, when it does.
		var wake <-chan struct{}
		var poll <-chan time.Time
		known := map[string]permission.Pending{}
		if b := d.board(); b != nil {
			ch, stop := b.WatchPending()
			defer stop()
			t := time.NewTicker(followPoll)
			defer t.Stop()
			wake, poll = ch, t.C
		}
		remote := func() bool {
			for _, ch := range d.remoteChanges(ctx, sessionID, known) {
				if !yield(ch, nil) {
					return false
				}
			}
			return true
		}
		for {
			sub, pending := d.broker.Subscribe(sessionID)
			if wake != nil {
				clear(known)
				for _, p := range d.othersPending(ctx, sessionID) {
					known[p.Request.RequestID] = p
					pending = append(pending, p)
				}
			}
			if !yield(PendingChange{Snapshot: true, Pending: pending}, nil) {
				sub.Close()
				return
			}
			resubscribe := false
			for !resubscribe {
				select {
				case n, ok := <-sub.C():
					if !ok {
						if sub.Err() == permission.ErrDropped {
							resubscribe = true // behind: start again from a snapshot
							continue
						}
						return // the broker closed
					}
					ch := PendingChange{Pending: []permission.Pending{n.Pending}}
					if r := n.Resolution; r != nil {
						ch = PendingChange{Settled: &Settled{RequestID: n.Pending.Request.RequestID,
							SessionID: n.Pending.SessionID, Outcome: outcomeWord(r), By: r.By, At: r.At}}
					}
					if !yield(ch, nil) {
						sub.Close()
						return
					}
				case <-wake:
					if !remote() {
						sub.Close()
						return
					}
				case <-poll:
					if !remote() {
						sub.Close()
						return
					}
				case <-ctx.Done():
					sub.Close()
					yield(PendingChange{}, ctx.Err())
					return
				case <-d.ctx.Done():
					sub.Close()
					return
				}
			}
		}
	}
}

// outcomeWord says how a request ended in a client's words.
func outcomeWord(r *permission.Resolution) string {
	switch r.Outcome {
	case permission.Decided:
		if r.Result.Allow {
			return "allowed"
		}
		return "denied"
	case permission.Expired:
		return "expired"
	}
	return "withdrawn"
}
