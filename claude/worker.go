package claude

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/claudectl/claudectl/internal/relay"
)

// WorkerListener is a [Transport] whose CLIs run on other machines: each
// runs under a remote worker ("claudectl worker --connect URL --token-file F"),
// which starts the Claude Code CLI over stdio on its machine and relays its
// lines over a WebSocket to this listener. Sessions keep the same API as
// local ones; the CLI's working directory and files are the worker's.
//
// Use [WorkerListener.Listen] to serve on an address of its own, or mount
// the listener (an [http.Handler]) in a server. Each [WorkerListener.Start]
// takes the next worker that connects (or one already waiting), sends it the
// command and returns the connection. The worker applies the environment
// changes of [Options.Env] to its own environment; [Options.CLIPath] is
// ignored (the worker's --cli flag chooses the CLI).
//
// The link survives network failures: the worker reconnects with backoff,
// the CLI keeps running meanwhile, and both sides send again, by sequence
// number, what the other has not received, so no line is lost or doubled.
// The protocol is described in internal/relay.
//
// Token must be set; the other fields may be left zero. The fields must not
// change once the listener is in use.
type WorkerListener struct {
	// Token is the bearer token workers must present.
	Token string
	// Addr is the address Listen listens on; empty means "127.0.0.1:0" (a
	// free port on the loopback interface).
	Addr string
	// Path is the URL path Listen serves; empty means "/worker".
	Path string
	// WaitTimeout bounds how long Start waits for a worker; zero means as
	// long as Start's context lasts.
	WaitTimeout time.Duration
	// ReconnectTimeout is how long a session waits for its worker to come
	// back after the link dropped before it fails with a *WorkerLostError;
	// zero means 2 minutes.
	ReconnectTimeout time.Duration
	// BufferBytes bounds the lines sent to a worker and not yet
	// acknowledged (a writer blocks while it is full); zero means 8 MiB.
	BufferBytes int
	// Stderr, if set, receives each line the remote CLIs write on stderr.
	Stderr func(line string)
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger

	initOnce sync.Once
	ctx      context.Context // ends when the listener closes
	cancel   context.CancelFunc
	handlers sync.WaitGroup // ServeHTTP calls
	serve    sync.WaitGroup // Listen's Serve goroutine

	pingInterval, pingTimeout time.Duration // tests

	mu       sync.Mutex
	closed   bool
	srv      *http.Server
	url      string
	idle     []*workerLink
	idleWake chan struct{} // closed and replaced when a worker becomes idle
	sessions map[string]*remoteConn
	// ended remembers, until the time given, the sessions whose CLI exited,
	// with the frames received: a worker that missed the last ack because
	// the link dropped gets it when it comes back.
	ended map[string]endedSession
}

type endedSession struct {
	recv  uint64
	until time.Time
}

// ErrListenerClosed is returned by the calls on a closed WorkerListener, and
// by the sessions it was still serving.
var ErrListenerClosed = errors.New("claude: listener closed")

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

func (l *WorkerListener) init() {
	l.initOnce.Do(func() {
		l.ctx, l.cancel = context.WithCancel(context.Background())
		l.idleWake = make(chan struct{})
		l.sessions = map[string]*remoteConn{}
		l.ended = map[string]endedSession{}
	})
}

func (l *WorkerListener) logger() *slog.Logger {
	if l.Logger != nil {
		return l.Logger
	}
	return slog.Default()
}

func (l *WorkerListener) path() string {
	if l.Path != "" {
		return l.Path
	}
	return "/worker"
}

// Listen starts serving on Addr in the background. Workers connect to
// [WorkerListener.URL].
func (l *WorkerListener) Listen() error {
	l.init()
	if l.Token == "" {
		return errors.New("claude: WorkerListener.Token is empty")
	}
	addr := l.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrListenerClosed
	}
	if l.srv != nil {
		return errors.New("claude: WorkerListener is already listening")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("claude: WorkerListener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(l.path(), l)
	l.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	l.url = "ws://" + ln.Addr().String() + l.path()
	l.serve.Add(1)
	go func() {
		defer l.serve.Done()
		l.srv.Serve(ln)
	}()
	return nil
}

// URL returns the ws:// URL workers connect to, once Listen has succeeded
// ("" before).
func (l *WorkerListener) URL() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.url
}

