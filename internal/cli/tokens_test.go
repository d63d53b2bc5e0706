package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// TestTokensCommands: an admin makes an approver's token for a phone (the
// token alone on stdout), whoami says who it is, it allows a request and
// the daemon names the person, a viewer's token is refused the decision
// naming what was needed, the audit says who did what, and a revoked
// token is refused at once, by name. Bad input is refused naming the
// field.
func TestTokensCommands(t *testing.T) {
	d, _, _, id := makeFileSession(t, nil, "made it")
	o := claudectl(t, d.inv(), "tokens", "create", "phone", "--role", "approver", "--user", "alice", "--expires", "30d")
	if o.code != 0 || !regexp.MustCompile(`^cctl_[A-Za-z0-9_-]{43}\n$`).MatchString(o.stdout) ||
		!strings.Contains(o.stderr, `Created token "phone" for user alice, role approver`) || !strings.Contains(o.stderr, "expires ") {
		t.Fatalf("tokens create: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	phone := invocation{getenv: map[string]string{"CLAUDECTL_SERVER": d.url, "CLAUDECTL_TOKEN": strings.TrimSpace(o.stdout)}}
	o = claudectl(t, d.inv(), "tokens", "create", "watcher", "--role", "viewer")
	viewer := invocation{getenv: map[string]string{"CLAUDECTL_SERVER": d.url, "CLAUDECTL_TOKEN": strings.TrimSpace(o.stdout)}}

	o = claudectl(t, phone, "whoami")
	if o.code != 0 || !strings.Contains(o.stdout, `user alice, token "phone", role approver`) || !strings.Contains(o.stdout, "decide") {
		t.Errorf("whoami: exit %d, stdout %q", o.code, o.stdout)
	}
	o = claudectl(t, d.inv(), "whoami")
	if o.code != 0 || !strings.Contains(o.stdout, `user bootstrap, token "bootstrap", role admin`) {
		t.Errorf("whoami with the daemon's own token: exit %d, stdout %q", o.code, o.stdout)
	}

	req := waitPending(t, d, id)
	o = claudectl(t, viewer, "approve", req)
	if o.code != 1 || !strings.Contains(o.stderr, `permission denied: Decide needs permission "decide"`) || !strings.Contains(o.stderr, `"watcher"`) {
		t.Errorf("a viewer's allow: exit %d, stderr %q", o.code, o.stderr)
	}
	o = claudectl(t, phone, "approve", req)
	if o.code != 0 || !strings.Contains(o.stdout, "as user:alice.") {
		t.Errorf("the phone's allow: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}

	o = claudectl(t, d.inv(), "tokens", "list", "--json")
	var list []tokenJSON
	if err := json.Unmarshal([]byte(o.stdout), &list); err != nil || len(list) != 2 || list[0].Name != "phone" || list[0].User != "alice" ||
		list[0].ExpiresAt == nil || list[0].CreatedBy != "bootstrap" {
		t.Errorf("tokens list --json: %+v, %v", list, err)
	}
	o = claudectl(t, d.inv(), "audit", "--user", "alice", "--json")
	var aud []auditJSON
	if err := json.Unmarshal([]byte(o.stdout), &aud); err != nil || len(aud) != 1 || aud[0].Action != "Decide" || aud[0].Token != "phone" ||
		aud[0].ClientKind != "cli" || aud[0].SessionID != id || aud[0].Outcome != "ok" {
		t.Errorf("audit --user alice --json: %+v, %v", aud, err)
	}
	o = claudectl(t, d.inv(), "audit", "--since", "1h", "--session", id)
	if o.code != 0 || !strings.Contains(o.stdout, "Decide") || !strings.Contains(o.stdout, "watcher") || !strings.Contains(o.stdout, "permission_denied") {
		t.Errorf("audit --session: exit %d, stdout %q", o.code, o.stdout)
	}
	o = claudectl(t, viewer, "audit")
	if o.code != 1 || !strings.Contains(o.stderr, `"audit.read"`) {
		t.Errorf("a viewer's audit: exit %d, stderr %q", o.code, o.stderr)
	}

	o = claudectl(t, d.inv(), "tokens", "revoke", "phone")
	if o.code != 0 || o.stdout != "" || !strings.Contains(o.stderr, `Revoked token "phone"`) {
		t.Errorf("tokens revoke: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	o = claudectl(t, phone, "whoami")
	if o.code != 1 || !strings.Contains(o.stderr, `token "phone" was revoked`) || strings.Contains(o.stderr, phone.getenv["CLAUDECTL_TOKEN"][5:]) {
		t.Errorf("whoami with the revoked token: exit %d, stderr %q", o.code, o.stderr)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"tokens", "create", "watcher", "--role", "viewer"}, 1, `"watcher": a live token has that name already`},
		{[]string{"tokens", "create", "x", "--role", "root"}, 1, `invalid role "root"`},
		{[]string{"tokens", "create", "x"}, 2, "missing --role"},
		{[]string{"tokens", "create", "x", "--role", "viewer", "--expires", "-1h"}, 2, "in the past"},
		{[]string{"tokens", "create", "x", "--role", "viewer", "--expires", "soon"}, 2, "--expires"},
		{[]string{"tokens", "create", "x", "--role", "viewer", "--dir", "/no/such/dir"}, 1, "no such directory"},
		{[]string{"tokens", "create", "x", "--role", "viewer", "--session", "nope"}, 1, "no such session"},
		{[]string{"tokens", "revoke", "nobody"}, 1, `no live token called "nobody"`},
		{[]string{"tokens", "list", "--role", "viewer"}, 2, "only go with tokens create"},
		{[]string{"tokens", "lst"}, 2, `"list"`},
		{[]string{"audit", "--since", "yesterday-ish"}, 2, "--since"},
	} {
		o := claudectl(t, d.inv(), tc.args...)
		if o.code != tc.code || !strings.Contains(o.stderr, tc.want) || (tc.args[1] == "create" && o.stdout != "") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d and %q", strings.Join(tc.args, " "), o.code, o.stdout, o.stderr, tc.code, tc.want)
		}
	}
}

// waitPending follows session id until its first permission request and
// returns the request's id.
func waitPending(t *testing.T, d *testDaemon, id string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(d.ctx)
	defer cancel()
	stream, err := d.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	for stream.Receive() {
		if pr := stream.Msg().Event.GetPermissionRequest(); pr != nil {
			return pr.RequestId
		}
	}
	t.Fatalf("no permission request: %v", stream.Err())
	return ""
}
