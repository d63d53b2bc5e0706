package cli

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// testDaemon is an in-process daemon on 127.0.0.1 whose sessions run the
// real CLI against a scripted fake API (as in daemon/api's tests).
type testDaemon struct {
	url      string
	ctx      context.Context
	sessions claudectlv1connect.SessionServiceClient
}

func startDaemon(t *testing.T, turns ...claudetest.Turn) *testDaemon {
	t.Helper()
	return startDaemonToken(t, "", turns...)
}

// startDaemonToken is startDaemon requiring the bearer token (if not "").
func startDaemonToken(t *testing.T, token string, turns ...claudetest.Turn) *testDaemon {
	t.Helper()
	d := daemontest.Start(t, &daemontest.Options{Token: token}, turns...)
	url, httpc := d.Serve()
	return &testDaemon{url: url, ctx: d.Ctx, sessions: claudectlv1connect.NewSessionServiceClient(httpc, url)}
}

// inv points the client commands at the daemon through CLAUDECTL_SERVER.
func (d *testDaemon) inv() invocation {
	return invocation{getenv: map[string]string{"CLAUDECTL_SERVER": d.url}}
}

func TestClientRules(t *testing.T) {
	d := startDaemon(t)
	o := claudectl(t, d.inv(), "rules", "add", "Bash(touch:*)", "allow")
	if o.code != 0 || !strings.Contains(o.stdout, "Added rule") {
		t.Fatalf("rules add: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	id := regexp.MustCompile(`Added rule (\S+):`).FindStringSubmatch(o.stdout)[1]

	// --server wins over the environment.
	inv := d.inv()
	inv.getenv["CLAUDECTL_SERVER"] = "http://127.0.0.1:1"
	o = claudectl(t, inv, "rules", "list", "--server", d.url)
	if o.code != 0 || !strings.Contains(o.stdout, "Bash(touch:*)") || !strings.Contains(o.stdout, "allow") || !strings.Contains(o.stdout, id) {
		t.Fatalf("rules list: exit %d, stdout %q", o.code, o.stdout)
	}

	o = claudectl(t, d.inv(), "rules", "list", "--json")
	var rules []ruleJSON
	if err := json.Unmarshal([]byte(o.stdout), &rules); err != nil || len(rules) != 1 ||
		rules[0].ID != id || rules[0].Pattern != "Bash(touch:*)" || rules[0].Behavior != "allow" || rules[0].Scope != "global" {
		t.Fatalf("rules list --json = %+v (%v)", rules, err)
	}

	dir := t.TempDir()
	o = claudectl(t, d.inv(), "rules", "add", "Read(./src/**)", "deny", "--project", dir)
	if o.code != 0 || !strings.Contains(o.stdout, "project ") {
		t.Fatalf("rules add --project: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}

	o = claudectl(t, d.inv(), "rules", "rm", id)
	if o.code != 0 {
		t.Fatalf("rules rm: exit %d, stderr %q", o.code, o.stderr)
	}
	o = claudectl(t, d.inv(), "rules", "list")
	if o.code != 0 || strings.Contains(o.stdout, "Bash(touch:*)") || !strings.Contains(o.stdout, "Read(./src/**)") {
		t.Fatalf("rules list after rm: exit %d, stdout %q", o.code, o.stdout)
	}
	o = claudectl(t, d.inv(), "rules", "rm", id)
	if o.code != 1 || !strings.Contains(o.stderr, "not found") {
		t.Errorf("rules rm twice: exit %d, stderr %q; want 1 and not found", o.code, o.stderr)
	}
}

func TestClientSessionsAndSend(t *testing.T) {
	d := startDaemon(t, claudetest.Reply(claudetest.Text("hi")))
	cwd := t.TempDir()
	res, err := d.sessions.CreateSession(d.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: cwd}}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.Session.Id

	o := claudectl(t, d.inv(), "sessions", "--json")
	var list []sessionJSON
	if err := json.Unmarshal([]byte(o.stdout), &list); o.code != 0 || err != nil {
		t.Fatalf("sessions --json: exit %d, %v, stdout %q", o.code, err, o.stdout)
	}
	if len(list) != 1 || list[0].ID != id || list[0].Cwd != cwd || list[0].Status == "" {
		t.Errorf("sessions --json = %+v, want session %s in %s", list, id, cwd)
	}

	o = claudectl(t, d.inv(), "sessions")
	if o.code != 0 || !strings.Contains(o.stdout, "STATUS") || !strings.Contains(o.stdout, id) {
		t.Errorf("sessions: exit %d, stdout %q", o.code, o.stdout)
	}

	o = claudectl(t, d.inv(), "send", "no-such-session", "hello")
	if o.code != 1 || !strings.Contains(o.stderr, "not found") || !strings.Contains(o.stderr, "no-such-session") {
		t.Errorf("send to unknown id: exit %d, stderr %q; want 1 and not found", o.code, o.stderr)
	}

	o = claudectl(t, d.inv(), "deny", "no-such-request", "--message", "no")
	if o.code != 1 || !strings.Contains(o.stderr, "no-such-request") {
		t.Errorf("deny unknown request: exit %d, stderr %q", o.code, o.stderr)
	}
}

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
			if o.code != 1 || !strings.Contains(o.stderr, "already decided by client:claudectl") || !strings.Contains(o.stderr, "first decision wins") {
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

func TestClientToken(t *testing.T) {
	d := startDaemonToken(t, "s3cret")
	o := claudectl(t, d.inv(), "rules", "list")
	if o.code != 1 || !strings.Contains(o.stderr, "bearer token") {
		t.Errorf("without a token: exit %d, stderr %q", o.code, o.stderr)
	}
	inv := d.inv()
	inv.getenv["CLAUDECTL_TOKEN"] = "s3cret"
	if o := claudectl(t, inv, "rules", "list"); o.code != 0 {
		t.Errorf("CLAUDECTL_TOKEN: exit %d, stderr %q", o.code, o.stderr)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if o := claudectl(t, d.inv(), "sessions", "--token-file", file); o.code != 0 {
		t.Errorf("--token-file: exit %d, stderr %q", o.code, o.stderr)
	}
}

func TestClientDaemonUnreachable(t *testing.T) {
	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{
		{"sessions", "--server", addr},
		{"send", "--server", addr, "s1", "hello"},
		{"approve", "--server", addr, "r1"},
		{"deny", "--server", addr, "r1"},
		{"rules", "list", "--server", addr},
	} {
		o := claudectl(t, invocation{}, args...)
		want := "cannot reach the claudectl daemon at " + addr + " (start it with `claudectl serve`)"
		if o.code != 1 || !strings.Contains(o.stderr, want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", args, o.code, o.stderr, want)
		}
	}
}

func TestClientUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sessions", "extra"}, `"extra"`},
		{[]string{"send"}, "SESSION_ID"},
		{[]string{"send", "s1"}, "TEXT"},
		{[]string{"approve"}, "REQUEST_ID"},
		{[]string{"approve", "r1", "r2"}, `"r2"`},
		{[]string{"approve", "r1", "--message", "x"}, "--message"},
		{[]string{"deny", "r1", "--always"}, "--always"},
		{[]string{"rules"}, "subcommand"},
		{[]string{"rules", "frob"}, `"frob"`},
		{[]string{"rules", "add"}, "PATTERN"},
		{[]string{"rules", "add", "Bash"}, "BEHAVIOR"},
		{[]string{"rules", "add", "Bash", "maybe"}, `"maybe"`},
		{[]string{"rules", "add", "Bash", "allow", "--project", "/no/such/dir"}, "--project"},
		{[]string{"rules", "add", "Bash", "allow", "--project", ".", "--session", "s"}, "--session"},
		{[]string{"rules", "list", "--session", "s"}, "--session"},
		{[]string{"rules", "rm"}, "RULE_ID"},
		{[]string{"sessions", "--server", "ftp://x"}, "--server"},
		{[]string{"sessions", "--token-file", "/no/such/file"}, "--token-file"},
	} {
		o := claudectl(t, invocation{}, tc.args...)
		if o.code != ExitUsage || !strings.Contains(o.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", tc.args, o.code, o.stderr, tc.want)
		}
	}
	o := claudectl(t, invocation{}, "rules", "-h")
	if o.code != 0 || !strings.Contains(o.stdout, "rules add") || !strings.Contains(o.stdout, "CLAUDECTL_SERVER") {
		t.Errorf("rules -h: exit %d, stdout %q", o.code, o.stdout)
	}
}