// Close stops listening, drops every worker connection and ends the
// sessions that still run (their Conn reports ErrListenerClosed). It waits
// for the listener's goroutines; it is idempotent.
func (l *WorkerListener) Close() error {
	l.init()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.serve.Wait()
		l.handlers.Wait()
		return nil
	}
	l.closed = true
	srv := l.srv
	sessions := make([]*remoteConn, 0, len(l.sessions))
	for _, rc := range l.sessions {
		sessions = append(sessions, rc)
	}
	l.mu.Unlock()
	l.cancel()
	if srv != nil {
		srv.Close()
	}
	for _, rc := range sessions {
		rc.fail(ErrListenerClosed)
	}
	l.serve.Wait()
	l.handlers.Wait()
	return nil
}

func (l *WorkerListener) enter() bool {
	l.init()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.handlers.Add(1)
	return true
}

// ServeHTTP implements [http.Handler]: it accepts a worker's WebSocket
// connection (bearer token and the relay subprotocol required) and serves it
// until it ends.
func (l *WorkerListener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !l.enter() {
		http.Error(w, "listener closed", http.StatusServiceUnavailable)
		return
	}
	defer l.handlers.Done()
	if !bearerOK(r, l.Token) {
		l.logger().Warn("claude: worker connection refused", "remote", r.RemoteAddr, "path", r.URL.Path, "reason", authProblem(r))
		refuse(w)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{relay.Subprotocol}})
	if err != nil {
		l.logger().Warn("claude: worker connection failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	defer c.CloseNow()
	if c.Subprotocol() != relay.Subprotocol {
		c.Close(websocket.StatusPolicyViolation, "subprotocol "+relay.Subprotocol+" required")
		return
	}
	hctx, cancel := context.WithTimeout(l.ctx, 30*time.Second)
	hello, err := relay.ReadFrame(hctx, c)
	cancel()
	if err != nil || hello.Type != relay.TypeHello {
		l.logger().Warn("claude: worker connection without hello", "remote", r.RemoteAddr, "err", err)
		c.Close(websocket.StatusProtocolError, "hello expected")
		return
	}
	wl := &workerLink{l: l, c: c, name: hello.Worker, remote: r.RemoteAddr, assign: make(chan assignment, 1), gone: make(chan struct{})}
	if wl.name == "" {
		wl.name = r.RemoteAddr
	}
	var rc *remoteConn
	if hello.Session != "" {
		l.mu.Lock()
		rc = l.sessions[hello.Session]
		ended, wasEnded := l.ended[hello.Session]
		l.mu.Unlock()
		if rc == nil && wasEnded && time.Now().Before(ended.until) {
			// The session is over but the worker missed the last ack:
			// give it, and let the worker close.
			l.logger().Info("claude: worker came back after its session ended", "worker", wl.name, "session", hello.Session)
			if relay.WriteFrame(l.ctx, c, &relay.Header{Type: relay.TypeResume, Session: hello.Session, Ack: ended.recv}, nil) == nil {
				ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
				c.Read(ctx) // until the worker's close
				cancel()
			}
			return
		}
		if rc == nil || rc.over() {
			l.logger().Warn("claude: worker came back for an unknown session", "worker", wl.name, "session", hello.Session)
			relay.WriteFrame(l.ctx, c, &relay.Header{Type: relay.TypeReject, Error: "unknown session " + hello.Session}, nil)
			c.Close(websocket.StatusNormalClosure, "")
			return
		}
	}
	wl.serve(rc, hello.Ack)
}

// assignment hands a waiting worker a new session; the handler reports on
// result whether the start frame went out.
type assignment struct {
	rc     *remoteConn
	result chan error
}

// workerLink is one connection of a worker, served by ServeHTTP.
type workerLink struct {
	l      *WorkerListener
	c      *websocket.Conn
	name   string
	remote string
	assign chan assignment
	gone   chan struct{} // closed when the handler stops waiting for an assignment

	mu sync.Mutex
	rc *remoteConn
}

func (wl *workerLink) handle(f *relay.Frame) error {
	wl.mu.Lock()
	rc := wl.rc
	wl.mu.Unlock()
	if rc == nil {
		return fmt.Errorf("%w: %s frame before start", relay.ErrMalformed, f.Type)
	}
	return rc.handle(f)
}

// serve runs the connection: a fresh worker (rc nil) first waits for a
// session, a returning one resumes rc from the worker's ack.
func (wl *workerLink) serve(rc *remoteConn, from uint64) {
	l := wl.l
	ctx, cancel := context.WithCancelCause(l.ctx)
	defer cancel(nil)
	link := &relay.Link{Conn: wl.c, Handle: wl.handle, PingInterval: l.pingInterval, PingTimeout: l.pingTimeout}
	wl.mu.Lock()
	wl.rc = rc
	wl.mu.Unlock()
	if rc != nil {
		wl.c.SetReadLimit(rc.readLimit())
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer wl.c.CloseNow()
	wg.Add(2)
	go func() {
		defer wg.Done()
		err := link.ReadLoop(ctx)
		cancel(err)
		wl.c.CloseNow()
	}()
	go func() {
		defer wg.Done()
		if err := link.PingLoop(ctx); err != nil {
			cancel(err)
			wl.c.CloseNow()
		}
	}()

	if rc == nil {
		l.addIdle(wl)
		select {
		case a := <-wl.assign:
			rc = a.rc
			wl.mu.Lock()
			wl.rc = rc
			wl.mu.Unlock()
			wl.c.SetReadLimit(rc.readLimit())
			err := relay.WriteFrame(ctx, wl.c, &relay.Header{Type: relay.TypeStart, Session: rc.id, Command: rc.cmd}, nil)
			a.result <- err
			if err != nil {
				return
			}
		case <-ctx.Done():
			l.removeIdle(wl)
			close(wl.gone)
			return
		}
		close(wl.gone)
		from = 0
		l.logger().Info("claude: remote session started", "worker", wl.name, "remote", wl.remote, "session", rc.id)
	} else {
		if err := relay.WriteFrame(ctx, wl.c, &relay.Header{Type: relay.TypeResume, Session: rc.id, Ack: rc.received()}, nil); err != nil {
			return
		}
		rc.out.Ack(from)
		l.logger().Info("claude: remote worker came back", "worker", wl.name, "remote", wl.remote, "session", rc.id, "worker_has", from)
	}
	rc.attach(wl)
	link.Out, link.From, link.Ack, link.AckChanged = rc.out, from, rc.consumedSeq, rc.ackChanged
	err := link.WriteLoop(ctx)
	if err != nil {
		cancel(err)
	}
	wl.c.CloseNow()
	<-ctx.Done()
	rc.detach(wl, context.Cause(ctx))
}

func (l *WorkerListener) addIdle(wl *workerLink) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idle = append(l.idle, wl)
	close(l.idleWake)
	l.idleWake = make(chan struct{})
}

func (l *WorkerListener) removeIdle(wl *workerLink) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, w := range l.idle {
		if w == wl {
			l.idle = append(l.idle[:i], l.idle[i+1:]...)
			return
		}
	}
}

