package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

// TestEveryMethodHasAPermission: every method of every service of the
// API (and server reflection) is in the one table of permissions, so a
// method added later is refused to everyone until it is given one, never
// let through unchecked.
func TestEveryMethodHasAPermission(t *testing.T) {
	svcs := v1.File_claudectl_v1_claudectl_proto.Services()
	if svcs.Len() < 5 {
		t.Fatalf("only %d services", svcs.Len())
	}
	for i := range svcs.Len() {
		sd := svcs.Get(i)
		for j := range sd.Methods().Len() {
			md := sd.Methods().Get(j)
			proc := "/" + string(sd.FullName()) + "/" + string(md.Name())
			if _, ok := apiserver.MethodPermission(proc); !ok {
				t.Errorf("%s has no permission", proc)
			}
		}
	}
	for _, proc := range []string{"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"} {
		if p, ok := apiserver.MethodPermission(proc); !ok || p != apiserver.PermAPI {
			t.Errorf("%s: %q, %v", proc, p, ok)
		}
	}
}

// bearerTransport sends one token, and says the client is the CLI.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	r.Header.Set(apiserver.ClientHeader, "cli")
	return b.next.RoundTrip(r)
}

// as returns c's clients that send token instead of the bootstrap one.
func (c *client) as(t *testing.T, token string) *client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	httpc := &http.Client{Transport: &bearerTransport{token: token, next: tr}}
	return &client{
		sessions: claudectlv1connect.NewSessionServiceClient(httpc, c.url),
		perms:    claudectlv1connect.NewPermissionServiceClient(httpc, c.url),
		health:   claudectlv1connect.NewHealthServiceClient(httpc, c.url),
		auth:     claudectlv1connect.NewAuthServiceClient(httpc, c.url),
		url:      c.url, token: token, ctx: c.ctx,
	}
}

// mint makes a token with the bootstrap token and returns its secret.
func (c *client) mint(t *testing.T, req *v1.CreateTokenRequest) string {
	t.Helper()
	res, err := c.auth.CreateToken(c.ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("CreateToken %s: %v", req.Name, err)
	}
	if !strings.HasPrefix(res.Msg.Secret, apiserver.TokenPrefix) || len(res.Msg.Secret) < 40 {
		t.Fatalf("secret %q", res.Msg.Secret)
	}
	return res.Msg.Secret
}

func wantCode(t *testing.T, what string, err error, code connect.Code, words ...string) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Errorf("%s: %v, want %v", what, err, code)
		return
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
}

