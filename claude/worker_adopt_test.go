package claude_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/relay"
)

// TestWorkerTakeover: a controller holding a worker session's lines until
// it "stores" them dies mid-stream; the worker comes back to a second
// controller, which takes the session over at the lines stored. The second
// controller gets every line after those, once, in order (the read but
// unreleased ones again), a line the first one wrote that the worker never
// got reaches the CLI first, then the second one's own, and the session
// ends cleanly.
func TestWorkerTakeover(t *testing.T) {
	const lines, stored, readOnA = 3000, 1000, 1500
	a, b, logger := twoListeners(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// storedSeq is the frame of the last line stored; firstUnstored that
	// of the line after it (a stderr frame can come in between, which the
	// worker may drop). Both are set before aDies is closed.
	var storedSeq, firstUnstored uint64
	aDies := make(chan struct{})
	cmd := &claude.Command{Args: []string{"--verbose"}, Dir: "/tmp", MaxLineBytes: 1 << 20}

	// B takes the session over from the lines stored, once A is gone (set
	// before the worker starts: a worker that lost A for a moment may try
	// B at any time).
	var back *claude.WorkerReturn
	var secretHash string // what A "stored" of the session's secret
	adopted := make(chan claude.Conn, 1)
	b.Adopt = func(actx context.Context, r *claude.WorkerReturn) error {
		select {
		case <-aDies:
		case <-actx.Done():
			return actx.Err()
		}
		back = r
		// The session's context is its own: Adopt's ends when it returns.
		c, err := (&claude.WorkerTransport{Listener: b, Hold: true,
			Resume: &claude.WorkerResume{Session: r.Session, SecretHash: secretHash, Received: storedSeq,
				Unsent: [][]byte{[]byte(`{"from":"a"}`)}}}).Start(ctx, cmd)
		if err != nil {
			return err
		}
		adopted <- c
		return nil
	}

	var starts atomic.Int32
	w := &relay.Worker{
		URLs: []string{a.URL(), b.URL()}, Token: "tok", Name: "w1",
		ReconnectTimeout: 20 * time.Second, BufferBytes: 64 << 10,
		PingInterval: 100 * time.Millisecond, PingTimeout: time.Second, Logger: logger,
		Start: func(ctx context.Context, cmd *relay.Command, stderr func(string)) (relay.Process, error) {
			starts.Add(1)
			return startFakeCLI(ctx, lines, stderr), nil
		},
	}
	workerErr := make(chan error, 1)
	go func() { workerErr <- w.Run(ctx) }()

	connA, err := (&claude.WorkerTransport{Listener: a, Hold: true}).Start(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	secretHash = connA.(interface{ RelaySecretHash() string }).RelaySecretHash()
	count := func(ln claude.Line) int {
		if m := decodeFake(t, ln); m.Type == "count" {
			return m.N
		}
		return -1
	}
	for i := range readOnA {
		ln, err := connA.ReadLine()
		if err != nil {
			t.Fatalf("line %d on the first controller: %v", i, err)
		}
		if n := count(ln); n != i {
			t.Fatalf("count %d, want %d", n, i)
		}
		if ln.Seq == 0 {
			t.Fatal("a worker's line without its frame number")
		}
		if i == stored-1 {
			storedSeq = ln.Seq
			connA.(interface{ Release(uint64) }).Release(ln.Seq)
		}
		if i == stored {
			firstUnstored = ln.Seq
		}
	}

	close(aDies)
	a.Close() // the first controller dies: its links drop, nothing is said to the worker

	var connB claude.Conn
	select {
	case connB = <-adopted:
	case <-ctx.Done():
		t.Fatal("the worker never came back to the second controller")
	}
	if back.Worker != "w1" || back.Held >= firstUnstored {
		t.Errorf("worker return %+v: the worker must still hold the line of frame %d, the first not stored", back, firstUnstored)
	}
	if c, ok := connB.(interface{ Attached() bool }); !ok || !c.Attached() {
		t.Error("a taken-over connection does not say it is attached")
	}
	if err := connB.WriteLine(ctx, []byte(`{"from":"b"}`+"\n")); err != nil {
		t.Fatal(err)
	}
	connB.CloseWrite()
	next, echoes := stored, []string{}
	var lastSeq uint64
	for {
		ln, err := connB.ReadLine()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("ReadLine on the second controller: %v", err)
		}
		if ln.Seq <= storedSeq {
			t.Fatalf("line %d again: it was stored", ln.Seq)
		}
		switch n := count(ln); n {
		case -1:
			echoes = append(echoes, decodeFake(t, ln).Line)
		case next:
			next++
		default:
			t.Fatalf("count %d (frame %d, last frame %d) on the second controller, want %d (a gap or a repeat)", n, ln.Seq, lastSeq, next)
		}
		connB.(interface{ Release(uint64) }).Release(ln.Seq)
		lastSeq = ln.Seq
	}
	if want := []string{`{"from":"a"}`, `{"from":"b"}`}; next != lines || !slices.Equal(echoes, want) {
		t.Errorf("the second controller got counts up to %d and echoes %q, want %d and %q (the line the worker never got first)", next, echoes, lines, want)
	}
	if err := connB.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-workerErr; err != nil {
		t.Errorf("worker: %v", err)
	}
	if n := starts.Load(); n != 1 {
		t.Errorf("the CLI was started %d times, want once", n)
	}
	t.Logf("taken over at frame %d (worker held from %d, had %d frames of the first controller)", storedSeq, back.Held, back.WorkerHas)
}

// TestWorkerReturnRefused: a worker coming back to a controller that will
// not take its session over is not rejected (its CLI keeps running) unless
// the controller says the session is over.
func TestWorkerReturnRefused(t *testing.T) {
	a, b, logger := twoListeners(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	asked := make(chan struct{}, 16)
	var over atomic.Bool
	b.Adopt = func(ctx context.Context, r *claude.WorkerReturn) error {
		asked <- struct{}{}
		if over.Load() {
			return fmt.Errorf("%w: session %s was closed", claude.ErrUnknownRelaySession, r.Session)
		}
		return errors.New("its lease is another daemon's")
	}
	w := &relay.Worker{
		URLs: []string{a.URL(), b.URL()}, Token: "tok", Name: "w1", ReconnectTimeout: 20 * time.Second,
		PingInterval: 100 * time.Millisecond, PingTimeout: time.Second, Logger: logger,
		Start: func(ctx context.Context, cmd *relay.Command, stderr func(string)) (relay.Process, error) {
			return startFakeCLI(ctx, 10, stderr), nil
		},
	}
	workerErr := make(chan error, 1)
	go func() { workerErr <- w.Run(ctx) }()
	conn, err := a.Start(ctx, &claude.Command{MaxLineBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ReadLine(); err != nil {
		t.Fatal(err)
	}
	a.Close()
	for range 2 { // refused twice, the worker keeps trying
		select {
		case <-asked:
		case err := <-workerErr:
			t.Fatalf("the worker gave up after a refusal: %v", err)
		case <-ctx.Done():
			t.Fatal("the worker never came to the second controller")
		}
	}
	over.Store(true)
	select {
	case err := <-workerErr:
		if !errors.Is(err, relay.ErrRejected) {
			t.Errorf("worker: %v, want a rejection", err)
		}
	case <-ctx.Done():
		t.Fatal("the worker did not stop once its session was said to be over")
	}
}

// twoListeners starts two controllers with quick pings, closed by the
// test's end, and the logger they write to the test's log with.
func twoListeners(t *testing.T) (a, b *claude.WorkerListener, logger *slog.Logger) {
	t.Helper()
	logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a = &claude.WorkerListener{Token: "tok", Logger: logger}
	b = &claude.WorkerListener{Token: "tok", Logger: logger}
	for _, l := range []*claude.WorkerListener{a, b} {
		claude.SetWorkerPing(l, 100*time.Millisecond, time.Second)
		if err := l.Listen(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
	return a, b, logger
}

// scriptCLI is a relay.Process that prints its lines, then echoes what it
// reads until its input ends.
type scriptCLI struct {
	out  chan []byte
	in   chan []byte
	once sync.Once
	done chan struct{}
}

func startScriptCLI(lines ...string) *scriptCLI {
	p := &scriptCLI{out: make(chan []byte, len(lines)+16), in: make(chan []byte, 16), done: make(chan struct{})}
	for _, l := range lines {
		p.out <- []byte(l)
	}
	go func() {
		for l := range p.in {
			p.out <- fmt.Appendf(nil, `{"type":"echo","line":%q}`, l)
		}
		close(p.out)
		close(p.done)
	}()
	return p
}

func (p *scriptCLI) ReadLine() ([]byte, int64, error) {
	l, ok := <-p.out
	if !ok {
		return nil, 0, io.EOF
	}
	return l, 0, nil
}

func (p *scriptCLI) WriteLine(ctx context.Context, line []byte) error {
	p.in <- bytes.TrimSuffix(line, []byte("\n"))
	return nil
}

func (p *scriptCLI) CloseWrite() error { p.once.Do(func() { close(p.in) }); return nil }
func (p *scriptCLI) Close() error {
	p.CloseWrite()
	for range p.out {
	}
	<-p.done
	return nil
}
func (p *scriptCLI) Wait() *relay.Exit { <-p.done; return &relay.Exit{} }

// TestWorkerTakeoverKeepsOpenRequests: the CLI asks (a control_request)
// and goes on printing; the first controller stores and releases every
// line after the request but dies before answering it. The worker kept
// the request: the second controller, taking over at the lines stored,
// gets the request again and nothing else of what was stored, and its
// answer reaches the CLI.
func TestWorkerTakeoverKeepsOpenRequests(t *testing.T) {
	a, b, logger := twoListeners(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := &claude.Command{MaxLineBytes: 1 << 20}
	var last uint64       // the last line stored, set before aDies is closed
	var secretHash string // A's session's, set before aDies is closed
	aDies := make(chan struct{})
	adopted := make(chan claude.Conn, 1)
	b.Adopt = func(actx context.Context, r *claude.WorkerReturn) error { // set before the worker starts
		select {
		case <-aDies:
		case <-actx.Done():
			return actx.Err()
		}
		c, err := (&claude.WorkerTransport{Listener: b, Hold: true,
			Resume: &claude.WorkerResume{Session: r.Session, SecretHash: secretHash, Received: last}}).Start(ctx, cmd)
		if err == nil {
			adopted <- c
		}
		return err
	}
	w := &relay.Worker{
		URLs: []string{a.URL(), b.URL()}, Token: "tok", Name: "w1", ReconnectTimeout: 20 * time.Second,
		PingInterval: 100 * time.Millisecond, PingTimeout: time.Second, Logger: logger,
		Start: func(ctx context.Context, cmd *relay.Command, stderr func(string)) (relay.Process, error) {
			return startScriptCLI(`{"type":"count","n":0}`,
				`{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash"}}`,
				`{"type":"count","n":1}`, `{"type":"count","n":2}`), nil
		},
	}
	workerErr := make(chan error, 1)
	go func() { workerErr <- w.Run(ctx) }()
	connA, err := (&claude.WorkerTransport{Listener: a, Hold: true}).Start(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	secretHash = connA.(interface{ RelaySecretHash() string }).RelaySecretHash()
	for range 4 {
		ln, err := connA.ReadLine()
		if err != nil {
			t.Fatal(err)
		}
		last = ln.Seq
	}
	connA.(interface{ Release(uint64) }).Release(last) // every line stored; the request not answered
	// Let the acknowledgement reach the worker (it goes out 20 ms after a
	// release): what it still holds then is what was not acknowledged.
	time.Sleep(300 * time.Millisecond)

	close(aDies)
	a.Close()
	var connB claude.Conn
	select {
	case connB = <-adopted:
	case <-ctx.Done():
		t.Fatal("the worker never came back to the second controller")
	}
	type read struct {
		ln  claude.Line
		err error
	}
	first := make(chan read, 1)
	go func() {
		ln, err := connB.ReadLine()
		first <- read{ln, err}
	}()
	var ln claude.Line
	select {
	case r := <-first:
		ln, err = r.ln, r.err
	case <-ctx.Done():
		connB.Close()
		t.Fatal("the second controller got nothing: the worker no longer held the open request")
	}
	if err != nil || !bytes.Contains(ln.Data, []byte(`"request_id":"r1"`)) {
		t.Fatalf("first line on the second controller: %s, %v; want the open request r1 again", ln.Data, err)
	}
	if err := connB.WriteLine(ctx, []byte(`{"type":"control_response","response":{"subtype":"success","request_id":"r1"}}`+"\n")); err != nil {
		t.Fatal(err)
	}
	connB.CloseWrite()
	ln, err = connB.ReadLine()
	if err != nil || decodeFake(t, ln).Type != "echo" || !strings.Contains(decodeFake(t, ln).Line, `"request_id":"r1"`) {
		t.Fatalf("next line: %s, %v; want the CLI's echo of the answer (nothing stored again)", ln.Data, err)
	}
	if _, err := connB.ReadLine(); err != io.EOF {
		t.Fatalf("after the echo: %v, want the end", err)
	}
	connB.Close()
	if err := <-workerErr; err != nil {
		t.Errorf("worker: %v", err)
	}
}
