package claude

import (
	"context"
	"sync"
)

// msgQueue hands decoded messages from the dispatcher to the reader. push
// never blocks, so control traffic is always routed; instead readLoop calls
// waitRoom before reading more from the CLI, which pauses the CLI (through
// its stdout pipe) while more than maxQueuedBytes of output is unread.
type msgQueue struct {
	mu     sync.Mutex
	items  []Message
	head   int
	bytes  int
	closed bool
	err    error
	notify chan struct{} // capacity 1: something was pushed, or the queue closed
	room   chan struct{} // capacity 1: the reader made room
}

// keepQueueCap is the largest backing array the queue keeps once drained.
const keepQueueCap = 256

func (q *msgQueue) init() {
	q.notify = make(chan struct{}, 1)
	q.room = make(chan struct{}, 1)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push appends msgs (copied); after close they are dropped.
func (q *msgQueue) push(msgs []Message) {
	n := 0
	for _, m := range msgs {
		n += len(m.Raw())
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	if q.head > 0 && q.head == len(q.items) {
		clear(q.items)
		q.items, q.head = q.items[:0], 0
	}
	q.items = append(q.items, msgs...)
	q.bytes += n
	q.mu.Unlock()
	signal(q.notify)
}

// waitRoom returns once less than maxQueuedBytes is unread, the queue is
// closed, or ctx ends.
func (q *msgQueue) waitRoom(ctx context.Context) {
	for {
		q.mu.Lock()
		ok := q.bytes < maxQueuedBytes || q.closed
		q.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-q.room:
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
				if cap(q.items) > keepQueueCap {
					q.items = nil // a burst is over: do not keep its backlog's array while idle
				}
			}
			wake := was >= maxQueuedBytes && q.bytes < maxQueuedBytes
			q.mu.Unlock()
			if wake {
				signal(q.room)
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

// discard drops the unread messages.
func (q *msgQueue) discard() {
	q.mu.Lock()
	clear(q.items)
	q.items, q.head, q.bytes = q.items[:0], 0, 0
	q.mu.Unlock()
	signal(q.room)
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
	signal(q.room)
}
