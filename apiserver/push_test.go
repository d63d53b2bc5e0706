package apiserver_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
	servesettings "github.com/claudectl/claudectl/internal/serve"
	"github.com/claudectl/claudectl/notify"
	"github.com/claudectl/claudectl/notify/notifytest"
)

// notifyAs returns a NotifyService client that sends token.
func (c *client) notifyAs(t *testing.T, token string) claudectlv1connect.NotifyServiceClient {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return claudectlv1connect.NewNotifyServiceClient(&http.Client{Transport: &bearerTransport{token: token, next: tr}}, c.url)
}

// act posts a notification's action as the page's service worker does.
func act(t *testing.T, c *client, capability, action string) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"cap": capability, "action": action})
	res, err := http.Post(c.url+apiserver.PushActPath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// TestPushActionSettlesOnce: alice (approver) and vera (viewer) subscribe
// devices through the API; a request reaches both through a push service
// on loopback, alice's with Allow and Deny and a capability, vera's with
// neither. The capability allows that request as user:alice, once (again:
// 409; a forged one: 403), written to the audit trail as a push action;
// once alice's token is revoked, the capability her device got before is
// refused. Nobody's token is in any payload.
func TestPushActionSettlesOnce(t *testing.T) {
	ps := notifytest.NewPushService(t)
	logs := &daemontest.LogBuffer{}
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	c := startWith(t, &daemontest.Options{Log: logs, Notify: servesettings.NotifySettings{AllowPrivateTargets: true}},
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "touch x", "description": "Create x"})),
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "touch y", "description": "Create y"})),
		claudetest.Reply(claudetest.Text("Created x and not y.")))
	alice := c.mint(t, &v1.CreateTokenRequest{Name: "alice-phone", Role: "approver", User: "alice"})
	vera := c.mint(t, &v1.CreateTokenRequest{Name: "vera-phone", Role: "viewer", User: "vera"})
	b64 := base64.RawURLEncoding.EncodeToString
	for _, who := range []struct{ token, path string }{{alice, "/d/alice"}, {vera, "/d/vera"}} {
		ep, key, auth := ps.NewDevice(who.path)
		res, err := c.notifyAs(t, who.token).AddPushSubscription(c.ctx, connect.NewRequest(&v1.AddPushSubscriptionRequest{
			Endpoint: ep, P256Dh: b64(key), Auth: b64(auth), Device: "test phone"}))
		if err != nil {
			t.Fatalf("subscribing %s: %v", who.path, err)
		}
		if s := res.Msg.Subscription; s.Token == "" || len(s.Kinds) != 4 {
			t.Fatalf("subscription %+v", s)
		}
	}
	list, err := c.notifyAs(t, vera).ListPushSubscriptions(c.ctx, connect.NewRequest(&v1.ListPushSubscriptionsRequest{}))
	if err != nil || len(list.Msg.Subscriptions) != 1 || list.Msg.Subscriptions[0].User != "vera" {
		t.Fatalf("vera's devices: %v, %v", list.Msg, err)
	}

	sres, err := c.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir()}, Prompt: "Create x and y"}))
	if err != nil {
		t.Fatal(err)
	}
	id := sres.Msg.Session.Id
	message := func(p notifytest.Pushed) notify.PushMessage {
		var m notify.PushMessage
		if err := json.Unmarshal(p.Payload, &m); err != nil {
			t.Fatalf("payload %s: %v", p.Payload, err)
		}
		for _, tok := range []string{alice, vera} {
			if bytes.Contains(p.Payload, []byte(tok)) {
				t.Fatal("a push carries a token")
			}
		}
		return m
	}
	first := message(ps.WaitPushes("/d/alice", 1)[0])
	if first.Capability == "" || first.SessionID != id || !strings.Contains(first.Body, "touch x") {
		t.Fatalf("alice's push: %+v", first)
	}
	if vm := message(ps.WaitPushes("/d/vera", 1)[0]); vm.Capability != "" || len(vm.Actions) != 0 {
		t.Errorf("vera (a viewer) was given actions: %+v", vm)
	}

	if code, out := act(t, c, first.Capability, "allow"); code != 200 || out["outcome"] != "allowed" || out["by"] != "user:alice" {
		t.Fatalf("alice's Allow: %d %v", code, out)
	}
	if code, out := act(t, c, first.Capability, "allow"); code != http.StatusConflict || !strings.Contains(out["message"].(string), "answered already") {
		t.Errorf("the same capability again: %d %v", code, out)
	}
	if code, _ := act(t, c, "cctlcap_forged", "deny"); code != http.StatusForbidden {
		t.Errorf("a forged capability: %d", code)
	}

	second := message(ps.WaitPushes("/d/alice", 2)[1])
	if second.Capability == "" || !strings.Contains(second.Body, "touch y") {
		t.Fatalf("alice's second push: %+v", second)
	}
	if _, err := c.auth.RevokeToken(c.ctx, connect.NewRequest(&v1.RevokeTokenRequest{Name: "alice-phone"})); err != nil {
		t.Fatal(err)
	}
	if code, out := act(t, c, second.Capability, "allow"); code != http.StatusForbidden || !strings.Contains(out["message"].(string), "was revoked or expired") {
		t.Errorf("a capability of a revoked token's device: %d %v", code, out)
	}
	// The second request is still pending: denied from the CLI's side.
	pend, err := c.perms.ListPending(c.ctx, connect.NewRequest(&v1.ListPendingRequest{SessionId: id}))
	if err != nil || len(pend.Msg.Requests) != 1 {
		t.Fatalf("pending after the refused action: %v, %v", pend, err)
	}
	if _, err := c.perms.Decide(c.ctx, connect.NewRequest(&v1.DecideRequest{RequestId: pend.Msg.Requests[0].RequestId,
		Behavior: v1.Behavior_BEHAVIOR_DENY, Client: "desk"})); err != nil {
		t.Fatal(err)
	}
	c.untilIdle(t, id, 0, nil)
	ds, err := c.perms.ListDecisions(c.ctx, connect.NewRequest(&v1.ListDecisionsRequest{SessionId: id}))
	if err != nil || len(ds.Msg.Decisions) != 2 || !slices.ContainsFunc(ds.Msg.Decisions, func(d *v1.Decision) bool {
		return d.DecidedBy == "user:alice" && d.Behavior == v1.Behavior_BEHAVIOR_ALLOW
	}) {
		t.Fatalf("decisions: %v, %v", ds.Msg, err)
	}
	audit, err := c.auth.ListAudit(c.ctx, connect.NewRequest(&v1.ListAuditRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var acts []string
	for _, e := range audit.Msg.Entries {
		if e.Action == "PushAction" {
			acts = append(acts, e.User+" "+e.ClientKind+" "+e.Outcome)
		}
	}
	slices.Sort(acts)
	if !slices.Equal(acts, []string{"alice push ok", "alice push permission_denied: the token this device subscribed with (\"alice-phone\") was revoked or expired: subscribe again from the page"}) {
		t.Errorf("the audit trail's push actions: %q", acts)
	}
	dl, err := c.notifyAs(t, c.token).ListDeliveries(c.ctx, connect.NewRequest(&v1.ListDeliveriesRequest{}))
	if err != nil || len(dl.Msg.Deliveries) < 3 {
		t.Fatalf("deliveries: %v, %v", dl, err)
	}
}
