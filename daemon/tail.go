package daemon

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/claudectl/claudectl/store"
)

// Following sessions other daemons run (a store.Tailer): the subscribers of
// a session no CLI of this daemon runs wait on its hub as usual, and one
// tailer per daemon publishes into those hubs what the other daemons
// store: at every notification that any session's events were committed
// (or every followPoll), it reads the new events of every followed
// session with one query and publishes them in order. Subscribers of one
// session share the reading; a subscriber that falls behind the ring reads
// the store as ever.

// tailer is the daemon's follower of other daemons' sessions.
type tailer struct {
	d *Daemon
	t store.Tailer

	mu      sync.Mutex
	follows map[*hub]*tailState // guarded by mu
	kick    chan struct{}       // capacity 1: a follow was added
	done    chan struct{}
}

// tailState is how far the tailer has published a hub.
type tailState struct {
	last int64
	refs int
}

// tailBatch bounds the events one read takes.
const tailBatch = 4096

func newTailer(d *Daemon, t store.Tailer) *tailer {
	tl := &tailer{d: d, t: t, follows: map[*hub]*tailState{}, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go tl.run()
	return tl
}

// follow publishes into h what other daemons store of its session after
// seq last, until stop is called.
func (tl *tailer) follow(h *hub, last int64) (stop func()) {
	tl.mu.Lock()
	st := tl.follows[h]
	if st == nil {
		st = &tailState{last: last}
		tl.follows[h] = st
	}
	st.last = max(st.last, last)
	st.refs++
	tl.mu.Unlock()
	select {
	case tl.kick <- struct{}{}:
	default:
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			tl.mu.Lock()
			if st.refs--; st.refs == 0 {
				delete(tl.follows, h)
			}
			tl.mu.Unlock()
		})
	}
}

func (tl *tailer) run() {
	defer close(tl.done)
	wake, stop := tl.t.WatchAllEvents()
	defer stop()
	poll := time.NewTicker(followPoll)
	defer poll.Stop()
	for {
		select {
		case <-tl.d.ctx.Done():
			return
		case <-wake:
		case <-tl.kick:
		case <-poll.C:
		}
		for tl.read() {
			// a session had more than one read takes: read on
		}
	}
}

// read publishes the new events of every followed hub; it reports whether
// it stopped at its bound (there may be more).
func (tl *tailer) read() bool {
	d := tl.d
	tl.mu.Lock()
	after := make(map[string]int64, len(tl.follows))
	byID := make(map[string]*hub, len(tl.follows))
	d.mu.Lock()
	for h, st := range tl.follows {
		if h.actor || h.detached {
			continue // this daemon runs it now, or it ended
		}
		after[h.id], byID[h.id] = st.last, h
	}
	d.mu.Unlock()
	tl.mu.Unlock()
	if len(after) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	evs, err := tl.t.EventsAfter(ctx, after, tailBatch)
	cancel()
	if err != nil {
		if d.ctx.Err() == nil {
			d.log.Warn("reading the events of sessions other daemons run", "err", err)
		}
		return false
	}
	n := 0
	var ended []*hub
	tl.mu.Lock()
	for id, list := range evs {
		h := byID[id]
		st := tl.follows[h]
		if st == nil {
			continue
		}
		// A CLI of this daemon may have run the session meanwhile and
		// published its events: the ring stays in seq order.
		st.last = max(st.last, h.newest())
		for _, ev := range list {
			if ev.Seq != st.last+1 {
				continue // published already (a subscriber moved last on)
			}
			h.publish(EventFromStore(ev)) // never blocks
			st.last, n = ev.Seq, n+1
			if ev.Type == "status" {
				var sc StatusChange
				if json.Unmarshal(ev.Raw, &sc) == nil && terminal(sc.Status) {
					ended = append(ended, h)
				}
			}
		}
	}
	tl.mu.Unlock()
	for _, h := range ended {
		d.endHub(h)
	}
	return n >= tailBatch
}
