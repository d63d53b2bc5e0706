package daemon

import (
	"context"
	"errors"
	"iter"
	"sync"

	"github.com/claudectl/claudectl/store"
)

// A hub fans a session's logged events out to its live subscribers. publish
// never blocks: a subscriber that has more than size events not yet taken
// is dropped. Each subscriber's backlog is a slice that grows only as far
// as it lags, so an idle subscriber costs almost nothing.
type hub struct {
	size int

	mu     sync.Mutex
	subs   map[*sub]struct{} // guarded by mu
	closed bool              // guarded by mu
}

type sub struct {
	wake chan struct{} // capacity 1: events or the end are waiting

	// guarded by hub.mu
	backlog []Event
	ended   bool  // no more events will be added
	dropped bool  // ended because the backlog overflowed
	err     error // ended because the session failed so (fail)
}

func newHub(size int) *hub { return &hub{size: size, subs: map[*sub]struct{}{}} }

func (h *hub) subscribe() *sub {
	s := &sub{wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.ended = true
		return s
	}
	h.subs[s] = struct{}{}
	return s
}

func (h *hub) unsubscribe(s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, s)
	s.ended = true
	s.backlog = nil
}

func (h *hub) publish(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if len(s.backlog) >= h.size {
			s.dropped, s.ended, s.backlog = true, true, nil
			delete(h.subs, s)
		} else {
			s.backlog = append(s.backlog, ev)
		}
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// close ends every subscription; they get the events already queued.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		s.ended = true
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// fail ends every subscription with err, after the events already queued.
func (h *hub) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		delete(h.subs, s)
		s.ended, s.err = true, err
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// failSubscribers ends the session's subscriptions with err.
func (a *actor) failSubscribers(err error) { a.hub.fail(err) }

// take returns the events queued for s (nil when none) and whether the
// subscription has ended, and if so, whether it was dropped.
func (h *hub) take(s *sub) (evs []Event, ended, dropped bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	evs, s.backlog = s.backlog, nil
	return evs, s.ended, s.dropped, s.err
}

// Subscribe returns the events of session id after seq after: those stored,
// then the live ones as they are logged, with no gap and no duplicate at the
// seam. For a session without a live CLI it ends after the stored events;
// otherwise it ends when the session does (after its last event) or ctx
// ends. A subscriber that falls too far behind gets ErrSlowSubscriber and
// may subscribe again from the last seq it saw. Errors of the replay are
// the store's (store.ErrNotFound, store.ErrUnavailable).
//
// While a subscriber follows a live session, the session counts as
// watched: its permission requests expire after the watched timeout.
func (d *Daemon) Subscribe(ctx context.Context, id string, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		// Live first, then replay: whatever is logged while the replay
		// runs is buffered, and skipped if the replay had it.
		d.mu.Lock()
		a := d.actors[id]
		d.mu.Unlock()
		var s *sub
		if a != nil {
			s = a.hub.subscribe()
			defer a.hub.unsubscribe(s)
			defer d.broker.Watch(id)()
		}
		last := after
		for ev, err := range d.db.Events(ctx, id, after) {
			if errors.Is(err, store.ErrNotFound) {
				err = &SessionNotFoundError{ID: id}
			}
			if err != nil {
				yield(Event{}, err)
				return
			}
			if !yield(EventFromStore(ev), nil) {
				return
			}
			last = ev.Seq
		}
		if s == nil {
			return
		}
		for {
			evs, ended, dropped, ferr := a.hub.take(s)
			for _, ev := range evs {
				if ev.Seq <= last {
					continue
				}
				last = ev.Seq
				if !yield(ev, nil) {
					return
				}
			}
			if ended && len(evs) == 0 {
				switch {
				case ferr != nil:
					yield(Event{}, ferr)
				case dropped:
					yield(Event{}, ErrSlowSubscriber)
				}
				return
			}
			if len(evs) > 0 {
				continue // more may have come meanwhile; ended is checked on an empty take
			}
			select {
			case <-s.wake:
			case <-ctx.Done():
				yield(Event{}, ctx.Err())
				return
			}
		}
	}
}
