package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/internal/linkcut"
)

// TestWorkerSessionSurvivesOwnerKill: two "claudectl serve" on one
// PostgreSQL, two registered workers given both daemons' addresses, the
// real CLI. A session runs on the worker under daemon A; a client follows it
// through daemon B. A is killed (kill -9) mid-turn: with the default lease
// (15 s), B takes the session over as soon as the worker comes back to it
// (A's liveness lock ended with its connection to the store), and
// the turn completes through B — the CLI's pid unchanged, the subscriber on
// B seeing every event once, in order, and the stored log holding every
// line the CLI printed, byte for byte, once, with no gap. B then lists both
// workers with their sessions; the other worker's session, B's all along,
// is untouched.
func TestWorkerSessionSurvivesOwnerKill(t *testing.T) {
	tokenFile := writeWorkerToken(t)
	long := strings.Repeat("a turn that outlives its daemon; ", 60)
	ts := startTwoServes(t, func(url string) string { // the default lease (15 s)
		return `{"store": {"url": "` + url + `"}, "workers": {"token_file": "` + tokenFile + `"}}`
	}, claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(long)}, DeltaDelay: 20 * time.Millisecond, ChunkSize: 8})
	ctx, a, b := ts.ctx, ts.a, ts.b
	w := startTeeWorker(t, "w1", ts.binary, ts.env, tokenFile, a, b)
	id := createOnWorker(t, ctx, a, "w1", ts.work)
	clis := w.waitCLI(t)
	// A second worker, whose session B runs all along.
	w2 := startTeeWorker(t, "w2", ts.binary, ts.env, tokenFile, b, a)
	id2 := createOnWorker(t, ctx, b, "w2", ts.work)
	clis2 := w2.waitCLI(t)
	stream, err := b.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if _, err := a.sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: "stream"})); err != nil {
		t.Fatal(err)
	}
	f := &turnFollower{}
	var killed time.Time
	f.follow(t, stream, 15, func() {
		if err := a.cmd.Process.Kill(); err != nil { // kill -9, mid-turn
			t.Fatal(err)
		}
		<-a.done
		killed = time.Now()
		s, err := b.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		f.storedBefore = s.Msg.Session.LastSeq // A's last: the first event after it is B's
	})
	f.follow(t, stream, 0, nil) // the same subscription, through B
	f.check(t, long)
	if got := childrenOf(w.cmd.Process.Pid); !slices.Equal(got, clis) {
		t.Errorf("the worker's CLIs %v after the failover, were %v: the CLI was restarted", got, clis)
	}
	s := waitIdle(t, ctx, b.sessions, id)
	if !strings.HasSuffix(s.Daemon, ts.dataB) || s.WorkerName != "w1" {
		t.Errorf("session after the failover: daemon %q, worker %q; want B and w1", s.Daemon, s.WorkerName)
	}
	n := checkStoredAsPrinted(t, ctx, b.sessions, id, w.printed)
	// B lists both workers with their sessions; w2's session is untouched.
	workers := claudectlv1connect.NewWorkerServiceClient(&http.Client{}, b.url, connect.WithInterceptors(tokenFrom(ts.dataB)))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := workers.ListWorkers(ctx, connect.NewRequest(&v1.ListWorkersRequest{}))
		got := map[string]string{}
		if err == nil {
			for _, w := range res.Msg.Workers {
				got[w.Name] = w.State.String() + " " + strings.Join(w.SessionIds, ",")
			}
		}
		connected := v1.WorkerState_WORKER_STATE_CONNECTED.String()
		if got["w1"] == connected+" "+id && got["w2"] == connected+" "+id2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's workers %v (%v); want w1 running %s and w2 running %s, both connected", got, err, id, id2)
		}
	}
	if s2 := waitIdle(t, ctx, b.sessions, id2); !strings.HasSuffix(s2.Daemon, ts.dataB) || s2.WorkerName != "w2" {
		t.Errorf("w2's session: daemon %q, worker %q", s2.Daemon, s2.WorkerName)
	}
	if got := childrenOf(w2.cmd.Process.Pid); !slices.Equal(got, clis2) {
		t.Errorf("w2's CLIs %v, were %v", got, clis2)
	}
	t.Logf("kill -9 of A after 15 deltas; first event through B %v after the kill; turn complete %v after it (default lease, 15s); %d CLI lines stored as printed",
		f.firstAfter.Sub(killed).Round(time.Millisecond), f.done.Sub(killed).Round(time.Millisecond), n)
	if took := f.firstAfter.Sub(killed); took >= 10*time.Second {
		t.Errorf("the first event through B came %v after the kill: B waited for A's lease (15 s) instead of seeing A gone", took)
	}
}

