package claude_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
)

// Errors of session calls say what was being done and in which session,
// with one "claude:" prefix.
func TestCallErrorsSayWhatAndWhere(t *testing.T) {
	s, c := startMem(t, nil)
	c.print(map[string]any{"type": "system", "subtype": "init", "session_id": "s-7", "model": "m", "tools": []string{}, "cwd": "/"})
	if _, err := s.Next(context.Background()); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := s.SetModel(ctx, "m") // written, never answered
	want := "claude: control request set_model (session s-7): gave up waiting for the answer: context deadline exceeded"
	if !errors.Is(err, context.DeadlineExceeded) || err.Error() != want {
		t.Errorf("SetModel = %v,\nwant %s", err, want)
	}

	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	err = s.SendText(done, "hi")
	want = "claude: send (session s-7): writing to the CLI: line not written: context canceled"
	if !errors.Is(err, context.Canceled) || err.Error() != want {
		t.Errorf("SendText = %v,\nwant %s", err, want)
	}
}

// An exit seen by a control request is reported once, not as
// "claude: control request initialize: claude: CLI exited ...".
func TestControlErrorOfExitHasOnePrefix(t *testing.T) {
	defer claude.SetShutdownTimings(200*time.Millisecond, 300*time.Millisecond, 100*time.Millisecond)()
	s := startFake(t, context.Background(), "exit3")
	defer s.Close()
	_, err := s.Initialize(context.Background())
	var ee *claude.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("Initialize = %v, want the exit with code 3", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "claude: control request initialize: CLI exited with code 3") || strings.Count(msg, "claude:") != 1 {
		t.Errorf("Initialize = %q, want one prefix, the request and the exit", msg)
	}
}

// An ExitError says how the CLI ended: by itself, by a signal, or stopped
// by the SDK after it closed its output and kept running.
func TestExitErrorMessages(t *testing.T) {
	for _, tc := range []struct {
		err  claude.ExitError
		want string
	}{
		{claude.ExitError{Code: 3, SessionID: "s", Stderr: "boom\n"},
			"claude: CLI exited with code 3 (session s); stderr: boom"},
		{claude.ExitError{Code: -1, Signal: "killed", During: "mid-turn"},
			"claude: CLI was terminated by signal killed mid-turn; stderr was empty"},
		{claude.ExitError{Code: -1, Signal: "terminated", KeptRunning: 5 * time.Second, SessionID: "s", Stderr: "bye"},
			"claude: CLI closed its output but kept running; it was stopped after 5s (session s); stderr: bye"},
		{claude.ExitError{Code: -1, Signal: "killed", KeptRunning: 10 * time.Second, During: "mid-turn"},
			"claude: CLI closed its output mid-turn but kept running; it was killed after 10s; stderr was empty"},
		{claude.ExitError{Code: 0, KeptRunning: 5 * time.Second}, // it caught SIGTERM and exited 0
			"claude: CLI closed its output but kept running; it was stopped after 5s; stderr was empty"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%+v:\n got %s\nwant %s", tc.err, got, tc.want)
		}
	}
}