// TestRolesDecide: a viewer's token cannot decide (PermissionDenied naming
// the permission), an approver's can, and the decision, the session's log
// and the audit trail name the approver; the audit names the token, the
// client kind and the address.
func TestRolesDecide(t *testing.T) {
	c := start(t, touchScript...)
	viewer := c.as(t, c.mint(t, &v1.CreateTokenRequest{Name: "watcher", Role: "viewer", User: "vera"}))
	approver := c.as(t, c.mint(t, &v1.CreateTokenRequest{Name: "phone", Role: "approver", User: "alice"}))
	operator := c.as(t, c.mint(t, &v1.CreateTokenRequest{Name: "ci", Role: "operator"}))

	_, err := viewer.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: t.TempDir()}}))
	wantCode(t, "a viewer's CreateSession", err, connect.CodePermissionDenied, `"sessions.operate"`, `"watcher"`, "operator or admin")
	_, err = viewer.sessions.Typing(c.ctx, connect.NewRequest(&v1.TypingRequest{SessionId: "any"}))
	wantCode(t, "a viewer's Typing", err, connect.CodePermissionDenied, `"sessions.operate"`)
	_, err = approver.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: t.TempDir()}}))
	wantCode(t, "an approver's CreateSession", err, connect.CodePermissionDenied, `"sessions.operate"`)
	_, err = operator.auth.ListTokens(c.ctx, connect.NewRequest(&v1.ListTokensRequest{}))
	wantCode(t, "an operator's ListTokens", err, connect.CodePermissionDenied, `"tokens.manage"`)
	_, err = approver.perms.AddRule(c.ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{Pattern: "Bash", Behavior: v1.Behavior_BEHAVIOR_ALLOW}}))
	wantCode(t, "an approver's AddRule", err, connect.CodePermissionDenied, `"rules.write"`)

	res, err := operator.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir()}, Prompt: "Create x"}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.Session.Id
	decided := false
	viewer.untilIdle(t, id, 0, func(ev *v1.Event) {
		pr := ev.GetPermissionRequest()
		if pr == nil {
			return
		}
		pend, err := viewer.perms.ListPending(c.ctx, connect.NewRequest(&v1.ListPendingRequest{}))
		if err != nil || len(pend.Msg.Requests) != 1 {
			t.Errorf("a viewer's ListPending: %v, %v", pend, err)
		}
		_, err = viewer.perms.Decide(c.ctx, connect.NewRequest(&v1.DecideRequest{RequestId: pr.RequestId, Behavior: v1.Behavior_BEHAVIOR_ALLOW}))
		wantCode(t, "a viewer's Decide", err, connect.CodePermissionDenied, `"decide"`, "approver or admin", `"watcher"`)
		_, err = operator.perms.Decide(c.ctx, connect.NewRequest(&v1.DecideRequest{RequestId: pr.RequestId, Behavior: v1.Behavior_BEHAVIOR_ALLOW}))
		wantCode(t, "an operator's Decide", err, connect.CodePermissionDenied, `"decide"`)
		got, err := approver.perms.Decide(c.ctx, connect.NewRequest(&v1.DecideRequest{RequestId: pr.RequestId,
			Behavior: v1.Behavior_BEHAVIOR_ALLOW, Client: "mallory"})) // a name it gives itself: a hint only
		if err != nil {
			t.Errorf("an approver's Decide: %v", err)
			return
		}
		if got.Msg.Decision.DecidedBy != "user:alice" {
			t.Errorf("decided by %q, want user:alice", got.Msg.Decision.DecidedBy)
		}
		decided = true
	})
	if !decided {
		t.Fatal("no permission request")
	}
	ds, err := viewer.perms.ListDecisions(c.ctx, connect.NewRequest(&v1.ListDecisionsRequest{SessionId: id}))
	if err != nil || len(ds.Msg.Decisions) != 1 || ds.Msg.Decisions[0].DecidedBy != "user:alice" {
		t.Fatalf("ListDecisions: %v, %v", ds, err)
	}
	aud, err := c.auth.ListAudit(c.ctx, connect.NewRequest(&v1.ListAuditRequest{User: "alice"}))
	if err != nil {
		t.Fatal(err)
	}
	var ok, refused bool
	for _, e := range aud.Msg.Entries {
		if e.Action == "Decide" && e.Outcome == "ok" {
			ok = e.Token == "phone" && e.ClientKind == "cli" && e.ClientHint == "mallory" && e.SessionId == id &&
				strings.HasPrefix(e.Remote, "127.0.0.1:") && strings.Contains(e.Detail, "user:alice")
			if !ok {
				t.Errorf("the decision's audit entry: %v", e)
			}
		}
		if e.Action == "AddRule" && e.Outcome == "permission_denied" {
			refused = true
		}
	}
	if !ok || !refused {
		t.Errorf("alice's audit: %v", aud.Msg.Entries)
	}
	aud, err = c.auth.ListAudit(c.ctx, connect.NewRequest(&v1.ListAuditRequest{SessionId: id}))
	if err != nil || !slices.ContainsFunc(aud.Msg.Entries, func(e *v1.AuditEntry) bool {
		return e.Action == "CreateSession" && e.User == "ci" && e.Token == "ci" && e.Outcome == "ok"
	}) {
		t.Errorf("the session's audit: %v, %v", aud, err)
	}
	_, err = viewer.auth.ListAudit(c.ctx, connect.NewRequest(&v1.ListAuditRequest{}))
	wantCode(t, "a viewer's ListAudit", err, connect.CodePermissionDenied, `"audit.read"`)
}

