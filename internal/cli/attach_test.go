package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/permission"
)

// These tests run attach and run --server against an in-process daemon
// whose sessions run the real CLI against the scripted model.

// startDaemonModel is startDaemon keeping the scripted model, for its requests.
func startDaemonModel(t *testing.T, opts *daemontest.Options, turns ...claudetest.Turn) (*testDaemon, *claudetest.Server) {
	t.Helper()
	dd := daemontest.Start(t, opts, turns...)
	url, httpc := dd.Serve()
	return &testDaemon{url: url, token: dd.Token(), ctx: dd.Ctx, sessions: claudectlv1connect.NewSessionServiceClient(httpc, url),
		perms: claudectlv1connect.NewPermissionServiceClient(httpc, url)}, dd.Model
}

// create starts a session in dir (streaming text deltas) with a prompt.
func (d *testDaemon) create(t *testing.T, dir, prompt string) string {
	t.Helper()
	res, err := d.sessions.CreateSession(d.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: dir, IncludePartialMessages: true}, Prompt: prompt}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg.Session.Id
}

func (d *testDaemon) closeSession(t *testing.T, id string) {
	t.Helper()
	if _, err := d.sessions.CloseSession(d.ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
}

// waitResults waits until session id has logged n results.
func (d *testDaemon) waitResults(t *testing.T, id string, n int) {
	t.Helper()
	waitFor(t, "the session's result", func() bool {
		stream, err := d.sessions.Subscribe(d.ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
		if err != nil {
			return false
		}
		defer stream.Close()
		seen := 0
		for stream.Receive() {
			if stream.Msg().Event.GetMessage().GetType() == "result" {
				if seen++; seen == n {
					return true
				}
			}
		}
		return false
	})
}

// waitIdle waits until session id is idle (its result is logged just
// before its status changes).
func (d *testDaemon) waitIdle(t *testing.T, id string) {
	t.Helper()
	waitFor(t, "the session to be idle", func() bool {
		res, err := d.sessions.GetSession(d.ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
		return err == nil && res.Msg.Session.Status == v1.SessionStatus_SESSION_STATUS_IDLE
	})
}

// permissionRequest waits for session id's first permission request and
// returns its id.
func (d *testDaemon) permissionRequest(t *testing.T, id string) string {
	t.Helper()
	var reqID string
	waitFor(t, "a permission request", func() bool {
		stream, err := d.sessions.Subscribe(d.ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
		if err != nil {
			return false
		}
		defer stream.Close()
		for stream.Receive() {
			if pr := stream.Msg().Event.GetPermissionRequest(); pr != nil {
				reqID = pr.RequestId
				return true
			}
		}
		return false
	})
	return reqID
}

// waitFor polls cond for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// background runs claudectl on its own goroutine; live gets its stdout as
// it is written, and wait returns how it ended.
func background(t *testing.T, inv invocation, args ...string) (live *lockedBuffer, wait func() outcome) {
	t.Helper()
	live = &lockedBuffer{}
	inv.stdout = live
	done := make(chan outcome, 1)
	go func() { done <- claudectl(t, inv, args...) }()
	return live, func() outcome {
		t.Helper()
		select {
		case o := <-done:
			return o
		case <-time.After(80 * time.Second):
			t.Fatal("claudectl did not end")
			return outcome{}
		}
	}
}

func TestAttachReplayAndLive(t *testing.T) {
	t.Parallel()
	d, _ := startDaemonModel(t, nil,
		claudetest.Reply(claudetest.Text("First reply.")),
		claudetest.Reply(claudetest.Text("Second reply.")))
	id := d.create(t, t.TempDir(), "first prompt")
	d.waitResults(t, id, 1)

	live, wait := background(t, d.inv(), "attach", id)
	waitFor(t, "the replayed reply", func() bool { return strings.Contains(live.String(), "First reply.") })
	if _, err := d.sessions.Send(d.ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: "second prompt"})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the live reply", func() bool { return strings.Contains(live.String(), "Second reply.") })
	d.closeSession(t, id)
	o := wait()
	if o.code != 0 {
		t.Fatalf("exit %d, want 0 once the session closed", o.code)
	}
	want := "> first prompt\n\nFirst reply.\n\n> second prompt\n\nSecond reply.\n"
	if o.stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", o.stdout, want)
	}
	for _, s := range []string{"claudectl: attached to session " + id, "session running", "session idle", "usage: turn $", "session " + id + " closed"} {
		if !strings.Contains(o.stderr, s) {
			t.Errorf("stderr lacks %q", s)
		}
	}
	if n := strings.Count(o.stderr, "closed"); n != 1 {
		t.Errorf("stderr says the session closed %d times, want once", n)
	}
}

// Attaching to a session that has ended replays it and ends; --json prints
// every event as a JSON line.
func TestAttachEndedSessionJSON(t *testing.T) {
	t.Parallel()
	d, _ := startDaemonModel(t, nil, claudetest.Reply(claudetest.Text("Only reply.")))
	id := d.create(t, t.TempDir(), "hello")
	d.waitResults(t, id, 1)
	d.closeSession(t, id)

	o := claudectl(t, d.inv(), "attach", "--json", id)
	if o.code != 0 {
		t.Fatalf("exit %d", o.code)
	}
	var last int64
	types := map[string]int{}
	var text strings.Builder
	for i, line := range strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n") {
		var ev eventJSON
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %d is not JSON: %v: %.200q", i+1, err, line)
		}
		if ev.Seq != last+1 || ev.SessionID != id {
			t.Errorf("line %d: seq %d after %d, session %q", i+1, ev.Seq, last, ev.SessionID)
		}
		last = ev.Seq
		types[ev.Type]++
		if ev.Type == "text_delta" {
			text.WriteString(ev.Text)
		}
		if ev.Type == "status" && ev.Status == "" {
			t.Errorf("line %d: status without a status", i+1)
		}
	}
	for _, typ := range []string{"message", "text_delta", "status", "usage_report"} {
		if types[typ] == 0 {
			t.Errorf("no %s event (events by type: %v)", typ, types)
		}
	}
	if text.String() != "Only reply." {
		t.Errorf("text deltas make %q", text.String())
	}

	// --from-seq skips the history before it.
	o = claudectl(t, d.inv(), "attach", "--json", "--from-seq", "3", id)
	if o.code != 0 || !strings.HasPrefix(o.stdout, `{"session_id":"`+id+`","seq":3,`) {
		t.Errorf("--from-seq 3: exit %d, stdout starts %.100q", o.code, o.stdout)
	}
}

