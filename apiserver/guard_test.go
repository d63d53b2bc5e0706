package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/claudectl/claudectl/apiserver"
)

// TestIdleStrangersCannotLockClientsOut opens many connections that never
// send the token (silent ones, and ones that got a 401): they neither use
// up the daemon nor keep a real client out, and the oldest are closed.
func TestIdleStrangersCannotLockClientsOut(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	hs, err := apiserver.NewServer("127.0.0.1:0", ok, &apiserver.ServerOptions{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := apiserver.GuardListener(inner, &apiserver.GuardOptions{Max: 16, Logger: slog.New(slog.DiscardHandler)})
	served := make(chan struct{})
	go func() { defer close(served); hs.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		<-served
	}()
	addr := ln.Addr().String()

	// A client that authenticates keeps its connection through the flood.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func() error {
		req, _ := http.NewRequest("POST", "http://"+addr+"/x", nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			return errors.New(res.Status)
		}
		return nil
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}

	var strangers []net.Conn
	for i := range 200 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("stranger %d: %v", i, err)
		}
		defer c.Close()
		if i%2 == 0 { // a request without the token: 401, then the server hangs up
			io.WriteString(c, "POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
		}
		strangers = append(strangers, c)
	}
	if err := get(); err != nil {
		t.Fatalf("an authenticated client after 200 strangers: %v", err)
	}
	// A new client connects and authenticates despite the strangers.
	tr.CloseIdleConnections()
	if err := get(); err != nil {
		t.Fatalf("a new client after 200 strangers: %v", err)
	}
	closed := 0
	for _, c := range strangers {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 4096)
		for {
			_, err := c.Read(buf)
			if err == nil {
				continue // the 401
			}
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				closed++
			}
			break
		}
	}
	// At most 16 silent ones stay open (the newest); the 401s were all closed.
	if closed < 200-16 {
		t.Errorf("%d of 200 strangers' connections closed, want at least %d", closed, 200-16)
	}
}

// pipeListener accepts the server ends of net.Pipe pairs, each with its
// own remote address: a listener a synctest bubble can wait on.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// dial connects a client from remote and returns its end.
func (l *pipeListener) dial(remote string) net.Conn {
	client, server := net.Pipe()
	l.conns <- remoteConn{server, remote}
	return client
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr("listener") }

type remoteConn struct {
	net.Conn
	remote string
}

func (c remoteConn) RemoteAddr() net.Addr { return pipeAddr(c.remote) }

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }

// TestEvictionsLogged: connections closed for going over the limit are
// logged, at Warn, in at most one line a minute that counts them, names
// where the latest closed came from and the setting that raises the limit; a
// flood makes a line a minute, not one per connection, and none is lost.
// Before, nothing was logged: an operator never learnt of the flood.
func TestEvictionsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		inner := newPipeListener()
		ln := apiserver.GuardListener(inner, &apiserver.GuardOptions{Max: 4, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		defer ln.Close()
		go func() { // the server's ends: pipes, which need no closing
			for {
				if _, err := ln.Accept(); err != nil {
					return
				}
			}
		}()
		var clients []net.Conn
		open := func(n int, from string) {
			for i := range n {
				clients = append(clients, inner.dial(fmt.Sprintf("%s:%d", from, i)))
			}
			synctest.Wait()
		}
		defer func() {
			for _, c := range clients {
				c.Close()
			}
		}()
		type line struct {
			Level, Msg, Fix, Reason string
			Closed                  int
			Limit                   int
			LatestRemote            string `json:"latest_remote"`
		}
		lines := func() []line {
			var out []line
			for l := range strings.Lines(logs.String()) {
				var v line
				if err := json.Unmarshal([]byte(l), &v); err != nil {
					t.Fatalf("%q: %v", l, err)
				}
				out = append(out, v)
			}
			return out
		}

		open(4, "10.0.0.1") // at the limit: nothing closed
		if got := lines(); len(got) != 0 {
			t.Fatalf("logged at the limit: %+v", got)
		}
		open(1, "10.0.0.2") // one over: the oldest closed, and said at once
		got := lines()
		if len(got) != 1 || got[0].Level != "WARN" || got[0].Closed != 1 || got[0].Limit != 4 || got[0].LatestRemote != "10.0.0.1:0" ||
			!strings.Contains(got[0].Fix, "daemon.max_unauthenticated_connections") {
			t.Fatalf("after one eviction: %+v; want one Warn line, closed 1, latest from 10.0.0.1:0, naming the setting", got)
		}
		if _, err := clients[0].Read(make([]byte, 1)); err == nil {
			t.Error("the oldest connection is still open")
		}

		// A flood within the minute: no more lines until it has passed,
		// then one that counts them all. The last closed is the 996th
		// (the newest four stay).
		open(1000, "10.0.0.3")
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if got := lines(); len(got) != 1 {
			t.Fatalf("%d lines within a minute of 1,001 evictions, want 1", len(got))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		got = lines()
		if len(got) != 2 || got[1].Closed != 1000 || got[1].LatestRemote != "10.0.0.3:995" {
			t.Fatalf("a minute after the first line: %+v; want a second line, closed 1000, latest from 10.0.0.3:995", got)
		}

		// Quiet for a while: the next eviction is said at once again.
		time.Sleep(10 * time.Minute)
		open(1, "10.0.0.4")
		if got = lines(); len(got) != 3 || got[2].Closed != 1 || got[2].LatestRemote != "10.0.0.3:996" {
			t.Fatalf("an eviction after a quiet time: %+v; want a third line at once", got)
		}

		// One more within the minute, then the listener closes: its line
		// is written then, not lost.
		open(1, "10.0.0.5")
		ln.Close()
		if got = lines(); len(got) != 4 || got[3].Closed != 1 {
			t.Fatalf("evictions pending at Close: %+v; want a fourth line, closed 1", got)
		}
	})
}
