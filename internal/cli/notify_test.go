package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/internal/serve"
	"github.com/claudectl/claudectl/notify"
	"github.com/claudectl/claudectl/permission"
)

// TestTwoPersonRuleAndNotifyLog: a route asks group:ops for git push, two
// of them must allow. claudectl pending says who is asked and "0 of 2";
// alice's approve is counted ("1 of 2"), pending then names her, her
// second approve is refused, carol (not in ops) is refused naming the
// route, bob's approve lets it run. The webhook heard of the request
// (signed), claudectl notify log lists the delivery (admin only), and
// claudectl notify test ops delivers a test event.
func TestTwoPersonRuleAndNotifyLog(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var events []string
	var sigs []string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var p notify.Payload
		json.Unmarshal(b, &p)
		mu.Lock()
		events = append(events, p.Event)
		sigs = append(sigs, r.Header.Get("Claudectl-Signature"))
		mu.Unlock()
	}))
	t.Cleanup(sink.Close)
	d, _ := startDaemonModel(t, &daemontest.Options{
		Routes: []permission.Route{{Name: "pushes", Tools: []string{"Bash(git push:*)"}, Ask: []string{"group:ops"}, Approvals: 2}},
		Groups: map[string][]string{"ops": {"alice", "bob"}},
		Notify: serve.NotifySettings{AllowPrivateTargets: true, Webhooks: []serve.Webhook{{Webhook: notify.Webhook{
			Name: "ops", URL: sink.URL, Secret: []byte("hook-secret")}}}},
	},
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "git push origin main", "description": "push"})),
		claudetest.Reply(claudetest.Text("Pushed.")))
	person := func(name string) invocation {
		t.Helper()
		o := claudectl(t, d.inv(), "tokens", "create", name+"-laptop", "--role", "approver", "--user", name)
		if o.code != 0 {
			t.Fatalf("tokens create for %s: exit %d, stderr %q", name, o.code, o.stderr)
		}
		return invocation{getenv: map[string]string{"CLAUDECTL_SERVER": d.url, "CLAUDECTL_TOKEN": strings.TrimSpace(o.stdout)}}
	}
	alice, bob, carol := person("alice"), person("bob"), person("carol")
	id := d.create(t, t.TempDir(), "push it")
	req := waitPending(t, d, id)

	o := claudectl(t, d.inv(), "pending")
	if o.code != 0 || !strings.Contains(o.stdout, req+": route pushes: asks group:ops, 0 of 2 allowed") {
		t.Errorf("pending before anyone allowed: exit %d\n%s", o.code, o.stdout)
	}
	o = claudectl(t, alice, "approve", req)
	if o.code != 0 || !strings.Contains(o.stdout, "Allowed "+req+": 1 of 2 allows (user:alice); it waits for another person's claudectl approve.") {
		t.Fatalf("alice's approve: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	o = claudectl(t, d.inv(), "pending", "--json")
	var list []pendingJSON
	if err := json.Unmarshal([]byte(o.stdout), &list); err != nil || len(list) != 1 || list[0].Route == nil ||
		list[0].Route.Needed != 2 || strings.Join(list[0].Route.ApprovedBy, ",") != "user:alice" {
		t.Fatalf("pending --json after alice: %v %q", err, o.stdout)
	}
	o = claudectl(t, d.inv(), "pending")
	if !strings.Contains(o.stdout, "1 of 2 allowed (user:alice)") {
		t.Errorf("pending after alice:\n%s", o.stdout)
	}
	if o = claudectl(t, alice, "approve", req); o.code != 1 || !strings.Contains(o.stderr, "alice") {
		t.Errorf("alice's second approve: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	if o = claudectl(t, carol, "approve", req); o.code != 1 || !strings.Contains(o.stderr, "goes to group:ops (route pushes), and user:carol is not among them") {
		t.Errorf("carol's approve: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	if o = claudectl(t, bob, "approve", req); o.code != 0 || !strings.Contains(o.stdout, "Allowed "+req+" (Bash in session "+id+") as user:bob.") {
		t.Fatalf("bob's approve: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	d.waitResults(t, id, 1)

	waitFor(t, "the webhook's deliveries in the log", func() bool {
		o = claudectl(t, d.inv(), "notify", "log")
		return strings.Contains(o.stdout, "session_finished")
	})
	if o.code != 0 || !regexp.MustCompile(`(?m)^\S+ \S+\s+webhook:ops\s+permission_request\s+`+id+`\s+`+regexp.QuoteMeta(req)+`\s+delivered\s+1\s+200\s`).MatchString(o.stdout) {
		t.Errorf("notify log:\n%s", o.stdout)
	}
	mu.Lock()
	if len(sigs) == 0 || !strings.HasPrefix(sigs[0], "t=") || !strings.Contains(strings.Join(events, ","), "permission_request") {
		t.Errorf("the webhook got %v, signatures %v", events, sigs)
	}
	mu.Unlock()
	if o = claudectl(t, alice, "notify", "log"); o.code != 1 || !strings.Contains(o.stderr, "permission denied") {
		t.Errorf("notify log with an approver's token: exit %d, stderr %q", o.code, o.stderr)
	}
	o = claudectl(t, d.inv(), "notify", "test", "ops")
	if o.code != 0 || !regexp.MustCompile(`webhook:ops\s+test\s.*delivered`).MatchString(o.stdout) {
		t.Errorf("notify test ops: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	if o = claudectl(t, d.inv(), "notify", "frob"); o.code != 2 || !strings.Contains(o.stderr, `unknown subcommand "frob"`) {
		t.Errorf("notify frob: exit %d, stderr %q", o.code, o.stderr)
	}
}
