package cli

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// These tests run a daemon session on a "claudectl worker" process: the
// daemon hosts workers at apiserver.WorkerPath on its API address, and the worker
// runs the real CLI against the scripted model.

// workerProc is a "claudectl worker" process.
type workerProc struct {
	done   chan struct{} // closed when it has exited
	err    error         // how it exited; set before done is closed
	stderr syncBuffer
}

// startWorker starts "claudectl worker" (bin) for the endpoint with the
// token. The test's cleanup kills it if it is still running.
func startWorker(t *testing.T, bin, endpoint, token string) *workerProc {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "worker-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &workerProc{done: make(chan struct{})}
	cmd := exec.Command(bin, "worker", "--connect", endpoint, "--token-file", tokenFile,
		"--cli", claudetest.CLIPath(t), "--once", "--name", "e2e-worker", "--reconnect-timeout", "20s", "--verbose")
	cmd.Stderr = &w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.err = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			cmd.Process.Kill()
			<-w.done
		}
		t.Logf("worker stderr:\n%s", w.stderr.String())
	})
	return w
}

func TestDaemonRemoteWorker(t *testing.T) {
	t.Parallel()
	bin := buildClaudectl(t)
	cwd := t.TempDir()
	target := filepath.Join(cwd, "from-worker.txt")
	const token = "worker-s3cret"
	dd := daemontest.Start(t, &daemontest.Options{WorkerToken: token},
		claudetest.Reply(claudetest.Text("Writing the file."),
			claudetest.ToolUse("Write", map[string]any{"file_path": target, "content": "written remotely\n"})),
		claudetest.Reply(claudetest.Text("The file is written.")))
	url, httpc := dd.Serve()
	ctx := dd.Ctx
	sessions := claudectlv1connect.NewSessionServiceClient(httpc, url)
	perms := claudectlv1connect.NewPermissionServiceClient(httpc, url)
	endpoint := "ws://" + strings.TrimPrefix(url, "http://") + apiserver.WorkerPath

	// A worker with a wrong token is refused, and says so.
	badToken := filepath.Join(t.TempDir(), "bad-token")
	if err := os.WriteFile(badToken, []byte("not-the-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := claudectl(t, invocation{timeout: 30 * time.Second}, "worker", "--connect", endpoint,
		"--token-file", badToken, "--cli", claudetest.CLIPath(t), "--reconnect-timeout", "10s")
	if want := "claudectl worker: the daemon at " + endpoint + " refused the worker's token (answered 401)"; o.code != ExitFailure || !strings.Contains(o.stderr, want) {
		t.Errorf("worker with a wrong token: exit %d, stderr %q; want 1 and %q", o.code, o.stderr, want)
	}

	worker := startWorker(t, bin, endpoint, token)

	// CreateSession waits for a worker to take the session.
	res, err := sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: cwd, Worker: "remote", IncludePartialMessages: true},
		Prompt:  "write the file"}))
	if err != nil {
		t.Fatalf("CreateSession on a remote worker: %v", err)
	}
	id := res.Msg.Session.Id
	if w := res.Msg.Session.Worker; w != "remote" {
		t.Errorf("CreateSession: worker %q, want remote", w)
	}

	// Follow the session to its result, allowing the Write.
	stream, err := sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	var allowed []string
	var result []byte
	for result == nil && stream.Receive() {
		ev := stream.Msg().Event
		if ev.Seq != last+1 {
			t.Errorf("event seq %d after %d: the log has a gap", ev.Seq, last)
		}
		last = ev.Seq
		if pr := ev.GetPermissionRequest(); pr != nil {
			if _, err := perms.Decide(ctx, connect.NewRequest(&v1.DecideRequest{RequestId: pr.RequestId,
				Behavior: v1.Behavior_BEHAVIOR_ALLOW, Client: "worker test"})); err != nil {
				t.Fatalf("Decide %s: %v", pr.ToolName, err)
			}
			allowed = append(allowed, pr.ToolName)
		}
		if m := ev.GetMessage(); m.GetType() == "result" {
			result = m.Raw
		}
	}
	stream.Close()
	if result == nil {
		t.Fatalf("the stream ended without a result: %v", stream.Err())
	}
	var r struct {
		IsError bool   `json:"is_error"`
		Result  string `json:"result"`
	}
	if err := json.Unmarshal(result, &r); err != nil || r.IsError || r.Result != "The file is written." {
		t.Errorf("result %s (%v)", result, err)
	}
	if len(allowed) != 1 || allowed[0] != "Write" {
		t.Errorf("permission requests %v, want [Write]", allowed)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "written remotely\n" {
		t.Errorf("the worker's CLI did not write the file: %q, %v", b, err)
	}
	gres, err := sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if s := gres.Msg.Session; s.Worker != "remote" || s.ClaudeSessionId == "" {
		t.Errorf("session: worker %q, CLI session %q", s.Worker, s.ClaudeSessionId)
	}
	o = claudectl(t, invocation{getenv: map[string]string{"CLAUDECTL_SERVER": url, "CLAUDECTL_TOKEN": dd.Token()}}, "sessions", "--json")
	var list []sessionJSON
	if err := json.Unmarshal([]byte(o.stdout), &list); err != nil || len(list) != 1 || list[0].Worker != "remote" {
		t.Errorf("sessions --json: %+v (%v)", list, err)
	}

	// The daemon judges the worker's CLI by the version its system/init
	// gives, as a worker's.
	hres, err := claudectlv1connect.NewHealthServiceClient(httpc, url).HealthDetails(ctx, connect.NewRequest(&v1.HealthDetailsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var workerVersion *v1.ClaudeCodeVersion
	for _, v := range hres.Msg.ClaudeCode.GetVersions() {
		if v.Worker {
			workerVersion = v
		}
	}
	if workerVersion == nil || workerVersion.Version != claudetest.CLIVersion(t) || workerVersion.LiveSessions != 1 || !workerVersion.Counted ||
		workerVersion.Level != v1.CompatibilityLevel_COMPATIBILITY_LEVEL_FULLY_COMPATIBLE {
		t.Errorf("health: versions %v; want the worker's CLI version, fully compatible, with its live session", hres.Msg.ClaudeCode.GetVersions())
	}

	// Closing the session ends the remote CLI, and the worker with it.
	if o := claudectl(t, invocation{getenv: map[string]string{"CLAUDECTL_SERVER": url, "CLAUDECTL_TOKEN": dd.Token()}}, "close", id); o.code != 0 {
		t.Fatalf("close: exit %d, stderr %q", o.code, o.stderr)
	}
	select {
	case <-worker.done:
		if worker.err != nil {
			t.Errorf("worker: %v, want exit 0 after its session ended", worker.err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the worker did not exit after its session was closed")
	}

	// The whole log replays gap-free, and ends with the session closed.
	gres, err = sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	s := gres.Msg.Session
	if s.Status != v1.SessionStatus_SESSION_STATUS_CLOSED {
		t.Errorf("after close the session is %s (error %q)", statusName(s.Status), s.Error)
	}
	stream, err = sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	n := int64(0)
	var lastStatus v1.SessionStatus
	for stream.Receive() {
		ev := stream.Msg().Event
		if n++; ev.Seq != n {
			t.Fatalf("replay: event %d has seq %d", n, ev.Seq)
		}
		if sc := ev.GetStatusChange(); sc != nil {
			lastStatus = sc.Status
		}
	}
	if err := stream.Err(); err != nil {
		t.Errorf("replay: %v", err)
	}
	if n != s.LastSeq || lastStatus != v1.SessionStatus_SESSION_STATUS_CLOSED {
		t.Errorf("replay: %d events (last_seq %d), last status %s", n, s.LastSeq, statusName(lastStatus))
	}
}

// A daemon without a worker token refuses sessions on remote workers, and
// says which field; a worker connecting to it is refused at once.
func TestDaemonRemoteWorkerNotEnabled(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	endpoint := "ws://" + strings.TrimPrefix(d.url, "http://") + apiserver.WorkerPath
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("a-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, once := range [][]string{nil, {"--once"}} {
		o := claudectl(t, invocation{timeout: 30 * time.Second}, append([]string{"worker", "--connect", endpoint,
			"--token-file", tokenFile, "--cli", claudetest.CLIPath(t)}, once...)...)
		if want := "claudectl worker: the daemon at " + endpoint + " accepts no remote workers: it answered 404 (its workers.token_file is unset"; o.code != ExitFailure || !strings.HasPrefix(o.stderr, want) {
			t.Errorf("worker %v to a daemon without workers: exit %d, stderr %q; want 1 and %q", once, o.code, o.stderr, want)
		}
	}
	_, err := d.sessions.CreateSession(d.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir(), Worker: "remote"}}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || !strings.Contains(ce.Message(), "options.worker") {
		t.Fatalf("CreateSession with worker remote: %v; want InvalidArgument naming options.worker", err)
	}
	_, err = d.sessions.CreateSession(d.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir(), Worker: "elsewhere"}}))
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || !strings.Contains(ce.Message(), "options.worker") {
		t.Errorf("CreateSession with worker elsewhere: %v; want InvalidArgument naming options.worker", err)
	}
}

