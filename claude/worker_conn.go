package claude

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/claudectl/claudectl/internal/relay"
)

// This file holds the Conn of a session whose CLI runs on a worker: the
// frames it receives, replayed after a reconnection by sequence number, and
// ReadLine, WriteLine, Close and Wait over them.

// ErrWorkerLost is matched (errors.Is) by *WorkerLostError.
var ErrWorkerLost = errors.New("claude: remote worker lost")

// WorkerLostError reports that a session's remote worker did not come back
// within the listener's ReconnectTimeout (or did not report the CLI's exit
// when the session closed). The CLI may still be running on the worker's
// machine until the worker gives up too.
type WorkerLostError struct {
	Session string // the relay session id
	Worker  string // the worker's name
	Reason  string
}

func (e *WorkerLostError) Error() string {
	return fmt.Sprintf("claude: remote worker %q (session %s) lost: %s", e.Worker, e.Session, e.Reason)
}

// Is matches ErrWorkerLost and ErrClosed.
func (e *WorkerLostError) Is(target error) bool {
	return target == ErrWorkerLost || target == ErrClosed
}

// workerConn is the Conn of a session run by a remote worker.
type workerConn struct {
	l      *WorkerListener
	ctx    context.Context
	id     string
	worker string // guarded by mu once the session started
	tag    string // WorkerTransport.Tag
	placed bool   // on a registered worker: counts in its load
	grace  time.Duration
	// hold keeps the lines read on the worker until Release covers them
	// (WorkerTransport.Hold); attached marks a session taken over from
	// another controller (WorkerTransport.Resume).
	hold     bool
	attached bool
	// secret proves a link is the worker's (relay.Header.Secret): sent in
	// the start frame, presented by the hello of every link that resumes
	// the session; never logged.
	secret string
	cmd    *relay.Command
	out    *relay.Outbox
	stderr func(string)
	tail   tail
	bg     sync.WaitGroup // watch

	writeMu   sync.Mutex
	eofOnce   sync.Once
	closeOnce sync.Once
	closing   chan struct{} // closed when Close starts

	mu       sync.Mutex
	recv     uint64 // frames received from the worker, in order
	consumed uint64 // of those, handed over (ReadLine) or handled
	// pend holds, with hold, the numbers of the lines handed over that no
	// Release covers yet, in order: the worker keeps them. pins holds,
	// by request id, the lines of the CLI's requests not answered yet:
	// a Release passes over them (they stay in pend until the answer is
	// written, so the worker keeps them for whoever takes over); released
	// is the highest Release.
	pend     []uint64
	pins     map[string]uint64
	released uint64
	// skipTo is, in a session taken over, the last frame whose line is
	// stored: of the frames up to it the worker sends again, only the
	// CLI's requests are delivered (they are never stored as lines).
	skipTo  uint64
	items   []workerItem
	wake    chan struct{} // closed and replaced when items grow or the conn ends
	ackCh   chan struct{} // closed and replaced when consumed grows
	link    *workerLink
	linkCh  chan struct{} // closed and replaced when link changes
	lostAt  time.Time
	lastErr error
	exit    *relay.Exit
	exitErr error
	exited  chan struct{} // closed when the CLI's exit is known, or the session failed
	eof     bool          // ReadLine reached the end
	closed  bool
}

type workerItem struct {
	seq  uint64
	line Line
	kind string
}

// WorkerName returns the name of the worker that runs the session.
func (rc *workerConn) WorkerName() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.worker
}

func (rc *workerConn) readLimit() int64 {
	return int64(orDefault(rc.cmd.MaxLineBytes, DefaultMaxPayloadBytes)) + 1<<20
}

func (rc *workerConn) received() uint64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.recv
}

// consumedSeq is what the worker may forget: the frames consumed, but for
// the lines handed over that are not released yet (with hold).
func (rc *workerConn) consumedSeq() uint64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.pend) > 0 {
		return rc.pend[0] - 1
	}
	return rc.consumed
}

// Release lets the worker forget the lines up to seq (see Session.Release)
// but the CLI's requests not answered yet.
func (rc *workerConn) Release(seq uint64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.released = max(rc.released, seq)
	rc.dropReleasedLocked()
}

