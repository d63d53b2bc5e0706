package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/internal/linkcut"
)

// These tests run registered workers ("claudectl worker --name …", the
// built binary, real CLI, scripted model) for a daemon.

// regWorker is a registered "claudectl worker" process.
type regWorker struct {
	cmd    *exec.Cmd
	done   chan struct{} // closed when it has exited
	err    error         // how it exited; set before done is closed
	stderr syncBuffer
}

func startRegWorker(t testing.TB, bin, endpoint, token string, args ...string) *regWorker {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "worker-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &regWorker{done: make(chan struct{})}
	w.cmd = exec.Command(bin, append([]string{"worker", "--connect", endpoint, "--token-file", tokenFile,
		"--cli", claudetest.CLIPath(t), "--verbose"}, args...)...)
	w.cmd.Stderr = &w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			w.cmd.Process.Kill()
			<-w.done
		}
		if t.Failed() {
			t.Logf("worker %v stderr:\n%s", args, w.stderr.String())
		}
	})
	return w
}

// children returns the live child processes of pid (the worker's CLIs).
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := atoiOK(e.Name())
		if err != nil {
			continue
		}
		if st, ppid, ok := procStat(p); ok && ppid == pid && st != 'Z' {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func atoiOK(s string) (int, error) {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, errors.New("not a number")
		}
		n = n*10 + int(r-'0')
	}
	return n, nil
}

