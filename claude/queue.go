package claude

import (
	"context"
	"sync"
)

// msgQueue hands decoded messages from the dispatcher to the reader. It is
// unbounded in count so that control traffic never waits for a reader, but
// push blocks once maxQueuedBytes of unread output is queued, which pauses
// reading from the CLI until the reader catches up.
type msgQueue struct {
	mu     sync.Mutex
	items  []Message
	head   int
	bytes  int
	closed bool
	err    error
	notify chan struct{} // capacity 1: something was pushed, or the queue closed
	space  chan struct{} // capacity 1: the reader made room
}

func (q *msgQueue) init() {
	q.notify = make(chan struct{}, 1)
	q.space = make(chan struct{}, 1)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push appends msgs (copied) and returns once they are queued, or when ctx
// ends or the queue is closed (then they are dropped).
func (q *msgQueue) push(ctx context.Context, msgs []Message) {
	n := 0
	for _, m := range msgs {
		n += len(m.Raw())
	}
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return
		}
		if q.bytes < maxQueuedBytes || q.head == len(q.items) {
			if q.head > 0 && q.head == len(q.items) {
				clear(q.items)
				q.items, q.head = q.items[:0], 0
			}
			q.items = append(q.items, msgs...)
			q.bytes += n
			q.mu.Unlock()
			signal(q.notify)
			return
		}
		q.mu.Unlock()
		select {
		case <-q.space:
		case <-ctx.Done():
			return
		}
	}
}

// pop returns the next message, or the close error once the queue is empty.
func (q *msgQueue) pop(ctx context.Context) (Message, error) {
	for {
		q.mu.Lock()
		if q.head < len(q.items) {
			m := q.items[q.head]
			q.items[q.head] = nil
			q.head++
			was := q.bytes
			q.bytes -= len(m.Raw())
			if q.head == len(q.items) {
				q.items, q.head = q.items[:0], 0
			}
			wake := was >= maxQueuedBytes && q.bytes < maxQueuedBytes
			q.mu.Unlock()
			if wake {
				signal(q.space)
			}
			return m, nil
		}
		if q.closed {
			err := q.err
			q.mu.Unlock()
			signal(q.notify) // let another waiting reader see it too
			return nil, err
		}
		q.mu.Unlock()
		select {
		case <-q.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// close ends the queue; queued messages can still be popped, then err.
// Only the first close counts.
func (q *msgQueue) close(err error) {
	q.mu.Lock()
	if !q.closed {
		q.closed, q.err = true, err
	}
	q.mu.Unlock()
	signal(q.notify)
	signal(q.space)
}
