package cli

import (
	"encoding/json"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// These tests run resume, fork, close and interrupt against an in-process
// daemon whose sessions run the real CLI against the scripted model.

// lastConversation is the conversation of the model's last request.
func lastConversation(t *testing.T, model *claudetest.Server) string {
	t.Helper()
	reqs := model.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model got no request")
	}
	return reqs[len(reqs)-1].Transcript()
}

func (d *testDaemon) session(t *testing.T, id string) *v1.Session {
	t.Helper()
	res, err := d.sessions.GetSession(d.ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg.Session
}

// waitStatus waits until session id has status st.
func (d *testDaemon) waitStatus(t *testing.T, id string, st v1.SessionStatus) {
	t.Helper()
	waitFor(t, "session "+id+" to be "+statusName(st), func() bool { return d.session(t, id).Status == st })
}

func TestCloseThenResume(t *testing.T) {
	t.Parallel()
	d, model := startRemote(t, nil,
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

func TestFork(t *testing.T) {
	t.Parallel()
	d, model := startRemote(t, nil,
		claudetest.Reply(claudetest.Text("Noted: 42.")),
		claudetest.Reply(claudetest.Text("It was 42.")))
	id := d.create(t, t.TempDir(), "Remember 42.")
	d.waitResults(t, id, 1)

	// The original still runs: a fork goes on apart from it.
	o := claudectl(t, d.inv(), "fork", id, "Which number?")
	m := regexp.MustCompile(`^Forked session ` + id + ` as (\S+) \(\w+\)\.\n$`).FindStringSubmatch(o.stdout)
	if o.code != 0 || m == nil {
		t.Fatalf("fork: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	fork := m[1]
	if fork == id {
		t.Fatalf("the fork has the original's id %s", id)
	}
	d.waitResults(t, fork, 1)
	conv := lastConversation(t, model)
	for _, want := range []string{"user: Remember 42.", "assistant: Noted: 42.", "user: Which number?"} {
		if !strings.Contains(conv, want) {
			t.Errorf("the fork's request lacks %q:\n%s", want, conv)
		}
	}
	if s := d.session(t, fork); s.ParentId != id || s.ClaudeSessionId == "" || s.ClaudeSessionId == d.session(t, id).ClaudeSessionId {
		t.Errorf("fork: parent %q, CLI session %q (original's %q)", s.ParentId, s.ClaudeSessionId, d.session(t, id).ClaudeSessionId)
	}

	// --json prints the new session, for scripts.
	o = claudectl(t, d.inv(), "fork", "--json", id)
	var js sessionJSON
	if err := json.Unmarshal([]byte(o.stdout), &js); o.code != 0 || err != nil || js.ID == "" || js.ID == id || js.ID == fork || js.ParentID != id {
		t.Fatalf("fork --json: exit %d, %+v (%v), stderr %q", o.code, js, err, o.stderr)
	}

	// sessions shows where each fork came from.
	o = claudectl(t, d.inv(), "sessions")
	if o.code != 0 || !strings.Contains(o.stdout, "PARENT") || strings.Contains(o.stdout, "ERROR") {
		t.Fatalf("sessions: exit %d, stdout:\n%s", o.code, o.stdout)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(o.stdout), "\n")[1:] {
		f := strings.Fields(l)
		rows[f[0]] = f
	}
	if r := rows[fork]; len(r) != 6 || r[5] != id {
		t.Errorf("the fork's row %q does not name its parent %s", r, id)
	}
	if r := rows[id]; len(r) != 6 || r[5] != "-" {
		t.Errorf("the original's row %q has a parent", r)
	}
	o = claudectl(t, d.inv(), "sessions", "--json")
	var list []sessionJSON
	if err := json.Unmarshal([]byte(o.stdout), &list); err != nil || len(list) != 3 {
		t.Fatalf("sessions --json: %v, %d sessions", err, len(list))
	}
	for _, s := range list {
		if want := map[bool]string{true: "", false: id}[s.ID == id]; s.ParentID != want {
			t.Errorf("sessions --json: %s has parent %q, want %q", s.ID, s.ParentID, want)
		}
	}

	o = claudectl(t, d.inv(), "fork", "no-such-session")
	if o.code != 1 || !strings.Contains(o.stderr, "forking session no-such-session: not found") {
		t.Errorf("fork of an unknown session: exit %d, stderr %q", o.code, o.stderr)
	}
}

func TestInterrupt(t *testing.T) {
	t.Parallel()
	const words = 2000
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("slow ", words))},
		ChunkSize: 5, DeltaDelay: 50 * time.Millisecond}
	d, _ := startRemote(t, nil, slow, claudetest.Reply(claudetest.Text("Next turn.")))
	id := d.create(t, t.TempDir(), "go slowly")
	waitFor(t, "the reply to stream", func() bool {
		stream, err := d.sessions.Subscribe(d.ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
		if err != nil {
			return false
		}
		defer stream.Close()
		for stream.Receive() {
			if stream.Msg().Event.GetTextDelta() != nil {
				return true
			}
		}
		return false
	})
	start := time.Now()
	o := claudectl(t, d.inv(), "interrupt", id)
	if o.code != 0 || o.stdout != "Interrupted session "+id+".\n" {
		t.Fatalf("interrupt: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	d.waitResults(t, id, 1)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the turn ended %v after the interrupt: it was not cut short", took)
	}
	d.waitStatus(t, id, v1.SessionStatus_SESSION_STATUS_IDLE)

	// The session goes on.
	if o := claudectl(t, d.inv(), "send", id, "next"); o.code != 0 {
		t.Fatalf("send after the interrupt: exit %d, stderr %q", o.code, o.stderr)
	}
	d.waitResults(t, id, 2)
}

// sessions shows why a session failed.
func TestSessionsShowsError(t *testing.T) {
	t.Parallel()
	// It answers --version, which the daemon asks at start, and breaks on a session.
	broken := script(t, `[ "$1" = --version ] && { echo "2.1.329 (Claude Code)"; exit 0; }; echo "boom: the CLI broke" >&2; exit 3`)
	dd := daemontest.Start(t, &daemontest.Options{CLIPath: broken})
	url, _ := dd.Serve()
	d := &testDaemon{url: url, ctx: dd.Ctx}
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
}

func TestLifecycleUsageAndErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"resume"}, "SESSION_ID"},
		{[]string{"resume", "s1", " "}, "PROMPT is empty"},
		{[]string{"resume", "--attach", "--json", "s1"}, "--attach"},
		{[]string{"fork"}, "SESSION_ID"},
		{[]string{"fork", "--bogus", "s1"}, "bogus"},
		{[]string{"close"}, "SESSION_ID"},
		{[]string{"close", "s1", "s2"}, `"s2"`},
		{[]string{"interrupt"}, "SESSION_ID"},
		{[]string{"interrupt", "s1", "s2"}, `"s2"`},
		{[]string{"close", "--server", "ftp://x", "s1"}, "--server"},
	} {
		o := claudectl(t, invocation{}, tc.args...)
		if o.code != ExitUsage || !strings.Contains(o.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", tc.args, o.code, o.stderr, tc.want)
		}
	}
	for _, name := range []string{"resume", "fork", "close", "interrupt"} {
		o := claudectl(t, invocation{}, name, "-h")
		if o.code != 0 || !strings.Contains(o.stdout, "Usage: claudectl "+name) || !strings.Contains(o.stdout, "CLAUDECTL_SERVER") {
			t.Errorf("%s -h: exit %d, stdout %q", name, o.code, o.stdout)
		}
	}

	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	for _, name := range []string{"resume", "fork", "close", "interrupt"} {
		o := claudectl(t, invocation{getenv: map[string]string{"CLAUDECTL_SERVER": addr}}, name, "s1")
		want := "cannot reach the claudectl daemon at " + addr + " (start it with `claudectl serve`)"
		if o.code != 1 || !strings.Contains(o.stderr, want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", name, o.code, o.stderr, want)
		}
	}

	d := startDaemonToken(t, "s3cret")
	for _, name := range []string{"resume", "close", "interrupt"} {
		o := claudectl(t, d.inv(), name, "no-such-session")
		if o.code != 1 || !strings.Contains(o.stderr, "bearer token") {
			t.Errorf("%s without the token: exit %d, stderr %q", name, o.code, o.stderr)
		}
		inv := d.inv()
		inv.getenv["CLAUDECTL_TOKEN"] = "s3cret"
		o = claudectl(t, inv, name, "no-such-session")
		if o.code != 1 || !strings.Contains(o.stderr, "session no-such-session: not found") {
			t.Errorf("%s of an unknown session: exit %d, stderr %q", name, o.code, o.stderr)
		}
	}
}
