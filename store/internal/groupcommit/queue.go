// Package groupcommit is the request queue of a store's single event
// writer, shared by the engines: callers queue requests (an append, a
// deletion), the writer takes whatever queued since its last commit, up to
// a number of events and of heavy requests, and commits it in one
// transaction; each session's requests commit in the order they were
// queued, light ones of other sessions may go ahead of heavy ones (Run).
// A request is withdrawn by its caller (queued → cancelled) or taken by
// the writer (queued → taken), never both: that is what lets Append
// promise "a seq if and only if the event is stored".
package groupcommit

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/claudectl/claudectl/store"
)

// Request states.
const (
	queued int32 = iota
	taken
	cancelled
)

// Base is embedded in an engine's request.
type Base struct {
	state atomic.Int32
	// Notify is called once, on the writer goroutine, with the outcome of
	// a request the writer took. It must not block.
	Notify func(error)
}

// Take marks a request taken by the writer; false when its caller
// withdrew it first (it is then dropped, and not notified).
func (b *Base) Take() bool { return b.state.CompareAndSwap(queued, taken) }

// Kind says what the queue needs to know of a request of type R.
type Kind[R any] struct {
	// Base returns the request's Base.
	Base func(R) *Base
	// Size returns the events the request holds.
	Size func(R) int
	// Key returns what the request is ordered within: its session. Requests
	// of one key are committed in the order they were queued; those of
	// different keys may be committed in another order (see Run). "" orders
	// a request with every other one.
	Key func(R) string
	// Heavy reports whether the request does more than insert its events
	// (a session update, a ledger entry, a deletion): its statements cost
	// the writer far more than an event does.
	Heavy func(R) bool
}

// A Queue holds requests of type R for one writer.
type Queue[R any] struct {
	kind Kind[R]
	max  int // the events of a batch, at most (a request is not split)

	mu     sync.RWMutex // held for reading while sending on in; for writing to close it
	closed bool
	in     chan R
	exited chan struct{}
}

// New returns a queue of capacity requests whose batches hold up to
// maxBatch events.
func New[R any](capacity, maxBatch int, kind Kind[R]) *Queue[R] {
	return &Queue[R]{kind: kind, max: maxBatch, in: make(chan R, capacity), exited: make(chan struct{})}
}

// SessionKey is a Kind.Key for a store's requests: the session deleted,
// or the one session of the events ("" if they are of several).
func SessionKey(deleted string, evs []*store.Event) string {
	if deleted != "" {
		return deleted
	}
	if len(evs) == 0 {
		return ""
	}
	id := evs[0].SessionID
	for _, ev := range evs[1:] {
		if ev.SessionID != id {
			return ""
		}
	}
	return id
}

// SessionHeavy is a Kind.Heavy for a store's requests: a session's
// deletion, or events with statements of their own to run after them (a
// session update, a ledger entry).
func SessionHeavy(deleted string, hasThen bool) bool { return hasThen || deleted != "" }

// maxHeavy is how many heavy requests a batch takes at most. When many
// sessions end their turns at once, each with a session update and a
// ledger entry, a batch of them all would hold every other session's
// lines until the last update ran; a few per batch, with the light
// requests of every other session going first, keeps those lines flowing.
const maxHeavy = 8

// maxLightRounds is how many batches in a row may take only the light
// requests while heavy ones wait. A heavy request (a session update, a
// ledger entry) costs the writer tens of times what an event does, and
// when a hundred sessions end their turns together a batch of 8 of them
// holds every other session's last lines for its whole commit: with the
// lines committed first, their p99 in the lockstep benchmark fell by
// about 2 ms (10 paired runs). The bound keeps a steady stream of lines
// from holding a status change back for more than a few commits.
const maxLightRounds = 4

