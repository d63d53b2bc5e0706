package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claudetest"
)

// This file checks, end to end, what a kill -9 of "claudectl serve" in the
// middle of a streamed reply leaves behind: the stored log of the session is
// a gap-free prefix of what the CLI printed, and holds every event a client
// had already received.
//
// The daemon runs the CLI through a wrapper, which is this test binary
// itself (see init): it runs the real CLI and copies what the CLI prints on
// stdout to a file, the file first and then the daemon, so that the file
// holds at least every line the daemon could have read.

// Environment of the wrapper (set on the daemon, which passes it on).
const (
	wrapCLIEnv  = "CLAUDECTL_CRASH_WRAP_CLI"  // the real CLI; set, it makes this binary the wrapper
	wrapTeeEnv  = "CLAUDECTL_CRASH_WRAP_TEE"  // the file that gets a copy of the CLI's stdout
	wrapMarkEnv = "CLAUDECTL_CRASH_WRAP_MARK" // a token naming every process of one test, to find them in /proc
)

func init() {
	if cli := os.Getenv(wrapCLIEnv); cli != "" {
		// Pdeathsig follows the thread that started the child: keep main on
		// the main thread, which lives as long as the process.
		runtime.LockOSThread()
		os.Exit(runWrapper(cli, os.Getenv(wrapTeeEnv), os.Args[1:]))
	}
}

// runWrapper runs cli with args, its stdin and stderr ours, and copies its
// stdout to tee (unless it is only asked its version) and then to ours. The
// CLI gets SIGKILL when the wrapper dies (the daemon's own Pdeathsig kills
// the wrapper, not the CLI behind it), and the signals the wrapper gets are
// passed on.
func runWrapper(cli, tee string, args []string) int {
	cmd := exec.Command(cli, args...)
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash wrapper:", err)
		return 1
	}
	var f *os.File
	if tee != "" && !(len(args) == 1 && args[0] == "--version") {
		f, err = os.OpenFile(tee, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "crash wrapper:", err)
			return 1
		}
		defer f.Close()
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "crash wrapper:", err)
		return 1
	}
	go func() {
		for sig := range sigs {
			cmd.Process.Signal(sig)
		}
	}()
	buf := make([]byte, 64<<10)
	stdoutOK := true
	for {
		n, rerr := out.Read(buf)
		if n > 0 {
			if f != nil {
				if _, err := f.Write(buf[:n]); err != nil {
					fmt.Fprintln(os.Stderr, "crash wrapper:", err)
					cmd.Process.Kill()
					cmd.Wait()
					return 1
				}
			}
			if stdoutOK {
				// On a broken stdout keep draining the CLI into the file.
				_, err := os.Stdout.Write(buf[:n])
				stdoutOK = err == nil
			}
		}
		if rerr != nil {
			break
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "crash wrapper:", err)
	return 1
}

