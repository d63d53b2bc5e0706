package apiserver_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// BenchmarkStalledStreams measures what clients that open a Subscribe and
// never read it cost the daemon: 200 of them, from seq 0, on a session
// holding four 2 MB assistant messages (the figure: 12 MB each).
// Half stall on HTTP/2's window (they read their socket, never grant more
// than 64 KiB), half never read their socket at all. It reports the heap
// per stalled stream once every stream has stalled ("held") and once the
// daemon has ended them, or 60 s later ("after"; the target is ≤ 256 KB),
// and the time a well-behaved client takes to read another session's log
// (200 small events) with and without the crowd: other clients' latency
// must not change. The heap is this process's: the stalled clients keep
// nothing of what they read.
//
//	go test -run '^$' -bench StalledStreams -benchtime 1x ./apiserver/
func BenchmarkStalledStreams(b *testing.B) {
	const streams = 200
	for range b.N {
		td, addr, id, _ := stallDaemon(b, &daemontest.Options{}, 4, 2<<20)
		other := otherSession(b, td)
		url, httpc := td.Serve()
		sessions := claudectlv1connect.NewSessionServiceClient(httpc, url)
		baseline := readLogTimes(b, td.Ctx, sessions, other)

		heap0 := heapAfterGC()
		var stalled sync.WaitGroup
		var endedN atomic.Int64
		for i := range streams {
			stalled.Add(1)
			if i%2 == 0 {
				go windowStaller(b, addr, td.Token(), id, stalled.Done, func() { endedN.Add(1) })
			} else {
				go socketStaller(b, addr, td.Token(), id, stalled.Done)
			}
		}
		stalled.Wait()
		stalledAt := time.Now()
		// Stalled: what the daemon holds for them now.
		held := heapAfterGC()
		crowd := readLogTimes(b, td.Ctx, sessions, other)
		// Then what it holds once it has ended them all (the socket
		// stallers cannot see it: their handlers tell), or after 60 s.
		deadline := time.Now().Add(60 * time.Second)
		for subscribeHandlers() > 0 && time.Now().Before(deadline) {
			time.Sleep(250 * time.Millisecond)
		}
		endedIn := time.Since(stalledAt)
		left := subscribeHandlers()
		after := heapAfterGC()
		perStream := func(h uint64) float64 { return float64(int64(h)-int64(heap0)) / streams / 1024 }
		b.ReportMetric(perStream(held), "KB-held/stream")
		b.ReportMetric(perStream(after), "KB-after/stream")
		b.ReportMetric(float64(endedN.Load()), "window-streams-reset")
		b.ReportMetric(ms(baseline), "ms-other-client-alone")
		b.ReportMetric(ms(crowd), "ms-other-client-with-crowd")
		b.ReportMetric(float64(left), "streams-left")
		b.ReportMetric(endedIn.Seconds(), "s-until-ended")
		b.Logf("heap %d MB → %d MB stalled → %d MB after; RSS %s; %d of %d window-stalled streams reset by the daemon; %d streams still served after %s",
			heap0>>20, held>>20, after>>20, rss(), endedN.Load(), streams/2, left, endedIn.Round(time.Second))
	}
}

// subscribeHandlers counts the Subscribe handlers running in this process.
func subscribeHandlers() int {
	buf := make([]byte, 16<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "apiserver.(*Service).Subscribe(")
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func rss() string {
	b, _ := os.ReadFile("/proc/self/status")
	for l := range strings.Lines(string(b)) {
		if strings.HasPrefix(l, "VmRSS:") {
			return strings.Join(strings.Fields(l)[1:], " ")
		}
	}
	return "?"
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// otherSession makes a session of 200 small events for the well-behaved
// client to read.
func otherSession(b *testing.B, td *daemontest.Daemon) string {
	s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: b.TempDir()}, "go")
	if err != nil {
		b.Fatal(err)
	}
	for ev, err := range td.D.Subscribe(td.Ctx, s.ID, 0) {
		if err != nil {
			b.Fatal(err)
		}
		if st, ok := ev.Body.(*daemon.StatusChange); ok && st.Status == "idle" && ev.Seq > 2 {
			break
		}
	}
	return s.ID
}