// TestDaemonRegisteredWorkers runs two registered workers with different
// labels and capacities: sessions placed by name and by labels, the
// capacity refused, a taken name refused, ListWorkers and "claudectl
// workers", a mid-turn cut of every link of a worker (same CLI, every
// delta once), a worker killed (its sessions lost after its grace period,
// with the reason) and a worker stopped by SIGTERM (exit 0, no CLI left).
func TestDaemonRegisteredWorkers(t *testing.T) {
	t.Parallel()
	bin := buildClaudectl(t)
	const token = "worker-s3cret"
	long := strings.Repeat("streamed through a cut link; ", 24)
	dd := daemontest.Start(t, &daemontest.Options{WorkerToken: token},
		claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(long)}, DeltaDelay: 15 * time.Millisecond, ChunkSize: 8})
	apiURL, httpc := dd.Serve()
	ctx := dd.Ctx
	sessions := claudectlv1connect.NewSessionServiceClient(httpc, apiURL)
	workersAPI := claudectlv1connect.NewWorkerServiceClient(httpc, apiURL)
	endpoint := "ws://" + strings.TrimPrefix(apiURL, "http://") + apiserver.WorkerPath
	u, _ := url.Parse(endpoint)
	proxy, err := linkcut.New(u.Host) // alpha's every link goes through it
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	cliEnv := invocation{getenv: map[string]string{"CLAUDECTL_SERVER": apiURL, "CLAUDECTL_TOKEN": dd.Token()}}

	alpha := startRegWorker(t, bin, "ws://"+proxy.Addr+u.Path, token, "--name", "alpha",
		"--label", "pool=a", "--label", "gpu=yes", "--capacity", "2", "--grace", "3s")
	beta := startRegWorker(t, bin, "ws://127.0.0.1:9/nothing-here,"+endpoint, token, "--name", "beta", "--label", "pool=a", "--capacity", "1")
	listWorkers := func() map[string]*v1.Worker {
		t.Helper()
		res, err := workersAPI.ListWorkers(ctx, connect.NewRequest(&v1.ListWorkersRequest{}))
		if err != nil {
			t.Fatalf("ListWorkers: %v", err)
		}
		m := map[string]*v1.Worker{}
		for _, w := range res.Msg.Workers {
			m[w.Name] = w
		}
		return m
	}
	waitFor := func(what string, ok func(map[string]*v1.Worker) bool) map[string]*v1.Worker {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			ws := listWorkers()
			if ok(ws) {
				return ws
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: workers %v", what, ws)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ws := waitFor("alpha and beta connected", func(ws map[string]*v1.Worker) bool {
		return ws["alpha"].GetState() == v1.WorkerState_WORKER_STATE_CONNECTED && ws["beta"].GetState() == v1.WorkerState_WORKER_STATE_CONNECTED
	})
	if a := ws["alpha"]; a.Capacity != 2 || a.Labels["gpu"] != "yes" || a.CliVersion != claudetest.CLIVersion(t) || a.GraceSeconds != 3 || a.Pid != int32(alpha.cmd.Process.Pid) {
		t.Errorf("alpha: %v", a)
	}

	// ListWorkers needs the API token, as every call does.
	_, err = claudectlv1connect.NewWorkerServiceClient(http.DefaultClient, apiURL).ListWorkers(ctx, connect.NewRequest(&v1.ListWorkersRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("ListWorkers without the token: %v, want Unauthenticated", err)
	}

	// A second worker with a live worker's name is refused, and says why.
	o := claudectl(t, invocation{timeout: 30 * time.Second}, "worker", "--connect", endpoint, "--token-file", writeToken(t, token),
		"--cli", claudetest.CLIPath(t), "--name", "beta")
	if o.code != ExitFailure || !strings.Contains(o.stderr, `worker name "beta" is taken`) {
		t.Errorf("a second worker named beta: exit %d, stderr %q; want 1, the name is taken", o.code, o.stderr)
	}

	create := func(o *v1.SessionOptions) (*v1.Session, error) {
		o.Cwd = t.TempDir()
		o.IncludePartialMessages = true
		res, err := sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: o}))
		if err != nil {
			return nil, err
		}
		return res.Msg.Session, nil
	}
	code := func(err error) connect.Code {
		var ce *connect.Error
		if errors.As(err, &ce) {
			return ce.Code()
		}
		return connect.CodeUnknown
	}
	// By name.
	onBeta, err := create(&v1.SessionOptions{Worker: "beta"})
	if err != nil || onBeta.WorkerName != "beta" || onBeta.Worker != "beta" {
		t.Fatalf("CreateSession on beta: %v, %v", onBeta, err)
	}
	if _, err := create(&v1.SessionOptions{Worker: "beta"}); code(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "beta (1/1)") {
		t.Errorf("a second session on beta (capacity 1): %v; want ResourceExhausted naming beta (1/1)", err)
	}
	// By labels: gpu=yes is alpha only; pool=a has room on alpha only now.
	onAlpha, err := create(&v1.SessionOptions{WorkerLabels: map[string]string{"gpu": "yes"}})
	if err != nil || onAlpha.WorkerName != "alpha" || onAlpha.Worker != "remote" {
		t.Fatalf("CreateSession with gpu=yes: %v, %v", onAlpha, err)
	}
	onPool, err := create(&v1.SessionOptions{Worker: "remote", WorkerLabels: map[string]string{"pool": "a"}})
	if err != nil || onPool.WorkerName != "alpha" {
		t.Fatalf("CreateSession with pool=a: %v, %v; want alpha, the one with room", onPool, err)
	}
	if _, err := create(&v1.SessionOptions{WorkerLabels: map[string]string{"pool": "a"}}); code(err) != connect.CodeResourceExhausted {
		t.Errorf("pool=a with every worker full: %v; want ResourceExhausted", err)
	}
	if _, err := create(&v1.SessionOptions{WorkerLabels: map[string]string{"pool": "z"}}); code(err) != connect.CodeFailedPrecondition ||
		!strings.Contains(err.Error(), "pool=z") || !strings.Contains(err.Error(), "alpha (connected, gpu=yes,pool=a)") {
		t.Errorf("pool=z: %v; want FailedPrecondition naming the labels and the workers", err)
	}
	for _, bad := range []*v1.SessionOptions{{Worker: "no such name!"}, {Worker: "local", WorkerLabels: map[string]string{"pool": "a"}},
		{WorkerLabels: map[string]string{"bad key": "x"}}} {
		if _, err := create(bad); code(err) != connect.CodeInvalidArgument {
			t.Errorf("CreateSession(worker %q, labels %v): %v; want InvalidArgument", bad.Worker, bad.WorkerLabels, err)
		}
	}

	// ListWorkers and claudectl workers show the load.
	ws = listWorkers()
	if a := ws["alpha"]; a.State != v1.WorkerState_WORKER_STATE_CONNECTED || strings.Join(a.SessionIds, ",") != strings.Join(sortedIDs(onAlpha.Id, onPool.Id), ",") {
		t.Errorf("alpha: %v; want sessions %s and %s", a, onAlpha.Id, onPool.Id)
	}
	if b := ws["beta"]; strings.Join(b.SessionIds, ",") != onBeta.Id {
		t.Errorf("beta: %v; want session %s", b, onBeta.Id)
	}
	o = claudectl(t, cliEnv, "workers")
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if o.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") ||
		!containsAll(lines[1], "alpha", "connected", "2/2", "gpu=yes,pool=a", claudetest.CLIVersion(t)) ||
		!containsAll(lines[2], "beta", "connected", "1/1", "pool=a", onBeta.Id) {
		t.Errorf("claudectl workers: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
	o = claudectl(t, cliEnv, "workers", "--json")
	var list []workerJSON
	if err := json.Unmarshal([]byte(o.stdout), &list); err != nil || len(list) != 2 || list[0].Name != "alpha" || len(list[0].Sessions) != 2 || list[1].Capacity != 1 {
		t.Errorf("claudectl workers --json: %s (%v)", o.stdout, err)
	}
	o = claudectl(t, cliEnv, "sessions")
	if !strings.Contains(o.stdout, "WORKER") || !strings.Contains(o.stdout, onBeta.Id) || !containsAll(o.stdout, " beta", " alpha") {
		t.Errorf("claudectl sessions does not show the workers:\n%s", o.stdout)
	}
	o = claudectl(t, cliEnv, "doctor", "--server", apiURL)
	if !strings.Contains(o.stdout, "alpha: connected, 2/2 sessions") {
		t.Errorf("doctor --server does not show the workers:\n%s", o.stdout)
	}

	// A turn on alpha while all its links are cut: the same CLI streams
	// every delta once, and the log has no gap.
	clis := children(alpha.cmd.Process.Pid)
	if len(clis) != 2 {
		t.Fatalf("alpha runs CLIs %v, want 2", clis)
	}
	stream, err := sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: onAlpha.Id}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: onAlpha.Id, Text: "stream"})); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var last int64
	cuts, deltas := 0, 0
	result := ""
	for result == "" && stream.Receive() {
		ev := stream.Msg().Event
		if ev.Seq != last+1 {
			t.Errorf("event seq %d after %d: the log has a gap", ev.Seq, last)
		}
		last = ev.Seq
		if d := ev.GetTextDelta(); d != nil {
			text.WriteString(d.Text)
			if deltas++; deltas%10 == 3 {
				cuts += proxy.Cut()
			}
		}
		if m := ev.GetMessage(); m.GetType() == "result" {
			var r struct{ Result string }
			json.Unmarshal(m.Raw, &r)
			result = r.Result
		}
	}
	stream.Close()
	if result != long || text.String() != long {
		t.Errorf("after cuts: result %q, deltas %q; want %q in both", result, text.String(), long)
	}
	if cuts < 3 {
		t.Errorf("%d links cut during the turn, want several", cuts)
	}
	if got := children(alpha.cmd.Process.Pid); !slices.Equal(got, clis) {
		t.Errorf("alpha's CLIs %v after the cuts, were %v: a CLI was restarted", got, clis)
	}
	waitFor("alpha back", func(ws map[string]*v1.Worker) bool {
		return ws["alpha"].GetState() == v1.WorkerState_WORKER_STATE_CONNECTED
	})

	// alpha killed: after its grace period (3s) its sessions fail, saying
	// which worker was lost and for how long; its CLIs die with it.
	alpha.cmd.Process.Signal(syscall.SIGKILL)
	<-alpha.done
	killed := time.Now()
	waitFor("alpha reconnecting", func(ws map[string]*v1.Worker) bool {
		return ws["alpha"].GetState() == v1.WorkerState_WORKER_STATE_RECONNECTING
	})
	for _, id := range []string{onAlpha.Id, onPool.Id} {
		s := waitStatus(t, sessions, ctx, id, v1.SessionStatus_SESSION_STATUS_FAILED, 30*time.Second)
		if !containsAll(s.Error, `remote worker "alpha"`, "grace period of 3s") {
			t.Errorf("session %s on the killed worker: error %q; want the worker and its grace period", id, s.Error)
		}
		if s.WorkerName != "alpha" {
			t.Errorf("session %s: worker_name %q", id, s.WorkerName)
		}
	}
	if d := time.Since(killed); d < 2*time.Second {
		t.Errorf("sessions lost %v after the kill, before the grace period", d)
	}
	waitFor("alpha lost", func(ws map[string]*v1.Worker) bool {
		return ws["alpha"].GetState() == v1.WorkerState_WORKER_STATE_LOST && len(ws["alpha"].SessionIds) == 0
	})
	for _, pid := range clis {
		waitGone(t, pid)
	}

	// beta stopped by SIGTERM: it closes its CLI, which leaves nothing
	// behind, and exits 0.
	betaCLIs := children(beta.cmd.Process.Pid)
	if len(betaCLIs) != 1 {
		t.Fatalf("beta runs CLIs %v, want 1", betaCLIs)
	}
	beta.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-beta.done:
		if beta.err != nil {
			t.Errorf("beta after SIGTERM: %v, want exit 0", beta.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("beta did not exit after SIGTERM")
	}
	for _, pid := range betaCLIs {
		waitGone(t, pid)
	}
}

