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

// startFake starts the test binary as a stand-in CLI in the given mode.
func startFake(t *testing.T, ctx context.Context, mode string) *claude.Session {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s, err := claude.Start(ctx, &claude.Options{CLIPath: exe, Env: map[string]string{fakeCLIEnv: mode}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCloseEscalatesToSIGKILL(t *testing.T) {
	defer claude.SetShutdownTimings(200*time.Millisecond, 300*time.Millisecond, 100*time.Millisecond)()
	ctx := context.Background()
	s := startFake(t, ctx, "stubborn")
	// Wait until it has ignored SIGTERM.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.StderrTail(), "ignoring SIGTERM") {
		if time.Now().After(deadline) {
			t.Fatalf("stand-in never started; stderr %q", s.StderrTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
	err := s.Close()
	var ee *claude.ExitError
	if !errors.As(err, &ee) || ee.Signal != "killed" {
		t.Fatalf("Close = %v, want an ExitError for SIGKILL", err)
	}
	if !strings.Contains(ee.Stderr, "ignoring SIGTERM") {
		t.Errorf("stderr tail = %q", ee.Stderr)
	}
	if err2 := s.Close(); !errors.Is(err2, err) && err2 != err {
		t.Errorf("second Close = %v, want the same result %v", err2, err)
	}
}

func TestContextCancelTearsDown(t *testing.T) {
	defer claude.SetShutdownTimings(5*time.Second, 300*time.Millisecond, 100*time.Millisecond)()
	ctx, cancel := context.WithCancel(context.Background())
	s := startFake(t, ctx, "stubborn")
	for !strings.Contains(s.StderrTail(), "ignoring SIGTERM") {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	_, err := s.Next(context.Background())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Next after cancel = %v, want context.Canceled in the chain", err)
	}
	s.Close()
}

func TestExitCodeAndStderrInError(t *testing.T) {
	ctx := context.Background()
	s := startFake(t, ctx, "exit3")
	defer s.Close()
	if err := s.SendText(ctx, "hi"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Next(ctx)
	var ee *claude.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || !strings.Contains(ee.Stderr, "something broke") {
		t.Fatalf("Next = %v", err)
	}
	if ee.During != "mid-turn" {
		t.Errorf("During = %q", ee.During)
	}
	if !strings.Contains(err.Error(), "exited with code 3") || !strings.Contains(err.Error(), "something broke") {
		t.Errorf("message = %q", err)
	}
	if err := s.SendText(ctx, "again"); !errors.Is(err, claude.ErrClosed) {
		t.Errorf("SendText after exit = %v, want ErrClosed", err)
	}
	if err := s.Interrupt(ctx); !errors.Is(err, claude.ErrClosed) {
		t.Errorf("Interrupt after exit = %v, want ErrClosed", err)
	}
}

func TestStandInProtocolAndTolerance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startFake(t, ctx, "echo")
	if _, err := s.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.SendText(ctx, "hi"); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var res *claude.ResultMessage
	for m, err := range s.Turn(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, m.Kind())
		if r, ok := m.(*claude.ResultMessage); ok {
			res = r
		}
	}
	want := "not_json_yet_a_type system assistant result"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("kinds = %q, want %q (the non-JSON line is skipped)", got, want)
	}
	if res == nil || res.NumTurns != 1 || res.DurationMS != 12 {
		t.Errorf("numbers sent as strings were not accepted: %s", res.Raw())
	}
	st := s.Stats()
	if st.Unknown["not_json_yet_a_type"] != 1 || st.NotJSON != 1 || st.Tolerated != 1 {
		t.Errorf("stats = %+v", st)
	}
	if err := s.CloseInput(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("Next after a clean exit = %v, want io.EOF", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after a clean exit = %v", err)
	}
}

func TestNoZombies(t *testing.T) {
	ctx := context.Background()
	for range 3 {
		s := startFake(t, ctx, "echo")
		if _, err := s.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	var ws syscall.WaitStatus
	if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid > 0 {
		t.Errorf("an unreaped child %d was left behind", pid)
	} else if err != nil && !errors.Is(err, syscall.ECHILD) {
		t.Errorf("wait4: %v", err)
	}
}
