package claude_test

import (
	"context"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
)

// A CLI that closes its stdout but keeps running is over for the protocol:
// the session gives it the grace period, stops it (and its child) as Close
// would, and reports why, instead of waiting for ever for it to exit.
func TestOutputClosedButKeptRunning(t *testing.T) {
	for _, tc := range []struct {
		mode, signal, said string
		after              time.Duration
	}{
		{"closeout", "terminated", "stopped after 300ms", 300 * time.Millisecond},
		{"closeout-stubborn", "killed", "killed after 700ms", 700 * time.Millisecond}, // grace + kill delay
	} {
		t.Run(tc.mode, func(t *testing.T) {
			defer claude.SetShutdownTimings(300*time.Millisecond, 400*time.Millisecond, 100*time.Millisecond)()
			ctx := context.Background()
			s := startFake(t, ctx, tc.mode)
			defer s.Close()
			if _, err := s.Initialize(ctx); err != nil {
				t.Fatal(err)
			}
			cli := s.PID()
			start := time.Now()
			select {
			case <-s.Done():
			case <-time.After(10 * time.Second):
				t.Fatalf("Done not closed 10s after the CLI closed its output; stderr %q", s.StderrTail())
			}
			t.Logf("Done after %v", time.Since(start).Round(time.Millisecond))

			err := s.Err()
			var ee *claude.ExitError
			if !errors.As(err, &ee) || ee.KeptRunning != tc.after || ee.Signal != tc.signal || !errors.Is(err, claude.ErrClosed) {
				t.Fatalf("Err = %#v, want an ExitError with KeptRunning %v and signal %s", err, tc.after, tc.signal)
			}
			want := "claude: CLI closed its output but kept running; it was " + tc.said + " (session s-closeout); stderr: "
			if msg := err.Error(); !strings.HasPrefix(msg, want) || !strings.Contains(msg, "closed stdout") {
				t.Errorf("Err = %q,\nwant %q and the stderr tail", msg, want+"…")
			}
			for {
				_, nerr := s.Next(ctx)
				if nerr != nil {
					if !errors.As(nerr, &ee) || ee.KeptRunning != tc.after {
						t.Errorf("Next at the end = %v, want the same ExitError", nerr)
					}
					break
				}
			}
			if cerr := s.Close(); !errors.As(cerr, &ee) || ee.KeptRunning != tc.after {
				t.Errorf("Close = %v, want the same ExitError", cerr)
			}
			child := regexp.MustCompile(`child (\d+)`).FindStringSubmatch(s.StderrTail())
			if child == nil {
				t.Fatalf("no child pid in stderr %q", s.StderrTail())
			}
			pid, _ := strconv.Atoi(child[1])
			waitGone(t, "the stop", map[string]int{"cli": cli, "child": pid})
		})
	}
}

// A CLI that closes its stdout and exits at once is reported as ever, with
// no delay: not the grace period the one that kept running was given.
func TestOutputClosedThenExited(t *testing.T) {
	for _, tc := range []struct {
		mode string
		code int // -1: a clean exit
	}{{"closeout-exit0", -1}, {"closeout-exit4", 4}} {
		t.Run(tc.mode, func(t *testing.T) {
			// A minute's grace period: an exit that waited for it stands
			// out from one a busy machine made slow.
			defer claude.SetShutdownTimings(time.Minute, 5*time.Second, 2*time.Second)()
			ctx := context.Background()
			s := startFake(t, ctx, tc.mode)
			defer s.Close()
			if _, err := s.Initialize(ctx); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			select {
			case <-s.Done():
			case <-time.After(2 * time.Minute):
				t.Fatal("Done not closed 2 minutes after the CLI exited")
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("Done after %v: the exit waited for something", d)
			}
			var err error
			for err == nil {
				_, err = s.Next(ctx)
			}
			var ee *claude.ExitError
			switch {
			case tc.code < 0:
				if s.Err() != nil || !errors.Is(err, io.EOF) || s.Close() != nil {
					t.Errorf("Err = %v, Next = %v, Close = %v; want a clean end", s.Err(), err, s.Close())
				}
			case !errors.As(s.Err(), &ee) || ee.Code != tc.code || ee.KeptRunning != 0 || ee.Signal != "":
				t.Errorf("Err = %#v, want an exit with code %d", s.Err(), tc.code)
			case !strings.HasPrefix(s.Err().Error(), "claude: CLI exited with code 4 (session s-closeout)"):
				t.Errorf("Err = %q", s.Err())
			}
		})
	}
}