func TestAttachApprovesBash(t *testing.T) {
	t.Parallel()
	d, model, dir, id := makeFileSession(t, nil, "Made it.")

	inv := d.inv()
	inv.tty, inv.stdin = true, "y\n"
	live, wait := background(t, inv, "attach", id)
	waitFor(t, "the reply after the tool", func() bool { return strings.Contains(live.String(), "Made it.") })
	d.closeSession(t, id)
	o := wait()
	if o.code != 0 {
		t.Fatalf("exit %d", o.code)
	}
	if !strings.Contains(o.stderr, "Allow Bash: touch made.txt? [y/N/a(lways)] ") {
		t.Errorf("no permission prompt on stderr: %q", o.stderr)
	}
	// The request's id, which approve and deny take, comes with the prompt.
	decs, err := d.perms.ListDecisions(d.ctx, connect.NewRequest(&v1.ListDecisionsRequest{SessionId: id}))
	if err != nil || len(decs.Msg.Decisions) != 1 {
		t.Fatalf("decisions: %v (%v)", decs, err)
	}
	if want := "claudectl: permission request " + decs.Msg.Decisions[0].RequestId + ": Bash: touch made.txt\n"; !strings.Contains(o.stderr, want) ||
		strings.Index(o.stderr, want) > strings.Index(o.stderr, "Allow Bash") {
		t.Errorf("no %q before the prompt:\n%s", want, o.stderr)
	}
	if !strings.Contains(o.stdout, "⏺ Bash(touch made.txt)\n  ⎿  (Bash completed with no output)\n") {
		t.Errorf("the tool call is not in the transcript:\n%s", o.stdout)
	}
	if !fileExists(filepath.Join(dir, "made.txt")) {
		t.Error("made.txt was not created: the approval did not reach the CLI")
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1]
	if uses := last.ToolUses(); len(uses) == 0 {
		t.Error("no tool call in the model's last request")
	} else if content, isError, ok := last.ToolResult(uses[0].ID); !ok || isError {
		t.Errorf("tool_result %q (is_error %v, found %v), want success", content, isError, ok)
	}
}