// TestScopedToken: a token scoped to one directory sees and touches only
// the sessions there: lists and watches leave the others out, a call
// naming one is refused, and it makes sessions only there. A token
// scoped to one session makes none.
func TestScopedToken(t *testing.T) {
	c := start(t)
	inside, outside := t.TempDir(), t.TempDir()
	mk := func(dir string) string {
		res, err := c.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: dir}}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.Session.Id
	}
	theirs := mk(outside)
	ours := mk(inside)
	ci := c.as(t, c.mint(t, &v1.CreateTokenRequest{Name: "ci", Role: "operator", Dirs: []string{inside}}))

	list, err := ci.sessions.ListSessions(c.ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
	if err != nil || len(list.Msg.Sessions) != 1 || list.Msg.Sessions[0].Id != ours {
		t.Fatalf("a scoped ListSessions: %v, %v", list, err)
	}
	_, err = ci.sessions.GetSession(c.ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: theirs}))
	wantCode(t, "GetSession outside", err, connect.CodePermissionDenied, theirs, "outside the scope", inside)
	_, err = ci.sessions.Send(c.ctx, connect.NewRequest(&v1.SendRequest{SessionId: theirs, Text: "hi"}))
	wantCode(t, "Send outside", err, connect.CodePermissionDenied, "outside the scope")
	_, err = ci.sessions.CloseSession(c.ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: theirs}))
	wantCode(t, "CloseSession outside", err, connect.CodePermissionDenied, "outside the scope")
	_, err = ci.sessions.Typing(c.ctx, connect.NewRequest(&v1.TypingRequest{SessionId: theirs}))
	wantCode(t, "Typing outside", err, connect.CodePermissionDenied, "outside the scope")
	if _, err := ci.sessions.Typing(c.ctx, connect.NewRequest(&v1.TypingRequest{SessionId: ours})); err != nil {
		t.Errorf("Typing inside: %v", err)
	}
	_, err = ci.sessions.GetSession(c.ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: "no-such-session"}))
	wantCode(t, "GetSession of no session", err, connect.CodePermissionDenied, "outside the scope") // tells nothing of what exists
	stream, err := ci.sessions.Subscribe(c.ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: theirs}))
	if err == nil {
		for stream.Receive() {
			t.Errorf("a scoped Subscribe outside got %v", stream.Msg())
		}
		err = stream.Err()
		stream.Close()
	}
	wantCode(t, "Subscribe outside", err, connect.CodePermissionDenied, "outside the scope")
	_, err = ci.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: outside}}))
	wantCode(t, "CreateSession outside", err, connect.CodePermissionDenied, "options.cwd", inside)
	_, err = ci.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: inside + "/../" + strings.TrimPrefix(outside, "/")}}))
	wantCode(t, "CreateSession outside through ..", err, connect.CodePermissionDenied, "options.cwd")
	res, err := ci.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: inside}}))
	if err != nil {
		t.Fatalf("CreateSession inside: %v", err)
	}
	if _, err := ci.sessions.GetSession(c.ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: res.Msg.Session.Id})); err != nil {
		t.Errorf("GetSession inside: %v", err)
	}
	_, err = ci.perms.AddRule(c.ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{Pattern: "Bash", Behavior: v1.Behavior_BEHAVIOR_ALLOW}}))
	wantCode(t, "a scoped AddRule", err, connect.CodePermissionDenied, `"rules.write"`)

	// The watch: the snapshot holds ours only, and a change elsewhere is
	// not sent.
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	ws, err := ci.sessions.WatchSessions(ctx, connect.NewRequest(&v1.WatchSessionsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if !ws.Receive() {
		t.Fatal(ws.Err())
	}
	for _, s := range ws.Msg().Sessions {
		if s.Cwd != inside {
			t.Errorf("the watch's snapshot shows %s in %s", s.Id, s.Cwd)
		}
	}
	if _, err := c.sessions.CloseSession(c.ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: theirs})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.sessions.CloseSession(c.ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: ours})); err != nil {
		t.Fatal(err)
	}
	for ws.Receive() {
		seen := false
		for _, s := range ws.Msg().Sessions {
			if s.Id == theirs {
				t.Fatalf("the watch showed the session outside: %v", s)
			}
			seen = seen || s.Id == ours && s.Status == v1.SessionStatus_SESSION_STATUS_CLOSED
		}
		if seen {
			break
		}
	}

	one := c.as(t, c.mint(t, &v1.CreateTokenRequest{Name: "one", Role: "operator", SessionId: ours}))
	list, err = one.sessions.ListSessions(c.ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
	if err != nil || len(list.Msg.Sessions) != 1 || list.Msg.Sessions[0].Id != ours {
		t.Fatalf("a session-scoped ListSessions: %v, %v", list, err)
	}
	_, err = one.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: inside}}))
	wantCode(t, "a session-scoped CreateSession", err, connect.CodePermissionDenied, "cannot create sessions")
	who, err := one.auth.Whoami(c.ctx, connect.NewRequest(&v1.WhoamiRequest{}))
	if err != nil || who.Msg.SessionId != ours || who.Msg.Role != "operator" || slices.Contains(who.Msg.Permissions, "decide") {
		t.Errorf("Whoami: %v, %v", who, err)
	}
}

