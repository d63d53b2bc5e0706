package claude

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
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
// the listener (an [http.Handler]) in a server. Workers are of two kinds:
// registered ones ("claudectl worker --name N --label k=v --capacity C")
// stay connected and run several sessions, placed on them by
// [WorkerTransport] (by name, labels and load; see [WorkerListener.Workers]);
// one-session ones ("claudectl worker --once") wait for a session and exit
// when it ends. [WorkerListener.Start] uses a registered worker with room if
// one is connected, else takes the next one-session worker that connects
// (or one already waiting); it sends the command and returns the
// connection. The worker applies the environment
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
	// Authorize, if set, accepts other tokens too: it is given a worker's
	// bearer token and address and says whether that worker may connect
	// (a daemon's tokens of role worker). Token may then be empty.
	Authorize func(token, remote string) bool
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
	// MaxConnections bounds the worker connections open at once that
	// presented the token: registered workers' control connections,
	// session links and workers waiting for a session (each holds a file
	// descriptor and tens of kilobytes). One more is answered 503 Service
	// Unavailable with the reason, which the worker prints before it
	// tries again with backoff; a warning is logged at most once a minute.
	// Zero means DefaultMaxWorkerConnections. Leave room for reconnections:
	// a worker's links that drop are counted until the listener notices
	// (a ping timeout) while the new ones connect.
	MaxConnections int
	// MaxConnectionsSetting, if set, is how a refusal for MaxConnections
	// names the setting that raises it ("workers.max_connections" for a
	// claudectl daemon).
	MaxConnectionsSetting string
	// Stderr, if set, receives each line the remote CLIs write on stderr.
	Stderr func(line string)
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger
	// Adopt, if set, is asked about a worker that comes back for a relay
	// session the listener does not serve: the controller that served it
	// died or restarted. To take the session over, Adopt starts a Session
	// (or calls WorkerTransport.Start) with WorkerTransport.Resume naming
	// r.Session and the session's stored secret hash before it returns
	// nil; the link then goes on, the CLI untouched. Adopt must check
	// r.Proves first: any holder of the token can name a session (the
	// take-over is refused anyway when the worker did not present the
	// secret). An error wrapping ErrUnknownRelaySession makes the worker
	// stop its CLI (the session is over); any other error, or nil without
	// a take-over, closes the connection and the worker tries again (its
	// other addresses, with backoff): the session may be another
	// controller's. ctx bounds the decision (it ends after 10 seconds, or
	// when Adopt returns): the session taken over needs a context of its
	// own, which governs its life as Start's does.
	Adopt func(ctx context.Context, r *WorkerReturn) error

	initOnce sync.Once
	ctx      context.Context // ends when the listener closes
	cancel   context.CancelFunc
	handlers sync.WaitGroup // ServeHTTP calls
	serve    sync.WaitGroup // Listen's Serve goroutine

	pingInterval, pingTimeout time.Duration     // tests
	beforeWelcome             func(name string) // tests: called before a worker's welcome frame is written

	mu     sync.Mutex
	closed bool
	conns  int // connections served that presented the token (MaxConnections)
	// full counts the connections refused for MaxConnections since the
	// last warning, fullWarned is when that was.
	full       int
	fullWarned time.Time
	srv        *http.Server
	url        string
	idle       []*workerLink
	idleWake   chan struct{} // closed and replaced when a worker becomes idle
	sessions   map[string]*workerConn
	// registry holds the registered workers by name, claims the sessions
	// placed on one of them that wait for its link.
	registry  map[string]*registered
	claims    map[string]*claim
	returning map[string]*returning // workers waiting for Adopt, by session
	// ended remembers, until the time given, the sessions whose CLI exited,
	// with the frames received: a worker that missed the last ack because
	// the link dropped gets it when it comes back.
	ended map[string]endedSession
}

type endedSession struct {
	recv   uint64
	until  time.Time
	secret string // the session's: only its worker learns that it ended
}

// DefaultMaxWorkerConnections is WorkerListener.MaxConnections' default:
// 1024 workers registered at most, each with a few sessions, fit; 1024
// idle connections held by one token holder cost about 40 MB.
const DefaultMaxWorkerConnections = 1024

// ErrListenerClosed is returned by the calls on a closed WorkerListener, and
// by the sessions it was still serving.
var ErrListenerClosed = errors.New("claude: listener closed")

