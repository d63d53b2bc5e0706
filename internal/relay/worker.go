package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// Defaults of a Worker.
const (
	DefaultReconnectTimeout = 2 * time.Minute
	DefaultBufferBytes      = 8 << 20
	minBackoff              = 100 * time.Millisecond
	maxBackoff              = 5 * time.Second
	dialTimeout             = 15 * time.Second
	// busyWarnEvery spaces the warnings of a worker that a full
	// controller keeps turning away.
	busyWarnEvery = 30 * time.Second
)

// A Process is the CLI as the worker runs it.
type Process interface {
	// ReadLine returns the next stdout line and, if it was cut, its size
	// before truncation (else 0); io.EOF at the end.
	ReadLine() (line []byte, orig int64, err error)
	WriteLine(ctx context.Context, line []byte) error
	CloseWrite() error
	// Close ends stdin, waits a grace period, then terminates the CLI; it
	// returns once the CLI is gone.
	Close() error
	// Wait blocks until the CLI has exited and says how.
	Wait() *Exit
}

// A StartFunc starts the CLI for cmd. stderr receives each line the CLI
// writes on stderr. ctx governs the life of the process: when it ends, the
// CLI is stopped without a grace period.
type StartFunc func(ctx context.Context, cmd *Command, stderr func(line string)) (Process, error)

// ErrRejected is wrapped by the error of a worker whose session the
// controller does not know (any more), or whose token it refused.
var ErrRejected = errors.New("relay: rejected by the controller")

// A Worker connects to a controller, runs the CLI the controller asks for
// and relays its lines until the session ends. See the package
// documentation for the protocol.
type Worker struct {
	URL string // ws:// or wss:// URL of the controller's endpoint
	// URLs, if set, replaces URL: the endpoints of the controllers, tried
	// in turn, one per attempt.
	URLs  []string
	Token string // bearer token
	Name  string // shown in the controller's logs
	// Claim is the session an open frame of the controller asked a
	// registered worker (Host) for; empty for a worker that waits for any.
	Claim string
	// claimSecret is the open frame's secret, which the claim presents.
	claimSecret string
	// Drain, when closed, stops the CLI gracefully, as a close frame
	// would: its exit is still sent and acknowledged before Run returns.
	Drain <-chan struct{}
	Start StartFunc
	// ReconnectTimeout is how long the worker keeps trying to reach the
	// controller, from the moment the link was lost (or, at first, from
	// the start), before it stops the CLI and fails. Zero means 2 minutes.
	ReconnectTimeout time.Duration
	// BufferBytes bounds the output kept until the controller acknowledges
	// it. Zero means 8 MiB.
	BufferBytes int
	// HTTPClient dials; nil means http.DefaultClient.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// PingInterval and PingTimeout tune the keep-alive; zero means
	// DefaultPingInterval and DefaultPingTimeout.
	PingInterval, PingTimeout time.Duration

	// state of the session, shared by the successive connections
	out      *Outbox
	sid      string
	secret   string        // the start frame's: a returning hello presents it
	recv     atomic.Uint64 // frames received from the controller, in order
	consumed atomic.Uint64 // of those, acted on
	inMu     sync.Mutex
	inQ      []*Frame      // received, not acted on yet
	inWake   chan struct{} // closed and replaced when inQ grows
	quit     chan struct{} // closed when Run ends
	ackMu    sync.Mutex
	ackCh    chan struct{} // closed and replaced when consumed grows
	proc     Process
	procStop context.CancelFunc
	exitSeq  atomic.Uint64 // seq of the exit frame once pushed
	exitSent chan struct{}
	stderrOK atomic.Bool
	bg       sync.WaitGroup
}

var errFinished = errors.New("relay: session finished")

