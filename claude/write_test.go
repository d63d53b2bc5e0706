package claude_test

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
)

// returnsWithin runs f and fails the test if it has not returned after d.
func returnsWithin(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// startDeaf starts a stand-in CLI that never reads its input, and waits
// until it runs.
func startDeaf(t *testing.T, ctx context.Context) *claude.Session {
	t.Helper()
	s := startFake(t, ctx, "deaf")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.StderrTail(), "not reading stdin") {
		if time.Now().After(deadline) {
			t.Fatalf("stand-in never started; stderr %q", s.StderrTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

// waitStuck returns once writes to s no longer go through.
func waitStuck(t *testing.T, s *claude.Session) {
	t.Helper()
	for range 200 {
		var err error
		returnsWithin(t, 20*time.Second, "SendText with a 50ms deadline", func() {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			err = s.SendText(ctx, "probe")
		})
		if err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("writes to a CLI that reads nothing kept going through")
}

// A CLI that stops reading its input must not hold up a call past its ctx,
// nor Close.
func TestStuckInputHoldsNoCallPastItsContext(t *testing.T) {
	defer claude.SetShutdownTimings(200*time.Millisecond, 300*time.Millisecond, 100*time.Millisecond)()
	s := startDeaf(t, context.Background())
	big := strings.Repeat("x", 1<<20) // far more than the pipe holds

	// A send with no deadline gets stuck writing.
	stuck := make(chan error, 1)
	go func() { stuck <- s.SendText(context.Background(), big) }()
	waitStuck(t, s)

	// A send behind it returns when its ctx is cancelled (no deadline).
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	returnsWithin(t, 20*time.Second, "SendText after cancel", func() {
		err := s.SendText(ctx, "small")
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "not written") {
			t.Errorf("SendText after cancel = %v, want context.Canceled saying the line was not written", err)
		}
	})

	// A control request behind it gives up at its deadline.
	returnsWithin(t, 20*time.Second, "SetModel with a 300ms deadline", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := s.SetModel(ctx, "m")
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not written") {
			t.Errorf("SetModel = %v, want a deadline error saying the line was not written", err)
		}
	})

	// Close ends the CLI, and the stuck send with it.
	returnsWithin(t, 30*time.Second, "Close", func() { s.Close() })
	select {
	case err := <-stuck:
		if err == nil {
			t.Error("the stuck SendText succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stuck SendText did not return after Close")
	}
	if pid := s.PID(); pid > 0 && processAlive(pid) {
		t.Errorf("the CLI (pid %d) outlived Close", pid)
	}
}

// Cancelling the session's ctx ends a CLI that does not read its input,
// even while a write to it is stuck.
func TestStuckInputSessionContextEndsCLI(t *testing.T) {
	// A minute's grace period: an end that waited for it stands out from
	// one a busy machine made slow.
	defer claude.SetShutdownTimings(time.Minute, 300*time.Millisecond, 100*time.Millisecond)()
	ctx, cancel := context.WithCancel(context.Background())
	s := startDeaf(t, ctx)
	defer s.Close()
	go s.SendText(context.Background(), strings.Repeat("x", 1<<20))
	waitStuck(t, s)
	cancel()
	select {
	case <-s.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the CLI was not ended after the session's ctx was cancelled")
	}
}

// A write cut by its deadline midway through a line is finished in the
// background: the next line follows it whole, and the CLI parses both.
func TestCutWriteFinishesItsLine(t *testing.T) {
	t.Run("deadline", func(t *testing.T) { testCutWrite(t, context.DeadlineExceeded) })
	t.Run("cancel", func(t *testing.T) { testCutWrite(t, context.Canceled) })
}

// cutCtx is a context the test ends, with err, when it chooses: once the
// line is being written. (A timer does not promise that: on a busy machine
// encoding the 300 KiB line outlasted 300 ms, and the line was not written
// at all.) The session's writer watches ctx with context.AfterFunc and
// reads its Err, as it does a deadline's or a cancel's.
type cutCtx struct {
	context.Context // no deadline, no values
	done            chan struct{}
	err             error // set before done is closed
}

func (c *cutCtx) Done() <-chan struct{} { return c.done }

func (c *cutCtx) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

func testCutWrite(t *testing.T, want error) {
	defer claude.SetShutdownTimings(2*time.Second, 300*time.Millisecond, 100*time.Millisecond)()
	s := startFake(t, context.Background(), "gatedecho") // reads nothing until told
	defer s.Close()
	ctx := &cutCtx{Context: context.Background(), done: make(chan struct{})}
	sent := make(chan error, 1)
	go func() { sent <- s.SendText(ctx, strings.Repeat("y", 300<<10)) }()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(s.StderrTail(), "gatedecho: input waiting"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the line's first bytes never reached the CLI; stderr %q", s.StderrTail())
		}
	}
	ctx.err = want
	close(ctx.done) // the line is being written: a pipe holds 64 KiB
	var err error
	select {
	case err = <-sent:
	case <-time.After(30 * time.Second):
		t.Fatal("the cut SendText did not return")
	}
	if !errors.Is(err, want) || !strings.Contains(err.Error(), "the rest will be written") {
		t.Errorf("cut SendText = %v, want %v saying the line is being finished", err, want)
	}
	if err := syscall.Kill(s.PID(), syscall.SIGUSR1); err != nil { // the CLI reads again
		t.Fatal(err)
	}
	if err := s.SendText(context.Background(), "hello"); err != nil {
		t.Fatalf("second SendText = %v", err)
	}
	mctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	results := 0
	for m, err := range s.Messages(mctx) {
		if err != nil {
			t.Fatalf("Messages: %v (stderr %q)", err, s.StderrTail())
		}
		if _, ok := m.(*claude.ResultMessage); ok {
			if results++; results == 2 {
				break
			}
		}
	}
	if err := s.CloseInput(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(mctx); !errors.Is(err, io.EOF) {
		t.Errorf("after CloseInput, Next = %v, want io.EOF (stderr %q)", err, s.StderrTail())
	}
}

// processAlive reports whether a process with that pid exists.
func processAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// BenchmarkSend measures the write path: prompts to a CLI that reads and
// discards them.
func BenchmarkSend(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	s, err := claude.Start(context.Background(), &claude.Options{CLIPath: exe, Env: map[string]string{fakeCLIEnv: "sink"}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background()) // a ctx that can end, as most have
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.SendText(ctx, "a prompt of an ordinary length, a sentence or two"); err != nil {
			b.Fatal(err)
		}
	}
}