// TestTokenRevocation: a revoked token is refused at the next request,
// Unauthenticated naming it (never the secret); an expired one likewise;
// a worker token cannot call the API.
func TestTokenRevocation(t *testing.T) {
	c := start(t)
	secret := c.mint(t, &v1.CreateTokenRequest{Name: "phone", Role: "approver", User: "alice"})
	phone := c.as(t, secret)
	who, err := phone.auth.Whoami(c.ctx, connect.NewRequest(&v1.WhoamiRequest{}))
	if err != nil || who.Msg.User != "alice" || who.Msg.Token != "phone" {
		t.Fatalf("Whoami: %v, %v", who, err)
	}
	if _, err := c.auth.RevokeToken(c.ctx, connect.NewRequest(&v1.RevokeTokenRequest{Name: "phone"})); err != nil {
		t.Fatal(err)
	}
	_, err = phone.auth.Whoami(c.ctx, connect.NewRequest(&v1.WhoamiRequest{}))
	wantCode(t, "a revoked token", err, connect.CodeUnauthenticated, `token "phone" was revoked`, "by bootstrap")
	if err != nil && strings.Contains(err.Error(), secret[len(apiserver.TokenPrefix):]) {
		t.Errorf("the refusal quotes the secret: %v", err)
	}
	_, err = c.auth.RevokeToken(c.ctx, connect.NewRequest(&v1.RevokeTokenRequest{Name: "phone"}))
	wantCode(t, "revoking it again", err, connect.CodeNotFound, `"phone"`)
	list, err := c.auth.ListTokens(c.ctx, connect.NewRequest(&v1.ListTokensRequest{IncludeRevoked: true}))
	if err != nil || len(list.Msg.Tokens) != 1 || list.Msg.Tokens[0].RevokedAt == nil || list.Msg.Tokens[0].RevokedBy != "bootstrap" {
		t.Errorf("ListTokens: %v, %v", list, err)
	}

	short := c.as(t, c.mint(t, &v1.CreateTokenRequest{Name: "short", Role: "viewer", ExpiresInSeconds: 1}))
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = short.auth.Whoami(c.ctx, connect.NewRequest(&v1.WhoamiRequest{}))
		if err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantCode(t, "an expired token", err, connect.CodeUnauthenticated, `token "short" expired at`)

	worker := c.as(t, c.mint(t, &v1.CreateTokenRequest{Name: "w1", Role: "worker"}))
	_, err = worker.sessions.ListSessions(c.ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
	wantCode(t, "a worker token's ListSessions", err, connect.CodePermissionDenied, "worker token", "cannot call the API")
	_, err = worker.health.Health(c.ctx, connect.NewRequest(&v1.HealthRequest{}))
	wantCode(t, "a worker token's Health", err, connect.CodePermissionDenied, "worker token")
}

// TestCreateTokenBadInput: what CreateToken refuses, each naming the field.
func TestCreateTokenBadInput(t *testing.T) {
	c := start(t)
	c.mint(t, &v1.CreateTokenRequest{Name: "taken", Role: "viewer"})
	for _, tc := range []struct {
		req   *v1.CreateTokenRequest
		code  connect.Code
		words []string
	}{
		{&v1.CreateTokenRequest{Name: "x", Role: "root"}, connect.CodeInvalidArgument, []string{"role", `"root"`, "viewer, operator, approver, admin, worker"}},
		{&v1.CreateTokenRequest{Name: "x", Role: ""}, connect.CodeInvalidArgument, []string{"role"}},
		{&v1.CreateTokenRequest{Name: "x", Role: "viewer", ExpiresInSeconds: -60}, connect.CodeInvalidArgument, []string{"expires_in_seconds", "in the past"}},
		{&v1.CreateTokenRequest{Name: "x", Role: "viewer", Dirs: []string{"/no/such/dir"}}, connect.CodeInvalidArgument, []string{"dirs", "/no/such/dir", "no such directory"}},
		{&v1.CreateTokenRequest{Name: "x", Role: "viewer", Dirs: []string{"relative"}}, connect.CodeInvalidArgument, []string{"dirs", "absolute"}},
		{&v1.CreateTokenRequest{Name: "x", Role: "viewer", SessionId: "nope"}, connect.CodeInvalidArgument, []string{"session_id", "no such session"}},
		{&v1.CreateTokenRequest{Name: "x", Role: "admin", Dirs: []string{"/"}}, connect.CodeInvalidArgument, []string{"role", "cannot be scoped"}},
		{&v1.CreateTokenRequest{Name: "taken", Role: "viewer"}, connect.CodeAlreadyExists, []string{`"taken"`}},
		{&v1.CreateTokenRequest{Name: "bootstrap", Role: "viewer"}, connect.CodeInvalidArgument, []string{"name"}},
		{&v1.CreateTokenRequest{Name: "", Role: "viewer"}, connect.CodeInvalidArgument, []string{"name", "required"}},
		{&v1.CreateTokenRequest{Name: "a\x1b[31mred", Role: "viewer"}, connect.CodeInvalidArgument, []string{"name", "letters, digits"}},
		{&v1.CreateTokenRequest{Name: "a b", Role: "viewer"}, connect.CodeInvalidArgument, []string{"name"}},
		{&v1.CreateTokenRequest{Name: strings.Repeat("n", 65), Role: "viewer"}, connect.CodeInvalidArgument, []string{"name", "at most 64"}},
		{&v1.CreateTokenRequest{Name: "x", User: "<script>", Role: "viewer"}, connect.CodeInvalidArgument, []string{"user"}},
		{&v1.CreateTokenRequest{Name: "x", Role: "viewer", Dirs: make([]string, 33)}, connect.CodeInvalidArgument, []string{"dirs", "at most 32"}},
	} {
		_, err := c.auth.CreateToken(c.ctx, connect.NewRequest(tc.req))
		wantCode(t, fmt.Sprintf("CreateToken(%v)", tc.req), err, tc.code, tc.words...)
	}
	// Tokens that are not the daemon's: a random one with its prefix, a
	// huge one, one with a NUL.
	for _, bad := range []string{apiserver.TokenPrefix + "AAAA", apiserver.TokenPrefix + strings.Repeat("x", 30_000), "cctl_\xff\xfe"} {
		_, err := c.as(t, bad).auth.Whoami(c.ctx, connect.NewRequest(&v1.WhoamiRequest{}))
		if connect.CodeOf(err) != connect.CodeUnauthenticated && connect.CodeOf(err) != connect.CodeUnknown {
			t.Errorf("a bad token %.20q: %v, want Unauthenticated", bad, err)
		}
	}
}

// TestFailedAuthRateLimited: past the allowance of failed attempts from
// one address, requests are refused with ResourceExhausted without being
// checked (the right token included), with one warning in the log; a
// request without a token is not an attempt.
func TestFailedAuthRateLimited(t *testing.T) {
	var logs daemontest.LogBuffer
	c := startWith(t, &daemontest.Options{Log: &logs})
	bad := c.as(t, apiserver.TokenPrefix+"guess")
	for i := range apiserver.DefaultFailureBurst {
		_, err := bad.auth.Whoami(c.ctx, connect.NewRequest(&v1.WhoamiRequest{}))
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("guess %d: %v, want Unauthenticated", i, err)
		}
	}
	for i := range 3 {
		_, err := bad.auth.Whoami(c.ctx, connect.NewRequest(&v1.WhoamiRequest{}))
		wantCode(t, fmt.Sprintf("guess past the limit %d", i), err, connect.CodeResourceExhausted, "too many failed authentications from 127.0.0.1")
	}
	_, err := c.auth.Whoami(c.ctx, connect.NewRequest(&v1.WhoamiRequest{}))
	wantCode(t, "the right token from the same address while it waits", err, connect.CodeResourceExhausted)
	if n := strings.Count(logs.String(), "failed to authenticate too often"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logs.String())
	}
	// Plain HTTP says 429.
	req, _ := http.NewRequestWithContext(c.ctx, http.MethodPost, c.url+claudectlv1connect.AuthServiceWhoamiProcedure, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiserver.TokenPrefix+"guess")
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("HTTP status %d, want 429", resp.StatusCode)
	}
}