// TestWorkerSessionSurvivesDaemonRestart: one "claudectl serve" on its
// embedded SQLite, a worker running a session's CLI. The daemon is killed
// (kill -9) mid-turn and started again on the same address and data: the
// worker comes back to it, the daemon takes the session over, and the turn
// completes — the CLI untouched, the log gap-free and as printed.
func TestWorkerSessionSurvivesDaemonRestart(t *testing.T) {
	long := strings.Repeat("a turn that outlives a restart; ", 60)
	r := startRestartRig(t, long)
	w := startTeeWorker(t, "w1", r.binary, r.env, r.tokenFile, r.d1)
	id := createOnWorker(t, r.ctx, r.d1, "w1", r.work)
	clis := w.waitCLI(t)
	d2, f, killed := r.restartMidTurn(t, id, long)
	if got := childrenOf(w.cmd.Process.Pid); !slices.Equal(got, clis) {
		t.Errorf("the worker's CLIs %v after the restart, were %v: the CLI was restarted", got, clis)
	}
	waitIdle(t, r.ctx, d2.sessions, id)
	n := checkStoredAsPrinted(t, r.ctx, d2.sessions, id, w.printed)
	t.Logf("kill -9 of the daemon after 15 deltas; restarted, the turn complete %v after the kill; %d CLI lines stored as printed",
		f.done.Sub(killed).Round(time.Millisecond), n)
}

// TestWorkerSpareSessionSurvivesDaemonRestart: a session that took a
// spare CLI on a worker started with --spares is taken over as any worker
// session is, when its daemon is killed mid-turn and started again: the
// spare's relay was tagged with the id the session got.
func TestWorkerSpareSessionSurvivesDaemonRestart(t *testing.T) {
	long := strings.Repeat("a spare's turn that outlives a restart; ", 50)
	r := startRestartRig(t, long)
	d1 := r.d1
	startTeeWorkerWith(t, "w1", r.binary, r.env, r.tokenFile, []string{"--spares"}, d1)
	first := createOnWorker(t, r.ctx, d1, "w1", r.work) // the default settings keep a spare for its options
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(d1.log(), "spare CLI ready"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no spare CLI on the worker started with --spares after session %s; daemon's log:\n%s", first, d1.log())
		}
	}
	id := createOnWorker(t, r.ctx, d1, "w1", r.work)
	if !strings.Contains(d1.log(), `msg="session took a spare CLI" session=`+id) {
		t.Fatalf("session %s did not take the spare; daemon's log:\n%s", id, d1.log())
	}
	d2, _, _ := r.restartMidTurn(t, id, long)
	s := waitIdle(t, r.ctx, d2.sessions, id)
	if s.WorkerName != "w1" {
		t.Errorf("the session runs on %q after the restart, want w1", s.WorkerName)
	}
	if l := d2.log(); !strings.Contains(l, `msg="session taken over" session=`+id) || strings.Contains(l, `msg="CLI started" session=`+id) {
		t.Errorf("the restarted daemon did not take session %s's CLI (the spare) over", id)
	}
}

// restartRig is one "claudectl serve" (d1) on its embedded SQLite that
// takes workers, and the scripted model, whose one turn streams a long
// text slowly.
type restartRig struct {
	ctx                                     context.Context
	tokenFile, tmp, work, data, binary, cli string
	env                                     []string
	httpc                                   *http.Client
	d1                                      *serveProc
}

func startRestartRig(t *testing.T, long string) *restartRig {
	t.Helper()
	r := &restartRig{tokenFile: writeWorkerToken(t), tmp: t.TempDir(), httpc: &http.Client{Transport: &http.Transport{}}}
	model := claudetest.NewServer(claudetest.Script(claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(long)},
		DeltaDelay: 20 * time.Millisecond, ChunkSize: 8}))
	t.Cleanup(model.Close)
	home := filepath.Join(r.tmp, "home")
	r.work, r.data = filepath.Join(r.tmp, "work"), filepath.Join(r.tmp, "data")
	for _, d := range []string{home, r.work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	r.binary = buildClaudectl(t, ctx, r.tmp)
	r.env = model.Env(home)
	r.cli = claudetest.CLIPath(t)
	r.d1 = startServe(ctx, t, r.binary, r.cli, r.data, r.env, filepath.Join(r.tmp, "serve1.log"), r.httpc, "--worker-token-file", r.tokenFile)
	return r
}

