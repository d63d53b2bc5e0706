package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// envelopeSeqs returns the seqs of the whole SubscribeResponse envelopes
// at the start of b (gRPC's and Connect's streams frame them alike).
func envelopeSeqs(t *testing.T, b []byte) []int64 {
	t.Helper()
	var seqs []int64
	for len(b) >= 5 {
		n := int(binary.BigEndian.Uint32(b[1:5]))
		if b[0] != 0 || len(b) < 5+n {
			break // the end-of-stream message, or one cut short
		}
		var res v1.SubscribeResponse
		if err := proto.Unmarshal(b[5:5+n], &res); err != nil {
			t.Fatalf("an envelope that is not a SubscribeResponse: %v", err)
		}
		seqs = append(seqs, res.Event.Seq)
		b = b[5+n:]
	}
	return seqs
}

// resumeAfter subscribes to id after seq from with a well-behaved client
// and checks that every event up to last follows, gap-free: a client whose
// stream was ended loses nothing by subscribing again.
func resumeAfter(t *testing.T, td *daemontest.Daemon, id string, from, last int64) {
	t.Helper()
	url, httpc := td.Serve()
	c := claudectlv1connect.NewSessionServiceClient(httpc, url)
	ctx, cancel := context.WithCancel(td.Ctx)
	defer cancel()
	for {
		stream, err := c.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id, AfterSeq: from}))
		if err != nil {
			t.Fatal(err)
		}
		want := from + 1
		for want <= last && stream.Receive() {
			if got := stream.Msg().Event.Seq; got != want {
				t.Fatalf("resumed after seq %d: got seq %d, want %d", from, got, want)
			}
			want++
		}
		err = stream.Err()
		stream.Close()
		switch {
		case want > last:
			return
		case want == from+1 && connect.CodeOf(err) == connect.CodeResourceExhausted:
			// The daemon has not yet seen streamFreed's watch end.
			time.Sleep(20 * time.Millisecond)
		default:
			t.Fatalf("resumed after seq %d: the stream ended before seq %d: %v", from, want, err)
		}
	}
}

// streamFreed waits until the daemon, serving one stream at most
// (MaxStreams 1), accepts a new one: the stalled stream's handler has
// returned, and let go of what it held.
func streamFreed(t *testing.T, td *daemontest.Daemon) {
	t.Helper()
	url, httpc := td.Serve()
	c := claudectlv1connect.NewSessionServiceClient(httpc, url)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithCancel(td.Ctx)
		w, err := c.WatchSessions(ctx, connect.NewRequest(&v1.WatchSessionsRequest{}))
		ok := err == nil && w.Receive()
		if err == nil {
			err = w.Err()
			w.Close()
		}
		cancel()
		if ok {
			return
		}
		if connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Fatalf("a watch while the stalled stream should be gone: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the stalled stream was never ended: its handler still holds the daemon's only stream")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStalledStreamIsEnded: a Subscribe whose client stops reading is
// ended, however the client stalls, instead of holding the message it was
// being sent (and what was read to make it) for as long as the client
// keeps its connection; the log says why and where to resume, and a client
// that subscribes again from the last event it has loses nothing. With
// the large messages of these sessions (1 MB), the unsent bound ends it
// after the grace; with a bound above them, the write timeout does.
func TestStalledStreamIsEnded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		unsent int // daemon.stream_unsent_bytes (0: its default)
		bound  string
		stall  func(t *testing.T, addr, token, id string) (got func() []byte)
	}{
		// The client reads its socket but never opens its HTTP/2 window
		// past the first 64 KiB.
		{"h2-window", 0, "daemon.stream_unsent_bytes", stallH2Window},
		{"h2-window-timeout", 64 << 20, "daemon.stream_write_timeout", stallH2Window},
		// The client never reads its socket at all: the stream cannot even
		// be reset, the connection is closed.
		{"h2-socket", 0, "", stallH2Socket},
		// Connect's streaming over HTTP/1.1 (a browser's fetch), never read.
		{"http1", 0, "daemon.stream_unsent_bytes", stallHTTP1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs daemontest.LogBuffer
			// The write timeout is the grace (5 s) where the unsent bound
			// should end the stream, shorter where it is its own reason.
			timeout := 5 * time.Second
			if tc.bound == "daemon.stream_write_timeout" {
				timeout = 2 * time.Second
			}
			td, addr, id, last := stallDaemon(t, &daemontest.Options{MaxStreams: 1, StreamWriteTimeout: timeout,
				StreamUnsentBytes: tc.unsent, Log: &logs}, 4, 1<<20)
			got := tc.stall(t, addr, td.Token(), id)
			streamFreed(t, td)
			if l := logs.String(); tc.bound != "" && (!strings.Contains(l, "ended a stream whose client stopped reading") ||
				!strings.Contains(l, tc.bound) || !strings.Contains(l, "session="+id)) {
				t.Errorf("the log does not say the stream of session %s was ended by %s:\n%s", id, tc.bound, l)
			}
			seqs := envelopeSeqs(t, got())
			from := int64(0)
			for i, s := range seqs {
				if s != int64(i+1) {
					t.Fatalf("the stalled client got seqs %v, not 1..n", seqs)
				}
				from = s
			}
			if from >= last {
				t.Fatalf("the stalled client got every event (%d): it did not stall", from)
			}
			resumeAfter(t, td, id, from, last)
		})
	}
}

