package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Default timings of a Link.
const (
	DefaultPingInterval = 5 * time.Second
	DefaultPingTimeout  = 15 * time.Second
	// ackDelay coalesces acknowledgements sent on their own.
	ackDelay = 20 * time.Millisecond
	// writeTimeout bounds one frame write.
	writeTimeout = 30 * time.Second
)

// A Link runs one WebSocket connection of a session after its handshake:
// it sends the outbox's frames from where the peer is, with
// acknowledgements, pings, and hands every frame it reads to Handle. Run
// does all three; a caller that must read before it knows the session (the
// controller, while a worker waits for one) runs ReadLoop, PingLoop and
// WriteLoop itself.
type Link struct {
	Conn *websocket.Conn
	// Handle receives every frame read, in order; it applies the frame's
	// Ack to the outbox. An error ends the link.
	Handle func(f *Frame) error

	// Used by WriteLoop only:
	Out *Outbox
	// From is the peer's acknowledgement at the handshake: the frames
	// after it are sent first.
	From uint64
	// Ack returns what this side has consumed, and AckChanged a channel
	// closed when that grows.
	Ack        func() uint64
	AckChanged func() <-chan struct{}

	PingInterval, PingTimeout time.Duration
}

// Run serves the link until the connection ends or ctx is done, and returns
// why. It closes the connection before returning (abruptly: a normal closure
// is the caller's, with Conn.Close from another goroutine); every goroutine
// it started has ended.
func (l *Link) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := l.WriteLoop(ctx); err != nil {
			cancel(err)
			l.Conn.CloseNow()
		}
	}()
	go func() {
		defer wg.Done()
		if err := l.PingLoop(ctx); err != nil {
			cancel(err)
			l.Conn.CloseNow()
		}
	}()
	err := l.ReadLoop(ctx)
	cancel(err)
	l.Conn.CloseNow()
	wg.Wait()
	return linkErr(ctx, err)
}

// linkErr prefers the cause recorded in ctx (a write error, a ping
// timeout) to the read error it provoked.
func linkErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && (err == nil || isClosedErr(err)) {
		return cause
	}
	return err
}

func isClosedErr(err error) bool {
	return websocket.CloseStatus(err) != -1 || errors.Is(err, context.Canceled) || errors.Is(err, net.ErrClosed)
}

// ReadLoop reads frames and hands them to Handle until the connection
// fails, and returns why.
func (l *Link) ReadLoop(ctx context.Context) error {
	for {
		_, msg, err := l.Conn.Read(ctx)
		if err != nil {
			return err
		}
		f, err := Decode(msg)
		if err != nil {
			return err
		}
		if err := l.Handle(f); err != nil {
			return err
		}
	}
}

// WriteLoop sends Out's frames after From, then each new one, with
// acknowledgements, until ctx ends (nil) or a write fails.
func (l *Link) WriteLoop(ctx context.Context) error {
	sent, ackSent := l.From, uint64(0)
	var buf []byte
	var ackTimer <-chan time.Time
	for {
		frames, wake := l.Out.After(sent)
		ackCh := l.AckChanged()
		for _, f := range frames {
			h := f.Header
			h.Ack = l.Ack()
			var err error
			if buf, err = Encode(buf[:0], &h, f.Payload); err != nil {
				return err
			}
			if err := l.send(ctx, buf); err != nil {
				return err
			}
			sent, ackSent = f.Seq, h.Ack
		}
		if len(frames) > 0 {
			continue
		}
		if a := l.Ack(); a > ackSent && ackTimer == nil {
			ackTimer = time.After(ackDelay)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-ackCh:
		case <-ackTimer:
			ackTimer = nil
			if a := l.Ack(); a > ackSent {
				var err error
				if buf, err = Encode(buf[:0], &Header{Type: TypeAck, Ack: a}, nil); err != nil {
					return err
				}
				if err := l.send(ctx, buf); err != nil {
					return err
				}
				ackSent = a
			}
		}
	}
}

func (l *Link) send(ctx context.Context, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := l.Conn.Write(ctx, websocket.MessageText, msg); err != nil {
		return fmt.Errorf("relay: write: %w", err)
	}
	return nil
}

// PingLoop pings every PingInterval until ctx ends (nil) or a pong is
// missing for PingTimeout. Pongs are only read while ReadLoop runs.
func (l *Link) PingLoop(ctx context.Context) error {
	every := l.PingInterval
	if every <= 0 {
		every = DefaultPingInterval
	}
	timeout := l.PingTimeout
	if timeout <= 0 {
		timeout = DefaultPingTimeout
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := l.Conn.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("relay: no pong within %v: %w", timeout, err)
		}
	}
}

// WriteFrame writes one frame outside a Link (the handshake).
func WriteFrame(ctx context.Context, c *websocket.Conn, h *Header, payload []byte) error {
	msg, err := Encode(nil, h, payload)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
		return fmt.Errorf("relay: write %s: %w", h.Type, err)
	}
	return nil
}

// ReadFrame reads one frame outside a Link (the handshake).
func ReadFrame(ctx context.Context, c *websocket.Conn) (*Frame, error) {
	_, msg, err := c.Read(ctx)
	if err != nil {
		return nil, err
	}
	return Decode(msg)
}