// dropReleasedLocked drops from pend the released lines that no pin
// holds; rc.mu is held.
func (rc *workerConn) dropReleasedLocked() {
	kept := rc.pend[:0]
	for _, s := range rc.pend {
		if s > rc.released || rc.pinned(s) {
			kept = append(kept, s)
		}
	}
	if len(kept) == len(rc.pend) {
		return
	}
	clear(rc.pend[len(kept):])
	rc.pend = kept
	broadcast(&rc.ackCh)
}

func (rc *workerConn) pinned(seq uint64) bool {
	for _, s := range rc.pins {
		if s == seq {
			return true
		}
	}
	return false
}

// pin notes a request of the CLI read at seq (hold only); unpin its
// answer written, or its cancellation read. rc.mu is held by pin.
func (rc *workerConn) pin(line []byte, seq uint64) {
	id := requestIDOf(line)
	if id == "" {
		return
	}
	if rc.pins == nil {
		rc.pins = map[string]uint64{}
	}
	rc.pins[id] = seq
}

func (rc *workerConn) unpin(id string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if _, ok := rc.pins[id]; !ok {
		return
	}
	delete(rc.pins, id)
	rc.dropReleasedLocked()
}

// requestIDOf returns the request_id of a control_request or
// control_cancel_request line.
func requestIDOf(line []byte) string {
	var req struct {
		RequestID string `json:"request_id"`
	}
	json.Unmarshal(line, &req)
	return req.RequestID
}

// answered returns the request id a control_response line answers.
func answered(line []byte) string {
	var resp struct {
		Response struct {
			RequestID string `json:"request_id"`
		} `json:"response"`
	}
	json.Unmarshal(line, &resp)
	return resp.Response.RequestID
}

// RelaySession returns the relay session's id (see WorkerListener.Adopt).
func (rc *workerConn) RelaySession() string { return rc.id }

// RelaySecretHash returns the SHA-256 (hex) of the session's secret, which
// the worker presents when it comes back: a controller that may take the
// session over after a restart stores it and passes it to
// WorkerResume.SecretHash (the secret itself is never stored).
func (rc *workerConn) RelaySecretHash() string { return secretHash(rc.secret) }

// proves reports whether a hello's secret is the session's, in constant
// time.
func (rc *workerConn) proves(secret string) bool {
	return rc.secret != "" && subtle.ConstantTimeCompare([]byte(secret), []byte(rc.secret)) == 1
}

