package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// grpcurl runs grpcurl (github.com/fullstorydev/grpcurl), a gRPC client that
// is not ours and knows the schema only through server reflection, against a
// test daemon.
type grpcurl struct {
	t     *testing.T
	bin   string
	addr  string // host:port
	token string // the daemon's bearer token
	ctx   context.Context
}

// findGrpcurl returns grpcurl from $CLAUDECTL_TEST_GRPCURL (set by make),
// else from PATH. Without it the test is skipped, or fails when CI=true.
func findGrpcurl(t *testing.T) string {
	t.Helper()
	env := os.Getenv("CLAUDECTL_TEST_GRPCURL")
	if env != "" {
		if _, err := os.Stat(env); err == nil {
			return env
		}
	}
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	msg := "grpcurl is not on PATH and CLAUDECTL_TEST_GRPCURL is not set; `make test` installs it"
	if env != "" {
		msg = "grpcurl is not on PATH and CLAUDECTL_TEST_GRPCURL names a missing file (" + env + "); `make test` installs it"
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// startGrpcurl runs a daemon with the scripted turns, serves it on
// 127.0.0.1 and returns a grpcurl for it, bounded by a 60 s context.
func startGrpcurl(t *testing.T, turns ...claudetest.Turn) *grpcurl {
	t.Helper()
	bin := findGrpcurl(t)
	d := daemontest.Start(t, nil, turns...)
	base, _ := d.Serve()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(d.Ctx, 60*time.Second)
	t.Cleanup(cancel)
	return &grpcurl{t: t, bin: bin, addr: u.Host, token: d.Token(), ctx: ctx}
}

// command returns grpcurl's command line for args; the process is killed
// when the test's context ends.
func (g *grpcurl) command(args ...string) *exec.Cmd {
	cmd := exec.CommandContext(g.ctx, g.bin, append([]string{"-plaintext", "-H", "authorization: Bearer " + g.token}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs grpcurl to the end and returns its standard output.
func (g *grpcurl) run(args ...string) string {
	g.t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := g.command(args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		g.t.Fatalf("grpcurl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// call invokes a unary method with the request JSON and decodes the response
// (grpcurl's protojson) into res.
func (g *grpcurl) call(method string, req any, res proto.Message) {
	g.t.Helper()
	data, err := json.Marshal(req)
	if err != nil {
		g.t.Fatal(err)
	}
	out := g.run("-d", string(data), g.addr, method)
	if err := protojson.Unmarshal([]byte(out), res); err != nil {
		g.t.Fatalf("%s: decoding grpcurl's output: %v\n%s", method, err, out)
	}
}

// stream is a server stream read through grpcurl's standard output, which
// holds one JSON object per message.
type stream struct {
	t      *testing.T
	cmd    *exec.Cmd
	dec    *json.Decoder
	stderr bytes.Buffer
}

// stream starts a server-streaming call; its process is killed at the
// latest by the test's cleanup.
func (g *grpcurl) stream(method string, req any) *stream {
	g.t.Helper()
	data, err := json.Marshal(req)
	if err != nil {
		g.t.Fatal(err)
	}
	s := &stream{t: g.t, cmd: g.command("-d", string(data), g.addr, method)}
	s.cmd.Stderr = &s.stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		g.t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(s.stop)
	s.dec = json.NewDecoder(stdout)
	return s
}

// next decodes the next message into m; it fails the test when the stream
// ends.
func (s *stream) next(m proto.Message) {
	s.t.Helper()
	var raw json.RawMessage
	if err := s.dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			err = s.cmd.Wait()
		}
		s.t.Fatalf("stream ended: %v\n%s", err, s.stderr.String())
	}
	if err := protojson.Unmarshal(raw, m); err != nil {
		s.t.Fatalf("decoding grpcurl's output: %v\n%s", err, raw)
	}
}

// stop kills grpcurl (a subscription never ends by itself) and reaps it.
// It may be called more than once.
func (s *stream) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

func TestGrpcurlReflection(t *testing.T) {
	g := startGrpcurl(t)
	list := g.run(g.addr, "list")
	for _, svc := range []string{"claudectl.v1.SessionService", "claudectl.v1.PermissionService", "claudectl.v1.HealthService", "claudectl.v1.WorkerService"} {
		if !strings.Contains(list, svc+"\n") {
			t.Errorf("grpcurl list does not show %s:\n%s", svc, list)
		}
	}
	desc := g.run(g.addr, "describe", "claudectl.v1.SessionService")
	for _, want := range []string{
		"rpc CreateSession ( .claudectl.v1.CreateSessionRequest ) returns ( .claudectl.v1.CreateSessionResponse );",
		"rpc Subscribe ( .claudectl.v1.SubscribeRequest ) returns ( stream .claudectl.v1.SubscribeResponse );",
	} {
		if !strings.Contains(desc, want) {
			t.Errorf("grpcurl describe claudectl.v1.SessionService does not show %q:\n%s", want, desc)
		}
	}

	var lw v1.ListWorkersResponse // this daemon accepts no workers
	g.call("claudectl.v1.WorkerService/ListWorkers", struct{}{}, &lw)
	if len(lw.Workers) != 0 {
		t.Errorf("ListWorkers = %v, want none", &lw)
	}

	var hd v1.HealthDetailsResponse
	g.call("claudectl.v1.HealthService/HealthDetails", struct{}{}, &hd)
	cli := claudetest.CLIPath(t)
	out, err := exec.CommandContext(g.ctx, cli, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	cc := hd.ClaudeCode
	if !hd.Ok || cc.GetVersion() == "" || !strings.HasPrefix(string(out), cc.GetVersion()+" ") || cc.GetPath() != cli ||
		cc.GetLevel() != v1.CompatibilityLevel_COMPATIBILITY_LEVEL_FULLY_COMPATIBLE {
		t.Errorf("HealthDetails = %v; want ok, the version in %q, path %s, fully compatible", &hd, out, cli)
	}
}

func TestGrpcurlSession(t *testing.T) {
	g := startGrpcurl(t,
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "echo hi > f.txt", "description": "Write f.txt"})),
		claudetest.Reply(claudetest.Text("Wrote f.txt.")))
	dir := t.TempDir()
	var created v1.CreateSessionResponse
	g.call("claudectl.v1.SessionService/CreateSession",
		map[string]any{"options": map[string]any{"cwd": dir, "include_partial_messages": true}, "prompt": "Write hi to f.txt"}, &created)
	id := created.GetSession().GetId()
	if id == "" || created.Session.Cwd != dir {
		t.Fatalf("CreateSession = %v", &created)
	}

	sub := g.stream("claudectl.v1.SessionService/Subscribe", map[string]any{"session_id": id})
	var evs []*v1.Event
	var requested *v1.PermissionRequest
	for result := false; ; {
		var res v1.SubscribeResponse
		sub.next(&res)
		ev := res.Event
		evs = append(evs, ev)
		if pr := ev.GetPermissionRequest(); pr != nil {
			if requested != nil {
				t.Fatalf("a second permission request: %v", pr)
			}
			requested = pr
			decide(t, g, dir, id, pr)
		}
		result = result || ev.GetMessage().GetType() == "result"
		if result && ev.GetStatusChange().GetStatus() == v1.SessionStatus_SESSION_STATUS_IDLE {
			break
		}
	}
	sub.stop()

	checkSeqs(t, evs, 1)
	if requested == nil {
		t.Fatal("no permission_request event")
	}
	var (
		toolUse  *v1.ToolUse
		resolved *v1.PermissionResolved
		toolRes  bool // a user message with the tool's result
		reply    bool // an assistant message with the final text
		deltas   strings.Builder
	)
	for _, ev := range evs {
		if ev.GetSessionId() != id {
			t.Errorf("event %d is for session %q, want %q", ev.GetSeq(), ev.GetSessionId(), id)
		}
		switch k := ev.Kind.(type) {
		case *v1.Event_ToolUse:
			toolUse = k.ToolUse
		case *v1.Event_PermissionResolved:
			resolved = k.PermissionResolved
		case *v1.Event_TextDelta:
			deltas.WriteString(k.TextDelta.Text)
		case *v1.Event_Message:
			switch m := k.Message; m.Type {
			case "user":
				toolRes = toolRes || bytes.Contains(m.Raw, []byte(`"tool_result"`)) &&
					bytes.Contains(m.Raw, []byte(requested.ToolUseId))
			case "assistant":
				reply = reply || bytes.Contains(m.Raw, []byte("Wrote f.txt."))
			}
		}
	}
	if toolUse == nil || toolUse.Name != "Bash" || toolUse.ToolUseId != requested.ToolUseId || bashCommand(t, toolUse.Input) != "echo hi > f.txt" {
		t.Errorf("tool_use event = %v, want Bash %s", toolUse, requested.ToolUseId)
	}
	if resolved == nil || resolved.RequestId != requested.RequestId ||
		resolved.GetDecision().GetBehavior() != v1.Behavior_BEHAVIOR_ALLOW || resolved.GetDecision().GetDecidedBy() != "client:grpcurl" {
		t.Errorf("permission_resolved = %v, want allow by client:grpcurl", resolved)
	}
	if !toolRes {
		t.Errorf("no user message with the result of tool use %s", requested.ToolUseId)
	}
	if !reply || deltas.String() != "Wrote f.txt." {
		t.Errorf("final text: in an assistant message %v, text deltas %q; want \"Wrote f.txt.\"", reply, deltas.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("f.txt = %q, %v; want \"hi\\n\"", b, err)
	}
}

// bashCommand returns the command of a Bash tool input.
func bashCommand(t *testing.T, input []byte) string {
	t.Helper()
	var in struct{ Command string }
	if err := json.Unmarshal(input, &in); err != nil {
		t.Errorf("Bash input %s: %v", input, err)
	}
	return in.Command
}

// decide checks the pending request through ListPending and allows it
// through Decide, both with grpcurl.
func decide(t *testing.T, g *grpcurl, dir, id string, pr *v1.PermissionRequest) {
	t.Helper()
	if pr.ToolName != "Bash" || bashCommand(t, pr.Input) != "echo hi > f.txt" || pr.SessionId != id {
		t.Errorf("permission_request = %v", pr)
	}
	if _, err := os.Stat(filepath.Join(dir, "f.txt")); err == nil {
		t.Errorf("f.txt exists before the decision")
	}
	var pend v1.ListPendingResponse
	g.call("claudectl.v1.PermissionService/ListPending", map[string]any{"session_id": id}, &pend)
	if len(pend.Requests) != 1 || pend.Requests[0].RequestId != pr.RequestId || pend.Requests[0].ToolName != "Bash" {
		t.Fatalf("ListPending = %v, want request %s", &pend, pr.RequestId)
	}
	var dec v1.DecideResponse
	g.call("claudectl.v1.PermissionService/Decide",
		map[string]any{"request_id": pr.RequestId, "behavior": "BEHAVIOR_ALLOW", "client": "grpcurl"}, &dec)
	if d := dec.Decision; d.GetBehavior() != v1.Behavior_BEHAVIOR_ALLOW || d.GetDecidedBy() != "client:grpcurl" || d.GetRequestId() != pr.RequestId {
		t.Errorf("Decide = %v", &dec)
	}
}

// TestGrpcurlWatch follows the session list and the inbox with grpcurl, a
// gRPC client that is not ours: the session appears and waits for a
// person, its request comes into the inbox, and leaves it with who
// answered; a watch of an unknown session is NotFound.
func TestGrpcurlWatch(t *testing.T) {
	g := startGrpcurl(t,
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "echo hi > w.txt", "description": "Write w.txt"})),
		claudetest.Reply(claudetest.Text("Done.")))
	sessions := g.stream("claudectl.v1.SessionService/WatchSessions", map[string]any{})
	var first v1.WatchSessionsResponse
	sessions.next(&first)
	if !first.Snapshot || len(first.Sessions) != 0 {
		t.Fatalf("first WatchSessions response: %v", &first)
	}
	inbox := g.stream("claudectl.v1.PermissionService/WatchPending", map[string]any{})
	var snap v1.WatchPendingResponse
	inbox.next(&snap)
	if !snap.Snapshot || len(snap.Requests) != 0 {
		t.Fatalf("first WatchPending response: %v", &snap)
	}
	dir := t.TempDir()
	var created v1.CreateSessionResponse
	g.call("claudectl.v1.SessionService/CreateSession",
		map[string]any{"options": map[string]any{"cwd": dir}, "prompt": "Write hi to w.txt"}, &created)
	id := created.GetSession().GetId()

	var pending v1.WatchPendingResponse
	inbox.next(&pending)
	if pending.Snapshot || len(pending.Requests) != 1 || pending.Requests[0].SessionId != id || pending.Requests[0].ToolName != "Bash" {
		t.Fatalf("WatchPending after the request: %v", &pending)
	}
	for waiting := false; !waiting; {
		var ch v1.WatchSessionsResponse
		sessions.next(&ch)
		for _, s := range ch.Sessions {
			waiting = waiting || s.Id == id && s.Status == v1.SessionStatus_SESSION_STATUS_WAITING
		}
	}
	var decided v1.DecideResponse
	g.call("claudectl.v1.PermissionService/Decide",
		map[string]any{"request_id": pending.Requests[0].RequestId, "behavior": "BEHAVIOR_ALLOW", "client": "grpcurl"}, &decided)
	var settled v1.WatchPendingResponse
	inbox.next(&settled)
	if st := settled.Settled; st == nil || st.RequestId != pending.Requests[0].RequestId || st.Outcome != "allowed" || st.By != "client:grpcurl" {
		t.Fatalf("WatchPending after the decision: %v", &settled)
	}
	inbox.stop()
	sessions.stop()

	cmd := g.command("-d", `{"session_id":"no-such-session"}`, g.addr, "claudectl.v1.PermissionService/WatchPending")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "NotFound") {
		t.Errorf("WatchPending of an unknown session: %v\n%s", err, out)
	}
}

// TestGrpcurlRoles: grpcurl with a viewer's token reads the schema
// (reflection) and the sessions, and is refused a decision with
// PermissionDenied naming what was needed; with a worker's token it is
// refused even the schema.
func TestGrpcurlRoles(t *testing.T) {
	g := startGrpcurl(t)
	var tok v1.CreateTokenResponse
	g.call("claudectl.v1.AuthService/CreateToken", map[string]any{"name": "watcher", "role": "viewer"}, &tok)
	viewer := *g
	viewer.token = tok.Secret
	if list := viewer.run(g.addr, "list"); !strings.Contains(list, "claudectl.v1.AuthService\n") {
		t.Errorf("a viewer's grpcurl list:\n%s", list)
	}
	var ls v1.ListSessionsResponse
	viewer.call("claudectl.v1.SessionService/ListSessions", struct{}{}, &ls)
	var who v1.WhoamiResponse
	viewer.call("claudectl.v1.AuthService/Whoami", struct{}{}, &who)
	if who.Role != "viewer" || who.Token != "watcher" {
		t.Errorf("Whoami = %v", &who)
	}
	var stderr bytes.Buffer
	cmd := viewer.command("-d", `{"request_id":"req_1","behavior":"BEHAVIOR_ALLOW"}`, g.addr, "claudectl.v1.PermissionService/Decide")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "PermissionDenied") || !strings.Contains(stderr.String(), `permission "decide"`) {
		t.Errorf("a viewer's Decide through grpcurl: %v\n%s", err, stderr.String())
	}
	g.call("claudectl.v1.AuthService/CreateToken", map[string]any{"name": "w1", "role": "worker"}, &tok)
	worker := *g
	worker.token = tok.Secret
	stderr.Reset()
	cmd = worker.command(g.addr, "list")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "worker token") {
		t.Errorf("a worker token's grpcurl list: %v\n%s", err, stderr.String())
	}
}