// Run serves one session (call it once per Worker): it returns nil once the CLI has exited and the
// controller has acknowledged everything, or an error when the controller
// rejects the worker, stays out of reach for longer than ReconnectTimeout,
// or ctx ends. The CLI is stopped before Run returns.
func (w *Worker) Run(ctx context.Context) (err error) {
	if w.Start == nil {
		panic("relay: Worker.Start is nil")
	}
	logger := w.logger()
	w.out = NewOutbox(cmpOr(w.BufferBytes, DefaultBufferBytes))
	w.ackCh = make(chan struct{})
	w.exitSent = make(chan struct{})
	w.inWake = make(chan struct{})
	w.quit = make(chan struct{})
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w.procStop = stop
	defer func() {
		if err != nil {
			stop() // no grace: the session is lost
			w.out.Close()
		}
		close(w.quit)
		w.bg.Wait()
		stop()
		w.out.Close()
	}()
	giveUp := cmpOr(w.ReconnectTimeout, DefaultReconnectTimeout)
	lastUp := time.Now()
	backoff := minBackoff
	var lastErr error
	var busyWarned time.Time
	for attempt := 1; ; attempt++ {
		url := w.url(attempt)
		c, _, derr := w.dial(ctx, url)
		if derr == nil {
			up, serr := w.serve(ctx, pctx, c)
			if errors.Is(serr, errFinished) {
				return nil
			}
			if errors.Is(serr, ErrRejected) || ctx.Err() != nil {
				return serr
			}
			if up {
				lastUp, backoff = time.Now(), minBackoff
			}
			lastErr = serr
			logger.Warn("claudectl worker: link to the controller lost; reconnecting", "url", url, "session", w.sid, "err", serr)
		} else {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if rerr := refused(url, derr); rerr != nil {
				return rerr
			}
			lastErr = derr
			var busy *BusyError
			if errors.As(derr, &busy) && time.Since(busyWarned) >= busyWarnEvery {
				// Said now and then: a worker that waits for room must
				// not look like one that runs a session.
				busyWarned = time.Now()
				var args []any
				if w.sid != "" {
					args = append(args, "session", w.sid)
				}
				logger.Warn("claudectl worker: "+derr.Error()+"; trying again", args...)
			} else {
				logger.Debug("claudectl worker: dial failed", "url", url, "attempt", attempt, "err", derr)
			}
		}
		if time.Since(lastUp) > giveUp {
			return fmt.Errorf("relay: gave up reaching the controller at %s after %v: %w", w.urlList(), giveUp, lastErr)
		}
		d := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (w *Worker) logger() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.Default()
}

// A RefusedError is a controller's refusal of the WebSocket handshake:
// it answered URL with HTTP status Code, 401 or 403 (the token) or 404 (no
// worker endpoint there: a claudectl daemon without workers.token_file).
// Trying again would not help. It wraps ErrRejected.
type RefusedError struct {
	URL  string
	Code int
}

func (e *RefusedError) Error() string {
	if e.Code == http.StatusNotFound {
		return fmt.Sprintf("%v: %s answered %d: no worker endpoint there", ErrRejected, e.URL, e.Code)
	}
	return fmt.Sprintf("%v: %s answered %d: check the token", ErrRejected, e.URL, e.Code)
}

func (e *RefusedError) Unwrap() error { return ErrRejected }

// refused returns the RefusedError of a dial error that is one, else nil.
func refused(url string, err error) error {
	var he *httpStatusError
	if errors.As(err, &he) && (he.code == http.StatusUnauthorized || he.code == http.StatusForbidden || he.code == http.StatusNotFound) {
		return &RefusedError{URL: url, Code: he.code}
	}
	return nil
}

// A BusyError is a controller's refusal of the handshake for want of room
// (503 Service Unavailable): it has as many worker connections open as it
// allows. A Worker and a Host say so and try again with backoff; Reason is
// the controller's own explanation.
type BusyError struct {
	URL    string
	Reason string
}

func (e *BusyError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("the controller at %s turned the connection away (503): it has no room for another worker now", e.URL)
	}
	return fmt.Sprintf("the controller at %s turned the connection away: %s", e.URL, e.Reason)
}

// busyReason returns what a controller's 503 answer says (its first
// line, printable and at most 300 bytes: it goes to the worker's log).
func busyReason(resp *http.Response) string {
	if resp.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, line)
	if len(line) > 300 {
		line = Clip(line[:300])
	}
	return strings.TrimSpace(line)
}

type httpStatusError struct {
	code int
	err  error
}

func (e *httpStatusError) Error() string { return e.err.Error() }
func (e *httpStatusError) Unwrap() error { return e.err }

// url returns the endpoint of the attempt-th dial (from 1).
func (w *Worker) url(attempt int) string {
	if len(w.URLs) == 0 {
		return w.URL
	}
	return w.URLs[(attempt-1)%len(w.URLs)]
}

func (w *Worker) urlList() string {
	if len(w.URLs) == 0 {
		return w.URL
	}
	return strings.Join(w.URLs, ", ")
}

func (w *Worker) dial(ctx context.Context, url string) (*websocket.Conn, *http.Response, error) {
	c, resp, err := dial(ctx, w.HTTPClient, url, w.Token)
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(-1) // lines are bounded by the controller's MaxLineBytes
	return c, resp, nil
}

