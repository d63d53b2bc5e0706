package apiserver_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/testing/protocmp"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.M(m)) }

type client struct {
	sessions claudectlv1connect.SessionServiceClient
	perms    claudectlv1connect.PermissionServiceClient
	health   claudectlv1connect.HealthServiceClient
	auth     claudectlv1connect.AuthServiceClient
	url      string
	token    string
	ctx      context.Context
}

// start runs a daemon and its API on 127.0.0.1:0, with sessions running the
// real CLI against a scripted fake API, and returns Connect clients.
func start(t *testing.T, turns ...claudetest.Turn) *client {
	t.Helper()
	return startWith(t, nil, turns...)
}

// startWith is start with the test daemon's options.
func startWith(t *testing.T, opts *daemontest.Options, turns ...claudetest.Turn) *client {
	t.Helper()
	d := daemontest.Start(t, opts, turns...)
	url, httpc := d.Serve()
	return &client{
		sessions: claudectlv1connect.NewSessionServiceClient(httpc, url),
		perms:    claudectlv1connect.NewPermissionServiceClient(httpc, url),
		health:   claudectlv1connect.NewHealthServiceClient(httpc, url),
		auth:     claudectlv1connect.NewAuthServiceClient(httpc, url),
		url:      url, token: d.Token(), ctx: d.Ctx,
	}
}

// untilIdle subscribes from after and collects events up to the idle
// status that follows a result.
func (c *client) untilIdle(t *testing.T, id string, after int64, onEvent func(*v1.Event)) []*v1.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	stream, err := c.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id, AfterSeq: after}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var evs []*v1.Event
	sawResult := false
	for stream.Receive() {
		ev := stream.Msg().Event
		evs = append(evs, ev)
		if onEvent != nil {
			onEvent(ev)
		}
		if ev.GetMessage().GetType() == "result" {
			sawResult = true
		}
		if sawResult && ev.GetStatusChange().GetStatus() == v1.SessionStatus_SESSION_STATUS_IDLE {
			return evs
		}
	}
	t.Fatalf("stream ended before idle after %d events: %v", len(evs), stream.Err())
	return nil
}

// through returns the events of session id up to seq last.
func (c *client) through(t *testing.T, id string, last int64) []*v1.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	stream, err := c.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var evs []*v1.Event
	for stream.Receive() {
		evs = append(evs, stream.Msg().Event)
		if stream.Msg().Event.Seq >= last {
			return evs
		}
	}
	t.Fatalf("stream ended after %d events, before seq %d: %v", len(evs), last, stream.Err())
	return nil
}

func checkSeqs(t *testing.T, evs []*v1.Event, first int64) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != first+int64(i) {
			t.Fatalf("event %d has seq %d, want %d (gap or duplicate)", i, ev.Seq, first+int64(i))
		}
	}
}

func TestCreateSubscribeReplay(t *testing.T) {
	c := start(t, claudetest.Reply(claudetest.Text("Hello through the daemon.")))
	res, err := c.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir()}, Prompt: "Say hello"}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.Session.Id
	evs := c.untilIdle(t, id, 0, nil)
	checkSeqs(t, evs, 1)
	var text strings.Builder
	var types []string
	var report *v1.UsageReport
	for _, ev := range evs {
		if r := ev.GetUsageReport(); r != nil {
			report = r
		}
		if m := ev.GetMessage(); m != nil {
			types = append(types, m.Type)
			if m.Type == "assistant" {
				text.Write(m.Raw)
			}
		}
	}
	if !strings.Contains(text.String(), "Hello through the daemon.") {
		t.Errorf("no scripted reply among the assistant events; types %v", types)
	}
	if types[len(types)-1] != "result" {
		t.Errorf("last CLI event is %q, want result", types[len(types)-1])
	}
	if report == nil || report.GetTurn().GetOutputTokens() == 0 ||
		report.GetSessionTotals().GetOutputTokens() != report.GetTurn().GetOutputTokens() {
		t.Errorf("usage report = %v", report)
	}

	// After the fact, a replay gives the same events.
	replay := c.untilIdle(t, id, 0, nil)
	if len(replay) != len(evs) {
		t.Fatalf("replay has %d events, live had %d", len(replay), len(evs))
	}
	for i := range evs {
		if replay[i].Seq != evs[i].Seq || string(replay[i].GetMessage().GetRaw()) != string(evs[i].GetMessage().GetRaw()) {
			t.Fatalf("replay event %d differs", i)
		}
	}
	got, err := c.sessions.GetSession(c.ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if s := got.Msg.Session; s.ClaudeSessionId == "" || s.Status != v1.SessionStatus_SESSION_STATUS_IDLE || s.LastSeq < evs[len(evs)-1].Seq {
		t.Errorf("GetSession = %v", s)
	}

	// Errors carry codes.
	_, err = c.sessions.GetSession(c.ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: "nope"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("GetSession(nope): %v, want NotFound", err)
	}
	_, err = c.sessions.SetPermissionMode(c.ctx, connect.NewRequest(&v1.SetPermissionModeRequest{SessionId: id, Mode: "yolo"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), `mode "yolo"`) {
		t.Errorf("SetPermissionMode(yolo): %v, want InvalidArgument naming the value", err)
	}
	// The mode in effect, as the CLI reports it: in the answer, the
	// session and its log.
	mode, err := c.sessions.SetPermissionMode(c.ctx, connect.NewRequest(&v1.SetPermissionModeRequest{SessionId: id, Mode: "plan"}))
	if err != nil || mode.Msg.Mode != "plan" {
		t.Errorf("SetPermissionMode(plan) = %v, %v", mode, err)
	}
	got, err = c.sessions.GetSession(c.ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if err != nil || got.Msg.Session.PermissionMode != "plan" {
		t.Errorf("GetSession after SetPermissionMode(plan): %v, %v", got, err)
	}
	var change *v1.PermissionModeChange
	for _, ev := range c.through(t, id, got.Msg.Session.LastSeq) {
		if pm := ev.GetPermissionMode(); pm != nil {
			change = pm
		}
	}
	if change.GetMode() != "plan" || change.GetRequested() != "plan" {
		t.Errorf("the permission_mode event after SetPermissionMode(plan): %v", change)
	}
	if _, err := c.sessions.CloseSession(c.ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	_, err = c.sessions.Send(c.ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: "more"}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("Send after close: %v, want FailedPrecondition", err)
	}
}

var touchScript = []claudetest.Turn{
	claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "touch x", "description": "Create x"})),
	claudetest.Reply(claudetest.Text("Created x.")),
}

