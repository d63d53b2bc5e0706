package daemon_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/internal/serve"
	"github.com/claudectl/claudectl/notify"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// hookSink is a webhook target on loopback that keeps the payloads.
type hookSink struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []notify.Payload
}

func newHookSink(t *testing.T) *hookSink {
	h := &hookSink{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p notify.Payload
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &p); err != nil {
			t.Errorf("webhook body %s: %v", b, err)
		}
		h.mu.Lock()
		h.got = append(h.got, p)
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// wait returns the first payload f accepts, waiting up to 60 s for it.
func (h *hookSink) wait(t *testing.T, what string, f func(notify.Payload) bool) notify.Payload {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		h.mu.Lock()
		i := slices.IndexFunc(h.got, f)
		var p notify.Payload
		if i >= 0 {
			p = h.got[i]
		}
		events := make([]string, len(h.got))
		for j, g := range h.got {
			events[j] = g.Event
		}
		h.mu.Unlock()
		if i >= 0 {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no webhook delivery of %s in 60 s; got %v", what, events)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRoutingTwoPersonRule runs a git push on the real CLI under a route
// that asks group ops, two of whom must allow: the bootstrap's client and
// carol (not in ops) are refused, alice's allow is counted (1 of 2, still
// pending, the card's routing says so), alice again is refused, bob's
// settles it and the command runs; the decision records the route and
// both people, and a webhook heard of the request with its route and of
// the turn's end.
func TestRoutingTwoPersonRule(t *testing.T) {
	sink := newHookSink(t)
	td := daemontest.Start(t, &daemontest.Options{
		Routes: []permission.Route{{Name: "pushes", Tools: []string{"Bash(git push:*)"}, Ask: []string{"group:ops"}, Approvals: 2}},
		Groups: map[string][]string{"ops": {"alice", "bob"}},
		Notify: serve.NotifySettings{AllowPrivateTargets: true, Webhooks: []serve.Webhook{{Webhook: notify.Webhook{Name: "ops", URL: sink.srv.URL}}}},
	},
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "git push origin main", "description": "push"})),
		claudetest.Reply(claudetest.Text("Pushed.")))
	s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "push it")
	if err != nil {
		t.Fatal(err)
	}
	waitPending(t, td.D, td.Ctx, s.ID)
	p := td.D.Pending(s.ID)[0]
	id := p.Request.RequestID
	if p.Routing == nil || p.Routing.Route != "pushes" || p.Routing.Approvals != 2 {
		t.Fatalf("the request's routing: %+v", p.Routing)
	}
	allow := func(client string) (*store.Decision, error) {
		d, _, err := td.D.Decide(td.Ctx, daemon.Decision{RequestID: id, Allow: true, Client: client})
		return d, err
	}
	var na *daemon.NotAskedError
	if _, err := allow("web"); !errors.As(err, &na) || !strings.Contains(err.Error(), "goes to group:ops (route pushes), and client:web is not among them") {
		t.Errorf("the bootstrap's client: %v", err)
	}
	if _, err := allow(daemon.VerifiedBy("carol")); !errors.Is(err, daemon.ErrNotAsked) {
		t.Errorf("carol, not in ops: %v", err)
	}
	d, err := allow(daemon.VerifiedBy("alice"))
	var more *permission.ApprovalsNeededError
	if !errors.As(err, &more) || more.Need != 2 || d == nil || !slices.Equal(d.ApprovedBy, []string{"user:alice"}) || d.Route != "pushes" {
		t.Fatalf("alice's allow: %+v, %v; want it counted, 1 of 2", d, err)
	}
	if ps := td.D.Pending(s.ID); len(ps) != 1 || len(ps[0].Approvals) != 1 || ps[0].Approvals[0].By != "user:alice" {
		t.Fatalf("pending after alice: %+v", ps)
	}
	if _, err := allow(daemon.VerifiedBy("alice")); !errors.Is(err, permission.ErrInvalidDecision) {
		t.Errorf("alice twice: %v", err)
	}
	hook := sink.wait(t, "the request", func(p notify.Payload) bool { return p.Event == notify.EventPermission })
	if hook.Request == nil || hook.Request.Route != "pushes" || hook.Request.Needed != 2 || hook.Request.Summary != "git push origin main" ||
		hook.Session.ID != s.ID {
		t.Errorf("the webhook's request: %+v", hook.Request)
	}
	d, err = allow(daemon.VerifiedBy("bob"))
	if err != nil || d.Behavior != "allow" || !slices.Equal(d.ApprovedBy, []string{"user:alice", "user:bob"}) {
		t.Fatalf("bob's allow: %+v, %v", d, err)
	}
	var resolved *daemon.PermissionResolved
	for ev, err := range td.D.Subscribe(td.Ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := ev.Body.(*daemon.PermissionResolved); ok {
			resolved = r
		}
		if ev.Type == "result" {
			break
		}
	}
	if resolved == nil || resolved.Route != "pushes" || !slices.Equal(resolved.ApprovedBy, []string{"user:alice", "user:bob"}) || resolved.By != "user:bob" {
		t.Errorf("the session's permission_resolved: %+v", resolved)
	}
	ds, err := td.D.Decisions(td.Ctx, store.DecisionFilter{SessionID: s.ID})
	if err != nil || len(ds) != 1 || ds[0].Route != "pushes" || !slices.Equal(ds[0].ApprovedBy, []string{"user:alice", "user:bob"}) {
		t.Fatalf("the audit trail's decision: %+v, %v", ds, err)
	}
	fin := sink.wait(t, "the turn's end", func(p notify.Payload) bool { return p.Event == notify.EventSessionFinished })
	if fin.Session.ID != s.ID || fin.Detail != "Pushed." {
		t.Errorf("session_finished: %+v", fin)
	}
}

// TestRouteEscalatesAndExpires: a request its route's people leave
// unanswered is escalated (a webhook hears of it, the card names the
// people added), and denied at the route's expiry with its message; the
// decision records the route.
func TestRouteEscalatesAndExpires(t *testing.T) {
	sink := newHookSink(t)
	td := daemontest.Start(t, &daemontest.Options{
		Routes: []permission.Route{{Name: "deploys", Dirs: []string{"/"}, Ask: []string{"alice"}, EscalateAfter: 300 * time.Millisecond,
			EscalateTo: []string{"carol"}, ExpireAfter: 1500 * time.Millisecond, OnExpiry: "Nobody answered; ask in #ops."}},
		Notify: serve.NotifySettings{AllowPrivateTargets: true, Webhooks: []serve.Webhook{{Webhook: notify.Webhook{Name: "ops", URL: sink.srv.URL}}}},
	},
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "touch deployed", "description": "deploy"})),
		claudetest.Reply(claudetest.Text("Not deployed.")))
	s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	esc := sink.wait(t, "the escalation", func(p notify.Payload) bool { return p.Event == notify.EventEscalated })
	if esc.Request == nil || !slices.Equal(esc.Request.Asked, []string{"alice", "carol"}) || esc.Request.Route != "deploys" {
		t.Errorf("escalated: %+v", esc.Request)
	}
	for ev, err := range td.D.Subscribe(td.Ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "result" {
			break
		}
	}
	ds, err := td.D.Decisions(td.Ctx, store.DecisionFilter{SessionID: s.ID})
	if err != nil || len(ds) != 1 || ds[0].Behavior != "deny" || ds[0].By != "timeout" || ds[0].Route != "deploys" ||
		ds[0].Message != "Nobody answered; ask in #ops." {
		t.Fatalf("the decision at expiry: %+v, %v", ds, err)
	}
}