// takeIdle removes and returns the oldest waiting worker, waiting for one
// if needed.
func (l *WorkerListener) takeIdle(ctx context.Context) (*workerLink, error) {
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, ErrListenerClosed
		}
		if len(l.idle) > 0 {
			wl := l.idle[0]
			l.idle = l.idle[1:]
			l.mu.Unlock()
			return wl, nil
		}
		wake := l.idleWake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.ctx.Done():
			return nil, ErrListenerClosed
		}
	}
}

// Start implements [Transport]: it waits for a worker (see WaitTimeout),
// sends it the command and returns the connection to the remote CLI. ctx
// governs the whole session: when it ends, the worker stops the CLI at once.
func (l *WorkerListener) Start(ctx context.Context, c *Command) (Conn, error) {
	l.init()
	if l.Token == "" {
		return nil, errors.New("claude: WorkerListener.Token is empty")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	set, unset := envDelta(c.Env, osEnviron())
	rc := &remoteConn{
		l:   l,
		ctx: ctx,
		id:  "s-" + randomHex(12),
		cmd: &relay.Command{Args: c.Args, SetEnv: set, UnsetEnv: unset, Dir: c.Dir, MaxLineBytes: c.MaxLineBytes},
		out: relay.NewOutbox(orDefault(l.BufferBytes, relay.DefaultBufferBytes)),

		ackCh:   make(chan struct{}),
		wake:    make(chan struct{}),
		linkCh:  make(chan struct{}),
		exited:  make(chan struct{}),
		closing: make(chan struct{}),
		stderr:  l.Stderr,
	}
	wctx := ctx
	if l.WaitTimeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, l.WaitTimeout)
		defer cancel()
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrListenerClosed
	}
	l.sessions[rc.id] = rc
	l.mu.Unlock()
	for {
		wl, err := l.takeIdle(wctx)
		if err != nil {
			l.forget(rc)
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				err = fmt.Errorf("no worker connected within %v", l.WaitTimeout)
			}
			return nil, &StartError{Path: "remote worker at " + l.URL(), Err: err}
		}
		res := make(chan error, 1)
		wl.assign <- assignment{rc: rc, result: res}
		select {
		case err = <-res:
		case <-wl.gone:
			select {
			case err = <-res:
			default:
				err = errors.New("gone")
			}
		}
		if err == nil {
			rc.worker = wl.name
			break
		}
		l.logger().Debug("claude: worker went away before its session started", "worker", wl.name, "err", err)
	}
	rc.bg.Add(1)
	go rc.watch()
	return rc, nil
}