// Enqueue queues r for the writer. It fails if ctx ends before r could be
// queued (the queue is full: the writer is behind) or with
// store.ErrClosed after Close.
func (q *Queue[R]) Enqueue(ctx context.Context, r R) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return store.ErrClosed
	}
	select {
	case q.in <- r:
		return nil
	default:
	}
	select {
	case q.in <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Submit queues r, waits until it is committed or failed, and returns the
// outcome. If ctx ends while r is still queued, r is withdrawn and ctx's
// error returned; once the writer has taken r, Submit waits for the
// transaction to end.
func (q *Queue[R]) Submit(ctx context.Context, r R) error {
	done := make(chan error, 1)
	b := q.kind.Base(r)
	b.Notify = func(err error) { done <- err }
	if err := q.Enqueue(ctx, r); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		if b.state.CompareAndSwap(queued, cancelled) {
			return ctx.Err()
		}
		return <-done
	}
}

// Run is the writer's loop: it calls commit with each batch until Close,
// after the requests already queued. commit may keep no reference to the
// slice.
//
// A batch is what queued while the last one committed (the group commit;
// waiting for more was measured to lose throughput: the callers being
// woken re-queue faster than any fixed delay), in the order it queued,
// up to the batch's events and maxHeavy heavy requests; a request left
// out leaves out every later one of its key, so that each key's requests
// commit in order, and the next batch starts with them. Light requests of
// other keys do go ahead of those left out: a session's lines are not held
// back by other sessions' updates. When light and heavy requests are both
// waiting, the batch takes the light ones alone, up to maxLightRounds
// batches in a row; then one takes the heavy ones too (see
// maxLightRounds).
//
// idle, if not nil, is called on the writer's goroutine whenever it has
// committed everything queued and is about to wait for more.
func (q *Queue[R]) Run(commit func(batch []R), idle func()) {
	defer close(q.exited)
	capacity := cap(q.in)
	var pending, batch, later []R
	blocked := map[string]bool{}
	open := true
	lightRounds := 0 // batches in a row that left heavy requests out for light ones
	for {
		if len(pending) == 0 {
			var (
				r  R
				ok bool
			)
			select {
			case r, ok = <-q.in:
			default:
				if idle != nil {
					idle()
				}
				r, ok = <-q.in
			}
			if !ok {
				return
			}
			pending = append(pending, r)
		}
		// Take what queued meanwhile, but hold no more than the channel
		// does: beyond that, callers wait in Enqueue (the back-pressure).
	gather:
		for open && len(pending) < capacity {
			select {
			case r, ok := <-q.in:
				if !ok {
					open = false // commit what is pending; the next receive ends the loop
					break gather
				}
				pending = append(pending, r)
			default:
				break gather
			}
		}
		var held bool
		batch, later, held = q.pick(pending, batch[:0], later[:0], blocked, lightRounds < maxLightRounds)
		if len(batch) == 0 { // only heavy requests can go
			batch, later, held = q.pick(pending, batch[:0], later[:0], blocked, false)
		}
		if held {
			lightRounds++
		} else {
			lightRounds = 0
		}
		commit(batch)
		clear(batch) // let the requests be collected
		clear(pending)
		pending, later = later, pending[:0]
		if !open && len(pending) == 0 {
			return
		}
	}
}

// pick splits pending into the next batch and what is left for later,
// both in queue order (see Run). With lightsOnly, it leaves every heavy
// request out; held reports that it left one out for that reason alone.
func (q *Queue[R]) pick(pending, batch, later []R, blocked map[string]bool, lightsOnly bool) (_, _ []R, held bool) {
	clear(blocked)
	all := false // a request of key "" was left: everything after it waits too
	n, heavy := 0, 0
	for _, r := range pending {
		k := q.kind.Key(r)
		take := !all && !blocked[k] && (k != "" || len(later) == 0)
		size, h := q.kind.Size(r), q.kind.Heavy(r)
		if take && len(batch) > 0 && (n+size > q.max || h && heavy >= maxHeavy) {
			take = false
		}
		if take && h && lightsOnly {
			take, held = false, true
		}
		if take {
			batch = append(batch, r)
			n += size
			if h {
				heavy++
			}
			continue
		}
		later = append(later, r)
		if k == "" {
			all = true
		} else {
			blocked[k] = true
		}
	}
	return batch, later, held
}

// Close stops taking requests and waits for Run to commit those already
// queued and return. Idempotent.
func (q *Queue[R]) Close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.in)
	}
	q.mu.Unlock()
	<-q.exited
}