// TestRevokedOnEveryDaemon: two daemons share a PostgreSQL store; a token
// made on one works on the other, and once revoked on one is refused by
// the other within a second.
func TestRevokedOnEveryDaemon(t *testing.T) {
	url := pgtest.New(t)
	a := daemontest.Start(t, &daemontest.Options{StoreURL: url, DaemonName: "daemon-a"}, claudetest.Turn{})
	b := daemontest.Start(t, &daemontest.Options{StoreURL: url, DaemonName: "daemon-b"}, claudetest.Turn{})
	ca, cb := clientOf(a), clientOf(b)
	secret := ca.mint(t, &v1.CreateTokenRequest{Name: "phone", Role: "approver", User: "alice"})
	onB := cb.as(t, secret)
	within := func(what string, ok func(error) bool) {
		t.Helper()
		deadline := time.Now().Add(time.Second)
		for {
			_, err := onB.auth.Whoami(b.Ctx, connect.NewRequest(&v1.WhoamiRequest{}))
			if ok(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within a second: %v", what, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	within("the token works on daemon b", func(err error) bool { return err == nil })
	start := time.Now()
	if _, err := ca.auth.RevokeToken(a.Ctx, connect.NewRequest(&v1.RevokeTokenRequest{Name: "phone"})); err != nil {
		t.Fatal(err)
	}
	within("refused on daemon b", func(err error) bool {
		return connect.CodeOf(err) == connect.CodeUnauthenticated && strings.Contains(err.Error(), `"phone" was revoked`)
	})
	t.Logf("refused on the other daemon %v after the revocation", time.Since(start).Round(time.Millisecond))
}

func clientOf(d *daemontest.Daemon) *client {
	url, httpc := d.Serve()
	return &client{
		sessions: claudectlv1connect.NewSessionServiceClient(httpc, url),
		perms:    claudectlv1connect.NewPermissionServiceClient(httpc, url),
		health:   claudectlv1connect.NewHealthServiceClient(httpc, url),
		auth:     claudectlv1connect.NewAuthServiceClient(httpc, url),
		url:      url, token: d.Token(), ctx: d.Ctx,
	}
}

// TestDocsRoleTable: the role table of docs/security.md says what the
// code's does, role by role.
func TestDocsRoleTable(t *testing.T) {
	b, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z]+)` \\| [^|]+ \\| ([^|]+) \\|$")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		role := m[1]
		if apiserver.RolePermissions(role) == nil {
			continue
		}
		var doc []string
		for _, p := range strings.Split(m[2], ",") {
			doc = append(doc, strings.Trim(strings.TrimSpace(p), "`"))
		}
		var code []string
		for _, p := range apiserver.RolePermissions(role) {
			code = append(code, string(p))
		}
		if strings.Join(doc, ",") != strings.Join(code, ",") {
			t.Errorf("docs/security.md gives %s %v, the code %v", role, doc, code)
		}
		seen[role] = true
	}
	for _, r := range apiserver.Roles() {
		if !seen[r] {
			t.Errorf("docs/security.md's role table has no row for %s", r)
		}
	}
}