func TestAttachAnswersQuestion(t *testing.T) {
	t.Parallel()
	ask := colorQuestion()
	d, model := startDaemonModel(t, nil, claudetest.Reply(ask), claudetest.Reply(claudetest.Text("Blue it is.")))
	id := d.create(t, t.TempDir(), "pick a color")

	inv := d.inv()
	inv.tty, inv.stdin = true, "2\n"
	live, wait := background(t, inv, "attach", id)
	waitFor(t, "the reply after the answer", func() bool { return strings.Contains(live.String(), "Blue it is.") })
	d.closeSession(t, id)
	o := wait()
	if o.code != 0 {
		t.Fatalf("exit %d", o.code)
	}
	for _, want := range []string{"[Color] Which color?", "1. red - warm", "2. blue - cold", "Choose 1-2"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1]
	uses := last.ToolUses()
	if len(uses) == 0 {
		t.Fatal("no tool call in the model's last request")
	}
	content, isError, ok := last.ToolResult(uses[0].ID)
	if !ok || isError || !strings.Contains(content, "blue") {
		t.Errorf("tool_result %q (is_error %v, found %v), want the answer blue", content, isError, ok)
	}
}

// TestAttachReportsTheAnswer: a question another client answered is
// reported with its answer, not as "allowed"; attach --json carries it.
func TestAttachReportsTheAnswer(t *testing.T) {
	t.Parallel()
	d, _ := startDaemonModel(t, nil, claudetest.Reply(colorQuestion()), claudetest.Reply(claudetest.Text("Blue it is.")))
	id := d.create(t, t.TempDir(), "pick a color")
	reqID := d.permissionRequest(t, id)
	waitFor(t, "the question to be pending", func() bool {
		_, err := d.perms.Decide(d.ctx, connect.NewRequest(&v1.DecideRequest{RequestId: reqID, Behavior: v1.Behavior_BEHAVIOR_ALLOW,
			Answers: map[string]string{"Which color?": "blue"}, Client: "alice"}))
		return err == nil
	})
	d.waitResults(t, id, 1)
	d.closeSession(t, id)
	o := claudectl(t, d.inv(), "attach", id)
	if want := "claudectl: request " + reqID + " (AskUserQuestion) answered by client:alice: \"blue\"\n"; !strings.Contains(o.stderr, want) {
		t.Errorf("attach does not report the answer %q:\n%s", want, o.stderr)
	}
	o = claudectl(t, d.inv(), "attach", "--json", id)
	if !strings.Contains(o.stdout, `"type":"permission_resolved",`) || !strings.Contains(o.stdout, `"answers":{"Which color?":"blue"}`) {
		t.Errorf("attach --json does not carry the answer:\n%s", o.stdout)
	}
}

// Without a terminal attach shows the request and leaves it to others; it
// is not asked again once settled.
func TestAttachNoTerminalShowsRequest(t *testing.T) {
	t.Parallel()
	d, _, dir, id := makeFileSession(t, nil, "Made it.")
	live, wait := background(t, d.inv(), "attach", id)
	reqID := d.permissionRequest(t, id)
	if o := claudectl(t, d.inv(), "approve", reqID); o.code != 0 {
		t.Fatalf("approve: exit %d, stderr %q", o.code, o.stderr)
	}
	waitFor(t, "the reply after the tool", func() bool { return strings.Contains(live.String(), "Made it.") })
	d.closeSession(t, id)
	o := wait()
	if o.code != 0 {
		t.Fatalf("exit %d", o.code)
	}
	for _, want := range []string{"permission request " + reqID + ": Bash: touch made.txt", "request " + reqID + " (Bash) allowed by client:claudectl approve ("} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if strings.Contains(o.stderr, "Allow Bash") {
		t.Error("asked without a terminal")
	}
	if !fileExists(filepath.Join(dir, "made.txt")) {
		t.Error("made.txt was not created")
	}
}

