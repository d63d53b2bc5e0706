package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// These tests run resume, fork, close and interrupt against an in-process
// daemon whose sessions run the real CLI against the scripted model.

func TestCloseThenResume(t *testing.T) {
	t.Parallel()
	d, model := startDaemonModel(t, nil,
		claudetest.Reply(claudetest.Text("Noted: blue.")),
		claudetest.Reply(claudetest.Text("It was blue.")),
		claudetest.Reply(claudetest.Text("Still blue.")))
	id := d.create(t, t.TempDir(), "My colour is blue.")
	d.waitResults(t, id, 1)
	d.waitIdle(t, id)

	// A session with its CLI (idle, as sessions shows it) needs no resume:
	// claudectl says so, not "already running".
	o := claudectl(t, d.inv(), "resume", id)
	if want := "Session " + id + " is idle with its CLI: nothing to resume (claudectl send " + id + " TEXT talks to it).\n"; o.code != 0 || o.stdout != want || o.stderr != "" {
		t.Errorf("resume of an idle session: exit %d, stdout %q, stderr %q; want 0 and %q", o.code, o.stdout, o.stderr, want)
	}
	// Nor is there a turn to interrupt.
	o = claudectl(t, d.inv(), "interrupt", id)
	if want := "Session " + id + " is idle: no turn was running, nothing to interrupt.\n"; o.code != 0 || o.stdout != want {
		t.Errorf("interrupt of an idle session: exit %d, stdout %q, stderr %q; want 0 and %q", o.code, o.stdout, o.stderr, want)
	}

	o = claudectl(t, d.inv(), "close", id)
	if o.code != 0 || o.stdout != "Closed session "+id+".\n" {
		t.Fatalf("close: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	if st := d.session(t, id).Status; st != v1.SessionStatus_SESSION_STATUS_CLOSED {
		t.Fatalf("after close the session is %s", statusName(st))
	}
	// Closing again is not an error.
	if o := claudectl(t, d.inv(), "close", id); o.code != 0 {
		t.Errorf("close twice: exit %d, stderr %q", o.code, o.stderr)
	}
	// Nor is there a turn to interrupt.
	o = claudectl(t, d.inv(), "interrupt", id)
	if o.code != 1 || !strings.Contains(o.stderr, "not possible now") || !strings.Contains(o.stderr, "claudectl resume "+id) {
		t.Errorf("interrupt of a closed session: exit %d, stderr %q", o.code, o.stderr)
	}

	// Without a terminal or --attach, resume returns once the prompt is sent.
	o = claudectl(t, d.inv(), "resume", id, "What", "was", "my", "colour?")
	if o.code != 0 || !regexp.MustCompile(`^Resumed session `+id+` \((starting|idle|running|waiting)\)\.\n$`).MatchString(o.stdout) {
		t.Fatalf("resume: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	if !strings.Contains(o.stderr, "claudectl attach "+id) {
		t.Errorf("resume does not say how to follow the turn: %q", o.stderr)
	}
	d.waitResults(t, id, 2)
	conv := lastConversation(t, model)
	for _, want := range []string{"user: My colour is blue.", "assistant: Noted: blue.", "user: What was my colour?"} {
		if !strings.Contains(conv, want) {
			t.Errorf("the resumed request lacks %q:\n%s", want, conv)
		}
	}

	// resume --attach follows the reply to its prompt, then returns.
	d.closeSession(t, id)
	o = claudectl(t, d.inv(), "resume", "--attach", id, "And now?")
	if o.code != 0 {
		t.Fatalf("resume --attach: exit %d", o.code)
	}
	if !strings.Contains(o.stdout, "Resumed session "+id) || !strings.HasSuffix(o.stdout, "> And now?\n\nStill blue.\n") {
		t.Errorf("resume --attach stdout:\n%s", o.stdout)
	}
	if strings.Contains(o.stdout, "Noted: blue.") || strings.Contains(o.stdout, "It was blue.") {
		t.Errorf("resume --attach replayed the history:\n%s", o.stdout)
	}
	if !strings.Contains(o.stderr, "attached to session "+id) {
		t.Errorf("resume --attach stderr: %q", o.stderr)
	}
	if st := d.session(t, id).Status; st == v1.SessionStatus_SESSION_STATUS_CLOSED || st == v1.SessionStatus_SESSION_STATUS_FAILED {
		t.Errorf("after resume --attach the session is %s, want it left running", statusName(st))
	}
}

// TestResumeRunningSendsPrompt: resume with a prompt of a session that has
// its CLI sends the prompt, as send does.
func TestResumeRunningSendsPrompt(t *testing.T) {
	t.Parallel()
	d, model := startDaemonModel(t, nil,
		claudetest.Reply(claudetest.Text("Noted: green.")),
		claudetest.Reply(claudetest.Text("It was green.")))
	id := d.create(t, t.TempDir(), "My colour is green.")
	d.waitResults(t, id, 1)
	d.waitStatus(t, id, v1.SessionStatus_SESSION_STATUS_IDLE)
	o := claudectl(t, d.inv(), "resume", id, "What", "was", "it?")
	if want := "Session " + id + " was idle with its CLI: nothing to resume; sent the prompt to it.\n"; o.code != 0 || o.stdout != want {
		t.Fatalf("resume of an idle session with a prompt: exit %d, stdout %q, stderr %q; want 0 and %q", o.code, o.stdout, o.stderr, want)
	}
	d.waitResults(t, id, 2)
	if conv := lastConversation(t, model); !strings.Contains(conv, "user: What was it?") {
		t.Errorf("the prompt did not reach the model:\n%s", conv)
	}
}

// TestSuspendedSession: interrupt of a suspended session says there was
// no turn; resume starts its CLI again.
func TestSuspendedSession(t *testing.T) {
	t.Parallel()
	d, _ := startDaemonModel(t, &daemontest.Options{IdleTimeout: 300 * time.Millisecond},
		claudetest.Reply(claudetest.Text("Noted.")))
	id := d.create(t, t.TempDir(), "Remember this.")
	d.waitResults(t, id, 1)
	d.waitStatus(t, id, v1.SessionStatus_SESSION_STATUS_SUSPENDED)
	o := claudectl(t, d.inv(), "interrupt", id)
	if want := "Session " + id + " is suspended: no turn was running, nothing to interrupt.\n"; o.code != 0 || o.stdout != want {
		t.Errorf("interrupt of a suspended session: exit %d, stdout %q, stderr %q; want 0 and %q", o.code, o.stdout, o.stderr, want)
	}
	o = claudectl(t, d.inv(), "resume", id)
	if o.code != 0 || !regexp.MustCompile(`^Resumed session `+id+` \((starting|idle|running)\)\.\n$`).MatchString(o.stdout) {
		t.Errorf("resume of a suspended session: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
}
