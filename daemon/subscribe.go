package daemon

import (
	"context"
	"iter"
	"sync"

	"github.com/claudectl/claudectl/store"
)

// A hub fans a session's logged events out to its live subscribers. publish
// never blocks: a subscriber whose buffer is full is dropped.
type hub struct {
	size int

	mu     sync.Mutex
	subs   map[*sub]struct{} // guarded by mu
	closed bool              // guarded by mu
}

type sub struct {
	c       chan store.Event
	dropped bool // set under hub.mu before c is closed
}

func newHub(size int) *hub { return &hub{size: size, subs: map[*sub]struct{}{}} }

func (h *hub) subscribe() *sub {
	s := &sub{c: make(chan store.Event, h.size)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(s.c)
		return s
	}
	h.subs[s] = struct{}{}
	return s
}

func (h *hub) unsubscribe(s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.c)
	}
}

func (h *hub) publish(ev store.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.c <- ev:
		default:
			s.dropped = true
			delete(h.subs, s)
			close(s.c)
		}
	}
}

// close ends every subscription; they get the events already buffered.
func (h *hub) close(error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.c)
	}
}

// Subscribe returns the events of session id after seq after: those stored,
// then the live ones as they are logged, with no gap and no duplicate at the
// seam. For a session without a live CLI it ends after the stored events;
// otherwise it ends when the session does (after its last event) or ctx
// ends. A subscriber that falls too far behind gets ErrSlowSubscriber and
// may subscribe again from the last seq it saw. Errors of the replay are
// the store's (store.ErrNotFound, store.ErrUnavailable).
func (d *Daemon) Subscribe(ctx context.Context, id string, after int64) iter.Seq2[store.Event, error] {
	return func(yield func(store.Event, error) bool) {
		// Live first, then replay: whatever is logged while the replay
		// runs is buffered, and skipped if the replay had it.
		d.mu.Lock()
		a := d.actors[id]
		d.mu.Unlock()
		var s *sub
		if a != nil {
			s = a.hub.subscribe()
			defer a.hub.unsubscribe(s)
		}
		last := after
		for ev, err := range d.db.Events(ctx, id, after) {
			if err != nil {
				yield(store.Event{}, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
			last = ev.Seq
		}
		if s == nil {
			return
		}
		for {
			select {
			case ev, ok := <-s.c:
				if !ok {
					a.hub.mu.Lock()
					dropped := s.dropped
					a.hub.mu.Unlock()
					if dropped {
						yield(store.Event{}, ErrSlowSubscriber)
					}
					return
				}
				if ev.Seq <= last {
					continue
				}
				last = ev.Seq
				if !yield(ev, nil) {
					return
				}
			case <-ctx.Done():
				yield(store.Event{}, ctx.Err())
				return
			}
		}
	}
}