// restartMidTurn sends session id its prompt through d1, kills d1 (kill
// -9) after 15 deltas and starts it again on the same address and data;
// it follows the turn through both and checks it (every delta once, in
// order, and the result). It returns the second daemon, the follower and
// when the first was killed.
func (r *restartRig) restartMidTurn(t *testing.T, id, long string) (*serveProc, *turnFollower, time.Time) {
	t.Helper()
	stream, err := r.d1.sessions.Subscribe(r.ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.d1.sessions.Send(r.ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: "stream"})); err != nil {
		t.Fatal(err)
	}
	f := &turnFollower{}
	var killed time.Time
	f.follow(t, stream, 15, func() {
		if err := r.d1.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-r.d1.done
		killed = time.Now()
	})
	stream.Close()
	addr := strings.TrimPrefix(r.d1.url, "http://")
	d2 := startServeAt(r.ctx, t, addr, r.binary, r.cli, r.data, r.env, filepath.Join(r.tmp, "serve2.log"), r.httpc, "--worker-token-file", r.tokenFile)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("first daemon's log:\n%s\nsecond daemon's log:\n%s", r.d1.log(), d2.log())
		}
	})
	stream, err = d2.sessions.Subscribe(r.ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id, AfterSeq: f.last}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	f.follow(t, stream, 0, nil)
	f.check(t, long)
	return d2, f, killed
}

func writeWorkerToken(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "worker-token")
	if err := os.WriteFile(p, []byte("worker-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func buildClaudectl(t *testing.T, ctx context.Context, dir string) string {
	t.Helper()
	binary := filepath.Join(dir, "claudectl")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return binary
}

// teeWorker is "claudectl worker --name NAME" running the real CLI through a
// wrapper that keeps a copy of everything the CLI prints in printed (exec:
// the wrapper's pid is the CLI's).
type teeWorker struct {
	cmd     *exec.Cmd
	printed string
}

func startTeeWorker(t *testing.T, name, binary string, env []string, tokenFile string, daemons ...*serveProc) *teeWorker {
	t.Helper()
	return startTeeWorkerWith(t, name, binary, env, tokenFile, nil, daemons...)
}

// startTeeWorkerWith is startTeeWorker with more flags for the worker.
func startTeeWorkerWith(t *testing.T, name, binary string, env []string, tokenFile string, flags []string, daemons ...*serveProc) *teeWorker {
	t.Helper()
	tmp := t.TempDir()
	w := &teeWorker{printed: filepath.Join(tmp, "printed.ndjson")}
	wrapper := filepath.Join(tmp, "claude-tee")
	script := "#!/bin/bash\nexec \"" + claudetest.CLIPath(t) + "\" \"$@\" > >(exec tee -a \"" + w.printed + "\")\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, d := range daemons {
		urls = append(urls, "ws://"+strings.TrimPrefix(d.url, "http://")+apiserver.WorkerPath)
	}
	w.cmd = exec.Command(binary, "worker", "--name", name, "--connect", strings.Join(urls, ","),
		"--token-file", tokenFile, "--cli", wrapper, "--grace", "60s", "--verbose")
	w.cmd.Args = append(w.cmd.Args, flags...)
	w.cmd.Env = env
	var log bytes.Buffer
	w.cmd.Stdout, w.cmd.Stderr = &log, &log
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { w.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		w.cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("worker log:\n%s", log.String())
			for i, d := range daemons {
				t.Logf("daemon %d's log:\n%s", i, d.log())
			}
		}
	})
	return w
}

// waitCLI returns the pid of the worker's one CLI, once it runs.
func (w *teeWorker) waitCLI(t *testing.T) []int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		clis := childrenOf(w.cmd.Process.Pid)
		if len(clis) == 1 {
			return clis
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker runs CLIs %v, want 1", clis)
		}
	}
}

// createOnWorker creates a session on the worker named through d, once it
// has registered.
func createOnWorker(t *testing.T, ctx context.Context, d *serveProc, worker, work string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := d.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{
			Options: &v1.SessionOptions{Cwd: work, Worker: worker, IncludePartialMessages: true}}))
		if err == nil {
			return res.Msg.Session.Id
		}
		if time.Now().After(deadline) {
			t.Fatalf("CreateSession on worker %s: %v", worker, err)
		}
	}
}

// turnFollower follows a streamed turn across subscriptions: every event
// once, in seq order, the text deltas and the result.
type turnFollower struct {
	text             strings.Builder
	last             int64
	deltas           int
	result           string
	killedAt         int   // the deltas seen when kill ran
	storedBefore     int64 // the last seq the killed daemon stored, when kill sets it
	firstAfter, done time.Time
}

