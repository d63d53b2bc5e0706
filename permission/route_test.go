package permission_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/permission"
)

func bashReq(id, cmd string) *claude.PermissionRequest {
	in, _ := json.Marshal(map[string]string{"command": cmd})
	return &claude.PermissionRequest{RequestID: id, ToolName: "Bash", Input: in}
}

// TestRouterPicksTheFirstMatch: routes match by tool pattern (a compound
// line by any of its commands), directory and session, in order; a
// request none matches has no routing.
func TestRouterPicksTheFirstMatch(t *testing.T) {
	r, err := permission.NewRouter([]permission.Route{
		{Name: "pushes", Tools: []string{"Bash(git push:*)", "Bash(rm:*)"}, Ask: []string{"group:ops"}, Approvals: 2},
		{Name: "app", Dirs: []string{"/src/app"}, Ask: []string{"alice"}},
		{Name: "one", Sessions: []string{"s9"}, Tools: []string{"Edit"}, Ask: []string{"bob"}},
		{Name: "questions", Tools: []string{"AskUserQuestion"}, Ask: []string{"carol"}},
	}, "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	at := permission.Scope{ProjectDir: "/src/app/sub", SessionID: "s1"}
	for _, tc := range []struct {
		req   *claude.PermissionRequest
		at    permission.Scope
		route string
	}{
		{bashReq("1", "git push origin main"), permission.Scope{ProjectDir: "/elsewhere"}, "pushes"},
		{bashReq("2", "make && git push"), permission.Scope{ProjectDir: "/elsewhere"}, "pushes"},
		{bashReq("3", "rm -rf build"), at, "pushes"},
		{bashReq("4", "ls"), at, "app"},
		{bashReq("5", "ls"), permission.Scope{ProjectDir: "/src/application"}, ""},
		{&claude.PermissionRequest{RequestID: "6", ToolName: "Edit", Input: json.RawMessage(`{"file_path":"/x"}`)},
			permission.Scope{ProjectDir: "/x", SessionID: "s9"}, "one"},
		{&claude.PermissionRequest{RequestID: "7", ToolName: "Edit", Input: json.RawMessage(`{"file_path":"/x"}`)},
			permission.Scope{ProjectDir: "/x", SessionID: "s8"}, ""},
		{&claude.PermissionRequest{RequestID: "8", ToolName: "AskUserQuestion", Input: json.RawMessage(`{}`)},
			permission.Scope{ProjectDir: "/x"}, "questions"},
	} {
		got := r.Route(tc.req, tc.at)
		name := ""
		if got != nil {
			name = got.Route
		}
		if name != tc.route {
			t.Errorf("request %s (%s): route %q, want %q", tc.req.RequestID, tc.req.Input, name, tc.route)
		}
	}
	if got := r.Route(bashReq("9", "git push"), at); got.Approvals != 2 || !slices.Equal(got.Ask, []string{"group:ops"}) {
		t.Errorf("routing %+v", got)
	}
	if !r.Route(bashReq("9", "git push"), at).Asks("dave", []string{"ops"}, false) || r.Route(bashReq("9", "git push"), at).Asks("dave", nil, false) {
		t.Error("Asks by group")
	}
}

func TestNewRouterErrors(t *testing.T) {
	for _, tc := range []struct {
		r    permission.Route
		want string
	}{
		{permission.Route{Ask: []string{"a"}}, "needs a name"},
		{permission.Route{Name: "x"}, "ask names nobody"},
		{permission.Route{Name: "x", Ask: []string{"a"}, Tools: []string{"Bash(unclosed"}}, `tool pattern "Bash(unclosed"`},
		{permission.Route{Name: "x", Ask: []string{"a"}, Dirs: []string{"rel"}}, "not absolute"},
		{permission.Route{Name: "x", Ask: []string{"a"}, EscalateAfter: time.Minute}, "without escalate_to"},
		{permission.Route{Name: "x", Ask: []string{"a"}, Approvals: 9}, "from 1 to 5"},
		{permission.Route{Name: "x", Ask: []string{"group:"}}, "not a user or a group"},
	} {
		_, err := permission.NewRouter([]permission.Route{tc.r}, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.r, err, tc.want)
		}
	}
}

