package daemon

import (
	"context"
	"errors"
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

// maxDirty bounds the sessions the feed remembers as changed between two
// frames; past it, the next frame is a new snapshot instead.
const maxDirty = 4096

// feedFrames is how many frames the feed keeps: a watcher further behind
// (its client reads slowly) starts again from a snapshot.
const feedFrames = 16

// A SessionsChange is what WatchSessions yields: every session when
// Snapshot (replacing what the watcher has), else those that changed. The
// sessions are shared with the other watchers: read only.
type SessionsChange struct {
	Snapshot bool
	Sessions []*store.Session
}

// sessionFeed tells session watchers what changed. changed is called on
// the store's writer path, for every event published: it costs an atomic
// load when nobody watches, else a map insert, whatever the number of
// watchers. One goroutine (Daemon.pumpSessions) reads the changed sessions
// once per WatchSessionsInterval and publishes them as a frame that every
// watcher reads, and watchers that start together share one snapshot: the
// store is read once per change, not once per watcher (3,000 watchers each
// reading every change made a turn cost the daemon 35 times its CPU).
type sessionFeed struct {
	n    atomic.Int32  // watchers
	kick chan struct{} // cap 1: something changed since the last frame

	// reading is held while the sessions of a frame or of a snapshot are
	// read (and the frame published): so a snapshot holds every change of
	// the frames published before its read, and the frames after it were
	// read after it (a frame read before a snapshot but published after
	// would show a watcher an older state over the snapshot's).
	reading sync.Mutex

	mu       sync.Mutex
	dirty    map[string]struct{} // changed since the last frame
	overflow bool                // more than maxDirty changed: the next frame is a snapshot
	frames   []sessionFrame      // the last feedFrames frames, oldest first
	seq      uint64              // the last frame's
	next     chan struct{}       // closed when the next frame is published
	snap     *feedSnapshot       // the last snapshot taken or being taken
}

// A sessionFrame is what changed in one interval, as read after it.
type sessionFrame struct {
	seq      uint64
	snapshot bool             // every session, replacing what came before
	sessions []*store.Session // read only
}

// A feedSnapshot is every session, as read after frame seq was published
// and before the next one was read.
type feedSnapshot struct {
	done chan struct{} // closed when seq, all and err are set
	seq  uint64
	all  []*store.Session
	err  error
}

func (f *sessionFeed) init() {
	f.kick, f.dirty, f.next = make(chan struct{}, 1), map[string]struct{}{}, make(chan struct{})
}

func (f *sessionFeed) changed(id string) {
	if f.n.Load() == 0 {
		return
	}
	f.mu.Lock()
	if len(f.dirty) >= maxDirty {
		f.overflow = true
	} else {
		f.dirty[id] = struct{}{}
	}
	f.mu.Unlock()
	f.wake()
}

// takeDirty returns what changed since the last call, and clears it.
func (f *sessionFeed) takeDirty() (ids []string, overflow bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	overflow, f.overflow = f.overflow, false
	if !overflow {
		for id := range f.dirty {
			ids = append(ids, id)
		}
	}
	clear(f.dirty)
	return ids, overflow
}

// publish adds a frame and wakes the watchers.
func (f *sessionFeed) publish(fr sessionFrame) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	fr.seq = f.seq
	if len(f.frames) == feedFrames {
		clear(f.frames[:1])
		f.frames = append(f.frames[:0], f.frames[1:]...)
	}
	f.frames = append(f.frames, fr)
	close(f.next)
	f.next = make(chan struct{})
}

// after returns the change of the frames after seq merged, and the last
// frame's seq; behind when some of them are gone. wait is closed when a
// frame after last is published.
func (f *sessionFeed) after(seq uint64) (ch SessionsChange, last uint64, behind bool, wait <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	last, wait = f.seq, f.next
	if seq == last {
		return ch, last, false, wait
	}
	if len(f.frames) == 0 || f.frames[0].seq > seq+1 {
		return ch, last, true, wait
	}
	at := map[string]int{} // where each session is in ch.Sessions
	for _, fr := range f.frames {
		if fr.seq <= seq {
			continue
		}
		if fr.snapshot {
			ch = SessionsChange{Snapshot: true}
			clear(at)
		}
		for _, s := range fr.sessions {
			if i, ok := at[s.ID]; ok {
				ch.Sessions[i] = s
				continue
			}
			at[s.ID] = len(ch.Sessions)
			ch.Sessions = append(ch.Sessions, s)
		}
	}
	return ch, last, false, wait
}

// pumpSessions publishes the sessions that change as frames, at most one
// per WatchSessionsInterval, until the daemon closes. Idle, it waits.
func (d *Daemon) pumpSessions() {
	defer close(d.feedDone)
	for {
		select {
		case <-d.feed.kick:
		case <-d.ctx.Done():
			return
		}
		d.publishFrame()
		select { // merge what changes in the next moment
		case <-time.After(WatchSessionsInterval):
		case <-d.ctx.Done():
			return
		}
	}
}

