package apiserver

import (
	"container/list"
	"context"
	"crypto/tls"
	"net"
	"sync"
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
// authenticated.
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
}

func (l *guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &guardConn{Conn: c, l: l}
	var evict *guardConn
	l.mu.Lock()
	gc.elem = l.unauth.PushBack(gc)
	if l.unauth.Len() > l.max {
		evict = l.unauth.Remove(l.unauth.Front()).(*guardConn)
		evict.elem = nil
	}
	l.mu.Unlock()
	if evict != nil {
		evict.Conn.Close()
	}
	return gc, nil
}

// authenticated takes c off the unauthenticated list.
func (c *guardConn) authenticated() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.elem != nil {
		c.l.unauth.Remove(c.elem)
		c.elem = nil
	}
}

func (c *guardConn) Close() error {
	c.authenticated() // off the list either way
	return c.Conn.Close()
}

type connKey struct{}

// withConn is the http.Server's ConnContext: requests carry their
// connection, for markAuthenticated.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// markAuthenticated takes the connection of a request that carried the
// token off the guard's list.
func markAuthenticated(ctx context.Context) {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*guardConn); ok {
		gc.authenticated()
	}
}