func writeToken(t *testing.T, token string) string {
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func sortedIDs(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// waitGone waits for a process to be gone (or a zombie).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			t.Errorf("process %d still runs", pid)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStatus waits for a session to reach status and returns it.
func waitStatus(t *testing.T, sessions claudectlv1connect.SessionServiceClient, ctx context.Context, id string, status v1.SessionStatus, d time.Duration) *v1.Session {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		res, err := sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
		if err != nil {
			t.Fatalf("GetSession %s: %v", id, err)
		}
		if s := res.Msg.Session; s.Status == status {
			return s
		} else if time.Now().After(deadline) {
			t.Fatalf("session %s is %s (error %q), want %s", id, statusName(s.Status), s.Error, statusName(status))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRunWorkerFlagsNeedServer(t *testing.T) {
	for _, args := range [][]string{{"run", "--worker", "beta", "hi"}, {"run", "--worker-label", "gpu=yes", "hi"}} {
		o := claudectl(t, invocation{}, args...)
		if o.code != ExitUsage || !strings.Contains(o.stderr, "go with --server") {
			t.Errorf("%v: exit %d, stderr %q; want 2, with --server", args, o.code, o.stderr)
		}
	}
	o := claudectl(t, invocation{}, "run", "--worker-label", "nokey", "hi")
	if o.code != ExitUsage || !strings.Contains(o.stderr, "KEY=VALUE") {
		t.Errorf("--worker-label nokey: exit %d, stderr %q", o.code, o.stderr)
	}
}

// TestDaemonWorkerResumeSticks: a session placed by labels and resumed goes
// back to the worker that holds its transcript, not to the least loaded one.
func TestDaemonWorkerResumeSticks(t *testing.T) {
	t.Parallel()
	bin := buildClaudectl(t)
	const token = "worker-s3cret"
	dd := daemontest.Start(t, &daemontest.Options{WorkerToken: token},
		claudetest.Reply(claudetest.Text("first")), claudetest.Reply(claudetest.Text("again")))
	apiURL, httpc := dd.Serve()
	ctx := dd.Ctx
	sessions := claudectlv1connect.NewSessionServiceClient(httpc, apiURL)
	endpoint := "ws://" + strings.TrimPrefix(apiURL, "http://") + apiserver.WorkerPath
	startRegWorker(t, bin, endpoint, token, "--name", "a1", "--label", "pool=p", "--capacity", "3")
	startRegWorker(t, bin, endpoint, token, "--name", "b2", "--label", "pool=p", "--capacity", "2")
	workersAPI := claudectlv1connect.NewWorkerServiceClient(httpc, apiURL)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := workersAPI.ListWorkers(ctx, connect.NewRequest(&v1.ListWorkersRequest{}))
		if err == nil && len(res.Msg.Workers) == 2 && res.Msg.Workers[0].State == v1.WorkerState_WORKER_STATE_CONNECTED &&
			res.Msg.Workers[1].State == v1.WorkerState_WORKER_STATE_CONNECTED {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers not connected: %v %v", res, err)
		}
	}
	create := func(o *v1.SessionOptions, prompt string) *v1.Session {
		t.Helper()
		o.Cwd = t.TempDir()
		res, err := sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: o, Prompt: prompt}))
		if err != nil {
			t.Fatalf("CreateSession %v: %v", o, err)
		}
		return res.Msg.Session
	}
	a := create(&v1.SessionOptions{WorkerLabels: map[string]string{"pool": "p"}}, "hello")
	if a.WorkerName != "a1" {
		t.Fatalf("the first session went to %q, want a1 (a tie goes by name)", a.WorkerName)
	}
	waitStatus(t, sessions, ctx, a.Id, v1.SessionStatus_SESSION_STATUS_IDLE, 60*time.Second)
	if _, err := sessions.CloseSession(ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: a.Id})); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sessions, ctx, a.Id, v1.SessionStatus_SESSION_STATUS_CLOSED, 30*time.Second)
	// Load a1 more than b2: 2 of 3 against 1 of 2.
	create(&v1.SessionOptions{Worker: "b2"}, "")
	create(&v1.SessionOptions{Worker: "a1"}, "")
	create(&v1.SessionOptions{Worker: "a1"}, "")
	res, err := sessions.ResumeSession(ctx, connect.NewRequest(&v1.ResumeSessionRequest{SessionId: a.Id, Prompt: "again"}))
	if err != nil {
		t.Fatalf("ResumeSession: %v", err)
	}
	if w := res.Msg.Session.WorkerName; w != "a1" {
		t.Errorf("the resumed session runs on %q, want a1, where its transcript is", w)
	}
	s := waitStatus(t, sessions, ctx, a.Id, v1.SessionStatus_SESSION_STATUS_IDLE, 60*time.Second)
	if s.Error != "" {
		t.Errorf("resumed session: error %q", s.Error)
	}
}