func (l *WorkerListener) forget(rc *remoteConn) {
	rc.mu.Lock()
	recv, exited := rc.recv, rc.exit != nil
	rc.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.sessions, rc.id)
	now := time.Now()
	for id, e := range l.ended {
		if now.After(e.until) {
			delete(l.ended, id)
		}
	}
	if exited {
		l.ended[rc.id] = endedSession{recv: recv, until: now.Add(l.reconnectTimeout())}
	}
}

func (l *WorkerListener) reconnectTimeout() time.Duration {
	if l.ReconnectTimeout > 0 {
		return l.ReconnectTimeout
	}
	return relay.DefaultReconnectTimeout
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// remoteConn is the Conn of a session run by a remote worker.
type remoteConn struct {
	l      *WorkerListener
	ctx    context.Context
	id     string
	worker string
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
	items    []remoteItem
	wake     chan struct{} // closed and replaced when items grow or the conn ends
	ackCh    chan struct{} // closed and replaced when consumed grows
	link     *workerLink
	linkCh   chan struct{} // closed and replaced when link changes
	lostAt   time.Time
	lastErr  error
	exit     *relay.Exit
	exitErr  error
	exited   chan struct{} // closed when the CLI's exit is known, or the session failed
	eof      bool          // ReadLine reached the end
	closed   bool
}

type remoteItem struct {
	seq  uint64
	line Line
	kind string
}

func (rc *remoteConn) readLimit() int64 {
	return int64(orDefault(rc.cmd.MaxLineBytes, DefaultMaxPayloadBytes)) + 1<<20
}

func (rc *remoteConn) received() uint64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.recv
}

func (rc *remoteConn) consumedSeq() uint64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.consumed
}

func (rc *remoteConn) ackChanged() <-chan struct{} {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.ackCh
}

