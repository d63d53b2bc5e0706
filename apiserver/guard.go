package apiserver

import (
	"container/list"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxUnauthenticated is how many connections may be open at once
// that have not yet made a request with the token.
const DefaultMaxUnauthenticated = 256

// GuardListener wraps ln so that at most max connections are open that
// have not yet made a request with the token (max <= 0: the default);
// when one more arrives, the oldest of them is closed. Idle sockets opened
// by someone without the token then cannot use up the daemon's file
// descriptors and lock real clients out: a client's connection
// authenticates with its first request, within milliseconds. Serve the
// listener with a server from NewServer, which marks connections
// authenticated, and ends an HTTP/2 connection that never carried the
// token at its first refused request (see NewServer).
func GuardListener(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		max = DefaultMaxUnauthenticated
	}
	return &guardListener{Listener: ln, max: max, unauth: list.New()}
}

type guardListener struct {
	net.Listener
	max int

	mu     sync.Mutex
	unauth *list.List // of *guardConn, oldest first; guarded by mu
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
	}
	l.mu.Unlock()
	if evict != nil {
		evict.Close()
	}
	return gc, nil
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
