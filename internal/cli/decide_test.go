package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
)

func TestClientApproveThenDenyLoses(t *testing.T) {
	d := startDaemon(t,
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "touch x", "description": "Create x"})),
		claudetest.Reply(claudetest.Text("Created x.")))
	dir := t.TempDir()
	res, err := d.sessions.CreateSession(d.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: dir}, Prompt: "Create x"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(d.ctx)
	defer cancel()
	stream, err := d.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: res.Msg.Session.Id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	decided, sawResult := 0, false
	for stream.Receive() {
		ev := stream.Msg().Event
		if pr := ev.GetPermissionRequest(); pr != nil {
			o := claudectl(t, d.inv(), "approve", pr.RequestId)
			if o.code != 0 || !strings.Contains(o.stdout, "Allowed "+pr.RequestId) || !strings.Contains(o.stdout, "Bash") {
				t.Errorf("approve: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
			}
			o = claudectl(t, d.inv(), "deny", pr.RequestId, "--message", "no")
			if o.code != 1 || !strings.Contains(o.stderr, "already decided by client:claudectl approve (") || !strings.Contains(o.stderr, "first decision wins") {
				t.Errorf("late deny: exit %d, stderr %q; want 1 saying who won", o.code, o.stderr)
			}
			decided++
		}
		if ev.GetMessage().GetType() == "result" {
			sawResult = true
		}
		if sawResult && ev.GetStatusChange().GetStatus() == v1.SessionStatus_SESSION_STATUS_IDLE {
			break
		}
	}
	if decided != 1 {
		t.Fatalf("saw %d permission requests, want 1 (stream: %v)", decided, stream.Err())
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err != nil {
		t.Errorf("x was not created after approve: %v", err)
	}
}

// approve on a question says it is one and how to answer it; deny refuses
// it.
func TestApproveQuestion(t *testing.T) {
	t.Parallel()
	ask := colorQuestion()
	d, _ := startDaemonModel(t, nil, claudetest.Reply(ask), claudetest.Reply(claudetest.Text("No color then.")))
	id := d.create(t, t.TempDir(), "pick a color")
	reqID := d.permissionRequest(t, id)
	o := claudectl(t, d.inv(), "approve", reqID[:len(reqID)-2])
	want := "claudectl approve: request " + reqID + " is a question Claude asks, not a permission: answer it in claudectl attach " + id + ", or refuse it with claudectl deny " + reqID + "\n"
	if o.code != ExitFailure || o.stderr != want {
		t.Errorf("approve on a question: exit %d, stderr %q; want 1 and %q", o.code, o.stderr, want)
	}
	if o := claudectl(t, d.inv(), "deny", reqID); o.code != 0 {
		t.Errorf("deny on a question: exit %d, stderr %q", o.code, o.stderr)
	}
	d.closeSession(t, id)
}

// pending shows what approve --always would store before anyone agrees to
// it, and approve --always says what it did: the rules rules list then has.
func TestApproveAlwaysShowsTheRules(t *testing.T) {
	t.Parallel()
	d, _ := startDaemonModel(t, nil,
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "touch x", "description": "Create x"})),
		claudetest.Reply(claudetest.Text("Created x.")))
	dir := t.TempDir()
	id := d.create(t, dir, "Create x")
	reqID := d.permissionRequest(t, id)

	o := claudectl(t, d.inv(), "pending", "--json")
	var list []struct {
		Always []string `json:"always"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &list); err != nil || o.code != 0 || len(list) != 1 {
		t.Fatalf("pending --json: exit %d, %v: %q", o.code, err, o.stdout)
	}
	// The CLI suggests a Bash rule for the project (its pattern is the
	// CLI's choice).
	always := list[0].Always
	bash := regexp.MustCompile(`^allow (Bash\(touch x[^)]*\)) in ` + regexp.QuoteMeta(dir) + ` \(a rule of the daemon's: claudectl rules rm revokes it\)$`)
	var pattern string
	for _, a := range always {
		if m := bash.FindStringSubmatch(a); m != nil {
			pattern = m[1]
		}
	}
	if pattern == "" {
		t.Fatalf("pending --json: always %q; want the project's Bash rule", always)
	}
	o = claudectl(t, d.inv(), "pending")
	if o.code != 0 || !strings.Contains(o.stdout, "\napprove --always "+reqID+" would also:\n") {
		t.Errorf("pending does not show what approve --always does: exit %d, stdout:\n%s", o.code, o.stdout)
	}
	for _, a := range always {
		if !strings.Contains(o.stdout, "\n  - "+a+"\n") {
			t.Errorf("pending does not show %q:\n%s", a, o.stdout)
		}
	}

	o = claudectl(t, d.inv(), "approve", "--always", reqID)
	if o.code != 0 || !strings.Contains(o.stdout, "Allowed "+reqID) || !strings.Contains(o.stdout, "\nAlways also did:\n") {
		t.Errorf("approve --always does not say what it stored: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	for _, a := range always {
		if !strings.Contains(o.stdout, "\n  - "+a+"\n") {
			t.Errorf("approve --always does not say %q: %q", a, o.stdout)
		}
	}
	d.waitResults(t, id, 1)
	o = claudectl(t, d.inv(), "rules", "list")
	if o.code != 0 || !regexp.MustCompile(`(?m)^\d+\s+allow\s+`+regexp.QuoteMeta(pattern)+`\s+project `+regexp.QuoteMeta(dir)+`$`).MatchString(o.stdout) {
		t.Errorf("rules list after approve --always: exit %d, stdout:\n%s", o.code, o.stdout)
	}
	d.closeSession(t, id)
}