// TestCrashKillDaemonMidStream SIGKILLs "claudectl serve" while a session
// streams a long reply, restarts it on the same data directory and checks
// the stored log: seqs 1..n without a gap, every event a client received
// before the kill stored as received, and the stored CLI lines a prefix of
// what the CLI printed.
func TestCrashKillDaemonMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("builds claudectl and runs the daemon and the CLI")
	}
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // first registered: runs last

	cli := claudetest.CLIPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "claudectl")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	// A reply of three text blocks of 250 deltas each, one every 10 ms:
	// ~8 s of streaming, two events (stream_event, text_delta) per delta.
	var blocks []claudetest.Block
	for i := range 3 {
		blocks = append(blocks, claudetest.Text(strings.Repeat(fmt.Sprintf("block %d words ", i), 2000/14+1)[:2000]))
	}
	model := claudetest.NewServer(claudetest.Script(claudetest.Turn{Blocks: blocks, ChunkSize: 8, DeltaDelay: 10 * time.Millisecond}))
	t.Cleanup(model.Close)

	mark := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() { reapMarked(t, mark, 10*time.Second) }) // after the daemons' cleanups

	teePath := filepath.Join(tmp, "out.ndjson")
	dataDir := filepath.Join(tmp, "data")
	env := append(model.Env(filepath.Join(tmp, "home")),
		wrapCLIEnv+"="+cli, wrapTeeEnv+"="+teePath, wrapMarkEnv+"="+mark)
	if err := os.Mkdir(filepath.Join(tmp, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	httpc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(httpc.CloseIdleConnections)

	// First daemon: start a session and follow it.
	d1 := startServe(ctx, t, bin, self, dataDir, env, filepath.Join(tmp, "serve1.log"), httpc)
	res, err := d1.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir(), IncludePartialMessages: true},
		Prompt:  "Write at length, slowly."}))
	if err != nil {
		t.Fatalf("CreateSession: %v\n%s", err, d1.log())
	}
	id := res.Msg.Session.Id

	killAt := 250 + rand.IntN(200)
	var received []*v1.Event // everything the first daemon sent us, in order
	streamEvents := 0        // of them, stream_event lines
	killed := false
	for !killed {
		after := int64(0)
		if n := len(received); n > 0 {
			after = received[n-1].Seq
		}
		sctx, scancel := context.WithCancel(ctx)
		stream, err := d1.sessions.Subscribe(sctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id, AfterSeq: after}))
		if err != nil {
			scancel()
			t.Fatalf("Subscribe: %v", err)
		}
		for stream.Receive() {
			ev := stream.Msg().Event
			received = append(received, ev)
			switch ev.GetMessage().GetType() {
			case "stream_event":
				streamEvents++
			case "result":
				if !killed {
					t.Fatalf("the turn ended after %d events, before the kill (at %d): make the reply longer", len(received), killAt)
				}
			}
			if !killed && len(received) >= killAt && streamEvents > 0 {
				if n := len(markedPids(mark, d1.cmd.Process.Pid)); n < 2 {
					t.Errorf("%d marked processes besides the daemon before the kill, want the wrapper and the CLI", n)
				}
				if err := d1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
				t.Logf("SIGKILL after %d events (seq %d, %d stream_event lines)", len(received), ev.Seq, streamEvents)
				// Go on reading: whatever still comes was sent before the
				// daemon died, and must be stored too.
			}
		}
		serr := stream.Err()
		stream.Close()
		scancel()
		switch {
		case killed:
			t.Logf("stream ended after the kill, %d events received in all: %v", len(received), serr)
		case connect.CodeOf(serr) == connect.CodeResourceExhausted:
			t.Logf("dropped as a slow subscriber after %d events; subscribing again", len(received))
		default:
			t.Fatalf("stream ended before the kill after %d events: %v\n%s", len(received), serr, d1.log())
		}
	}
	<-d1.done
	if ws, ok := d1.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("daemon did not die of SIGKILL: %v", d1.err)
	}
	// The daemon's Pdeathsig kills the wrapper, the wrapper's the CLI: at
	// once, not when the CLI notices its stdin has ended (~15 s here).
	start := time.Now()
	if left := waitUnmarked(mark, 3*time.Second); len(left) > 0 {
		t.Errorf("processes still alive 3 s after the daemon's SIGKILL: %v", describe(left))
	} else {
		t.Logf("wrapper and CLI gone %v after the daemon", time.Since(start).Round(time.Millisecond))
	}
	for i, ev := range received {
		if ev.Seq != int64(i+1) {
			t.Fatalf("live stream: event %d has seq %d", i, ev.Seq)
		}
	}

	// Second daemon, same data directory.
	d2 := startServe(ctx, t, bin, self, dataDir, env, filepath.Join(tmp, "serve2.log"), httpc)
	got, err := d2.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatalf("GetSession after restart: %v", err)
	}
	sess := got.Msg.Session
	if sess.Status != v1.SessionStatus_SESSION_STATUS_INTERRUPTED {
		t.Errorf("status after restart = %v, want SESSION_STATUS_INTERRUPTED", sess.Status)
	}
	stored := replay(ctx, t, d2.sessions, id, sess.LastSeq)

	// Gap-free, and as long as GetSession says.
	for i, ev := range stored {
		if ev.Seq != int64(i+1) {
			t.Fatalf("stored event %d has seq %d: gap or disorder", i, ev.Seq)
		}
	}
	if int64(len(stored)) != sess.LastSeq {
		t.Errorf("replay has %d events, GetSession says last_seq %d", len(stored), sess.LastSeq)
	}
	// Nothing the client received is lost or changed.
	if len(stored) < len(received) {
		t.Errorf("%d events stored, but the client received %d before the daemon died (seq %d lost and after)",
			len(stored), len(received), len(stored)+1)
	}
	for i, ev := range received[:min(len(received), len(stored))] {
		if !proto.Equal(ev, stored[i]) {
			t.Errorf("seq %d: received %v\nstored %v", ev.Seq, ev, stored[i])
		}
	}

	// The stored CLI lines are, byte for byte, a prefix of what it printed
	// (the lines the daemon wrote to the CLI are in the log too, marked
	// to_cli: they are left out).
	printed := printedLines(t, teePath)
	var lines [][]byte
	for _, ev := range stored {
		if m := ev.GetMessage(); m != nil && !m.ToCli { // a line the CLI printed
			if m.GetType() == "result" {
				t.Errorf("seq %d is a result: the kill did not come mid-turn", ev.Seq)
			}
			lines = append(lines, m.Raw)
		}
	}
	if len(lines) > len(printed) {
		t.Errorf("%d CLI lines stored, the CLI printed only %d", len(lines), len(printed))
	}
	for i := range min(len(lines), len(printed)) {
		if !bytes.Equal(lines[i], printed[i]) {
			t.Fatalf("stored CLI line %d differs from printed line %d:\nstored  %s\nprinted %s", i, i, lines[i], printed[i])
		}
	}
	if len(lines) == 0 || streamEvents == 0 {
		t.Errorf("%d CLI lines stored, %d stream events received: nothing was streamed", len(lines), streamEvents)
	}
	t.Logf("received %d events; stored %d (%d CLI lines of the %d the CLI printed)",
		len(received), len(stored), len(lines), len(printed))

	d2.stop(t)
}