// follow reads stream until the turn's result (or the stream ends); after
// the killAfter-th delta (0: never) it runs kill. firstAfter is when the
// first event after the kill came, past storedBefore if kill set it (the
// events the killed daemon stored come through the other one too).
func (f *turnFollower) follow(t *testing.T, stream *connect.ServerStreamForClient[v1.SubscribeResponse], killAfter int, kill func()) {
	t.Helper()
	for f.result == "" && stream.Receive() {
		ev := stream.Msg().Event
		if ev.Seq != f.last+1 {
			t.Fatalf("event seq %d after %d: a gap or a repeat", ev.Seq, f.last)
		}
		f.last = ev.Seq
		if f.killedAt > 0 && f.firstAfter.IsZero() && ev.Seq > f.storedBefore {
			f.firstAfter = time.Now()
		}
		if d := ev.GetTextDelta(); d != nil {
			f.text.WriteString(d.Text)
			if f.deltas++; f.deltas == killAfter {
				kill()
				f.killedAt = f.deltas
				return
			}
		}
		if m := ev.GetMessage(); m.GetType() == "result" && !m.ToCli {
			var r struct{ Result string }
			json.Unmarshal(m.Raw, &r)
			f.result = r.Result
			f.done = time.Now()
		}
	}
	if killAfter > 0 && f.killedAt == 0 {
		t.Fatalf("the turn ended before the daemon could be killed (%d deltas): %v", f.deltas, stream.Err())
	}
}

func (f *turnFollower) check(t *testing.T, want string) {
	t.Helper()
	if f.result != want || f.text.String() != want {
		t.Fatalf("after the daemon's death: result %q, deltas %q; want the whole text in both", f.result, f.text.String())
	}
}

// waitIdle waits until session id is idle.
func waitIdle(t *testing.T, ctx context.Context, sessions claudectlv1connect.SessionServiceClient, id string) *v1.Session {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s, err := sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
		if err == nil && s.Msg.Session.Status == v1.SessionStatus_SESSION_STATUS_IDLE {
			return s.Msg.Session
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s did not become idle: %v %v", id, s, err)
		}
	}
}