func (rc *remoteConn) over() bool {
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
func (rc *remoteConn) handle(f *relay.Frame) error {
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
		rc.items = append(rc.items, remoteItem{seq: f.Seq, kind: f.Type, line: Line{Data: f.Payload, OriginalSize: f.Orig}})
	case relay.TypeStderr:
		stderrLine = string(f.Payload)
		rc.items = append(rc.items, remoteItem{seq: f.Seq, kind: f.Type})
	case relay.TypeExit:
		x := f.Exit
		if x == nil {
			x = &relay.Exit{Code: -1}
		}
		rc.exit = x
		rc.exitErr = rc.exitError(x)
		close(rc.exited)
		rc.items = append(rc.items, remoteItem{seq: f.Seq, kind: f.Type})
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

func (rc *remoteConn) exitError(x *relay.Exit) error {
	switch {
	case x.Error != "":
		return &StartError{Path: "claude on worker " + rc.worker, Err: errors.New(x.Error)}
	case x.Code == 0 && x.Signal == "":
		return nil
	}
	stderr := x.Stderr
	if stderr == "" {
		stderr = rc.tail.String()
	}
	return &ExitError{Code: x.Code, Signal: x.Signal, Stderr: stderr}
}

// attach makes wl the session's link, dropping an older one.
func (rc *remoteConn) attach(wl *workerLink) {
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
func (rc *remoteConn) detach(wl *workerLink, why error) {
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
func (rc *remoteConn) fail(err error) {
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
func (rc *remoteConn) watch() {
	defer rc.bg.Done()
	timeout := rc.l.reconnectTimeout()
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
			reason := fmt.Sprintf("no link for %v", timeout)
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
func (rc *remoteConn) ReadLine() (Line, error) {
	for {
		rc.mu.Lock()
		for len(rc.items) > 0 {
			it := rc.items[0]
			rc.items[0] = remoteItem{}
			rc.items = rc.items[1:]
			rc.consumed = it.seq
			broadcast(&rc.ackCh)
			switch it.kind {
			case relay.TypeLine:
				rc.mu.Unlock()
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
func (rc *remoteConn) WriteLine(ctx context.Context, line []byte) error {
	rc.writeMu.Lock()
	defer rc.writeMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if rc.over() {
		return rc.exitOrClosed()
	}
	_, err := rc.out.Push(ctx, relay.Header{Type: relay.TypeLine}, append([]byte(nil), line...))
	if errors.Is(err, relay.ErrOutboxClosed) {
		return rc.exitOrClosed()
	}
	return err
}

func (rc *remoteConn) exitOrClosed() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.exitErr != nil {
		return rc.exitErr
	}
	return ErrClosed
}

// CloseWrite implements [Conn].
func (rc *remoteConn) CloseWrite() error {
	rc.eofOnce.Do(func() {
		rc.writeMu.Lock()
		defer rc.writeMu.Unlock()
		ctx, cancel := context.WithTimeout(rc.ctx, 10*time.Second)
		defer cancel()
		rc.out.Push(ctx, relay.Header{Type: relay.TypeEOF}, nil)
	})
	return nil
}

// remoteCloseWait bounds how long Close waits for the worker to report the
// CLI's exit: its grace period and kill delay, and some slack.
var remoteCloseWait = 30 * time.Second

// Close implements [Conn]: the worker stops the CLI (stdin closed, grace
// period, SIGTERM, SIGKILL) and reports its exit.
func (rc *remoteConn) Close() error {
	rc.closeOnce.Do(func() {
		close(rc.closing)
		if !rc.over() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rc.out.Push(ctx, relay.Header{Type: relay.TypeClose, Now: rc.ctx.Err() != nil}, nil)
			cancel()
		}
		t := time.NewTimer(remoteCloseWait)
		select {
		case <-rc.exited:
		case <-t.C:
			rc.fail(&WorkerLostError{Session: rc.id, Worker: rc.worker, Reason: "the worker did not report the CLI's exit within " + remoteCloseWait.String()})
		}
		t.Stop()
		// Acknowledge everything so the worker can finish, then let it close
		// the link (or drop it after a moment).
		rc.mu.Lock()
		rc.closed = true
		rc.items = nil
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
func (rc *remoteConn) Wait() error {
	<-rc.exited
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.exitErr
}

// StderrTail implements [Conn].
func (rc *remoteConn) StderrTail() string {
	rc.mu.Lock()
	x := rc.exit
	rc.mu.Unlock()
	if x != nil && x.Stderr != "" {
		return x.Stderr
	}
	return rc.tail.String()
}