// dial opens a connection to a controller's endpoint.
func dial(ctx context.Context, hc *http.Client, url, token string) (*websocket.Conn, *http.Response, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, resp, err := websocket.Dial(dctx, url, &websocket.DialOptions{
		HTTPClient:   hc,
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + token}},
		Subprotocols: []string{Subprotocol},
	})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
			return nil, resp, &BusyError{URL: url, Reason: busyReason(resp)}
		}
		if resp != nil {
			return nil, resp, &httpStatusError{code: resp.StatusCode, err: err}
		}
		return nil, nil, err
	}
	if c.Subprotocol() != Subprotocol {
		c.Close(websocket.StatusPolicyViolation, "subprotocol "+Subprotocol+" required")
		return nil, resp, fmt.Errorf("relay: %s does not speak %s", url, Subprotocol)
	}
	return c, resp, nil
}

// serve runs the handshake and then the link on c. up reports whether the
// handshake succeeded.
func (w *Worker) serve(ctx, pctx context.Context, c *websocket.Conn) (up bool, err error) {
	defer c.CloseNow()
	hello := &Header{Type: TypeHello, Session: w.sid, Ack: w.recv.Load(), Worker: w.Name}
	if w.sid == "" {
		hello.Claim, hello.Secret = w.Claim, w.claimSecret
	} else {
		hello.Held, hello.Secret = w.out.Acked(), w.secret
	}
	if err := WriteFrame(ctx, c, hello, nil); err != nil {
		return false, err
	}
	f, err := w.awaitAnswer(ctx, c)
	if err != nil {
		// A fresh worker may have waited, connected, for a long time: the
		// link was up until now.
		return w.sid == "", err
	}
	from := uint64(0)
	switch f.Type {
	case TypeReject:
		c.Close(websocket.StatusNormalClosure, "")
		w.stopCLI()
		return false, fmt.Errorf("%w: %s", ErrRejected, f.Error)
	case TypeStart:
		if w.sid != "" || f.Command == nil || f.Session == "" {
			return false, fmt.Errorf("%w: unexpected start", ErrMalformed)
		}
		w.sid, w.secret = f.Session, f.Secret
		w.logger().Info("claudectl worker: starting the CLI", "session", w.sid, "dir", f.Command.Dir)
		w.logger().Debug("claudectl worker: CLI command", "session", w.sid, "args", f.Command.Args, "env_set", len(f.Command.SetEnv), "env_unset", f.Command.UnsetEnv)
		w.startCLI(ctx, pctx, f.Command)
	case TypeResume:
		if f.Session != w.sid || w.sid == "" {
			return false, fmt.Errorf("%w: resume of session %q, have %q", ErrMalformed, f.Session, w.sid)
		}
		from = f.Ack
		w.out.Ack(f.Ack)
		w.logger().Info("claudectl worker: link restored", "session", w.sid, "controller_has", f.Ack, "resending", w.out.Pending())
	default:
		return false, fmt.Errorf("%w: %s frame before start", ErrMalformed, f.Type)
	}
	// Once exit is acknowledged, close the link normally: that ends Run.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	finished := make(chan struct{})
	var fin sync.WaitGroup
	fin.Add(1)
	go func() {
		defer fin.Done()
		select {
		case <-w.exitSent:
		case <-lctx.Done():
			return
		}
		if w.out.WaitAcked(lctx, w.exitSeq.Load()) == nil {
			close(finished)
			c.Close(websocket.StatusNormalClosure, "session over")
		}
	}()
	link := &Link{
		Conn: c, Out: w.out, From: from,
		Ack:          w.consumed.Load,
		AckChanged:   w.ackChanged,
		Handle:       w.handle,
		PingInterval: w.PingInterval, PingTimeout: w.PingTimeout,
	}
	err = link.Run(lctx)
	cancel()
	fin.Wait()
	select {
	case <-finished:
		return true, errFinished
	default:
	}
	return true, err
}

// awaitAnswer reads the controller's answer to hello. A fresh worker may wait
// long for a session, so the connection is kept alive with pings meanwhile.
func (w *Worker) awaitAnswer(ctx context.Context, c *websocket.Conn) (*Frame, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		l := &Link{Conn: c, PingInterval: w.PingInterval, PingTimeout: w.PingTimeout}
		if l.PingLoop(ctx) != nil {
			c.CloseNow()
		}
	}()
	return ReadFrame(ctx, c)
}

func (w *Worker) ackChanged() <-chan struct{} {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	return w.ackCh
}

func (w *Worker) consumedUpTo(seq uint64) {
	w.consumed.Store(seq)
	w.ackMu.Lock()
	close(w.ackCh)
	w.ackCh = make(chan struct{})
	w.ackMu.Unlock()
}

