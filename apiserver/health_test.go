package apiserver_test

import (
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// TestHealthDetailsDegraded: a CLI whose system/init drops Bash makes a
// warning event on the session and turns the daemon's level DEGRADED with
// the reason, the session and the version; closing the session does not
// clear the version's reason (the CLI is still the one the daemon runs).
func TestHealthDetailsDegraded(t *testing.T) {
	cli := &daemontest.InProcessCLI{Init: func(f map[string]any) {
		f["tools"] = slices.DeleteFunc(f["tools"].([]string), func(s string) bool { return s == "Bash" })
	}}
	d := daemontest.Start(t, &daemontest.Options{Transport: cli})
	url, httpc := d.Serve()
	c := &client{sessions: claudectlv1connect.NewSessionServiceClient(httpc, url),
		health: claudectlv1connect.NewHealthServiceClient(httpc, url), url: url, ctx: d.Ctx}

	before, err := c.health.HealthDetails(c.ctx, connect.NewRequest(&v1.HealthDetailsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if l := before.Msg.ClaudeCode.Level; l != v1.CompatibilityLevel_COMPATIBILITY_LEVEL_FULLY_COMPATIBLE {
		t.Fatalf("before any session: level %v, want fully compatible", l)
	}

	res, err := c.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir()}, Prompt: "go"}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.Session.Id
	var warns []*v1.Warning
	c.untilIdle(t, id, 0, func(ev *v1.Event) {
		if w := ev.GetWarning(); w != nil {
			warns = append(warns, w)
		}
	})
	if len(warns) != 1 || warns[0].Kind != "missing_feature" || !slices.Equal(warns[0].Items, []string{"Bash tool"}) ||
		warns[0].Level != v1.CompatibilityLevel_COMPATIBILITY_LEVEL_DEGRADED || warns[0].ClaudeCodeVersion != claude.TestedMaxVersion {
		t.Fatalf("warning events %v; want one: Bash tool missing, degraded, %s (the in-process CLI's)", warns, claude.TestedMaxVersion)
	}

	check := func(when string, live bool) {
		t.Helper()
		h, err := c.health.HealthDetails(c.ctx, connect.NewRequest(&v1.HealthDetailsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		cc := h.Msg.ClaudeCode
		if cc.Level != v1.CompatibilityLevel_COMPATIBILITY_LEVEL_DEGRADED || !strings.Contains(cc.Message, "Bash tool") {
			t.Errorf("%s: level %v, message %q; want degraded, naming the Bash tool", when, cc.Level, cc.Message)
		}
		if len(cc.Reasons) != 1 || cc.Reasons[0].Kind != "missing_feature" || cc.Reasons[0].Subject != "Bash tool" ||
			cc.Reasons[0].SessionId != id || cc.Reasons[0].LastSeen == nil || cc.Reasons[0].ClaudeCodeVersion != claude.TestedMaxVersion {
			t.Errorf("%s: reasons %v", when, cc.Reasons)
		}
		if len(cc.Versions) != 1 || cc.Versions[0].Version != claude.TestedMaxVersion || !cc.Versions[0].Counted ||
			cc.Versions[0].MatrixLevel != v1.CompatibilityLevel_COMPATIBILITY_LEVEL_FULLY_COMPATIBLE {
			t.Errorf("%s: versions %v", when, cc.Versions)
		}
		if live != (len(cc.DegradedSessions) == 1 && cc.DegradedSessions[0].SessionId == id &&
			slices.Equal(cc.DegradedSessions[0].Missing, []string{"Bash tool"})) {
			t.Errorf("%s: degraded sessions %v (live session: %v)", when, cc.DegradedSessions, live)
		}
	}
	check("while the session runs", true)
	if _, err := c.sessions.CloseSession(c.ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	check("after the session closed", false)
}