// serveProc is a "claudectl serve" process.
type serveProc struct {
	cmd      *exec.Cmd
	logPath  string
	url      string // http://127.0.0.1:port
	sessions claudectlv1connect.SessionServiceClient
	done     chan struct{} // closed when cmd.Wait has returned
	err      error         // of cmd.Wait, once done is closed
}

// startServe starts "claudectl serve" on a free port of 127.0.0.1 with the
// wrapper as its CLI and waits until it answers. Cleanup kills it if the
// test has not stopped it.
func startServe(ctx context.Context, t *testing.T, bin, wrapper, dataDir string, env []string, logPath string, httpc *http.Client, extra ...string) *serveProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return startServeAt(ctx, t, addr, bin, wrapper, dataDir, env, logPath, httpc, extra...)
}

// startServeAt is startServe on addr (a daemon restarted where its clients
// and workers look for it).
func startServeAt(ctx context.Context, t *testing.T, addr, bin, wrapper, dataDir string, env []string, logPath string, httpc *http.Client, extra ...string) *serveProc {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p := &serveProc{logPath: logPath, done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"serve", "--listen", addr, "--data-dir", dataDir, "--cli", wrapper}, extra...)...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = logf, logf // files: no copying goroutines
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	url := "http://" + addr
	p.url = url
	// The daemon generates its token in the data dir at its first start.
	p.sessions = claudectlv1connect.NewSessionServiceClient(httpc, url, connect.WithInterceptors(tokenFrom(dataDir)))
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		_, err := p.sessions.ListSessions(rctx, connect.NewRequest(&v1.ListSessionsRequest{}))
		rcancel()
		if err == nil {
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("claudectl serve exited: %v\n%s", p.err, p.log())
		case <-ctx.Done():
			t.Fatalf("claudectl serve did not answer: %v\n%s", err, p.log())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *serveProc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// stop ends the daemon with SIGTERM and checks that it exits cleanly.
func (p *serveProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("claudectl serve after SIGTERM: %v\n%s", p.err, p.log())
		}
	case <-time.After(15 * time.Second):
		t.Errorf("claudectl serve still running 15 s after SIGTERM\n%s", p.log())
	}
}

// replay reads the stored events of session id from seq 1 up to last.
func replay(ctx context.Context, t *testing.T, c claudectlv1connect.SessionServiceClient, id string, last int64) []*v1.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stream, err := c.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatalf("Subscribe after restart: %v", err)
	}
	defer stream.Close()
	var evs []*v1.Event
	for stream.Receive() {
		evs = append(evs, stream.Msg().Event)
		if evs[len(evs)-1].Seq >= last {
			break
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("replay after %d events: %v", len(evs), err)
	}
	return evs
}

// printedLines returns the complete lines the CLI printed, the way the
// daemon's session reads them: a line without its end is not one yet, and
// the control traffic the session answers itself (control_request,
// control_response, control_cancel_request, keep_alive) and lines that are
// not JSON objects are not logged, so they are left out.
func printedLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	var out [][]byte
	for line := range bytes.Lines(b) {
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		var v struct {
			Type string `json:"type"`
		}
		if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &v) != nil {
			continue
		}
		switch v.Type {
		case "control_request", "control_response", "control_cancel_request", "keep_alive":
			continue
		}
		out = append(out, line)
	}
	return out
}

// markedPids returns the live (not zombie) processes whose environment
// holds the test's mark, but for the ones in except.
func markedPids(mark string, except ...int) []int {
	ents, _ := os.ReadDir("/proc")
	want := []byte(wrapMarkEnv + "=" + mark + "\x00")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || containsInt(except, pid) {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			// Skip "pid (comm) S": a zombie only waits to be reaped.
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// waitUnmarked waits up to d for every marked process to end and returns
// those still alive.
func waitUnmarked(mark string, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		left := markedPids(mark)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reapMarked fails the test if any marked process outlives it, and kills
// those.
func reapMarked(t *testing.T, mark string, d time.Duration) {
	left := waitUnmarked(mark, d)
	if len(left) == 0 {
		return
	}
	t.Errorf("processes left behind: %v", describe(left))
	for _, pid := range left {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	waitUnmarked(mark, 5*time.Second)
}

func describe(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		fmt.Fprintf(&b, "\n  %d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	}
	return b.String()
}

// tokenFrom sends the token a daemon generated in dataDir, read when a
// request is made (the file appears as the daemon starts).
func tokenFrom(dataDir string) connect.Interceptor {
	return &tokenInterceptor{path: filepath.Join(dataDir, "token")}
}

type tokenInterceptor struct{ path string }

func (ti *tokenInterceptor) header(h http.Header) {
	if b, err := os.ReadFile(ti.path); err == nil {
		h.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	}
}

func (ti *tokenInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ti.header(req.Header())
		return next(ctx, req)
	}
}

func (ti *tokenInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		ti.header(conn.RequestHeader())
		return conn
	}
}

func (ti *tokenInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
