package apiserver_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/apiserver"
)

// A raw h2c client: frames written and read by hand, so that a test sends
// exactly what an attacker would (a thousand HEADERS in one write, no
// waiting for answers) and sees every frame the server sends back.

// HTTP/2 frame types and flags (RFC 9113 §6).
const (
	h2Data         = 0x0
	h2Headers      = 0x1
	h2RSTStream    = 0x3
	h2Settings     = 0x4
	h2GoAway       = 0x7
	h2EndStream    = 0x1
	h2EndHeaders   = 0x4
	h2ClientPrface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
)

type h2Frame struct {
	typ, flags byte
	stream     uint32
	payload    []byte
}

func h2AppendFrame(b []byte, f h2Frame) []byte {
	n := len(f.payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), f.typ, f.flags)
	b = binary.BigEndian.AppendUint32(b, f.stream)
	return append(b, f.payload...)
}

func h2ReadFrame(r io.Reader) (h2Frame, error) {
	var h [9]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return h2Frame{}, err
	}
	f := h2Frame{typ: h[3], flags: h[4], stream: binary.BigEndian.Uint32(h[5:]) & (1<<31 - 1)}
	f.payload = make([]byte, int(h[0])<<16|int(h[1])<<8|int(h[2]))
	_, err := io.ReadFull(r, f.payload)
	return f, err
}

// hpackInt appends v with an n-bit prefix whose high bits are first's
// (RFC 7541 §5.1).
func hpackInt(b []byte, first byte, n uint, v int) []byte {
	max := 1<<n - 1
	if v < max {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(max))
	for v -= max; v >= 128; v >>= 7 {
		b = append(b, byte(v%128)|0x80)
	}
	return append(b, byte(v))
}

// hpackBlock encodes fields as literals without indexing, new names, no
// Huffman (RFC 7541 §6.2.2): no table state to keep.
func hpackBlock(fields ...string) []byte {
	var b []byte
	for i := 0; i+1 < len(fields); i += 2 {
		b = append(b, 0)
		b = hpackInt(b, 0, 7, len(fields[i]))
		b = append(b, fields[i]...)
		b = hpackInt(b, 0, 7, len(fields[i+1]))
		b = append(b, fields[i+1]...)
	}
	return b
}

// grpcCall is the header block of a gRPC call of path to host with
// authorization auth ("" for none).
func grpcCall(path, host, auth string) []byte {
	f := []string{":method", "POST", ":scheme", "http", ":path", path,
		":authority", host, "content-type", "application/grpc", "te", "trailers"}
	if auth != "" {
		f = append(f, "authorization", auth)
	}
	return hpackBlock(f...)
}

// emptyGRPCMessage is the DATA of a gRPC request with an empty message.
var emptyGRPCMessage = []byte{0, 0, 0, 0, 0}

// h2Answers is what the server sent on one connection until it closed it.
type h2Answers struct {
	headers   map[uint32]int  // HEADERS frames per stream
	status200 map[uint32]bool // streams answered 200 (":status" indexed)
	resets    int             // RST_STREAM frames
	goAways   int
	lastID    uint32        // of the last GOAWAY
	closedIn  time.Duration // from the first answer to the close (EOF)
	closed    bool          // the server closed the connection (within the read deadline)
	firstSeen time.Time
}

// h2Dial opens an h2c connection and sends the preface and an empty
// SETTINGS.
func h2Dial(addr string) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(h2AppendFrame([]byte(h2ClientPrface), h2Frame{typ: h2Settings})); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// h2Read reads frames until the server closes c or until wait has passed
// since the read began, and counts them.
func h2Read(c net.Conn, wait time.Duration) h2Answers {
	a := h2Answers{headers: map[uint32]int{}, status200: map[uint32]bool{}}
	c.SetReadDeadline(time.Now().Add(wait))
	br := bufio.NewReader(c)
	for {
		f, err := h2ReadFrame(br)
		if err != nil {
			var ne net.Error
			a.closed = !(errors.As(err, &ne) && ne.Timeout())
			if a.closed && !a.firstSeen.IsZero() {
				a.closedIn = time.Since(a.firstSeen)
			}
			return a
		}
		switch f.typ {
		case h2Headers:
			if a.firstSeen.IsZero() {
				a.firstSeen = time.Now()
			}
			a.headers[f.stream]++
			if a.headers[f.stream] == 1 && len(f.payload) > 0 && f.payload[0] == 0x88 { // HPACK static entry 8
				a.status200[f.stream] = true
			}
		case h2RSTStream:
			a.resets++
		case h2GoAway:
			a.goAways++
			a.lastID = binary.BigEndian.Uint32(f.payload) & (1<<31 - 1)
		}
	}
}

