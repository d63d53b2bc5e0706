package cli

import (
	"regexp"
	"strings"
	"testing"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
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

	// A session with its CLI cannot be resumed; the daemon says why.
	o := claudectl(t, d.inv(), "resume", id, "hello?")
	if o.code != 1 || !strings.Contains(o.stderr, "resuming session "+id+": not possible now:") ||
		!strings.Contains(o.stderr, "already running") || !strings.Contains(o.stderr, "claudectl send "+id) {
		t.Errorf("resume of a running session: exit %d, stderr %q; want 1 with the daemon's reason", o.code, o.stderr)
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
