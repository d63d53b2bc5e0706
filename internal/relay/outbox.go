package relay

import (
	"context"
	"errors"
	"sync"
)

// ErrOutboxClosed is returned by Push once the outbox is closed.
var ErrOutboxClosed = errors.New("relay: outbox closed")

// An Outbox numbers outgoing frames and keeps each one until the peer
// acknowledges it, so that it can be sent again on a new connection. It holds
// at most about MaxBytes of payload: Push blocks while it is full (a single
// frame larger than that is let through on its own). It is safe for
// concurrent use.
type Outbox struct {
	max int

	mu     sync.Mutex
	frames []*Frame // unacknowledged, in order
	last   uint64   // last sequence number given
	acked  uint64
	bytes  int
	closed bool
	wake   chan struct{} // closed and replaced when a frame is pushed or the outbox closes
	room   chan struct{} // closed and replaced when room is made
}

// NewOutbox returns an outbox holding about maxBytes of unacknowledged
// payload.
func NewOutbox(maxBytes int) *Outbox {
	return &Outbox{max: maxBytes, wake: make(chan struct{}), room: make(chan struct{})}
}

// NewOutboxAfter returns an outbox whose first frame is numbered n+1: a
// controller taking a session over from another one goes on numbering
// after the n frames the worker received.
func NewOutboxAfter(maxBytes int, n uint64) *Outbox {
	o := NewOutbox(maxBytes)
	o.last, o.acked = n, n
	return o
}

// Push numbers a frame of type h.Type (h.Seq is set), keeps it and wakes the
// senders. It blocks while the outbox is full, until ctx ends or the outbox
// is closed.
func (o *Outbox) Push(ctx context.Context, h Header, payload []byte) (uint64, error) {
	o.mu.Lock()
	for !o.closed && len(o.frames) > 0 && o.bytes+len(payload) > o.max {
		room := o.room
		o.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		o.mu.Lock()
	}
	defer o.mu.Unlock()
	if o.closed {
		return 0, ErrOutboxClosed
	}
	o.last++
	h.Seq = o.last
	o.frames = append(o.frames, &Frame{Header: h, Payload: payload})
	o.bytes += len(payload)
	close(o.wake)
	o.wake = make(chan struct{})
	return h.Seq, nil
}

// Ack drops the frames numbered up to n. Lower values than an earlier Ack
// are ignored.
func (o *Outbox) Ack(n uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n <= o.acked {
		return
	}
	n = min(n, o.last)
	o.acked = n
	i := 0
	for i < len(o.frames) && o.frames[i].Seq <= n {
		o.bytes -= len(o.frames[i].Payload)
		o.frames[i] = nil
		i++
	}
	if i > 0 {
		o.frames = append(o.frames[:0], o.frames[i:]...)
		close(o.room)
		o.room = make(chan struct{})
	}
}

// After returns the frames numbered above n, and a channel closed when
// another frame is pushed (or the outbox closes).
func (o *Outbox) After(n uint64) ([]*Frame, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := 0
	for i < len(o.frames) && o.frames[i].Seq <= n {
		i++
	}
	var out []*Frame
	if i < len(o.frames) {
		out = append(out, o.frames[i:]...)
	}
	return out, o.wake
}

// Acked returns the highest number acknowledged.
func (o *Outbox) Acked() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.acked
}

// WaitAcked blocks until the frames up to n are acknowledged, or ctx ends.
func (o *Outbox) WaitAcked(ctx context.Context, n uint64) error {
	for {
		o.mu.Lock()
		acked, room := o.acked, o.room
		o.mu.Unlock()
		if acked >= n {
			return nil
		}
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Last returns the highest number given.
func (o *Outbox) Last() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last
}

// Pending returns the number of unacknowledged frames.
func (o *Outbox) Pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.frames)
}

// Close makes Push fail from now on and wakes everything waiting. Frames
// already pushed stay available to After.
func (o *Outbox) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.closed = true
	close(o.wake)
	o.wake = make(chan struct{})
	close(o.room)
	o.room = make(chan struct{})
}