func TestPermissionSettledByRule(t *testing.T) {
	c := start(t, touchScript...)
	rule, err := c.perms.AddRule(c.ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{
		Pattern: "Bash(touch:*)", Behavior: v1.Behavior_BEHAVIOR_ALLOW}}))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	res, err := c.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: dir, PermissionMode: "default"}, Prompt: "Create x"}))
	if err != nil {
		t.Fatal(err)
	}
	evs := c.untilIdle(t, res.Msg.Session.Id, 0, nil)
	checkSeqs(t, evs, 1)
	if _, err := os.Stat(filepath.Join(dir, "x")); err != nil {
		t.Errorf("x was not created: %v", err)
	}
	var resolved *v1.PermissionResolved
	for _, ev := range evs {
		if ev.GetPermissionRequest() != nil {
			t.Errorf("a request went to a person although a rule allows it")
		}
		if r := ev.GetPermissionResolved(); r != nil {
			resolved = r
		}
	}
	if want := "rule:" + rule.Msg.Rule.Id; resolved == nil || resolved.Decision.DecidedBy != want ||
		resolved.Decision.Behavior != v1.Behavior_BEHAVIOR_ALLOW {
		t.Errorf("permission_resolved = %v, want allow by %s", resolved, want)
	}
	ds, err := c.perms.ListDecisions(c.ctx, connect.NewRequest(&v1.ListDecisionsRequest{SessionId: res.Msg.Session.Id}))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Msg.Decisions) != 1 || ds.Msg.Decisions[0].DecidedBy != "rule:"+rule.Msg.Rule.Id || ds.Msg.Decisions[0].ToolName != "Bash" {
		t.Errorf("audit = %v", ds.Msg.Decisions)
	}
	_, err = c.perms.AddRule(c.ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{
		Pattern: "Bash(", Behavior: v1.Behavior_BEHAVIOR_ALLOW}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "rule.pattern") {
		t.Errorf("AddRule(Bash(): %v, want InvalidArgument naming rule.pattern", err)
	}
}