// secretHash returns the SHA-256 of a relay secret in hex ("" for none).
func secretHash(secret string) string {
	if secret == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Attached reports whether the session took over a CLI another
// controller started (it is not initialised again).
func (rc *workerConn) Attached() bool { return rc.attached }

func (rc *workerConn) ackChanged() <-chan struct{} {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.ackCh
}

func (rc *workerConn) over() bool {
	select {
	case <-rc.exited:
		return true
	default:
		return false
	}
}

// broadcast closes *ch and replaces it; rc.mu is held.
func broadcast(ch *chan struct{}) {
	close(*ch)
	*ch = make(chan struct{})
}

// handle takes one frame from the worker, on the link's reader goroutine.
func (rc *workerConn) handle(f *relay.Frame) error {
	if f.Ack != 0 {
		rc.out.Ack(f.Ack)
	}
	if f.Type == relay.TypeAck {
		return nil
	}
	if f.Seq == 0 {
		return fmt.Errorf("%w: unexpected %s frame", relay.ErrMalformed, f.Type)
	}
	rc.mu.Lock()
	if f.Seq <= rc.recv {
		rc.mu.Unlock()
		return nil // sent again after a reconnection
	}
	if f.Seq != rc.recv+1 {
		rc.mu.Unlock()
		return fmt.Errorf("%w: frame %d after %d", relay.ErrMalformed, f.Seq, rc.recv)
	}
	rc.recv = f.Seq
	if rc.exit != nil || rc.closed {
		// Nothing follows exit; after Close, nobody reads.
		rc.consumed = rc.recv
		broadcast(&rc.ackCh)
		rc.mu.Unlock()
		return nil
	}
	var stderrLine string
	switch f.Type {
	case relay.TypeLine:
		if f.Seq <= rc.skipTo {
			if typ, _ := LineKind(f.Payload); typ != "control_request" {
				// Stored by the controller that died: consumed unread.
				rc.items = append(rc.items, workerItem{seq: f.Seq, kind: "skip"})
				break
			}
		}
		rc.items = append(rc.items, workerItem{seq: f.Seq, kind: f.Type, line: Line{Data: f.Payload, OriginalSize: f.Orig}})
	case relay.TypeStderr:
		stderrLine = string(f.Payload)
		rc.items = append(rc.items, workerItem{seq: f.Seq, kind: f.Type})
	case relay.TypeExit:
		x := f.Exit
		if x == nil {
			x = &relay.Exit{Code: -1}
		}
		rc.exit = x
		rc.exitErr = rc.exitError(x)
		close(rc.exited)
		rc.items = append(rc.items, workerItem{seq: f.Seq, kind: f.Type})
	default:
		rc.mu.Unlock()
		return fmt.Errorf("%w: unexpected %s frame from a worker", relay.ErrMalformed, f.Type)
	}
	broadcast(&rc.wake)
	rc.mu.Unlock()
	if f.Type == relay.TypeStderr {
		rc.tail.add(stderrLine)
		if rc.stderr != nil {
			rc.stderr(stderrLine)
		}
	}
	return nil
}

func (rc *workerConn) exitError(x *relay.Exit) error {
	switch {
	case x.Error != "":
		return &StartError{Path: "claude on worker " + rc.worker, Err: errors.New(x.Error)}
	case x.Code == 0 && x.Signal == "" && x.KeptRunningMS == 0:
		return nil
	}
	stderr := x.Stderr
	if stderr == "" {
		stderr = rc.tail.String()
	}
	return &ExitError{Code: x.Code, Signal: x.Signal, Stderr: stderr, KeptRunning: time.Duration(x.KeptRunningMS) * time.Millisecond}
}

// attach makes wl the session's link, dropping an older one.
func (rc *workerConn) attach(wl *workerLink) {
	rc.mu.Lock()
	old := rc.link
	rc.link = wl
	broadcast(&rc.linkCh)
	rc.mu.Unlock()
	if old != nil && old != wl {
		old.c.CloseNow()
	}
}

// detach notes that wl's connection ended.
func (rc *workerConn) detach(wl *workerLink, why error) {
	rc.mu.Lock()
	if rc.link != wl {
		rc.mu.Unlock()
		return
	}
	rc.link = nil
	rc.lostAt = time.Now()
	rc.lastErr = why
	broadcast(&rc.linkCh)
	ended := rc.exit != nil || rc.closed
	rc.mu.Unlock()
	if !ended {
		rc.l.logger().Warn("claude: link to remote worker lost; waiting for it to come back", "worker", wl.name, "session", rc.id, "err", why)
	}
}

// fail ends the session without the CLI's exit status.
func (rc *workerConn) fail(err error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.exit != nil || rc.exitErr != nil {
		return
	}
	rc.exitErr = err
	close(rc.exited)
	broadcast(&rc.wake)
	if rc.link != nil {
		rc.link.c.CloseNow()
	}
}

// watch fails the session when its worker stays away too long, and stops
// the CLI when ctx ends.
func (rc *workerConn) watch() {
	defer rc.bg.Done()
	timeout := rc.l.reconnectTimeout()
	if rc.grace > 0 {
		timeout = rc.grace
	}
	ctxDone := rc.ctx.Done()
	for {
		rc.mu.Lock()
		hasLink, lostAt, linkCh, lastErr := rc.link != nil, rc.lostAt, rc.linkCh, rc.lastErr
		rc.mu.Unlock()
		var timer <-chan time.Time
		var t *time.Timer
		if !hasLink && !lostAt.IsZero() {
			t = time.NewTimer(time.Until(lostAt.Add(timeout)))
			timer = t.C
		}
		stop := func() {
			if t != nil {
				t.Stop()
			}
		}
		select {
		case <-rc.exited:
			stop()
			return
		case <-rc.closing:
			stop()
			return
		case <-linkCh:
			stop()
		case <-timer:
			reason := fmt.Sprintf("gone for %v, more than its grace period of %v", time.Since(lostAt).Round(time.Millisecond), timeout)
			if lastErr != nil {
				reason += " (last error: " + lastErr.Error() + ")"
			}
			rc.fail(&WorkerLostError{Session: rc.id, Worker: rc.worker, Reason: reason})
			return
		case <-ctxDone:
			stop()
			ctxDone = nil
			pctx, cancel := context.WithTimeout(context.Background(), time.Second)
			rc.out.Push(pctx, relay.Header{Type: relay.TypeClose, Now: true}, nil)
			cancel()
		}
	}
}

// ReadLine implements [Conn].
func (rc *workerConn) ReadLine() (Line, error) {
	for {
		rc.mu.Lock()
		for len(rc.items) > 0 {
			it := rc.items[0]
			rc.items[0] = workerItem{}
			rc.items = rc.items[1:]
			rc.consumed = it.seq
			broadcast(&rc.ackCh)
			switch it.kind {
			case relay.TypeLine:
				var cancelled string
				if rc.hold {
					rc.pend = append(rc.pend, it.seq)
					switch typ, _ := LineKind(it.line.Data); typ {
					case "control_request":
						rc.pin(it.line.Data, it.seq)
					case "control_cancel_request":
						cancelled = requestIDOf(it.line.Data)
					}
				}
				rc.mu.Unlock()
				if cancelled != "" {
					rc.unpin(cancelled)
				}
				it.line.Seq = it.seq
				return it.line, nil
			case relay.TypeExit:
				rc.eof = true
			}
		}
		if rc.eof || rc.closed || (rc.exitErr != nil && rc.exit == nil) {
			rc.mu.Unlock()
			return Line{}, io.EOF
		}
		wake := rc.wake
		rc.mu.Unlock()
		<-wake
	}
}

// WriteLine implements [Conn].
func (rc *workerConn) WriteLine(ctx context.Context, line []byte) error {
	rc.writeMu.Lock()
	defer rc.writeMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if rc.over() {
		return rc.exitOrClosed()
	}
	if rc.hold {
		if typ, _ := LineKind(line); typ == "control_response" {
			// Answered: the worker may forget the request once released.
			// Were this process to die before the answer reaches the
			// worker, the answer is in its log (the new holder writes it
			// again, WorkerResume.Unsent).
			rc.unpin(answered(line))
		}
	}
	_, err := rc.out.Push(ctx, relay.Header{Type: relay.TypeLine}, append([]byte(nil), line...))
	if errors.Is(err, relay.ErrOutboxClosed) {
		return rc.exitOrClosed()
	}
	return err
}

func (rc *workerConn) exitOrClosed() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.exitErr != nil {
		return rc.exitErr
	}
	return ErrClosed
}

