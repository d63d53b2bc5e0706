package main_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

// TestTwoServesOnePostgres runs two "claudectl serve --store postgres://…"
// processes on one PostgreSQL, as a team would, with the real CLI: a
// session started through daemon A asks to run a command; through daemon
// B, "claudectl pending" lists the request and "claudectl approve" approves
// it; the command runs on A's CLI, the turn ends, and "claudectl sessions"
// and "claudectl doctor --server" through B show the session and the
// shared store.
func TestTwoServesOnePostgres(t *testing.T) {
	target := filepath.Join(t.TempDir(), "approved-through-b.txt")
	ts := startTwoServes(t, func(url string) string { return `{"store": {"url": "` + url + `"}}` },
		claudetest.Reply(claudetest.ToolUseID("toolu_b1", "Bash", map[string]any{"command": "touch " + target, "description": "make a file"})),
		claudetest.Reply(claudetest.Text("Made it.")))
	ctx, a, b, dataA, dataB, work := ts.ctx, ts.a, ts.b, ts.dataA, ts.dataB, ts.work
	res, err := a.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: work}, Prompt: "make a file"}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.Session.Id
	claudectl := func(dataDir string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, ts.binary, args...)
		cmd.Env = append(os.Environ(), "CLAUDECTL_TOKEN="+readToken(t, dataDir), "NO_COLOR=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	var pending string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, err := claudectl(dataB, "pending", "--server", b.url)
		if err == nil && strings.Contains(out, id[:8]) && strings.Contains(out, "Bash") {
			pending = out
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claudectl pending through B never listed A's request: %v\n%s\nA's log:\n%s", err, out, a.log())
		}
	}
	t.Logf("claudectl pending --server B:\n%s", pending)
	reqID := requestIDIn(pending)
	if reqID == "" {
		t.Fatalf("no request id in:\n%s", pending)
	}
	if out, err := claudectl(dataB, "approve", reqID, "--server", b.url); err != nil {
		t.Fatalf("claudectl approve through B: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		s, err := b.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
		if err == nil && s.Msg.Session.Status == v1.SessionStatus_SESSION_STATUS_IDLE {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn did not end: %v %v\nA's log:\n%s", s, err, a.log())
		}
	}
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("the command approved through B did not run on A: %v", err)
	}
	if s, err := b.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id})); err != nil ||
		!strings.HasSuffix(s.Msg.Session.Daemon, dataA) {
		t.Errorf("GetSession through B: daemon %q, %v; want A's name (host:%s)", s.Msg.GetSession().GetDaemon(), err, dataA)
	}
	out, err := claudectl(dataB, "sessions", "--server", b.url)
	if err != nil || !strings.Contains(out, id[:8]) {
		t.Errorf("claudectl sessions through B: %v\n%s", err, out)
	}
	out, _ = claudectl(dataB, "doctor", "--server", b.url)
	if !strings.Contains(out, "postgres 127.0.0.1:") || !strings.Contains(out, "session leases") {
		t.Errorf("claudectl doctor --server B does not show the shared store:\n%s", out)
	}
}

// twoServes is what both tests run: two "claudectl serve" processes (A
// and B, the real CLI, a scripted model) with the given settings on one
// throwaway PostgreSQL, a work directory, and a context bounding the test.
type twoServes struct {
	ctx          context.Context
	a, b         *serveProc
	dataA, dataB string
	tmp, work    string
	binary       string   // the claudectl built for the test
	env          []string // the daemons' environment (the scripted model's)
}

func startTwoServes(t *testing.T, settings func(url string) string, turns ...claudetest.Turn) *twoServes {
	t.Helper()
	url := pgtest.New(t)
	cli := claudetest.CLIPath(t)
	tmp := t.TempDir()
	model := claudetest.NewServer(claudetest.Script(turns...))
	t.Cleanup(model.Close)
	home := filepath.Join(tmp, "home")
	work := filepath.Join(tmp, "work")
	for _, d := range []string{home, work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	binary := buildClaudectl(t, ctx, tmp)
	config := filepath.Join(tmp, "settings.json")
	if err := os.WriteFile(config, []byte(settings(url)), 0o600); err != nil {
		t.Fatal(err)
	}
	httpc := &http.Client{Transport: &http.Transport{}}
	ts := &twoServes{ctx: ctx, dataA: filepath.Join(tmp, "a"), dataB: filepath.Join(tmp, "b"), tmp: tmp, work: work, binary: binary}
	env := model.Env(home)
	ts.env = env
	ts.a = startServe(ctx, t, binary, cli, ts.dataA, env, filepath.Join(tmp, "a.log"), httpc, "--config", config)
	ts.b = startServe(ctx, t, binary, cli, ts.dataB, env, filepath.Join(tmp, "b.log"), httpc, "--config", config)
	return ts
}

func readToken(t *testing.T, dataDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// requestIDIn returns the first word of the first line of claudectl
// pending's table after its header that looks like a request id.
func requestIDIn(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 {
			return f[0]
		}
	}
	return ""
}

// TestFailoverAfterKill: daemon A runs a session and is killed (kill -9);
// with the default store.lease_ttl (15 s), a prompt through daemon B
// resumes the session there (claude --resume) at once, not once A's lease
// expired: A's liveness lock ended with its connection. It logs the
// failover time: from the kill to the first event of B's turn.
func TestFailoverAfterKill(t *testing.T) {
	ts := startTwoServes(t, func(url string) string { return `{"store": {"url": "` + url + `"}}` },
		claudetest.Reply(claudetest.Text("first, on A")), claudetest.Reply(claudetest.Text("second, on B")))
	ctx, a, b, work := ts.ctx, ts.a, ts.b, ts.work
	res, err := a.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: work}, Prompt: "hello"}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.Session.Id
	var last int64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		s, err := b.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
		if err == nil && s.Msg.Session.Status == v1.SessionStatus_SESSION_STATUS_IDLE {
			last = s.Msg.Session.LastSeq
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's turn did not end: %v", err)
		}
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-a.done
	// Through B, prompts are refused (naming A) until the store has seen
	// A's connection end: a moment, not the lease.
	refused := 0
	for {
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := b.sessions.Send(sctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: "again"}))
		scancel()
		if err == nil {
			break
		}
		if connect.CodeOf(err) != connect.CodeFailedPrecondition || time.Since(killed) > 30*time.Second {
			t.Fatalf("Send through B after A died: %v", err)
		}
		refused++
		time.Sleep(100 * time.Millisecond)
	}
	stream, err := b.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id, AfterSeq: last}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatalf("no event through B after the failover: %v", stream.Err())
	}
	failover := time.Since(killed)
	t.Logf("failover: %v from kill -9 of A to the first event of the turn through B (default lease, 15s; %d prompts refused meanwhile)",
		failover.Round(time.Millisecond), refused)
	if failover >= 10*time.Second {
		t.Errorf("failover took %v: B waited for A's lease (15 s) instead of seeing A gone", failover)
	}
	for stream.Receive() {
		if stream.Msg().GetEvent().GetStatusChange().GetStatus() == v1.SessionStatus_SESSION_STATUS_IDLE {
			return
		}
	}
	t.Fatalf("B's turn did not end: %v", stream.Err())
}

