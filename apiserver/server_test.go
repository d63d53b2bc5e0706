package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/apiserver"
)

// syncBuffer is a bytes.Buffer that the server's goroutines may write while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve serves hs on a fresh loopback port (with TLS when hs has a
// TLSConfig) until the test ends, and returns its address.
func serve(t *testing.T, hs *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, hs, ln)
}

// serveOn serves hs on ln until the test ends, and returns ln's address.
func serveOn(t *testing.T, hs *http.Server, ln net.Listener) string {
	served := make(chan struct{})
	go func() {
		defer close(served)
		if hs.TLSConfig != nil {
			hs.ServeTLS(ln, "", "")
		} else {
			hs.Serve(ln)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		// What Shutdown left open goes too: an HTTP/2 connection still
		// counted active when its time ran out outlived the test (seen by
		// goleak once in make test, at the package's end, with both its
		// ends alive a minute on).
		hs.Close()
		<-served
	})
	return ln.Addr().String()
}

// TestHTTPMessagesGoToTheLogger: net/http's own messages (here the TLS
// handshake error a plaintext client causes, which a stranger can cause
// once per connection) go to the daemon's logger, in its format, at
// Debug, not to the standard logger in plain text.
func TestHTTPMessagesGoToTheLogger(t *testing.T) {
	ts := httptest.NewTLSServer(http.NotFoundHandler()) // for its certificate
	cert := ts.TLS.Certificates[0]
	ts.Close()
	var logs syncBuffer
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	hs, err := apiserver.NewServer("127.0.0.1:0", ok, &apiserver.ServerOptions{
		TLS:    &tls.Config{Certificates: []tls.Certificate{cert}},
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, hs)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") // plaintext to a TLS port
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	io.Copy(io.Discard, c) // until the server hangs up, having logged
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "TLS handshake error") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var line struct{ Level, Msg string }
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "TLS handshake error") {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("not a line of the JSON logger: %q: %v", l, err)
			}
		}
	}
	if line.Level != "DEBUG" || !strings.HasPrefix(line.Msg, "http: TLS handshake error from 127.0.0.1:") {
		t.Errorf("no Debug line of the handshake error in the daemon's log (got %+v):\n%s", line, logs.String())
	}
}

// TestBearerSchemeAnyCase: the scheme of "Authorization: Bearer TOKEN" is
// case-insensitive (RFC 7235), the token is not, and anything without the
// token is still refused.
func TestBearerSchemeAnyCase(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	hs, err := apiserver.NewServer("127.0.0.1:7777", ok, &apiserver.ServerOptions{Token: "s3cret", WorkerToken: "w0rker"})
	if err != nil {
		t.Fatal(err)
	}
	for auth, want := range map[string]int{
		"Bearer s3cret": 200, "bearer s3cret": 200, "BEARER s3cret": 200, "bEaReR s3cret": 200,
		"Bearer  s3cret": 200, // RFC 7235: 1*SP after the scheme
		"":               401, "Bearer": 401, "Bearer ": 401, "bearer ": 401, "Bearer S3CRET": 401, "bearer wrong": 401,
		"Bearer s3cret ": 401, "Bearers3cret": 401, "s3cret": 401, "Basic s3cret": 401, "Token s3cret": 401,
		"Bearer w0rker": 401, // the workers' token is not the API's
	} {
		r := httptest.NewRequest("POST", "/claudectl.v1.SessionService/ListSessions", nil)
		r.Host = "127.0.0.1:7777"
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		hs.Handler.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Authorization %q: status %d, want %d", auth, w.Code, want)
		}
	}
	// At the workers' path it is the other way round, and a refusal
	// never reaches the worker listener behind.
	for auth, want := range map[string]int{
		"Bearer w0rker": 200, "bearer w0rker": 200, "Bearer s3cret": 401, "": 401, "Bearer wrong": 401, "Basic w0rker": 401,
	} {
		r := httptest.NewRequest("GET", apiserver.WorkerPath, nil)
		r.Host = "127.0.0.1:7777"
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		hs.Handler.ServeHTTP(w, r)
		if w.Code != want || want == 401 && w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s with Authorization %q: status %d (WWW-Authenticate %q), want %d",
				apiserver.WorkerPath, auth, w.Code, w.Header().Get("WWW-Authenticate"), want)
		}
	}
}

// TestRefusalsClippedAndClosed: a client without a token that sends a
// huge Host, Origin or path gets a 403 and its connection closed, and the
// log line says so in bounded size, with the lengths of what it clipped.
func TestRefusalsClippedAndClosed(t *testing.T) {
	var logs syncBuffer
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	hs, err := apiserver.NewServer("127.0.0.1:0", ok, &apiserver.ServerOptions{Token: "s3cret",
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, hs)
	long := strings.Repeat("a", 30<<10)
	for _, tc := range []struct{ name, path, host, origin, clipped string }{
		{"Host", "/x", "evil-" + long + ".example", "", "evil-" + long + ".example"},
		{"path", "/" + long, "evil.example", "", "/" + long},
		{"Origin", "/x", addr, "http://" + long + ".example", "http://" + long + ".example"},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := "POST " + tc.path + " HTTP/1.1\r\nHost: " + tc.host + "\r\nContent-Length: 0\r\n"
		if tc.origin != "" {
			req += "Origin: " + tc.origin + "\r\n"
		}
		io.WriteString(c, req+"\r\n")
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 403 || !res.Close {
			t.Errorf("%s: %s, Connection %q; want 403 and close", tc.name, res.Status, res.Header.Get("Connection"))
		}
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("%s: the connection stays open after the 403: %v", tc.name, err)
		}
		if says := fmt.Sprintf("… (%d bytes)", len(tc.clipped)); !strings.Contains(logs.String(), says) {
			t.Errorf("%s: no log line gives the clipped value's length %q:\n%.2000s", tc.name, says, logs.String())
		}
	}
	for l := range strings.Lines(logs.String()) {
		if len(l) > 1500 {
			t.Errorf("a log line of %d bytes: %.300s…", len(l), l)
		}
	}
}