// guarded serves h through NewServer with the token "s3cret" on a
// GuardListener until the test ends, logging to logs, and returns the
// address.
func guarded(t *testing.T, h http.Handler, logs io.Writer) string {
	t.Helper()
	hs, err := apiserver.NewServer("127.0.0.1:0", h, &apiserver.ServerOptions{Token: "s3cret", WorkerToken: "w0rker",
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, hs, apiserver.GuardListener(inner, nil))
}

// floodHandler counts the requests it serves. A worker's request with a
// wrong token is refused before it, and logged once a connection, by the
// server (the worker listener behind it is never asked).
func floodHandler(served *atomic.Int64, _ io.Writer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.WriteHeader(200)
	})
}

// TestHTTP2RefusalHangsUp: a thousand streams opened at once on one h2c
// connection without the token (or with a wrong one, a Host the daemon
// does not answer to, a wrong worker token) are never served, the
// connection is read no further after the first refusal and closed within
// a fraction of a second, and the log has one line for it. Before, the
// refusal's graceful GOAWAY still answered every stream already read (up
// to 250, each 403 logged: 3,600 lines for 20 such connections), went on
// reading and decoding what the client sent, and closed the connection a
// second after its last stream.
func TestHTTP2RefusalHangsUp(t *testing.T) {
	for _, tc := range []struct {
		name, path, host, auth, logged string
	}{
		{"no token", "/claudectl.v1.HealthService/Health", "", "", ""},
		{"wrong token", "/claudectl.v1.HealthService/Health", "", "Bearer wrong", ""},
		{"bad Host", "/claudectl.v1.HealthService/Health", "evil.example", "Bearer s3cret", "refused a request"},
		{"wrong worker token", apiserver.WorkerPath, "", "Bearer wrong", "worker connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			var served atomic.Int64
			addr := guarded(t, floodHandler(&served, &logs), &logs)
			host := tc.host
			if host == "" {
				host = addr
			}
			c, err := h2Dial(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const n = 1000
			var b []byte
			block := grpcCall(tc.path, host, tc.auth)
			for i := range n {
				id := uint32(2*i + 1)
				b = h2AppendFrame(b, h2Frame{typ: h2Headers, flags: h2EndHeaders, stream: id, payload: block})
				b = h2AppendFrame(b, h2Frame{typ: h2Data, flags: h2EndStream, stream: id, payload: emptyGRPCMessage})
			}
			go c.Write(b) // stops when the server closes
			a := h2Read(c, 10*time.Second)
			if served.Load() != 0 {
				t.Errorf("%d of %d streams served", served.Load(), n)
			}
			if len(a.headers) == 0 {
				t.Errorf("no stream answered: the refusal did not reach the client")
			}
			if !a.closed || a.closedIn > 600*time.Millisecond {
				t.Errorf("connection closed %v, %v after the first answer (%d streams answered); want closed within 0.6 s",
					a.closed, a.closedIn, len(a.headers))
			}
			if got := strings.Count(logs.String(), "\n"); tc.logged != "" && got != 1 || tc.logged == "" && got != 0 {
				t.Errorf("%d log lines, want %d:\n%.1000s", got, min(len(tc.logged), 1), logs.String())
			}
			if !strings.Contains(logs.String(), tc.logged) {
				t.Errorf("log lacks %q", tc.logged)
			}
		})
	}

	// Twenty such connections at once: one line each.
	var logs syncBuffer
	var served atomic.Int64
	addr := guarded(t, floodHandler(&served, &logs), &logs)
	var b []byte
	block := grpcCall("/claudectl.v1.HealthService/Health", "evil.example", "")
	for i := range 1000 {
		b = h2AppendFrame(b, h2Frame{typ: h2Headers, flags: h2EndHeaders | h2EndStream, stream: uint32(2*i + 1), payload: block})
	}
	const conns = 20
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			c, err := h2Dial(addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			go c.Write(b)
			if a := h2Read(c, 10*time.Second); !a.closed {
				t.Error("a connection not closed after its refusal")
			}
		})
	}
	wg.Wait()
	if got := strings.Count(logs.String(), "\n"); got != conns || served.Load() != 0 {
		t.Errorf("%d connections of 1,000 streams with a bad Host: %d log lines, %d served; want %d, 0", conns, got, served.Load(), conns)
	}
}

