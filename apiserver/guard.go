package apiserver

import (
	"container/list"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxUnauthenticated is how many connections may be open at once
// that have not yet made a request with the token.
const DefaultMaxUnauthenticated = 256

// GuardOptions configures GuardListener; the zero value is the default
// limit, logging to slog.Default().
type GuardOptions struct {
	// Max is how many connections may be open at once that have not yet
	// made a request with the token; 0 means DefaultMaxUnauthenticated.
	Max int
	// Logger receives a warning when connections are closed for going
	// over Max: at most one line a minute, counting those closed since the
	// last; nil means slog.Default().
	Logger *slog.Logger
}

// evictionLogInterval is the least time between two warnings of connections
// closed for going over the limit: a flood of connections makes a line a
// minute, not one per connection.
const evictionLogInterval = time.Minute

// GuardListener wraps ln so that at most o.Max connections are open that
// have not yet made a request with the token; when one more arrives, the
// oldest of them is closed, and a warning logged. Idle sockets opened by
// someone without the token then cannot use up the daemon's file
// descriptors and lock real clients out: a client's connection
// authenticates with its first request, within milliseconds. Serve the
// listener with a server from NewServer, which marks connections
// authenticated, and ends an HTTP/2 connection that never carried the
// token at its first refused request (see NewServer).
func GuardListener(ln net.Listener, o *GuardOptions) net.Listener {
	var opts GuardOptions
	if o != nil {
		opts = *o
	}
	if opts.Max <= 0 {
		opts.Max = DefaultMaxUnauthenticated
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &guardListener{Listener: ln, max: opts.Max, log: opts.Logger, unauth: list.New()}
}

type guardListener struct {
	net.Listener
	max int
	log *slog.Logger

	mu     sync.Mutex
	unauth *list.List // of *guardConn, oldest first; guarded by mu
	// Evictions not yet logged: how many, the latest one's remote address,
	// when the last line was written, and the timer that writes the next
	// (nil when none is due). Guarded by mu.
	evicted       int
	evictedRemote string
	loggedAt      time.Time
	logTimer      *time.Timer
}

type guardConn struct {
	net.Conn
	l    *guardListener
	elem *list.Element // in l.unauth while unauthenticated; guarded by l.mu

	authed                atomic.Bool   // a request on it carried the token
	refused               atomic.Bool   // a request on it was refused
	hungUp                chan struct{} // closed by hangUp: Read then waits for Close
	closed                chan struct{} // closed by Close
	hangUpOnce, closeOnce sync.Once
}

func (l *guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &guardConn{Conn: c, l: l, hungUp: make(chan struct{}), closed: make(chan struct{})}
	var evict *guardConn
	l.mu.Lock()
	gc.elem = l.unauth.PushBack(gc)
	if l.unauth.Len() > l.max {
		evict = l.unauth.Remove(l.unauth.Front()).(*guardConn)
		evict.elem = nil
		l.noteEviction(evict.RemoteAddr().String())
	}
	l.mu.Unlock()
	if evict != nil {
		evict.Close()
	}
	return gc, nil
}

// noteEviction counts a connection closed for going over the limit, and
// logs the count at once if no line was written in the last
// evictionLogInterval, else when it has passed. l.mu is held.
func (l *guardListener) noteEviction(remote string) {
	l.evicted++
	l.evictedRemote = remote
	if l.logTimer != nil {
		return // a line is due
	}
	l.logTimer = time.AfterFunc(max(0, evictionLogInterval-time.Since(l.loggedAt)), l.logEvictions)
}

// logEvictions writes the warning of the evictions counted since the last.
func (l *guardListener) logEvictions() {
	l.mu.Lock()
	n, remote := l.evicted, l.evictedRemote
	l.evicted, l.logTimer, l.loggedAt = 0, nil, time.Now()
	l.mu.Unlock()
	l.log.Warn("closed connections that sent no request with the token", "closed", n, "limit", l.max, "latest_remote", remote,
		"reason", fmt.Sprintf("more than %d were open at once: the oldest is closed for each new one", l.max),
		"fix", "if they are your clients (many connecting at once), raise daemon.max_unauthenticated_connections in settings.json; "+
			"else someone is opening connections to this daemon without the token, latest_remote says from where")
}

// Close closes the listener, and logs at once the evictions whose line
// was due later.
func (l *guardListener) Close() error {
	l.mu.Lock()
	t := l.logTimer
	l.mu.Unlock()
	if t != nil && t.Stop() {
		l.logEvictions()
	}
	return l.Listener.Close()
}

// authenticated marks c as having carried the token and takes it off the
// unauthenticated list.
func (c *guardConn) authenticated() {
	c.authed.Store(true)
	c.unlist()
}

func (c *guardConn) unlist() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.elem != nil {
		c.l.unauth.Remove(c.elem)
		c.elem = nil
	}
}

// Read reads the connection until hangUp, and after it reads nothing: it
// waits for Close.
func (c *guardConn) Read(p []byte) (int, error) {
	select {
	case <-c.hungUp:
		<-c.closed
		return 0, net.ErrClosed
	default:
		return c.Conn.Read(p)
	}
}

// hangUp stops reading c and closes it after grace: what the client sent
// after a refused request is never read (on HTTP/2, the streams it opened
// after are never started), and the answers written before the close have
// grace to leave. A Read under way when hangUp is called ends as it would
// have; none starts after.
func (c *guardConn) hangUp(grace time.Duration) {
	c.hangUpOnce.Do(func() {
		close(c.hungUp)
		time.AfterFunc(grace, func() { c.Close() })
	})
}

func (c *guardConn) Close() error {
	c.unlist() // off the list either way
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

type connKey struct{}

// withConn is the http.Server's ConnContext: requests carry their
// connection, for markAuthenticated.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// guardOf returns the guarded connection a request came on, or nil when
// the server does not serve a GuardListener.
func guardOf(ctx context.Context) *guardConn {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	gc, _ := c.(*guardConn)
	return gc
}

// markAuthenticated takes the connection of a request that carried the
// token off the guard's list.
func markAuthenticated(ctx context.Context) {
	if gc := guardOf(ctx); gc != nil {
		gc.authenticated()
	}
}

// refusing marks the connection of r, a request being refused, and hangs
// it up at once if it is an HTTP/2 connection that has not carried the
// token (see hangUpRefused). It reports whether this is the connection's
// first refusal, the one to log: a client can make one line per
// connection, not one per stream.
func refusing(r *http.Request) (first bool) {
	c := guardOf(r.Context())
	if c == nil {
		return true
	}
	first = !c.refused.Swap(true)
	if r.ProtoMajor >= 2 && !c.authed.Load() {
		c.hangUp(hangUpGrace)
	}
	return first
}