// TestDaemonRemoteWorkerOwnToken: with workers.enabled and no shared
// worker token, a worker presents a token of role worker made with
// claudectl tokens create, and runs a session; a viewer's token is refused
// at the worker path, and a revoked worker token too.
func TestDaemonRemoteWorkerOwnToken(t *testing.T) {
	t.Parallel()
	bin := buildClaudectl(t)
	dd := daemontest.Start(t, &daemontest.Options{WorkersEnabled: true}, claudetest.Reply(claudetest.Text("hello from the worker")))
	url, httpc := dd.Serve()
	d := &testDaemon{url: url, token: dd.Token(), ctx: dd.Ctx, sessions: claudectlv1connect.NewSessionServiceClient(httpc, url)}
	endpoint := "ws://" + strings.TrimPrefix(url, "http://") + apiserver.WorkerPath
	mint := func(name, role string) string {
		o := claudectl(t, d.inv(), "tokens", "create", name, "--role", role)
		if o.code != 0 {
			t.Fatalf("tokens create %s: exit %d, stderr %q", name, o.code, o.stderr)
		}
		return strings.TrimSpace(o.stdout)
	}
	viewerFile := filepath.Join(t.TempDir(), "viewer-token")
	if err := os.WriteFile(viewerFile, []byte(mint("watcher", "viewer")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := claudectl(t, invocation{timeout: 30 * time.Second}, "worker", "--connect", endpoint,
		"--token-file", viewerFile, "--cli", claudetest.CLIPath(t), "--reconnect-timeout", "10s")
	if want := "refused the worker's token (answered 401)"; o.code != ExitFailure || !strings.Contains(o.stderr, want) {
		t.Errorf("a worker with a viewer's token: exit %d, stderr %q; want 1 and %q", o.code, o.stderr, want)
	}

	startWorker(t, bin, endpoint, mint("w1", "worker"))
	res, err := d.sessions.CreateSession(d.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir(), Worker: "remote"}, Prompt: "hi"}))
	if err != nil {
		t.Fatalf("CreateSession on a worker with its own token: %v", err)
	}
	stream, err := d.sessions.Subscribe(d.ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: res.Msg.Session.Id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	for stream.Receive() {
		if m := stream.Msg().Event.GetMessage(); m.GetType() == "result" {
			if !strings.Contains(string(m.Raw), "hello from the worker") {
				t.Errorf("result %s", m.Raw)
			}
			break
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}

	if o := claudectl(t, d.inv(), "tokens", "revoke", "w1"); o.code != 0 {
		t.Fatalf("tokens revoke: %q", o.stderr)
	}
	revoked := filepath.Join(t.TempDir(), "revoked")
	if err := os.WriteFile(revoked, []byte(mint("w2", "worker")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	claudectl(t, d.inv(), "tokens", "revoke", "w2")
	o = claudectl(t, invocation{timeout: 30 * time.Second}, "worker", "--connect", endpoint,
		"--token-file", revoked, "--cli", claudetest.CLIPath(t), "--reconnect-timeout", "10s")
	if o.code != ExitFailure || !strings.Contains(o.stderr, "refused the worker's token (answered 401)") {
		t.Errorf("a worker with a revoked token: exit %d, stderr %q", o.code, o.stderr)
	}
}
