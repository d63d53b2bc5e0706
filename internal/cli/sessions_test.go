package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

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
	if o.code != 1 || o.stderr != "claudectl send: no session no-such-session (claudectl sessions lists them)\n" {
		t.Errorf("send to unknown id: exit %d, stderr %q; want 1 and not found", o.code, o.stderr)
	}

	o = claudectl(t, d.inv(), "deny", "no-such-request", "--message", "no")
	if o.code != 1 || !strings.Contains(o.stderr, "no-such-request") {
		t.Errorf("deny unknown request: exit %d, stderr %q", o.code, o.stderr)
	}
}

// sessions shows why a session failed.
func TestSessionsShowsError(t *testing.T) {
	t.Parallel()
	// It answers --version, which the daemon asks at start, and breaks on a session.
	broken := script(t, `[ "$1" = --version ] && { echo "2.1.329 (Claude Code)"; exit 0; }; echo "boom: the CLI broke" >&2; exit 3`)
	dd := daemontest.Start(t, &daemontest.Options{CLIPath: broken})
	url, _ := dd.Serve()
	d := &testDaemon{url: url, token: dd.Token(), ctx: dd.Ctx}
	inv := d.inv()
	o := claudectl(t, inv, "run", "--cwd", t.TempDir(), "hi") // run --server through CLAUDECTL_SERVER
	if o.code == 0 {
		t.Fatalf("run on a broken CLI: exit 0")
	}
	var list []sessionJSON
	waitFor(t, "the session to fail", func() bool {
		o = claudectl(t, inv, "sessions", "--json")
		list = nil
		return json.Unmarshal([]byte(o.stdout), &list) == nil && len(list) == 1 && list[0].Status == "failed"
	})
	if list[0].Error == "" {
		t.Fatalf("sessions --json: the failed session has no error: %+v", list[0])
	}
	o = claudectl(t, inv, "sessions")
	first, _, _ := strings.Cut(list[0].Error, "\n")
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if o.code != 0 || len(lines) != 2 || !strings.HasSuffix(strings.TrimSpace(lines[0]), "ERROR") ||
		!strings.Contains(lines[1], "failed") || !strings.Contains(lines[1], strings.TrimSpace(first)[:min(len(first), 40)]) {
		t.Errorf("sessions does not show the error %q:\n%s", first, o.stdout)
	}
	// The MODEL column of a session that set none says so, as the page does.
	if f := strings.Fields(lines[1]); len(f) < 3 || f[2] != "default" {
		t.Errorf("sessions: the MODEL column of a session with the default model is not \"default\":\n%s", o.stdout)
	}
}

// sessions shows the permission mode in effect, as Claude Code reports it,
// in a MODE column once a session is not in the default mode.
func TestSessionsShowModeInEffect(t *testing.T) {
	t.Parallel()
	d, _ := startDaemonModel(t, nil, claudetest.Reply(claudetest.Text("ok")), claudetest.Reply(claudetest.Text("ok")))
	id := d.create(t, t.TempDir(), "hi")
	d.waitResults(t, id, 1)
	o := claudectl(t, d.inv(), "sessions")
	if o.code != 0 || slices.Contains(strings.Fields(strings.SplitN(o.stdout, "\n", 2)[0]), "MODE") {
		t.Fatalf("sessions with every session in the default mode: exit %d, stdout:\n%s", o.code, o.stdout)
	}
	res, err := d.sessions.SetPermissionMode(d.ctx, connect.NewRequest(&v1.SetPermissionModeRequest{SessionId: id, Mode: "plan"}))
	if err != nil || res.Msg.Mode != "plan" {
		t.Fatalf("SetPermissionMode(plan) = %v, %v", res, err)
	}
	o = claudectl(t, d.inv(), "sessions")
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if o.code != 0 || len(lines) != 2 || !slices.Equal(strings.Fields(lines[0])[:4], []string{"ID", "STATUS", "MODEL", "MODE"}) {
		t.Fatalf("sessions: exit %d, stdout:\n%s", o.code, o.stdout)
	}
	if f := strings.Fields(lines[1]); f[0] != id || f[3] != "plan" {
		t.Errorf("the session's row %q, want mode plan", f)
	}
	o = claudectl(t, d.inv(), "sessions", "--json")
	var list []sessionJSON
	if err := json.Unmarshal([]byte(o.stdout), &list); err != nil || len(list) != 1 || list[0].PermissionMode != "plan" {
		t.Errorf("sessions --json: %+v, %v", list, err)
	}
}

// attach says how the permission mode in effect changed.
func TestModeChangeText(t *testing.T) {
	for _, c := range []struct {
		mode, requested, want string
	}{
		{"plan", "plan", "permission mode now plan"},
		{"default", "auto", "permission mode now default (auto was asked for)"},
		{"default", "", "permission mode now default (changed by Claude Code)"},
	} {
		if got := modeChangeText(&v1.PermissionModeChange{Mode: c.mode, Requested: c.requested}); got != c.want {
			t.Errorf("modeChangeText(%s, %s) = %q, want %q", c.mode, c.requested, got, c.want)
		}
	}
}
