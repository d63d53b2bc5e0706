package cli

import (
	"context"
	"encoding/json"

	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claudetest"
)

// TestPendingAndPrefixes has two sessions wait on Bash, lists their
// requests with pending and sessions, and answers them by a prefix of
// their ids.
func TestPendingAndPrefixes(t *testing.T) {
	t.Parallel()
	d, _ := startDaemonModel(t, nil,
		// Each session's conversation: Bash, then a reply.
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "touch x", "description": "Create x"})),
		claudetest.Reply(claudetest.Text("Done.")))
	dirA := t.TempDir()
	a := d.create(t, dirA, "Create x")
	reqA := d.permissionRequest(t, a)
	b := d.create(t, t.TempDir(), "Create x")
	reqB := d.permissionRequest(t, b)

	o := claudectl(t, d.inv(), "pending")
	if o.code != 0 {
		t.Fatalf("pending: exit %d, stderr %q", o.code, o.stderr)
	}
	if !regexp.MustCompile(`(?m)^REQUEST\s+SESSION\s+TOOL\s+AGE\s+SUMMARY$`).MatchString(o.stdout) ||
		!regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(reqA)+`\s+`+a+`\s+Bash\s+\d+s\s+touch x$`).MatchString(o.stdout) ||
		!regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(reqB)+`\s+`+b+`\s+Bash\s+\d+s\s+touch x$`).MatchString(o.stdout) {
		t.Errorf("pending:\n%s", o.stdout)
	}

	o = claudectl(t, d.inv(), "pending", "--json", "--session", a)
	var list []pendingJSON
	if err := json.Unmarshal([]byte(o.stdout), &list); err != nil || o.code != 0 {
		t.Fatalf("pending --json: exit %d, %v: %q", o.code, err, o.stdout)
	}
	if len(list) != 1 || list[0].RequestID != reqA || list[0].Tool != "Bash" || list[0].Summary != "touch x" || list[0].Since == nil ||
		!strings.Contains(string(list[0].Input), `"touch x"`) {
		t.Errorf("pending --json --session %s: %+v", a, list)
	}

	o = claudectl(t, d.inv(), "sessions")
	if !strings.Contains(o.stdout, "WAITING FOR") || !strings.Contains(o.stdout, "Bash (request "+reqA+")") ||
		!strings.Contains(o.stdout, "Bash (request "+reqB+")") {
		t.Errorf("sessions does not say what the sessions wait for:\n%s", o.stdout)
	}

	// A prefix both ids share is ambiguous: exit 2 with both listed.
	common := 0
	for common < min(len(reqA), len(reqB)) && reqA[common] == reqB[common] {
		common++
	}
	if common > 0 {
		o = claudectl(t, d.inv(), "approve", reqA[:common])
		if o.code != 2 || !strings.Contains(o.stderr, "is the start of 2 pending requests") ||
			!strings.Contains(o.stderr, reqA) || !strings.Contains(o.stderr, reqB) {
			t.Errorf("approve with an ambiguous prefix: exit %d, stderr %q", o.code, o.stderr)
		}
	}
	// A unique prefix is enough.
	o = claudectl(t, d.inv(), "approve", reqA[:common+1])
	if o.code != 0 || !strings.Contains(o.stdout, "Allowed "+reqA+" (Bash in session "+a+").") {
		t.Fatalf("approve by prefix: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	d.waitResults(t, a, 1)
	if !fileExists(filepath.Join(dirA, "x")) {
		t.Error("x was not created")
	}
	o = claudectl(t, d.inv(), "deny", reqB[:common+1], "--message", "not now")
	if o.code != 0 || !strings.Contains(o.stdout, "Denied "+reqB) {
		t.Fatalf("deny by prefix: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	d.waitResults(t, b, 1)

	// Nothing left; an unknown id says where to look.
	if o = claudectl(t, d.inv(), "pending"); o.code != 0 || o.stdout != "No pending requests.\n" {
		t.Errorf("pending with none: exit %d, stdout %q", o.code, o.stdout)
	}
	o = claudectl(t, d.inv(), "approve", "nosuchrequest")
	if o.code != 1 || o.stderr != "claudectl approve: no pending request nosuchrequest (claudectl pending lists them)\n" {
		t.Errorf("approve of an unknown request: exit %d, stderr %q", o.code, o.stderr)
	}
	if st := d.session(t, a).Status; st == v1.SessionStatus_SESSION_STATUS_WAITING {
		t.Errorf("session %s still waits", a)
	}
	// Sessions go by a unique start of their id too; one that two ids
	// share is ambiguous.
	ps := 0
	for ps < min(len(a), len(b)) && a[ps] == b[ps] {
		ps++
	}
	if o = claudectl(t, d.inv(), "send", a[:ps+1], "hello"); o.code != 0 || o.stdout != "Sent to session "+a+".\n" {
		t.Errorf("send by prefix: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	if ps > 0 {
		o = claudectl(t, d.inv(), "close", a[:ps])
		if o.code != ExitUsage || !strings.Contains(o.stderr, "is the start of 2 sessions") || !strings.Contains(o.stderr, a) || !strings.Contains(o.stderr, b) {
			t.Errorf("close with an ambiguous prefix: exit %d, stderr %q", o.code, o.stderr)
		}
	}
	if o = claudectl(t, d.inv(), "close", b[:ps+1]); o.code != 0 || !strings.Contains(o.stdout, b) {
		t.Errorf("close by prefix: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	// A session that does not exist is not one without requests.
	o = claudectl(t, d.inv(), "pending", "--session", "NOPE")
	if o.code != 1 || o.stderr != "claudectl pending: no session NOPE (claudectl sessions lists them)\n" {
		t.Errorf("pending --session NOPE: exit %d, stderr %q", o.code, o.stderr)
	}
	// Nor is a replay from beyond a session's log a store's error.
	o = claudectl(t, d.inv(), "attach", "--from-seq", "99999", a)
	if o.code != ExitUsage || !strings.Contains(o.stderr, "session "+a+" has ") || strings.Contains(o.stderr, "unavailable") {
		t.Errorf("attach --from-seq 99999: exit %d, stderr %q", o.code, o.stderr)
	}

}

// stubPerms answers ListPending with fixed requests.
type stubPerms struct {
	claudectlv1connect.PermissionServiceClient
	reqs []*v1.PermissionRequest
}

func (s stubPerms) ListPending(context.Context, *connect.Request[v1.ListPendingRequest]) (*connect.Response[v1.ListPendingResponse], error) {
	return connect.NewResponse(&v1.ListPendingResponse{Requests: s.reqs}), nil
}

func TestResolveRequest(t *testing.T) {
	t.Parallel()
	dc := &daemonClient{perms: stubPerms{reqs: []*v1.PermissionRequest{
		{RequestId: "ab12", SessionId: "S1", ToolName: "Bash", Input: []byte(`{"command":"ls"}`)},
		{RequestId: "ab34", SessionId: "S2", ToolName: "Write", Input: []byte(`{"file_path":"/tmp/x"}`)},
		{RequestId: "ab", SessionId: "S3", ToolName: "Read"},
	}}}
	for _, c := range []struct{ in, want string }{
		{"ab12", "ab12"}, {"ab1", "ab12"}, {"ab3", "ab34"},
		{"ab", "ab"}, // an exact id wins over the ids it starts
		{"zz", "zz"}, // none: Decide says it is not pending
	} {
		if got, err := resolveRequest(context.Background(), dc, c.in); err != nil || got.GetRequestId() != c.want {
			t.Errorf("resolveRequest(%q) = %q, %v; want %q", c.in, got.GetRequestId(), err, c.want)
		}
	}
	dc.perms = stubPerms{reqs: []*v1.PermissionRequest{
		{RequestId: "ab12", SessionId: "S1", ToolName: "Bash", Input: []byte(`{"command":"ls"}`)},
		{RequestId: "ab34", SessionId: "S2", ToolName: "Write", Input: []byte(`{"file_path":"/tmp/x"}`)},
	}}
	_, err := resolveRequest(context.Background(), dc, "a")
	want := "\"a\" is the start of 2 pending requests; give more of the id:\n  ab12  Bash in session S1: ls\n  ab34  Write in session S2: /tmp/x"
	if exitCode(err) != ExitUsage || err.Error() != want {
		t.Errorf("an ambiguous prefix: exit %d, %v; want 2 and\n%s", exitCode(err), err, want)
	}
}