// publishFrame reads what changed since the last frame and publishes it.
// What could not be read is marked changed again, for the next frame.
func (d *Daemon) publishFrame() {
	f := &d.feed
	f.reading.Lock()
	defer f.reading.Unlock()
	ids, overflow := f.takeDirty()
	var fr sessionFrame
	if overflow {
		all, err := d.Sessions(d.ctx, store.SessionFilter{})
		if err != nil {
			if d.ctx.Err() == nil {
				d.log.Warn("reading the sessions for their watchers", "err", err)
				f.retry(nil, true)
			}
			return
		}
		fr = sessionFrame{snapshot: true, sessions: all}
	} else {
		var failed []string
		for _, id := range ids {
			s, err := d.Session(d.ctx, id)
			switch {
			case err == nil:
				fr.sessions = append(fr.sessions, s)
			case d.ctx.Err() != nil:
				return
			case !errors.Is(err, store.ErrNotFound): // a deleted session is left out
				failed = append(failed, id)
			}
		}
		if len(failed) > 0 {
			d.log.Warn("reading changed sessions for their watchers; trying again", "sessions", len(failed))
			f.retry(failed, false)
		}
	}
	if fr.snapshot || len(fr.sessions) > 0 {
		f.publish(fr)
	}
}

// retry marks sessions (or, with overflow, all of them) changed again, for
// the next frame, when they could not be read for this one.
func (f *sessionFeed) retry(ids []string, overflow bool) {
	f.mu.Lock()
	f.overflow = f.overflow || overflow
	for _, id := range ids {
		f.dirty[id] = struct{}{}
	}
	f.mu.Unlock()
	f.wake()
}

// wake tells the pump that something changed.
func (f *sessionFeed) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// sessionsSnapshot returns every session and the last frame whose changes
// they hold. Watchers that start while one is read, or while the frames
// after the last one are all kept, share it.
func (d *Daemon) sessionsSnapshot(ctx context.Context) ([]*store.Session, uint64, error) {
	f := &d.feed
	f.mu.Lock()
	s := f.snap
	if s != nil {
		select {
		case <-s.done: // kept while the frames after it are
			if len(f.frames) > 0 && f.frames[0].seq > s.seq+1 {
				s = nil
			}
		default: // being read: as fresh as can be
		}
	}
	if s == nil {
		s = &feedSnapshot{done: make(chan struct{})}
		f.snap = s
		go d.readSnapshot(s) // for every watcher that waits for it: bound to none's ctx
	}
	f.mu.Unlock()
	select {
	case <-s.done:
		return s.all, s.seq, s.err
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

func (d *Daemon) readSnapshot(s *feedSnapshot) {
	f := &d.feed
	f.reading.Lock()
	f.mu.Lock()
	s.seq = f.seq
	f.mu.Unlock()
	s.all, s.err = d.Sessions(d.ctx, store.SessionFilter{})
	f.reading.Unlock()
	if s.err != nil {
		f.mu.Lock()
		if f.snap == s {
			f.snap = nil // not kept: the next watcher tries again
		}
		f.mu.Unlock()
	}
	close(s.done)
}

// WatchSessions yields every session, then the sessions that change, as
// ListSessions and Session report them (a session with a pending request
// is waiting), at most every WatchSessionsInterval, until ctx ends (the
// last pair then carries ctx's error) or the daemon closes. A session that
// cannot be read any more (deleted) is left out. A watcher costs the
// sessions nothing: the changes are read once for every watcher, off the
// writer's path, and a watcher that falls behind gets a new snapshot.
func (d *Daemon) WatchSessions(ctx context.Context) iter.Seq2[SessionsChange, error] {
	return func(yield func(SessionsChange, error) bool) {
		f := &d.feed
		f.n.Add(1)
		defer f.n.Add(-1)
		var seq uint64
		snapshot := true
		for {
			var ch SessionsChange
			if snapshot {
				all, at, err := d.sessionsSnapshot(ctx)
				if err != nil {
					yield(SessionsChange{}, err)
					return
				}
				ch, seq = SessionsChange{Snapshot: true, Sessions: all}, at
			} else {
				var wait <-chan struct{}
				ch, seq, snapshot, wait = f.after(seq)
				if snapshot {
					continue
				}
				if !ch.Snapshot && len(ch.Sessions) == 0 {
					select {
					case <-wait:
						continue
					case <-ctx.Done():
						yield(SessionsChange{}, ctx.Err())
						return
					case <-d.ctx.Done():
						return
					}
				}
			}
			snapshot = false
			if !yield(ch, nil) {
				return
			}
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
	// Outcome is "allowed", "answered" (an AskUserQuestion), "denied",
	// "expired" or "withdrawn".
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
		switch {
		case permission.Answers(r.Result.UpdatedInput) != nil:
			return "answered" // an AskUserQuestion
		case r.Result.Allow:
			return "allowed"
		}
		return "denied"
	case permission.Expired:
		return "expired"
	}
	return "withdrawn"
}
