package cli

import (
	"encoding/json"
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