// stallH2Window reads the connection but never grants the stream more than
// its first 64 KiB; it waits for the server to reset the stream.
func stallH2Window(t *testing.T, addr, token, id string) func() []byte {
	data := untilReset(t, h2Open(t, &net.Dialer{}, addr, token, id, 65535))
	return func() []byte { return data }
}

// untilReset reads c, granting stream 1 nothing past its window, until
// the server resets the stream, and returns the stream's data.
func untilReset(t *testing.T, c net.Conn) []byte {
	t.Helper()
	var data bytes.Buffer
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		f, err := h2ReadFrame(br)
		if err != nil {
			t.Fatalf("no RST_STREAM before %v (%d bytes of data read)", err, data.Len())
		}
		switch {
		case f.typ == h2Settings && f.flags&0x1 == 0:
			c.Write(h2AppendFrame(nil, h2Frame{typ: h2Settings, flags: 0x1}))
		case f.typ == h2Data && f.stream == 1:
			data.Write(f.payload)
		case f.typ == h2RSTStream && f.stream == 1:
			return data.Bytes()
		case f.typ == h2Headers && f.stream == 1 && f.flags&h2EndStream != 0:
			t.Fatalf("the stream ended with trailers after %d bytes: the client read it all", data.Len())
		}
	}
}

// TestStalledWatchIsEnded: WatchPending, whose snapshot holds what waits
// for a person (a Write of 1 MB here), is ended for a client that stops
// reading as Subscribe is; a client that watches again gets the request.
func TestStalledWatchIsEnded(t *testing.T) {
	var logs daemontest.LogBuffer
	content := strings.Repeat("x", 1<<20)
	td := daemontest.Start(t, &daemontest.Options{StreamWriteTimeout: 5 * time.Second, Log: &logs,
		Transport: &daemontest.InProcessCLI{Script: func(int) [][]byte {
			return [][]byte{bigTurn(0, 0)[0], fmt.Appendf(nil, `{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Write","input":{"file_path":"/tmp/big.txt","content":%q},"tool_use_id":"toolu_1"}}`, content)}
		}}})
	url, httpc := td.Serve()
	s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "go")
	if err != nil {
		t.Fatal(err)
	}
	perms := claudectlv1connect.NewPermissionServiceClient(httpc, url)
	pending := func() int {
		res, err := perms.ListPending(td.Ctx, connect.NewRequest(&v1.ListPendingRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Msg.Requests)
	}
	for deadline := time.Now().Add(60 * time.Second); pending() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the Write of session " + s.ID + " never waited for a person")
		}
	}
	addr := strings.TrimPrefix(url, "http://")
	untilReset(t, h2Call(t, &net.Dialer{}, addr, td.Token(), "/claudectl.v1.PermissionService/WatchPending", emptyGRPCMessage, 65535))
	if l := logs.String(); !strings.Contains(l, "ended a stream whose client stopped reading") || !strings.Contains(l, "call=PermissionService/WatchPending") {
		t.Errorf("the log does not say the watch was ended:\n%s", l)
	}
	w, err := perms.WatchPending(td.Ctx, connect.NewRequest(&v1.WatchPendingRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !w.Receive() || len(w.Msg().Requests) != 1 || w.Msg().Requests[0].ToolName != "Write" {
		t.Fatalf("watching again: %v %v", w.Msg(), w.Err())
	}
}

// stallH2Socket grants the stream every byte but never reads the socket;
// once the daemon let the stream go, it reads what the socket held.
func stallH2Socket(t *testing.T, addr, token, id string) func() []byte {
	c := h2Open(t, smallReceiveBuffer, addr, token, id, 1<<31-1)
	return func() []byte {
		var data bytes.Buffer
		br := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			f, err := h2ReadFrame(br)
			if err != nil {
				return data.Bytes()
			}
			if f.typ == h2Data && f.stream == 1 {
				data.Write(f.payload)
			}
		}
	}
}

// stallHTTP1 makes a Connect streaming call over HTTP/1.1 and never reads
// the answer; once the daemon let the stream go, it reads what the socket
// held.
func stallHTTP1(t *testing.T, addr, token, id string) func() []byte {
	c, err := smallReceiveBuffer.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	body := subscribeRequest(t, id)
	fmt.Fprintf(c, "POST /claudectl.v1.SessionService/Subscribe HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/connect+proto\r\nConnect-Protocol-Version: 1\r\nContent-Length: %d\r\n\r\n", addr, token, len(body))
	c.Write(body)
	return func() []byte {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		b, _ := io.ReadAll(res.Body) // cut short: the daemon closed the connection
		return b
	}
}
