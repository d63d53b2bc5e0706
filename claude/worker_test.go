package claude_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/linkcut"
	"github.com/claudectl/claudectl/internal/relay"
)

// fakeCLI is a relay.Process that prints n numbered lines and echoes what it
// reads, then exits when its input ends.
type fakeCLI struct {
	out   chan []byte
	in    chan []byte
	inEnd sync.Once
	done  chan struct{}
	wg    sync.WaitGroup
}

func startFakeCLI(ctx context.Context, n int, stderr func(string)) *fakeCLI {
	p := &fakeCLI{out: make(chan []byte, 16), in: make(chan []byte, 16), done: make(chan struct{})}
	p.wg.Add(2)
	var mu sync.Mutex // the two writers of out
	send := func(b []byte) {
		mu.Lock()
		p.out <- b
		mu.Unlock()
	}
	go func() {
		defer p.wg.Done()
		for i := range n {
			send(fmt.Appendf(nil, `{"type":"count","n":%d}`, i))
			if i%200 == 0 {
				stderr(fmt.Sprintf("progress %d", i))
				time.Sleep(2 * time.Millisecond)
			}
		}
	}()
	go func() {
		defer p.wg.Done()
		for l := range p.in {
			send(fmt.Appendf(nil, `{"type":"echo","line":%q}`, l))
		}
	}()
	go func() {
		p.wg.Wait()
		close(p.out)
		close(p.done)
	}()
	go func() { // ctx ends the "process", as it would a ProcessTransport's
		select {
		case <-ctx.Done():
			p.CloseWrite()
		case <-p.done:
		}
	}()
	return p
}

// fakeLine is a line of a fakeCLI: a count or an echo.
type fakeLine struct {
	Type string
	N    int
	Line string
}

func decodeFake(t *testing.T, ln claude.Line) fakeLine {
	t.Helper()
	var m fakeLine
	if err := json.Unmarshal(ln.Data, &m); err != nil {
		t.Fatalf("line %q: %v", ln.Data, err)
	}
	return m
}

func (p *fakeCLI) ReadLine() ([]byte, int64, error) {
	l, ok := <-p.out
	if !ok {
		return nil, 0, io.EOF
	}
	return l, 0, nil
}