// handle queues one frame of the controller for the input goroutine; it
// never blocks, so the link notices a failure even while the CLI does not
// read its stdin.
func (w *Worker) handle(f *Frame) error {
	if f.Ack != 0 {
		w.out.Ack(f.Ack)
	}
	if f.Type == TypeAck {
		return nil
	}
	switch f.Type {
	case TypeLine, TypeEOF, TypeClose:
	default:
		return fmt.Errorf("%w: unexpected %s frame", ErrMalformed, f.Type)
	}
	have := w.recv.Load()
	if f.Seq <= have {
		return nil // sent again after a reconnection: already here
	}
	if f.Seq != have+1 {
		return fmt.Errorf("%w: frame %d after %d", ErrMalformed, f.Seq, have)
	}
	if w.proc == nil {
		return fmt.Errorf("%w: %s frame before the CLI started", ErrMalformed, f.Type)
	}
	w.inMu.Lock()
	w.inQ = append(w.inQ, f)
	close(w.inWake)
	w.inWake = make(chan struct{})
	w.inMu.Unlock()
	w.recv.Store(f.Seq)
	return nil
}

// input acts on the controller's frames in order: it writes lines to the
// CLI's stdin, closes it, or stops the CLI.
func (w *Worker) input(pctx context.Context) {
	defer w.bg.Done()
	for {
		w.inMu.Lock()
		var f *Frame
		if len(w.inQ) > 0 {
			f = w.inQ[0]
			w.inQ[0] = nil
			w.inQ = w.inQ[1:]
		}
		wake := w.inWake
		w.inMu.Unlock()
		if f == nil {
			select {
			case <-wake:
				continue
			case <-w.quit:
				return
			}
		}
		switch f.Type {
		case TypeLine:
			line := f.Payload
			if len(line) == 0 || line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			if err := w.proc.WriteLine(pctx, line); err != nil {
				w.logger().Debug("claudectl worker: writing to the CLI", "err", err)
			}
		case TypeEOF:
			w.proc.CloseWrite()
		case TypeClose:
			if f.Now {
				w.procStop()
			}
			w.stopCLI()
		}
		w.consumedUpTo(f.Seq)
	}
}

// stopCLI stops the CLI gracefully in the background; its exit frame follows.
func (w *Worker) stopCLI() {
	if w.proc == nil {
		return
	}
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		w.proc.Close()
	}()
}

// startCLI starts the CLI and the goroutine relaying its output; a CLI that
// cannot start is reported with an exit frame.
func (w *Worker) startCLI(ctx, pctx context.Context, cmd *Command) {
	w.stderrOK.Store(true)
	stderr := func(line string) {
		if w.stderrOK.Load() {
			w.out.Push(ctx, Header{Type: TypeStderr}, []byte(line))
		}
	}
	p, err := w.Start(pctx, cmd, stderr)
	if err != nil {
		w.proc = nopProcess{}
		w.pushExit(ctx, &Exit{Code: -1, Error: err.Error()})
		return
	}
	w.proc = p
	w.bg.Add(2)
	go w.input(pctx)
	if w.Drain != nil {
		w.bg.Add(1)
		go func() {
			defer w.bg.Done()
			select {
			case <-w.Drain:
				w.logger().Info("claudectl worker: stopping the CLI", "session", w.sid)
				p.Close()
			case <-w.quit:
			}
		}()
	}
	go func() {
		defer w.bg.Done()
		for {
			line, orig, err := p.ReadLine()
			if err != nil {
				break
			}
			if _, err := w.out.Push(ctx, Header{Type: TypeLine, Orig: orig}, line); err != nil {
				break
			}
		}
		x := p.Wait()
		w.stderrOK.Store(false)
		w.pushExit(ctx, x)
	}()
}

func (w *Worker) pushExit(ctx context.Context, x *Exit) {
	seq, err := w.out.Push(ctx, Header{Type: TypeExit, Exit: x}, nil)
	if err != nil {
		return
	}
	w.exitSeq.Store(seq)
	close(w.exitSent)
	if x.KeptRunningMS > 0 {
		w.logger().Warn("claudectl worker: the CLI closed its output but kept running; it was stopped", "session", w.sid,
			"after", time.Duration(x.KeptRunningMS)*time.Millisecond, "code", x.Code, "signal", x.Signal, "error", x.Error)
		return
	}
	w.logger().Info("claudectl worker: the CLI exited", "session", w.sid, "code", x.Code, "signal", x.Signal, "error", x.Error)
}

// nopProcess stands for a CLI that could not start.
type nopProcess struct{}

func (nopProcess) ReadLine() ([]byte, int64, error)        { return nil, 0, errors.New("not started") }
func (nopProcess) WriteLine(context.Context, []byte) error { return errors.New("not started") }
func (nopProcess) CloseWrite() error                       { return nil }
func (nopProcess) Close() error                            { return nil }
func (nopProcess) Wait() *Exit                             { return &Exit{Code: -1} }

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
