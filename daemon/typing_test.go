package daemon_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// Someone typing into a suspended session resumes it: its CLI is started
// (--resume) before the prompt comes, and the prompt goes to that CLI,
// which continues the conversation. Typing into a session with a CLI, a
// closed one or an unknown one starts nothing.
func TestTypingResumesSuspendedSession(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{IdleTimeout: time.Minute},
		claudetest.Reply(claudetest.Text("I will remember 42.")),
		claudetest.Reply(claudetest.Text("You said 42.")))
	d, ctx := td.D, td.Ctx
	s := suspended(t, td, "Remember the number 42.")

	if resuming, err := d.Typing(ctx, s.ID); err != nil || !resuming {
		t.Fatalf("Typing into a suspended session: resuming %v, err %v", resuming, err)
	}
	got := waitStatus(t, d, ctx, s.ID, store.StatusIdle)
	if got.Process != 2 || d.Running() != 1 {
		t.Fatalf("after Typing: process %d, %d CLIs running; want the second process, running", got.Process, d.Running())
	}
	if resuming, err := d.Typing(ctx, s.ID); err != nil || resuming {
		t.Errorf("Typing into a running session: resuming %v, err %v", resuming, err)
	}
	if err := d.Send(ctx, s.ID, "Which number?"); err != nil {
		t.Fatal(err)
	}
	for got.Totals.Turns < 2 {
		got = waitStatus(t, d, ctx, s.ID, store.StatusIdle)
	}
	if got.Process != 2 {
		t.Errorf("the prompt ran in process %d, not in the one Typing started", got.Process)
	}
	reqs := td.Model.Requests()
	if conv := reqs[len(reqs)-1].Transcript(); !strings.Contains(conv, "I will remember 42.") || !strings.Contains(conv, "Which number?") {
		t.Errorf("the CLI Typing started lacks the first exchange:\n%s", conv)
	}

	if err := d.CloseSession(ctx, s.ID, "test"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, ctx, s.ID, store.StatusClosed)
	if resuming, err := d.Typing(ctx, s.ID); err != nil || resuming {
		t.Errorf("Typing into a closed session: resuming %v, err %v", resuming, err)
	}
	if _, err := d.Typing(ctx, "NOSUCHSESSION"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Typing into an unknown session: %v, want ErrNotFound", err)
	}
}

// A session resumed for someone typing that no prompt follows is
// suspended again after the idle timeout.
func TestTypingResumeSleepsAgain(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{IdleTimeout: 500 * time.Millisecond},
		claudetest.Reply(claudetest.Text("Noted.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "Note this.")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, ctx, s.ID, store.StatusSuspended)
	if resuming, err := d.Typing(ctx, s.ID); err != nil || !resuming {
		t.Fatalf("Typing into a suspended session: resuming %v, err %v", resuming, err)
	}
	for { // resumed: a second process
		got, err := d.Session(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Process == 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("Typing started no CLI")
		case <-time.After(20 * time.Millisecond):
		}
	}
	got := waitStatus(t, d, ctx, s.ID, store.StatusSuspended)
	if got.Process != 2 || got.Totals.Turns != 1 {
		t.Errorf("suspended again: process %d, turns %d", got.Process, got.Totals.Turns)
	}
	if st := lastStatus(t, td, s.ID); st == nil || !strings.Contains(st.Detail, "idle for 500ms") {
		t.Errorf("the second suspension's status event: %+v", st)
	}
}

// A subscription to a suspended session gets the events of the CLI that
// Typing (or a prompt) starts, then, once the session is suspended again
// and closed, the closed event, and ends. Before, the close of a session
// without a CLI was only stored: the subscription waited forever.
func TestSubscriberOfSuspendedSessionSeesClose(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{IdleTimeout: time.Minute},
		claudetest.Reply(claudetest.Text("Noted.")))
	d, ctx := td.D, td.Ctx
	s := suspended(t, td, "Remember this.")

	statuses := make(chan store.SessionStatus, 100)
	ended := make(chan error, 1)
	go func() {
		for ev, err := range d.Subscribe(ctx, s.ID, 0) {
			if err != nil {
				ended <- err
				return
			}
			if st, ok := ev.Body.(*daemon.StatusChange); ok {
				statuses <- st.Status
			}
		}
		ended <- nil
	}()
	if resuming, err := d.Typing(ctx, s.ID); err != nil || !resuming {
		t.Fatalf("Typing: resuming %v, err %v", resuming, err)
	}
	waitStatus(t, d, ctx, s.ID, store.StatusIdle)
	daemon.SuspendForTest(d, s.ID, "suspended again by the test")
	waitStatus(t, d, ctx, s.ID, store.StatusSuspended)
	if err := d.CloseSession(ctx, s.ID, "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the subscription ended with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the subscription did not end after the suspended session was closed")
	}
	close(statuses)
	var last store.SessionStatus
	for st := range statuses {
		last = st
	}
	if last != store.StatusClosed {
		t.Errorf("the subscription's last status is %q, want closed", last)
	}
}

// suspended creates a session with prompt on td's daemon, waits for its
// turn to end and suspends it.
func suspended(t *testing.T, td *daemontest.Daemon, prompt string) *store.Session {
	t.Helper()
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, prompt)
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, ctx, s.ID, store.StatusIdle)
	daemon.SuspendForTest(d, s.ID, "suspended by the test")
	return waitStatus(t, d, ctx, s.ID, store.StatusSuspended)
}