// CloseWrite implements [Conn].
func (rc *workerConn) CloseWrite() error {
	rc.eofOnce.Do(func() {
		rc.writeMu.Lock()
		defer rc.writeMu.Unlock()
		ctx, cancel := context.WithTimeout(rc.ctx, 10*time.Second)
		defer cancel()
		rc.out.Push(ctx, relay.Header{Type: relay.TypeEOF}, nil)
	})
	return nil
}

// workerCloseWait bounds how long Close waits for the worker to report the
// CLI's exit: its grace period and kill delay, and some slack.
var workerCloseWait = 30 * time.Second

// Close implements [Conn]: the worker stops the CLI (stdin closed, grace
// period, SIGTERM, SIGKILL) and reports its exit.
func (rc *workerConn) Close() error {
	rc.closeOnce.Do(func() {
		close(rc.closing)
		if !rc.over() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rc.out.Push(ctx, relay.Header{Type: relay.TypeClose, Now: rc.ctx.Err() != nil}, nil)
			cancel()
		}
		t := time.NewTimer(workerCloseWait)
		select {
		case <-rc.exited:
		case <-t.C:
			rc.fail(&WorkerLostError{Session: rc.id, Worker: rc.worker, Reason: "the worker did not report the CLI's exit within " + workerCloseWait.String()})
		}
		t.Stop()
		// Acknowledge everything so the worker can finish, then let it close
		// the link (or drop it after a moment).
		rc.mu.Lock()
		rc.closed = true
		rc.items = nil
		rc.pend = nil
		rc.consumed = rc.recv
		broadcast(&rc.ackCh)
		broadcast(&rc.wake)
		linkCh, link := rc.linkCh, rc.link
		rc.mu.Unlock()
		if link != nil {
			select {
			case <-linkCh:
			case <-time.After(5 * time.Second):
				link.c.CloseNow()
			}
		}
		rc.out.Close()
		rc.bg.Wait()
		rc.l.forget(rc)
	})
	return rc.Wait()
}

// Wait implements [Conn].
func (rc *workerConn) Wait() error {
	<-rc.exited
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.exitErr
}

// StderrTail implements [Conn].
func (rc *workerConn) StderrTail() string {
	rc.mu.Lock()
	x := rc.exit
	rc.mu.Unlock()
	if x != nil && x.Stderr != "" {
		return x.Stderr
	}
	return rc.tail.String()
}