func (l *WorkerListener) init() {
	l.initOnce.Do(func() {
		l.ctx, l.cancel = context.WithCancel(context.Background())
		l.idleWake = make(chan struct{})
		l.sessions = map[string]*workerConn{}
		l.ended = map[string]endedSession{}
		l.registry = map[string]*registered{}
		l.claims = map[string]*claim{}
		l.returning = map[string]*returning{}
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

// authorized asks Authorize about r's bearer token.
func (l *WorkerListener) authorized(r *http.Request) bool {
	if l.Authorize == nil {
		return false
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	return ok && token != "" && l.Authorize(token, r.RemoteAddr)
}

// Listen starts serving on Addr in the background. Workers connect to
// [WorkerListener.URL].
func (l *WorkerListener) Listen() error {
	l.init()
	if l.Token == "" && l.Authorize == nil {
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
	sessions := make([]*workerConn, 0, len(l.sessions))
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
	if !bearerOK(r, l.Token) && !l.authorized(r) {
		l.logger().Warn("claude: worker connection refused", "remote", r.RemoteAddr, "path", r.URL.Path, "reason", authProblem(r))
		refuse(w)
		return
	}
	if !l.admit(r.RemoteAddr) {
		// Before the upgrade: a worker can say in its own words why it
		// waits, and the socket goes at once.
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "5")
		http.Error(w, l.fullReason(), http.StatusServiceUnavailable)
		return
	}
	defer l.leave()
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
	if hello.Register != nil {
		l.serveControl(c, hello.Register, r.RemoteAddr)
		return
	}
	if hello.Worker != "" {
		// A one-session worker's name is bounded as a registered one's
		// is: it becomes the session's worker name and goes into logs.
		if err := relay.ValidName(hello.Worker); err != nil {
			l.refuseLink(c, r.RemoteAddr, hello, err.Error()+": give the worker another --name")
			return
		}
	}
	wl := &workerLink{l: l, c: c, name: hello.Worker, remote: r.RemoteAddr, secret: hello.Secret,
		assign: make(chan assignment, 1), gone: make(chan struct{})}
	if wl.name == "" {
		wl.name = r.RemoteAddr
	}
	if hello.Claim != "" && hello.Session == "" {
		wl.claim = hello.Claim
	}
	var rc *workerConn
	if hello.Session != "" {
		l.mu.Lock()
		rc = l.sessions[hello.Session]
		ended, wasEnded := l.ended[hello.Session]
		l.mu.Unlock()
		if rc != nil && !rc.proves(hello.Secret) || rc == nil && wasEnded && subtle.ConstantTimeCompare([]byte(hello.Secret), []byte(ended.secret)) != 1 {
			// Another holder of the token, who read the session's id
			// somewhere: resumed, it would take the worker's place on the
			// link, get the CLI's input and write its output.
			l.refuseLink(c, r.RemoteAddr, hello, "relay session "+relay.Clip(hello.Session)+
				": this connection did not present the session's secret, so it is not the worker that runs it")
			return
		}
		if rc == nil && wasEnded && time.Now().Before(ended.until) {
			// The session is over but the worker missed the last ack:
			// give it, and let the worker close.
			l.logger().Info("claude: worker came back after its session ended", "worker", wl.name, "session", relay.Clip(hello.Session))
			if relay.WriteFrame(l.ctx, c, &relay.Header{Type: relay.TypeResume, Session: hello.Session, Ack: ended.recv}, nil) == nil {
				ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
				c.Read(ctx) // until the worker's close
				cancel()
			}
			return
		}
		if rc == nil && l.Adopt != nil {
			if rc = l.adoptReturn(wl, hello); rc == nil {
				return
			}
		} else if rc == nil || rc.over() {
			l.logger().Warn("claude: worker came back for an unknown session", "worker", wl.name, "session", relay.Clip(hello.Session))
			relay.WriteFrame(l.ctx, c, &relay.Header{Type: relay.TypeReject, Error: "unknown session " + hello.Session}, nil)
			c.Close(websocket.StatusNormalClosure, "")
			return
		}
	}
	wl.serve(rc, hello.Ack)
}

// refuseLink answers a worker's hello with reject, saying why, and closes
// the connection; nothing of the listener's state has changed. The worker
// stops (its CLI too, if it runs one) and says why.
func (l *WorkerListener) refuseLink(c *websocket.Conn, remote string, hello *relay.Frame, why string) {
	l.logger().Warn("claude: worker link refused", "remote", remote, "worker", relay.Clip(hello.Worker),
		"session", relay.Clip(cmp.Or(hello.Session, hello.Claim)), "reason", why)
	ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
	relay.WriteFrame(ctx, c, &relay.Header{Type: relay.TypeReject, Error: why}, nil)
	cancel()
	c.Close(websocket.StatusPolicyViolation, "refused")
}

func (l *WorkerListener) maxConnections() int {
	if l.MaxConnections > 0 {
		return l.MaxConnections
	}
	return DefaultMaxWorkerConnections
}

// admit counts a connection that presented the token, or reports false
// when MaxConnections are open already (and warns, at most once a
// minute).
func (l *WorkerListener) admit(remote string) bool {
	l.mu.Lock()
	if l.conns < l.maxConnections() {
		l.conns++
		l.mu.Unlock()
		return true
	}
	l.full++
	var refused int
	if now := time.Now(); now.Sub(l.fullWarned) >= time.Minute {
		refused, l.full, l.fullWarned = l.full, 0, now
	}
	l.mu.Unlock()
	if refused > 0 {
		l.logger().Warn("claude: worker connections refused: as many are open as allowed", "open", l.maxConnections(),
			"refused", refused, "latest_from", remote, "limit", cmp.Or(l.MaxConnectionsSetting, "MaxConnections"))
	}
	return false
}

func (l *WorkerListener) leave() {
	l.mu.Lock()
	l.conns--
	l.mu.Unlock()
}

// fullReason is what a worker refused for MaxConnections is told.
func (l *WorkerListener) fullReason() string {
	return fmt.Sprintf("%d worker connections are open, as many as it allows (%s): stop workers it does not need, or raise %[2]s",
		l.maxConnections(), cmp.Or(l.MaxConnectionsSetting, "MaxConnections"))
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

// Start implements [Transport]: it places the session on the least loaded
// registered worker with room if one is connected (see [WorkerTransport]);
// else it waits for the next one-session worker ("claudectl worker --once")
// to connect (see WaitTimeout). It sends the worker the command and returns
// the connection to the remote CLI. ctx governs the whole session: when it
// ends, the worker stops the CLI at once.
func (l *WorkerListener) Start(ctx context.Context, c *Command) (Conn, error) {
	return l.start(ctx, c, &WorkerTransport{})
}

// start is Start with t's Tag and Hold.
func (l *WorkerListener) start(ctx context.Context, c *Command, t *WorkerTransport) (Conn, error) {
	l.init()
	if l.Token == "" && l.Authorize == nil {
		return nil, errors.New("claude: WorkerListener.Token is empty")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	anyRegistered := l.anyConnectedLocked()
	l.mu.Unlock()
	if anyRegistered {
		return l.startPlaced(ctx, c, WorkerSelector{}, t)
	}
	rc := l.newConn(ctx, c, t)
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
			where := "the CLI on a remote worker"
			if u := l.URL(); u != "" { // "": served by another's server (the daemon's)
				where = "remote worker at " + u
			}
			return nil, &StartError{Path: where, Err: err}
		}
		err = l.handOver(wl, rc)
		if err == nil {
			break
		}
		l.logger().Debug("claude: worker went away before its session started", "worker", wl.name, "err", err)
	}
	rc.bg.Add(1)
	go rc.watch()
	return rc, nil
}

// handOver gives rc to the waiting worker connection wl and reports whether
// the start frame went out.
func (l *WorkerListener) handOver(wl *workerLink, rc *workerConn) error {
	res := make(chan error, 1)
	wl.assign <- assignment{rc: rc, result: res}
	var err error
	select {
	case err = <-res:
	case <-wl.gone:
		// The link sends the result before it closes gone, so both may
		// be ready: the result, if there is one, decides.
		select {
		case err = <-res:
		default:
			return errors.New("gone")
		}
	}
	if err == nil && !rc.placed {
		rc.mu.Lock()
		rc.worker = wl.name
		rc.mu.Unlock()
	}
	return err
}

// newConn makes the Conn of a new session running c, with t's Tag and
// Hold.
func (l *WorkerListener) newConn(ctx context.Context, c *Command, t *WorkerTransport) *workerConn {
	set, unset := envDelta(c.Env, osEnviron())
	return &workerConn{
		l:      l,
		ctx:    ctx,
		id:     relayID(t.Tag),
		secret: randomHex(32),
		tag:    t.Tag,
		hold:   t.Hold,
		cmd:    &relay.Command{Args: c.Args, SetEnv: set, UnsetEnv: unset, Dir: c.Dir, MaxLineBytes: c.MaxLineBytes},
		out:    relay.NewOutbox(orDefault(l.BufferBytes, relay.DefaultBufferBytes)),

		ackCh:   make(chan struct{}),
		wake:    make(chan struct{}),
		linkCh:  make(chan struct{}),
		exited:  make(chan struct{}),
		closing: make(chan struct{}),
		stderr:  l.Stderr,
	}
}

// relayID returns a new relay session id: "s-" and random hex, or, for a
// tagged session, the tag, "~" and random hex, so that a controller taking
// the session over finds its own session in the id (see RelayTag).
func relayID(tag string) string {
	if tag == "" {
		return "s-" + randomHex(12)
	}
	return tag + "~" + randomHex(12)
}

// RelayTag returns the WorkerTransport.Tag a relay session id was made
// with ("" for an untagged session).
func RelayTag(relaySession string) string {
	i := strings.LastIndexByte(relaySession, '~')
	if i < 0 {
		return ""
	}
	return relaySession[:i]
}

func (l *WorkerListener) forget(rc *workerConn) {
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
		l.ended[rc.id] = endedSession{recv: recv, until: now.Add(l.reconnectTimeout()), secret: rc.secret}
	}
}

func (l *WorkerListener) reconnectTimeout() time.Duration {
	// A registered worker's sessions wait for its grace period instead
	// (workerConn.grace).
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

// envDelta returns how env differs from base: the variables to set and the
// names to unset.
func envDelta(env, base []string) (set map[string]string, unset []string) {
	have := make(map[string]string, len(base))
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		have[k] = v
	}
	want := make(map[string]bool, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		want[k] = true
		if old, ok := have[k]; !ok || old != v {
			if set == nil {
				set = map[string]string{}
			}
			set[k] = v
		}
	}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !want[k] {
			unset = append(unset, k)
		}
	}
	return set, unset
}

// osEnviron is os.Environ, a variable for tests.
var osEnviron = os.Environ
