package daemon

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/store"
)

// tapTransport logs every line written to the CLI (prompts, control
// requests and the answers to the CLI's own) before it is written, so that
// a session's log holds both directions in the order they happened.
//
// A spare's (pool.go) has no actor yet: its tapConn keeps the lines written
// before a session takes it (the initialize request) and bind stores them
// as that session's first, so that its log reads as a cold start's.
type tapTransport struct {
	claude.Transport
	a *actor

	conn *tapConn // the connection Start made, for a spare's bind
}

func (t *tapTransport) Start(ctx context.Context, cmd *claude.Command) (claude.Conn, error) {
	c, err := t.Transport.Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if t.a == nil { // a spare: its relay is recorded when a session takes it
		t.conn = &tapConn{Conn: c, spare: true}
		t.conn.worker, _ = workerName(c)
		return t.conn, nil
	}
	if err := t.a.recordWorkerLink(ctx, c); err != nil {
		c.Close()
		return nil, err
	}
	return &tapConn{Conn: c, a: t.a}, nil
}

// workerName returns the name of the remote worker that runs c's CLI;
// false for a local CLI.
func workerName(c claude.Conn) (string, bool) {
	wn, ok := c.(interface{ WorkerName() string })
	if !ok {
		return "", false
	}
	return wn.WorkerName(), true
}

type tapConn struct {
	claude.Conn
	a      *actor // nil for a spare not yet taken: see early
	spare  bool   // a spare's: a is set by bind, under mu
	worker string // a spare's on a remote worker: the worker's name

	// mu guards a and early for a spare's connection: the lines written
	// before bind, kept to be stored as the session's once it has one.
	mu    sync.Mutex
	early [][]byte
}

// WriteLine logs line, then writes it. A line that cannot be logged is
// not written: nothing reaches the CLI that its log lacks (a prompt is
// refused, and the session stops when the store fails).
func (c *tapConn) WriteLine(ctx context.Context, line []byte) error {
	a := c.a
	if c.spare {
		c.mu.Lock()
		if a = c.a; a == nil { // not taken yet
			c.early = append(c.early, bytes.Clone(bytes.TrimRight(line, "\n")))
			err := c.Conn.WriteLine(ctx, line)
			c.mu.Unlock()
			return err
		}
		c.mu.Unlock()
	}
	raw := bytes.TrimRight(line, "\n")
	typ, sub := claude.LineKind(raw)
	ev := Event{Event: store.Event{SessionID: a.id, Direction: store.ToCLI, Type: typ, Subtype: sub,
		Raw: append([]byte(nil), raw...)}}
	relayed := a.remote()
	if relayed { // the SDK writes one line at a time
		ev.RelayFrame = a.sent.Add(1)
	}
	if err := a.record(context.WithoutCancel(ctx), ev, nil, true); err != nil {
		if relayed {
			a.sent.Add(-1)
		}
		a.d.log.Error("not writing a line to the CLI: it could not be logged", "session", a.id, "type", typ, "err", err)
		return fmt.Errorf("daemon: %s not sent to the CLI: it could not be recorded: %w", describeLine(typ, sub), err)
	}
	return c.Conn.WriteLine(ctx, line)
}

// bind makes a spare's connection a's: the lines written to the CLI so
// far are stored as a's first (ToCLI, in the order written), and every
// later one as any session's. It fails when the store does.
func (c *tapConn) bind(ctx context.Context, a *actor) error {
	c.mu.Lock()
	defer c.mu.Unlock() // a line written meanwhile waits, and lands after these
	for _, raw := range c.early {
		typ, sub := claude.LineKind(raw)
		ev := Event{Event: store.Event{SessionID: a.id, Direction: store.ToCLI, Type: typ, Subtype: sub, Raw: raw}}
		if a.remote() { // numbered as the relay numbered them (tapConn.WriteLine)
			ev.RelayFrame = a.sent.Add(1)
		}
		if err := a.record(context.WithoutCancel(ctx), ev, nil, true); err != nil {
			return fmt.Errorf("daemon: recording what was written to the spare CLI: %w", err)
		}
	}
	c.early, c.a = nil, a
	return nil
}

// describeLine names a line written to the CLI in a user's words.
func describeLine(typ, sub string) string {
	switch {
	case typ == "user":
		return "the prompt was"
	case sub != "":
		return "the " + sub + " " + typ + " was"
	}
	return "the " + typ + " line was"
}

// Release and Attached pass the SDK's optional methods of a worker's
// connection through (see claude.WorkerTransport).
func (c *tapConn) Release(seq uint64) {
	if r, ok := c.Conn.(interface{ Release(uint64) }); ok {
		r.Release(seq)
	}
}

func (c *tapConn) Attached() bool {
	a, ok := c.Conn.(interface{ Attached() bool })
	return ok && a.Attached()
}

// PID is the wrapped connection's process id, 0 without one.
func (c *tapConn) PID() int {
	if p, ok := c.Conn.(interface{ PID() int }); ok {
		return p.PID()
	}
	return 0
}

// Buffered keeps the session's batching of already-buffered lines (an
// optional method of the SDK's connections).
func (c *tapConn) Buffered() int {
	if b, ok := c.Conn.(interface{ Buffered() int }); ok {
		return b.Buffered()
	}
	return 0
}

// MemoryKills passes the SDK's count of the processes the session's memory
// limit killed through (claude.Session.MemoryKills).
func (c *tapConn) MemoryKills() int64 {
	if m, ok := c.Conn.(interface{ MemoryKills() int64 }); ok {
		return m.MemoryKills()
	}
	return 0
}