// TestPausedOwnerCannotWriteAfterTakeover: daemon A streams a turn and is
// paused (SIGSTOP) mid-turn; its connections stay open, so its liveness
// lock does too, and B is refused the session until A's lease (3 s) has
// run out. B then resumes the session and runs a turn. A is continued
// (SIGCONT) with its CLI's unread output waiting in the pipe: A's writes
// carry its old fence and are refused, A stops its CLI, and the stored
// log holds nothing after B's turn.
func TestPausedOwnerCannotWriteAfterTakeover(t *testing.T) {
	long := strings.Repeat("streamed by A; ", 80)
	ts := startTwoServes(t, func(url string) string { return `{"store": {"url": "` + url + `", "lease_ttl": "3s"}}` },
		claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(long)}, DeltaDelay: 20 * time.Millisecond, ChunkSize: 8},
		claudetest.Reply(claudetest.Text("answered through B")))
	ctx, a, b, work := ts.ctx, ts.a, ts.b, ts.work
	res, err := a.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: work, IncludePartialMessages: true}, Prompt: "stream"}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.Session.Id
	stream, err := b.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	for deltas := 0; deltas < 10; {
		if !stream.Receive() {
			t.Fatalf("the stream through B ended: %v", stream.Err())
		}
		if stream.Msg().Event.GetTextDelta() != nil {
			deltas++
		}
	}
	stream.Close()
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	t.Cleanup(func() { a.cmd.Process.Signal(syscall.SIGCONT) })
	refused := 0
	for {
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := b.sessions.Send(sctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: "through B"}))
		scancel()
		if err == nil {
			break
		}
		if connect.CodeOf(err) != connect.CodeFailedPrecondition || time.Since(paused) > 30*time.Second {
			t.Fatalf("Send through B while A is paused: %v", err)
		}
		refused++
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(paused)
	t.Logf("B took the session over %v after A was paused (lease 3s; %d prompts refused meanwhile)", took.Round(time.Millisecond), refused)
	// A renewed its lease at most a second (a third of it) before it was
	// paused: B waited for the lease, not for a lock A still held.
	if took < 1500*time.Millisecond || refused == 0 {
		t.Errorf("B took a paused A's session after %v (%d refusals): before A's lease ran out", took, refused)
	}
	waitIdle(t, ctx, b.sessions, id)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(a.log(), "session taken over by another daemon"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("A, continued, did not stop its CLI of the session B took over; A's log:\n%s", a.log())
		}
	}
	// A's CLI output that waited in the pipe was not stored: after the
	// status event that marked the session interrupted (B, taking it over)
	// nothing of A's turn is in the log, and B's turn is.
	got, err := b.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	last := got.Msg.Session.LastSeq
	all, err := b.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	takenAt, ofA, ofB := int64(0), 0, 0
	for all.Receive() {
		ev := all.Msg().Event
		if ev.GetStatusChange().GetStatus() == v1.SessionStatus_SESSION_STATUS_INTERRUPTED && takenAt == 0 {
			takenAt = ev.Seq
		}
		if takenAt > 0 {
			d := ev.GetTextDelta()
			if strings.Contains(string(ev.GetMessage().GetRaw()), "streamed by A") || d != nil && !strings.Contains("answered through B", d.Text) {
				ofA++
			}
			text := d.GetText() + string(ev.GetMessage().GetRaw())
			if strings.Contains(text, "answered through B") {
				ofB++
			}
		}
		if ev.Seq >= last {
			break
		}
	}
	if takenAt == 0 || ofA > 0 || ofB == 0 {
		t.Fatalf("the log after B took over (from seq %d of %d): %d events of A's turn, %d of B's; want none of A's", takenAt, last, ofA, ofB)
	}
	t.Logf("after A was continued: the log has %d events, B's takeover at seq %d, none of A's after it", last, takenAt)
}