func TestPermissionDecidedByClient(t *testing.T) {
	c := start(t, touchScript...)
	dir := t.TempDir()
	res, err := c.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: dir}, Prompt: "Create x"}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.Session.Id
	decided := 0
	var answered *v1.Decision
	evs := c.untilIdle(t, id, 0, func(ev *v1.Event) {
		pr := ev.GetPermissionRequest()
		if pr == nil {
			return
		}
		if pr.ToolName != "Bash" || !strings.Contains(string(pr.Input), "touch x") {
			t.Errorf("permission request = %v", pr)
		}
		pend, err := c.perms.ListPending(c.ctx, connect.NewRequest(&v1.ListPendingRequest{SessionId: id}))
		if err != nil || len(pend.Msg.Requests) != 1 || pend.Msg.Requests[0].RequestId != pr.RequestId {
			t.Errorf("ListPending = %v, %v", pend, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
			t.Errorf("x exists before the decision")
		}
		// What an allow of a Bash request cannot carry is refused, not
		// dropped: a message (only a denial tells Claude why), answers.
		for field, bad := range map[string]*v1.DecideRequest{
			"message": {Message: "go ahead"},
			"answers": {Answers: map[string]string{"Which?": "this"}},
		} {
			bad.RequestId, bad.Behavior = pr.RequestId, v1.Behavior_BEHAVIOR_ALLOW
			_, err := c.perms.Decide(c.ctx, connect.NewRequest(bad))
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "invalid "+field) {
				t.Errorf("Decide allow with %s: %v; want InvalidArgument naming it", field, err)
			}
		}
		got, err := c.perms.Decide(c.ctx, connect.NewRequest(&v1.DecideRequest{RequestId: pr.RequestId,
			Behavior: v1.Behavior_BEHAVIOR_ALLOW, Client: "alice"}))
		if err != nil {
			t.Errorf("Decide: %v", err)
		} else {
			answered = got.Msg.Decision
		}
		decided++
		// A second decision loses and says who won.
		_, err = c.perms.Decide(c.ctx, connect.NewRequest(&v1.DecideRequest{RequestId: pr.RequestId,
			Behavior: v1.Behavior_BEHAVIOR_DENY, Client: "bob"}))
		if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "alice") {
			t.Errorf("late Decide: %v, want FailedPrecondition naming alice", err)
		}
	})
	checkSeqs(t, evs, 1)
	if decided != 1 {
		t.Fatalf("saw %d permission requests, want 1", decided)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err != nil {
		t.Errorf("x was not created after the allow: %v", err)
	}
	ds, err := c.perms.ListDecisions(c.ctx, connect.NewRequest(&v1.ListDecisionsRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Msg.Decisions) != 1 || ds.Msg.Decisions[0].DecidedBy != "client:alice" {
		t.Fatalf("audit = %v", ds.Msg.Decisions)
	}
	// Decide answered with the decision as stored, its time included
	// (target, what the request was for, only ListDecisions says).
	if ds.Msg.Decisions[0].Target != "touch x" {
		t.Errorf("ListDecisions: target %q, want the command", ds.Msg.Decisions[0].Target)
	}
	if diff := cmp.Diff(ds.Msg.Decisions[0], answered, protocmp.Transform(), protocmp.IgnoreFields(&v1.Decision{}, "target")); diff != "" {
		t.Errorf("Decide's answer is not the stored decision (-stored +answered):\n%s", diff)
	}
	_, err = c.perms.Decide(c.ctx, connect.NewRequest(&v1.DecideRequest{RequestId: "req_unknown", Behavior: v1.Behavior_BEHAVIOR_ALLOW}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("Decide(unknown): %v, want NotFound", err)
	}
}

func TestHealthDetails(t *testing.T) {
	c := start(t)
	// Over gRPC on h2c as well as Connect: the same port speaks both.
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	defer h2c.CloseIdleConnections()
	grpc := claudectlv1connect.NewHealthServiceClient(&http.Client{Transport: h2c}, c.url, connect.WithGRPC())
	for name, hc := range map[string]claudectlv1connect.HealthServiceClient{"connect": c.health, "grpc": grpc} {
		req := connect.NewRequest(&v1.HealthDetailsRequest{})
		req.Header().Set("Authorization", "Bearer "+c.token)
		res, err := hc.HealthDetails(c.ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cc := res.Msg.ClaudeCode
		if want := claudetest.CLIVersion(t); cc.Version != want || cc.Level != v1.CompatibilityLevel_COMPATIBILITY_LEVEL_FULLY_COMPATIBLE {
			t.Errorf("%s: claude_code = %v, want %s fully compatible", name, cc, want)
		}
	}
}

func TestNonLoopbackNeedsToken(t *testing.T) {
	_, err := apiserver.NewServer("0.0.0.0:7777", http.NotFoundHandler(), nil)
	if !errors.Is(err, apiserver.ErrTokenRequired) {
		t.Errorf("NewServer(0.0.0.0) without a token: %v", err)
	}
	if _, err := apiserver.NewServer("0.0.0.0:7777", http.NotFoundHandler(), &apiserver.ServerOptions{Token: "s3cret"}); !errors.Is(err, apiserver.ErrCleartext) {
		t.Errorf("NewServer(0.0.0.0) with a token but no TLS: %v", err)
	}
	hs, err := apiserver.NewServer("0.0.0.0:7777", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }), &apiserver.ServerOptions{Token: "s3cret", InsecureCleartext: true})
	if err != nil {
		t.Fatal(err)
	}
	for auth, want := range map[string]int{"": 401, "Bearer wrong": 401, "Bearer s3cret": 200} {
		r, _ := http.NewRequest("POST", "/x", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := &recorder{h: http.Header{}}
		hs.Handler.ServeHTTP(w, r)
		if w.code != want {
			t.Errorf("Authorization %q: status %d, want %d", auth, w.code, want)
		}
	}
}

type recorder struct {
	h    http.Header
	code int
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return len(b), nil
}
func (r *recorder) WriteHeader(c int) { r.code = c }

// TestRequestSizeLimit: a 50 MB prompt is refused quickly with
// ResourceExhausted, over Connect and gRPC, and the daemon goes on serving.
func TestRequestSizeLimit(t *testing.T) {
	c := start(t)
	s, err := c.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: t.TempDir()}}))
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 50<<20)
	start := time.Now()
	_, err = c.sessions.Send(c.ctx, connect.NewRequest(&v1.SendRequest{SessionId: s.Msg.Session.Id, Text: huge}))
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("50 MB Send: %v, want ResourceExhausted", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("refusing took %v", took)
	}
	if _, err := c.health.Health(c.ctx, connect.NewRequest(&v1.HealthRequest{})); err != nil {
		t.Errorf("Health after the refusal: %v", err)
	}
}
