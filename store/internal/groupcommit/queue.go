// Package groupcommit is the request queue of a store's single event
// writer, shared by the engines: callers queue requests (an append, a
// deletion), the writer takes whatever queued since its last commit, up to
// a number of events, and commits it in one transaction. A request is
// withdrawn by its caller (queued → cancelled) or taken by the writer
// (queued → taken), never both: that is what lets Append promise "a seq if
// and only if the event is stored".
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

// A Queue holds requests of type R for one writer.
type Queue[R any] struct {
	base func(R) *Base
	size func(R) int // the events a request holds
	max  int         // the events of a batch, at most (a request is not split)

	mu     sync.RWMutex // held for reading while sending on in; for writing to close it
	closed bool
	in     chan R
	exited chan struct{}
}

// New returns a queue of capacity requests whose batches hold up to
// maxBatch events; base and size read a request's Base and event count.
func New[R any](capacity, maxBatch int, base func(R) *Base, size func(R) int) *Queue[R] {
	return &Queue[R]{base: base, size: size, max: maxBatch, in: make(chan R, capacity), exited: make(chan struct{})}
}

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
	b := q.base(r)
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

// Run is the writer's loop: it calls commit with each batch (the requests
// queued since the last commit, up to the batch's events) until Close,
// after the requests already queued. commit may keep no reference to the
// slice.
func (q *Queue[R]) Run(commit func(batch []R)) {
	defer close(q.exited)
	var batch []R
	var zero R
	for {
		r, ok := <-q.in
		if !ok {
			return
		}
		// Take what queued while the last batch committed: that is the
		// group commit. Waiting for more was measured to lose throughput:
		// the callers being woken re-queue faster than any fixed delay.
		batch = append(batch[:0], r)
		n := q.size(r)
	gather:
		for n < q.max {
			select {
			case r, ok := <-q.in:
				if !ok {
					break gather // commit this batch; the next receive ends the loop
				}
				batch = append(batch, r)
				n += q.size(r)
			default:
				break gather
			}
		}
		commit(batch)
		for i := range batch {
			batch[i] = zero // let the requests be collected
		}
	}
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