// TestHTTP2RefusedClientToldWhy: a client with a wrong token over h2c
// (gRPC and Connect) is told so, Unauthenticated, although its connection
// is hung up: the answer leaves before the close.
func TestHTTP2RefusedClientToldWhy(t *testing.T) {
	var served atomic.Int64
	addr := guarded(t, floodHandler(&served, io.Discard), io.Discard)
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	defer h2c.CloseIdleConnections()
	hc := &http.Client{Transport: h2c, Timeout: 10 * time.Second}
	for name, opts := range map[string][]connect.ClientOption{"gRPC": {connect.WithGRPC()}, "Connect": nil} {
		client := claudectlv1connect.NewHealthServiceClient(hc, "http://"+addr, opts...)
		for i := range 10 {
			req := connect.NewRequest(&v1.HealthRequest{})
			req.Header().Set("Authorization", "Bearer wrong")
			_, err := client.Health(context.Background(), req)
			if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "missing or bad bearer token") {
				t.Errorf("%s call %d with a wrong token over h2c: %v; want Unauthenticated", name, i, err)
			}
		}
	}
}

// TestHTTP2RefusalOnAuthenticatedConnection: on a connection that carried
// the token, a stream without it is refused, and the connection shut down
// gracefully: the client's stream already open finishes (deliberately: a
// client's own mistake, a page with an old token in one tab, does not cut
// its other calls), no new stream starts on it, and then it closes.
func TestHTTP2RefusalOnAuthenticatedConnection(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var served atomic.Int64
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		close(started)
		<-release
		w.WriteHeader(200)
	})
	var logs syncBuffer
	addr := guarded(t, slow, &logs)
	c, err := h2Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(id uint32, auth string) {
		t.Helper()
		var b []byte
		b = h2AppendFrame(b, h2Frame{typ: h2Headers, flags: h2EndHeaders, stream: id, payload: grpcCall("/x", addr, auth)})
		b = h2AppendFrame(b, h2Frame{typ: h2Data, flags: h2EndStream, stream: id, payload: emptyGRPCMessage})
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	send(1, "Bearer s3cret")
	<-started
	send(3, "Bearer wrong")
	time.Sleep(hangUpGraceForTest) // were the connection hung up, it would close now
	send(5, "Bearer s3cret")       // after the GOAWAY: never started
	close(release)
	a := h2Read(c, 10*time.Second)
	// Stream 3's refusal is gRPC's: HTTP 200 with grpc-status 16; it was
	// not served.
	if !a.status200[1] || a.headers[3] == 0 || a.headers[5] != 0 || served.Load() != 1 {
		t.Errorf("stream 1 (token, open) answered 200: %v; stream 3 (wrong token) answered %d; stream 5 (after) answered %d; served %d; want 200, a refusal, nothing, 1",
			a.status200[1], a.headers[3], a.headers[5], served.Load())
	}
	if a.goAways == 0 || a.lastID != 3 || !a.closed {
		t.Errorf("%d GOAWAY, last stream %d, closed %v; want a GOAWAY at stream 3, then the close", a.goAways, a.lastID, a.closed)
	}
}

// hangUpGraceForTest is longer than the grace a hung-up connection has.
const hangUpGraceForTest = 300 * time.Millisecond