// A client that falls behind the daemon's ring of recent events (one
// event here) is caught up from the store, not dropped: attach misses
// nothing and shows nothing twice. (attach still resubscribes from the
// last event it saw when an older daemon drops it.)
func TestAttachResubscribes(t *testing.T) {
	t.Parallel()
	const words = 600
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("word ", words))},
		ChunkSize: 5, DeltaDelay: 3 * time.Millisecond}
	d, _ := startDaemonModel(t, &daemontest.Options{SubscriberBuffer: 1}, slow)
	id := d.create(t, t.TempDir(), "talk")
	// Attach while the reply streams: the replay runs while live events
	// queue up behind a buffer of one.
	waitFor(t, "some of the reply", func() bool {
		res, err := d.sessions.GetSession(d.ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
		return err == nil && res.Msg.Session.LastSeq > 200
	})
	live, wait := background(t, d.inv(), "attach", id)
	waitFor(t, "the whole reply", func() bool { return strings.Count(live.String(), "word") == words })
	d.closeSession(t, id)
	o := wait()
	if o.code != 0 {
		t.Fatalf("exit %d", o.code)
	}
	if want := "> talk\n\n" + strings.TrimSpace(strings.Repeat("word ", words)) + "\n"; strings.TrimRight(o.stdout, " \n")+"\n" != want {
		t.Errorf("stdout is not the reply once, whole (%d words)", strings.Count(o.stdout, "word"))
	}
	if strings.Contains(o.stderr, "ended this client's stream") {
		t.Error("the daemon dropped the client instead of catching it up from the store")
	}
}

func TestAttachUsageAndErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"attach"}, "SESSION_ID"},
		{[]string{"attach", "a", "b"}, `"b"`},
		{[]string{"attach", "--tail", "--from-seq", "3", "a"}, "--tail"},
		{[]string{"attach", "--from-seq", "0", "a"}, "--from-seq"},
		{[]string{"run", "--server", "http://127.0.0.1:1", "--resume", "x", "hi"}, "--resume"},
		{[]string{"run", "--token-file", "/dev/null", "hi"}, "--token-file"},
	} {
		o := claudectl(t, invocation{}, tc.args...)
		if o.code != ExitUsage || !strings.Contains(o.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", tc.args, o.code, o.stderr, tc.want)
		}
	}
	d, _ := startDaemonModel(t, nil)
	o := claudectl(t, d.inv(), "attach", "no-such-session")
	if o.code != 1 || o.stderr != "claudectl attach: no session no-such-session (claudectl sessions lists them)\n" {
		t.Errorf("unknown session: exit %d, stderr %q", o.code, o.stderr)
	}
	o = claudectl(t, invocation{}, "attach", "-h")
	if o.code != 0 || !strings.Contains(o.stdout, "--from-seq") || !strings.Contains(o.stdout, "CLAUDECTL_SERVER") {
		t.Errorf("attach -h: exit %d, stdout %q", o.code, o.stdout)
	}
	o = claudectl(t, invocation{}, "run", "-h")
	if o.code != 0 || !strings.Contains(o.stdout, "--server") || !strings.Contains(o.stdout, "claudectl attach ID") {
		t.Errorf("run -h: exit %d, stdout %q", o.code, o.stdout)
	}
}

// When another client decides first, attach withdraws its question and
// says who won.
func TestAttachAnotherClientWins(t *testing.T) {
	t.Parallel()
	d, _, dir, id := makeFileSession(t, nil, "Made it.")

	stdout, stderr, done := attachTerminal(t, d, id) // a terminal on which nobody answers
	waitFor(t, "the question", func() bool { return strings.Contains(stderr.String(), "Allow Bash") })
	if o := claudectl(t, d.inv(), "approve", d.permissionRequest(t, id)); o.code != 0 {
		t.Fatalf("approve: exit %d, stderr %q", o.code, o.stderr)
	}
	waitFor(t, "the reply after the tool", func() bool { return strings.Contains(stdout.String(), "Made it.") })
	d.closeSession(t, id)
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
	t.Logf("stderr:\n%s", stderr.String())
	if !strings.Contains(stderr.String(), "Bash was decided first by client:claudectl approve (") || strings.Contains(stderr.String(), "allowed by") {
		t.Errorf("stderr does not say who won: %q", stderr.String())
	}
	if !fileExists(filepath.Join(dir, "made.txt")) {
		t.Error("made.txt was not created")
	}
}

