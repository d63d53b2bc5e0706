package daemon

import (
	"context"
	"sync"
)

// slots caps the sessions with a live CLI (Options.MaxRunning). A launch
// takes a slot before its CLI starts and gives it back when the CLI is
// gone; when none is free it queues, first come first served, while the
// daemon suspends idle sessions to make room. A freed slot is handed to
// the first in the queue, never taken by a newcomer ahead of it.
type slots struct {
	mu       sync.Mutex
	max      int           // 0: no limit; guarded by mu (setMax changes it)
	used     int           // slots held, the queue's granted ones included
	queue    []*slotWaiter // in arrival order
	evicting int           // idle sessions asked to make room, not gone yet
	closed   bool
}

type slotWaiter struct {
	ready   chan struct{} // closed when granted
	granted bool          // guarded by slots.mu
}

// take takes a free slot at once; it reports false when the caller must
// queue (with wait).
func (s *slots) take() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max <= 0 || (s.used < s.max && len(s.queue) == 0) {
		s.used++
		return true
	}
	return false
}

// free reports whether a launch would take a slot at once.
func (s *slots) free() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max <= 0 || (s.used < s.max && len(s.queue) == 0)
}

// force takes a slot even when none is free: for a CLI that already runs
// (taken over from another daemon), which no queue can hold back.
func (s *slots) force() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used++
}

// enqueue joins the queue; it returns the waiter and how many are ahead.
func (s *slots) enqueue() (*slotWaiter, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &slotWaiter{ready: make(chan struct{})}
	if s.closed {
		return w, 0
	}
	if s.used < s.max && len(s.queue) == 0 { // freed meanwhile
		s.used++
		w.granted = true
		close(w.ready)
		return w, 0
	}
	s.queue = append(s.queue, w)
	return w, len(s.queue) - 1
}

// wait waits for w's slot. When ctx or stop ends first, w leaves the queue
// (a slot granted meanwhile goes to the next) and the error says why.
func (s *slots) wait(ctx context.Context, stop <-chan struct{}, w *slotWaiter) error {
	select {
	case <-w.ready:
	case <-ctx.Done():
	case <-stop:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.granted {
		return nil
	}
	for i, q := range s.queue {
		if q == w {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			break
		}
	}
	switch {
	case s.closed:
		return ErrClosed
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return context.Canceled // stop: the session was closed while queued
}

// release gives a slot back: to the first in the queue, or to the pool.
// evicted tells that its session was suspended to make room.
func (s *slots) release(evicted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if evicted && s.evicting > 0 {
		s.evicting--
	}
	if len(s.queue) > 0 && !s.closed {
		w := s.queue[0]
		s.queue = s.queue[1:]
		w.granted = true
		close(w.ready)
		return
	}
	s.used--
}

// wantEviction reports whether the queue needs an idle session to make
// room, counting one more eviction if so.
func (s *slots) wantEviction() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > s.evicting {
		s.evicting++
		return true
	}
	return false
}

// evictionDropped takes back a wantEviction that found no session.
func (s *slots) evictionDropped() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.evicting > 0 {
		s.evicting--
	}
}

// queued returns how many launches wait for a slot.
func (s *slots) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// close fails every waiter with ErrClosed.
func (s *slots) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, w := range s.queue {
		close(w.ready) // not granted: wait sees closed
	}
	s.queue = nil
}

// limit returns the cap, 0 for none.
func (s *slots) limit() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// setMax changes the cap (0: none). A higher one grants the queue's first
// waiters the slots it adds at once; a lower one takes no slot back: the
// sessions running go on, and launches queue until enough have ended.
func (s *slots) setMax(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.max = max(n, 0)
	for len(s.queue) > 0 && !s.closed && (s.max == 0 || s.used < s.max) {
		w := s.queue[0]
		s.queue = s.queue[1:]
		s.used++
		w.granted = true
		close(w.ready)
	}
}