// readLogTimes returns the median time, over 20 reads, a client takes to
// subscribe to id and read its log to the last stored event.
func readLogTimes(b *testing.B, ctx context.Context, c claudectlv1connect.SessionServiceClient, id string) time.Duration {
	res, err := c.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if err != nil {
		b.Fatal(err)
	}
	last := res.Msg.Session.LastSeq
	var times []time.Duration
	for range 20 {
		start := time.Now()
		sctx, cancel := context.WithCancel(ctx)
		stream, err := c.Subscribe(sctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
		if err != nil {
			b.Fatal(err)
		}
		for stream.Receive() && stream.Msg().Event.Seq < last {
		}
		times = append(times, time.Since(start))
		stream.Close()
		cancel()
	}
	slices.Sort(times)
	return times[len(times)/2]
}

// windowStaller subscribes on its own connection, reads the socket but
// grants the stream no more than its first 64 KiB, discarding what it
// reads; it calls stalled once that window is used up and ended when the
// server resets the stream or closes the connection.
func windowStaller(b *testing.B, addr, token, id string, stalled, ended func()) {
	c := h2Open(b, &net.Dialer{}, addr, token, id, 65535)
	br := bufio.NewReader(c)
	n, once := 0, sync.OnceFunc(stalled)
	defer once()
	for {
		f, err := h2ReadFrame(br)
		if err != nil {
			ended()
			return
		}
		switch {
		case f.typ == h2Settings && f.flags&0x1 == 0:
			c.Write(h2AppendFrame(nil, h2Frame{typ: h2Settings, flags: 0x1}))
		case f.typ == h2Data && f.stream == 1:
			if n += len(f.payload); n >= 65535 {
				once()
			}
		case f.typ == h2RSTStream && f.stream == 1:
			ended()
			return
		}
	}
}

// socketStaller subscribes on its own connection, granting every byte,
// and never reads its socket; it says it has stalled once the server has
// had a second to fill the socket. Whether the server closed the
// connection cannot be seen without reading it: the heap tells.
func socketStaller(b *testing.B, addr, token, id string, stalled func()) {
	h2Open(b, smallReceiveBuffer, addr, token, id, 1<<31-1)
	time.Sleep(time.Second)
	stalled()
}

// bigTurn is a turn of the in-process CLI: its init, n assistant messages
// of about size bytes each, and a result.
func bigTurn(n, size int) [][]byte {
	const sid = `"session_id":"$SESSION_ID"`
	lines := [][]byte{fmt.Appendf(nil, `{"type":"system","subtype":"init",%s,"model":"stand-in","tools":["Bash"],"cwd":"/","permissionMode":"default","claude_code_version":"2.1.330"}`, sid)}
	text := strings.Repeat("All work and no play makes Jack a dull boy. ", size/45)
	for i := range n {
		lines = append(lines, fmt.Appendf(nil, `{"type":"assistant","message":{"id":"m%d","type":"message","role":"assistant","model":"stand-in","content":[{"type":"text","text":%q}],"usage":{"input_tokens":1,"output_tokens":1}},"parent_tool_use_id":null,%s,"uuid":"a%d"}`, i, text, sid, i))
	}
	return append(lines, fmt.Appendf(nil, `{"type":"result","subtype":"success","is_error":false,"result":"ok",%s,"total_cost_usd":0.001,"duration_ms":1,"num_turns":1}`, sid))
}

// stallDaemon runs a daemon with one idle session whose log holds n
// assistant messages of size bytes, and returns it, its address and the
// session's id and last seq.
func stallDaemon(t testing.TB, opts *daemontest.Options, n, size int) (td *daemontest.Daemon, addr, id string, last int64) {
	t.Helper()
	var first atomic.Bool // the first session's turn is large, any other's small (200 events)
	opts.Transport = &daemontest.InProcessCLI{Script: func(int) [][]byte {
		if first.CompareAndSwap(false, true) {
			return bigTurn(n, size)
		}
		return bigTurn(200, 100)
	}}
	td = daemontest.Start(t, opts)
	url, _ := td.Serve()
	s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "go")
	if err != nil {
		t.Fatal(err)
	}
	sawResult := false
	for ev, err := range td.D.Subscribe(td.Ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		sawResult = sawResult || ev.Type == "result"
		if st, ok := ev.Body.(*daemon.StatusChange); ok && sawResult && st.Status == "idle" {
			last = ev.Seq
			break
		}
	}
	if last == 0 {
		t.Fatal("the session did not become idle after its result")
	}
	return td, strings.TrimPrefix(url, "http://"), s.ID, last
}

// subscribeRequest is the enveloped message of a Subscribe request.
func subscribeRequest(t testing.TB, id string) []byte {
	t.Helper()
	msg, err := proto.Marshal(&v1.SubscribeRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
}

// smallReceiveBuffer dials with a 4 KiB receive buffer, so that a client
// that never reads fills the connection after a few hundred KB.
var smallReceiveBuffer = &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	return errors.Join(err, serr)
}}

// h2Open opens an h2c connection on which the client announces a
// stream window of window bytes, and starts a Subscribe to id on stream 1.
func h2Open(t testing.TB, dial *net.Dialer, addr, token, id string, window uint32) net.Conn {
	return h2Call(t, dial, addr, token, "/claudectl.v1.SessionService/Subscribe", subscribeRequest(t, id), window)
}

// h2Call opens an h2c connection on which the client announces a stream
// window of window bytes, and starts a gRPC call of path, with the
// enveloped request body, on stream 1.
func h2Call(t testing.TB, dial *net.Dialer, addr, token, path string, body []byte, window uint32) net.Conn {
	t.Helper()
	c, err := dial.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	settings := binary.BigEndian.AppendUint16(nil, 0x4) // SETTINGS_INITIAL_WINDOW_SIZE
	settings = binary.BigEndian.AppendUint32(settings, window)
	b := h2AppendFrame([]byte(h2ClientPrface), h2Frame{typ: h2Settings, payload: settings})
	if window > 65535 { // the connection's window too
		b = h2AppendFrame(b, h2Frame{typ: 0x8, payload: binary.BigEndian.AppendUint32(nil, window-65535)})
	}
	b = h2AppendFrame(b, h2Frame{typ: h2Headers, flags: h2EndHeaders, stream: 1, payload: grpcCall(path, addr, "Bearer "+token)})
	b = h2AppendFrame(b, h2Frame{typ: h2Data, flags: h2EndStream, stream: 1, payload: body})
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	return c
}