// A request whose session someone follows with attach expires after the
// watched timeout (permissions.watched_timeout), not the unwatched one.
func TestAttachWatchedRequestExpires(t *testing.T) {
	t.Parallel()
	d, _, dir, id := makeFileSession(t, &daemontest.Options{Broker: &permission.BrokerOptions{
		WatchedTimeout: 3 * time.Second, UnwatchedTimeout: time.Hour}}, "Could not.")
	live, wait := background(t, d.inv(), "attach", id)
	reqID := d.permissionRequest(t, id)
	start := time.Now()
	waitFor(t, "the request to expire", func() bool {
		return strings.Contains(live.String(), "Could not.") || strings.Contains(live.String(), "timeout")
	})
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the watched request expired after %v, want about 3 s", took)
	}
	d.closeSession(t, id)
	o := wait()
	if want := "request " + reqID + " (Bash) denied by timeout"; !strings.Contains(o.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, o.stderr)
	}
	if fileExists(filepath.Join(dir, "made.txt")) {
		t.Error("made.txt was created though the request expired")
	}
}

// A request withdrawn because its turn was interrupted is said in the
// user's words, not as the daemon's "decided first by context: unspecified".
func TestAttachWithdrawnRequest(t *testing.T) {
	t.Parallel()
	d, _, _, id := makeFileSession(t, nil, "Made it.")
	_, stderr, done := attachTerminal(t, d, id)
	waitFor(t, "the question", func() bool { return strings.Contains(stderr.String(), "Allow Bash") })
	if o := claudectl(t, d.inv(), "interrupt", id); o.code != 0 {
		t.Fatalf("interrupt: exit %d, stderr %q", o.code, o.stderr)
	}
	waitFor(t, "the withdrawal", func() bool { return strings.Contains(stderr.String(), "request was withdrawn") })
	d.closeSession(t, id)
	<-done
	t.Logf("stderr:\n%s", stderr.String())
	if want := "the Bash request was withdrawn: the turn was interrupted"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not say %q", want)
	}
	if s := stderr.String(); strings.Contains(s, "context") || strings.Contains(s, "unspecified") {
		t.Errorf("stderr names the daemon's internals: %q", s)
	}
}

// TestAttachWakesSuspendedSession: attaching at a terminal to a suspended
// session starts its CLI again (Typing), so that a prompt sent next finds
// it running; with no prompt it is suspended again after the idle timeout.
func TestAttachWakesSuspendedSession(t *testing.T) {
	t.Parallel()
	d, _ := startDaemonModel(t, &daemontest.Options{IdleTimeout: 2 * time.Second},
		claudetest.Reply(claudetest.Text("Noted.")))
	id := d.create(t, t.TempDir(), "Remember this.")
	d.waitResults(t, id, 1)
	d.waitStatus(t, id, v1.SessionStatus_SESSION_STATUS_SUSPENDED)

	_, stderr, done := attachTerminal(t, d, id)
	waitFor(t, "the attached session's CLI started again", func() bool {
		return d.session(t, id).Status != v1.SessionStatus_SESSION_STATUS_SUSPENDED
	})
	if !strings.Contains(stderr.String(), "attached to session "+id+" (suspended") {
		t.Errorf("attach did not say the session was suspended:\n%s", stderr)
	}
	d.waitStatus(t, id, v1.SessionStatus_SESSION_STATUS_SUSPENDED) // nobody wrote: asleep again
	d.closeSession(t, id)
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("attach: exit %d once the session closed, want 0\n%s", code, stderr)
		}
	case <-time.After(80 * time.Second):
		t.Fatalf("attach did not end when the session closed (status %v):\n%s", d.session(t, id).Status, stderr)
	}
}