// checkStoredAsPrinted compares session id's stored log with what the CLI
// printed (less the control traffic the SDK answers): the same lines, byte
// for byte, once each, in order, and no gap record. It follows the log
// live until it holds as many of the CLI's lines as were printed (a line
// the CLI prints after its result may still be on its way), for at most
// 30 seconds, and returns how many lines it compared.
func checkStoredAsPrinted(t *testing.T, ctx context.Context, sessions claudectlv1connect.SessionServiceClient, id string, printed string) int {
	t.Helper()
	// What the CLI printed, once the file stops growing.
	var want [][]byte
	for prev := -1; len(want) != prev; time.Sleep(300 * time.Millisecond) {
		prev, want = len(want), printedLines(t, printed)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	replay, err := sessions.Subscribe(rctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	var stored [][]byte
	var seq int64
	for len(stored) < len(want) && replay.Receive() {
		ev := replay.Msg().Event
		if ev.Seq != seq+1 {
			t.Fatalf("stored log: seq %d after %d", ev.Seq, seq)
		}
		seq = ev.Seq
		if m := ev.GetMessage(); m != nil && !m.ToCli {
			stored = append(stored, m.Raw)
		}
		if ev.GetGap() != nil {
			t.Errorf("stored log has a gap record at seq %d: %v", ev.Seq, ev.GetGap())
		}
	}
	if len(stored) != len(want) {
		t.Errorf("the stored log holds %d of the CLI's lines (%v), the CLI printed %d", len(stored), replay.Err(), len(want))
	}
	for i := range min(len(stored), len(want)) {
		if !bytes.Equal(stored[i], want[i]) {
			t.Fatalf("stored line %d differs from what the CLI printed:\nstored:  %.300s\nprinted: %.300s", i, stored[i], want[i])
		}
	}
	return len(stored)
}

// childrenOf returns the live child processes of pid.
func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces; cut after its ')'.
		rest := string(b[bytes.LastIndexByte(b, ')')+1:])
		var state string
		var ppid int
		if _, err := fmt.Sscan(rest, &state, &ppid); err == nil && ppid == pid && state != "Z" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// TestPromptOfADyingDaemonReachesTheCLI: daemon A accepts (stores) a prompt
// for a session on a worker it cannot reach at that moment, then dies
// (kill -9) before the worker got it. Daemon B, taking the session over,
// writes the prompt the worker never received: the turn runs on the same
// CLI and the prompt is in the log once.
func TestPromptOfADyingDaemonReachesTheCLI(t *testing.T) {
	tokenFile := writeWorkerToken(t)
	ts := startTwoServes(t, func(url string) string {
		return `{"store": {"url": "` + url + `", "lease_ttl": "3s"}, "workers": {"token_file": "` + tokenFile + `"}}`
	}, claudetest.Reply(claudetest.Text("answered after the failover")))
	ctx, a, b := ts.ctx, ts.a, ts.b
	// The worker reaches A only through a proxy the test closes.
	proxy, err := linkcut.New(strings.TrimPrefix(a.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	viaProxy := &serveProc{url: "http://" + proxy.Addr, logPath: a.logPath}
	w := startTeeWorker(t, "w1", ts.binary, ts.env, tokenFile, viaProxy, b)
	id := createOnWorker(t, ctx, a, "w1", ts.work)
	clis := w.waitCLI(t)
	waitIdle(t, ctx, a.sessions, id)

	proxy.Close() // the worker loses A and cannot reach it again
	if _, err := a.sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: "the prompt A accepted"})); err != nil {
		t.Fatalf("Send through A while its worker is away: %v", err)
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done
	stream, err := b.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	prompts, result := 0, ""
	for result == "" && stream.Receive() {
		m := stream.Msg().Event.GetMessage()
		switch {
		case m == nil:
		case m.ToCli && m.Type == "user" && strings.Contains(string(m.Raw), "the prompt A accepted"):
			prompts++
		case !m.ToCli && m.Type == "result":
			var r struct{ Result string }
			json.Unmarshal(m.Raw, &r)
			result = r.Result
		}
	}
	if result != "answered after the failover" || prompts != 1 {
		t.Fatalf("through B: result %q, the prompt logged %d times (%v); want the answer and once", result, prompts, stream.Err())
	}
	if got := childrenOf(w.cmd.Process.Pid); !slices.Equal(got, clis) {
		t.Errorf("the worker's CLIs %v, were %v: the CLI was restarted", got, clis)
	}
}

// TestPendingRequestSurvivesOwnerKill: a session on a worker under daemon A
// waits for a person to approve a command when A is killed. Daemon B takes
// it over: the CLI's request (which no stored line settled) comes to B
// again, a person approves it through B, the command runs on the same CLI
// and the turn completes.
func TestPendingRequestSurvivesOwnerKill(t *testing.T) {
	tokenFile := writeWorkerToken(t)
	target := filepath.Join(t.TempDir(), "approved-after-the-failover.txt")
	ts := startTwoServes(t, func(url string) string {
		return `{"store": {"url": "` + url + `", "lease_ttl": "3s"}, "workers": {"token_file": "` + tokenFile + `"}}`
	}, claudetest.Reply(claudetest.ToolUseID("toolu_f1", "Bash", map[string]any{"command": "touch " + target, "description": "make a file"})),
		claudetest.Reply(claudetest.Text("Made it.")))
	ctx, a, b := ts.ctx, ts.a, ts.b
	w := startTeeWorker(t, "w1", ts.binary, ts.env, tokenFile, a, b)
	id := createOnWorker(t, ctx, a, "w1", ts.work)
	clis := w.waitCLI(t)
	perms := claudectlv1connect.NewPermissionServiceClient(&http.Client{}, b.url, connect.WithInterceptors(tokenFrom(ts.dataB)))
	pending := func() string {
		res, err := perms.ListPending(ctx, connect.NewRequest(&v1.ListPendingRequest{SessionId: id}))
		if err != nil || len(res.Msg.Requests) == 0 {
			return ""
		}
		return res.Msg.Requests[0].RequestId
	}
	if _, err := a.sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: "make a file"})); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); pending() == ""; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("B never listed A's permission request")
		}
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done
	// A person approves through B, again until B holds the request (it
	// comes back to B once B has taken the session over).
	approved := false
	for deadline := time.Now().Add(30 * time.Second); !approved; time.Sleep(200 * time.Millisecond) {
		if req := pending(); req != "" {
			_, err := perms.Decide(ctx, connect.NewRequest(&v1.DecideRequest{RequestId: req,
				Behavior: v1.Behavior_BEHAVIOR_ALLOW, Client: "the person"}))
			approved = err == nil
		}
		if time.Now().After(deadline) {
			t.Fatalf("no approval through B took after A's death; B's log:\n%s", b.log())
		}
	}
	waitIdle(t, ctx, b.sessions, id)
	if _, err := os.Stat(target); err != nil {
		t.Errorf("the command approved through B did not run: %v", err)
	}
	if got := childrenOf(w.cmd.Process.Pid); !slices.Equal(got, clis) {
		t.Errorf("the worker's CLIs %v, were %v: the CLI was restarted", got, clis)
	}
}