func (p *fakeCLI) WriteLine(ctx context.Context, line []byte) error {
	select {
	case p.in <- line[:len(line)-1]:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *fakeCLI) CloseWrite() error {
	p.inEnd.Do(func() { close(p.in) })
	return nil
}

func (p *fakeCLI) Close() error {
	p.CloseWrite()
	for range p.out { // nobody reads any more
	}
	<-p.done
	return nil
}

func (p *fakeCLI) Wait() *relay.Exit {
	<-p.done
	return &relay.Exit{}
}

// TestWorkerLinkCuts relays thousands of lines both ways between a
// WorkerListener and an in-process worker while the link is cut again and
// again: every line must arrive once, in order.
func TestWorkerLinkCuts(t *testing.T) {
	const lines, writes = 4000, 300
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l := &claude.WorkerListener{Token: "secret-token", Logger: logger}
	claude.SetWorkerPing(l, 100*time.Millisecond, time.Second)
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	u, _ := url.Parse(l.URL())
	proxy, err := linkcut.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var gotCmd *relay.Command
	var stderrMu sync.Mutex
	var stderrLines []string
	w := &relay.Worker{
		URL: "ws://" + proxy.Addr + u.Path, Token: "secret-token", Name: "fake",
		ReconnectTimeout: 20 * time.Second, BufferBytes: 16 << 10,
		PingInterval: 100 * time.Millisecond, PingTimeout: time.Second,
		Logger: logger,
		Start: func(ctx context.Context, cmd *relay.Command, stderr func(string)) (relay.Process, error) {
			gotCmd = cmd
			return startFakeCLI(ctx, lines, stderr), nil
		},
	}
	l.Stderr = func(line string) {
		stderrMu.Lock()
		stderrLines = append(stderrLines, line)
		stderrMu.Unlock()
	}
	workerErr := make(chan error, 1)
	go func() { workerErr <- w.Run(ctx) }()

	env := append(os.Environ(), "CLAUDECTL_REMOTE_PROBE=1")
	conn, err := l.Start(ctx, &claude.Command{Args: []string{"--verbose"}, Env: env, Dir: "/tmp", MaxLineBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	// Write, and cut the link now and then, while reading.
	var bg sync.WaitGroup
	bg.Add(2)
	go func() {
		defer bg.Done()
		for i := range writes {
			if err := conn.WriteLine(ctx, fmt.Appendf(nil, `{"i":%d}`+"\n", i)); err != nil {
				t.Errorf("WriteLine %d: %v", i, err)
				return
			}
		}
		conn.CloseWrite()
	}()
	// Cuts follow the reader's progress, not a clock: a fast machine
	// relays every line before any timer fires.
	cuts := 0
	stopCuts := make(chan struct{})
	progress := make(chan struct{}, 1)
	go func() {
		defer bg.Done()
		for range 6 {
			select {
			case <-stopCuts:
				return
			case <-progress:
			}
			cuts += proxy.Cut()
		}
	}()
	nextN, nextEcho := 0, 0
	for read := 1; ; read++ {
		if read%(lines/8) == 0 {
			select {
			case progress <- struct{}{}:
			default:
			}
		}
		ln, err := conn.ReadLine()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("ReadLine: %v", err)
		}
		m := decodeFake(t, ln)
		switch m.Type {
		case "count":
			if m.N != nextN {
				t.Fatalf("count %d, want %d", m.N, nextN)
			}
			nextN++
		case "echo":
			if want := fmt.Sprintf(`{"i":%d}`, nextEcho); m.Line != want {
				t.Fatalf("echo %s, want %s", m.Line, want)
			}
			nextEcho++
		}
	}
	close(stopCuts)
	bg.Wait()
	if nextN != lines || nextEcho != writes {
		t.Errorf("got %d counts and %d echoes, want %d and %d", nextN, nextEcho, lines, writes)
	}
	if err := conn.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-workerErr; err != nil {
		t.Errorf("worker: %v", err)
	}
	if proxy.Accepted() < 2 || cuts == 0 {
		t.Errorf("%d connections, %d cuts: the link was never cut", proxy.Accepted(), cuts)
	}
	t.Logf("%d connections, %d cuts", proxy.Accepted(), cuts)
	if gotCmd.SetEnv["CLAUDECTL_REMOTE_PROBE"] != "1" || gotCmd.Dir != "/tmp" || gotCmd.Args[0] != "--verbose" {
		t.Errorf("command %+v", gotCmd)
	}
	stderrMu.Lock()
	if len(stderrLines) != lines/200 {
		t.Errorf("%d stderr lines, want %d", len(stderrLines), lines/200)
	}
	stderrMu.Unlock()
}

func TestWorkerListenerRefusesBadToken(t *testing.T) {
	l := &claude.WorkerListener{Token: "right"}
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := &relay.Worker{URL: l.URL(), Token: "wrong", Start: func(context.Context, *relay.Command, func(string)) (relay.Process, error) {
		t.Error("started a CLI")
		return nil, errors.New("no")
	}}
	if err := w.Run(ctx); !errors.Is(err, relay.ErrRejected) {
		t.Errorf("Run with a wrong token: %v, want ErrRejected", err)
	}
}

// A request refused for its token closes its connection: requests
// pipelined after it on the same connection are never read, so a stranger
// gets one 401 and one log line per connection it opens, not per request
// (20,000 requests on one connection made 20,000 of each in 0.75 s).
func TestWorkerListenerRefusalClosesConnection(t *testing.T) {
	logs := &logBuffer{}
	l := &claude.WorkerListener{Token: "right", Logger: slog.New(slog.NewTextHandler(logs, nil))}
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	u, _ := url.Parse(l.URL())
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 100
	req := "GET " + u.Path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer wrong\r\n\r\n"
	go io.WriteString(c, strings.Repeat(req, n)) // may fail once the server closes
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	answers := 0
	for {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		answers++
		if res.StatusCode != http.StatusUnauthorized || !res.Close {
			t.Errorf("answer %d: %s, Connection %q; want 401 and close", answers, res.Status, res.Header.Get("Connection"))
		}
	}
	if answers != 1 {
		t.Errorf("%d answers to %d pipelined requests with a wrong token, want 1 (then the connection closed)", answers, n)
	}
	if got := strings.Count(logs.String(), "worker connection refused"); got != 1 {
		t.Errorf("%d refusals logged, want 1", got)
	}
}

func TestWorkerListenerWaitTimeout(t *testing.T) {
	l := &claude.WorkerListener{Token: "t", WaitTimeout: 100 * time.Millisecond}
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err := l.Start(context.Background(), &claude.Command{})
	var se *claude.StartError
	if !errors.As(err, &se) {
		t.Errorf("Start without a worker: %v, want *StartError", err)
	}
}

func TestWorkerLost(t *testing.T) {
	l := &claude.WorkerListener{Token: "t", ReconnectTimeout: 300 * time.Millisecond}
	claude.SetWorkerPing(l, 50*time.Millisecond, 200*time.Millisecond)
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	u, _ := url.Parse(l.URL())
	proxy, err := linkcut.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wctx, stopWorker := context.WithCancel(ctx)
	w := &relay.Worker{URL: "ws://" + proxy.Addr + u.Path, Token: "t", ReconnectTimeout: time.Second,
		PingInterval: 50 * time.Millisecond, PingTimeout: 200 * time.Millisecond,
		Start: func(ctx context.Context, _ *relay.Command, _ func(string)) (relay.Process, error) {
			return startFakeCLI(ctx, 1, func(string) {}), nil
		}}
	workerErr := make(chan error, 1)
	go func() { workerErr <- w.Run(wctx) }()
	conn, err := l.Start(ctx, &claude.Command{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ReadLine(); err != nil {
		t.Fatal(err)
	}
	proxy.Close() // the worker can never come back
	if err := conn.Wait(); !errors.Is(err, claude.ErrWorkerLost) {
		t.Errorf("Wait: %v, want ErrWorkerLost", err)
	}
	if err := <-workerErr; err == nil {
		t.Error("the worker did not give up")
	} else {
		t.Logf("worker: %v", err)
	}
	stopWorker()
	conn.Close()
}

// keptRunningCLI is a relay.Process whose stdout ends at once and that the
// worker had to stop (it caught SIGTERM and exited 0).
type keptRunningCLI struct{}

func (keptRunningCLI) ReadLine() ([]byte, int64, error)        { return nil, 0, io.EOF }
func (keptRunningCLI) WriteLine(context.Context, []byte) error { return nil }
func (keptRunningCLI) CloseWrite() error                       { return nil }
func (keptRunningCLI) Close() error                            { return nil }
func (keptRunningCLI) Wait() *relay.Exit                       { return &relay.Exit{KeptRunningMS: 300, Stderr: "bye"} }

// A CLI the worker stopped because it closed its stdout but kept running
// is reported as such by the controller's Conn, not as a clean exit.
func TestWorkerReportsCLIThatKeptRunning(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l := &claude.WorkerListener{Token: "t", Logger: logger}
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	workerLogs := &logBuffer{}
	w := &relay.Worker{URL: l.URL(), Token: "t", Logger: slog.New(slog.NewTextHandler(io.MultiWriter(workerLogs, testWriter{t}), nil)),
		Start: func(context.Context, *relay.Command, func(string)) (relay.Process, error) {
			return keptRunningCLI{}, nil
		}}
	workerErr := make(chan error, 1)
	go func() { workerErr <- w.Run(ctx) }()
	conn, err := l.Start(ctx, &claude.Command{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ReadLine(); err != io.EOF {
		t.Fatalf("ReadLine = %v, want io.EOF", err)
	}
	want := "claude: CLI closed its output but kept running; it was stopped after 300ms; stderr: bye"
	var ee *claude.ExitError
	if err := conn.Wait(); !errors.As(err, &ee) || ee.KeptRunning != 300*time.Millisecond || err.Error() != want {
		t.Errorf("Wait = %v, want %s", err, want)
	}
	conn.Close()
	if err := <-workerErr; err != nil {
		t.Errorf("worker: %v", err)
	}
	// The worker's own log says so too, not that the CLI just exited.
	if logs := workerLogs.String(); !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "the CLI closed its output but kept running; it was stopped") || !strings.Contains(logs, "after=300ms") {
		t.Errorf("worker's log:\n%s\nwant a warning that the CLI kept running after closing its output, stopped after 300ms", logs)
	}
}