// TestTwoPersonRule: a request that needs two allows stays pending after
// the first, published again with it; the same person cannot allow twice;
// the second person's allow settles it naming both; a denial settles at
// once.
func TestTwoPersonRule(t *testing.T) {
	b := permission.NewBroker(nil)
	defer b.Close()
	sub, _ := b.Subscribe("")
	defer sub.Close()
	two := &permission.Routing{Route: "pushes", Ask: []string{"group:ops"}, Approvals: 2}
	ch, err := b.SubmitRouted(context.Background(), "s1", bashReq("r1", "git push"), two)
	if err != nil {
		t.Fatal(err)
	}
	if n := next(t, sub); n.Pending.Routing == nil || n.Pending.Routing.Route != "pushes" || len(n.Pending.Approvals) != 0 {
		t.Fatalf("first notice: %+v", n.Pending)
	}
	var more *permission.ApprovalsNeededError
	if err := b.Resolve("r1", claude.Allow(), "user:alice"); !errors.As(err, &more) || len(more.Approvals) != 1 || more.Need != 2 {
		t.Fatalf("first allow: %v, want an *ApprovalsNeededError with 1 of 2", err)
	}
	n := next(t, sub)
	if n.Resolution != nil || len(n.Pending.Approvals) != 1 || n.Pending.Approvals[0].By != "user:alice" {
		t.Fatalf("notice after the first allow: %+v", n)
	}
	if err := b.Resolve("r1", claude.Allow(), "user:alice"); !errors.Is(err, permission.ErrInvalidDecision) {
		t.Fatalf("alice again: %v, want ErrInvalidDecision", err)
	}
	select {
	case r := <-ch:
		t.Fatalf("settled after one allow: %+v", r)
	default:
	}
	if err := b.Resolve("r1", claude.Allow(), "user:bob"); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if !r.Result.Allow || r.By != "user:bob" || !slices.Equal(r.ApprovedBy, []string{"user:alice", "user:bob"}) {
		t.Fatalf("resolution %+v", r)
	}

	ch, _ = b.SubmitRouted(context.Background(), "s1", bashReq("r2", "git push"), two)
	if err := b.Resolve("r2", claude.Allow(), "user:alice"); !errors.As(err, &more) {
		t.Fatal(err)
	}
	if err := b.Resolve("r2", claude.Deny("no"), "user:bob"); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.Result.Allow || r.By != "user:bob" {
		t.Fatalf("a denial after one allow: %+v", r)
	}
}

// TestRouteEscalationAndExpiry: after EscalateAfter the request is
// published again, escalated; after ExpireAfter it is denied with the
// route's message, watched or not.
func TestRouteEscalationAndExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := permission.NewBroker(&permission.BrokerOptions{WatchedTimeout: time.Hour, UnwatchedTimeout: time.Hour})
		defer b.Close()
		sub, _ := b.Subscribe("")
		defer sub.Close()
		rt := &permission.Routing{Route: "deploys", Ask: []string{"alice"}, Approvals: 1, EscalateAfter: 5 * time.Minute,
			EscalateTo: []string{"group:ops"}, ExpireAfter: 10 * time.Minute}
		ch, err := b.SubmitRouted(context.Background(), "s1", bashReq("r1", "deploy"), rt)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if n := <-sub.C(); n.Pending.Escalated || !n.Pending.ExpiresAt.Equal(start.Add(10*time.Minute)) {
			t.Fatalf("first notice %+v", n.Pending)
		}
		n := <-sub.C()
		if !n.Pending.Escalated || n.Resolution != nil || time.Since(start) != 5*time.Minute {
			t.Fatalf("escalation %+v after %s", n.Pending, time.Since(start))
		}
		if !n.Pending.Routing.Asks("dave", []string{"ops"}, n.Pending.Escalated) {
			t.Error("an escalated request does not ask the escalation's group")
		}
		r := <-ch
		if r.Outcome != permission.Expired || time.Since(start) != 10*time.Minute || r.Result.Allow ||
			!strings.Contains(r.Result.Message, "nobody of alice, group:ops (route deploys) settled it within 10m0s") {
			t.Fatalf("expiry %+v after %s", r, time.Since(start))
		}
		rt.OnExpiry = "Ask in #ops."
		ch, _ = b.SubmitRouted(context.Background(), "s1", bashReq("r2", "deploy"), rt)
		if r := <-ch; r.Result.Message != "Ask in #ops." {
			t.Fatalf("expiry with a message of the route's: %+v", r)
		}
	})
}
