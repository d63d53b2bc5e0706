package daemon_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// modeChanges returns the permission_mode events of session id so far.
func modeChanges(t *testing.T, td *daemontest.Daemon, id string) []daemon.PermissionModeChange {
	t.Helper()
	s, err := td.D.Session(td.Ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out []daemon.PermissionModeChange
	for ev, err := range td.D.Subscribe(td.Ctx, id, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if b, ok := ev.Body.(*daemon.PermissionModeChange); ok {
			out = append(out, *b)
		}
		if ev.Seq >= s.LastSeq {
			break
		}
	}
	return out
}

// On the real CLI, the session's stored mode is the one the CLI reports
// in effect: one it switched to by itself (out of plan mode once a person
// approved the plan, which no SetPermissionMode asked for), one a client
// switched to (the CLI's answer), and not one the CLI refused.
func TestPermissionModeInEffect(t *testing.T) {
	cwd := t.TempDir()
	td := daemontest.Start(t, &daemontest.Options{Policy: daemon.SessionPolicy{AllowBypassPermissions: true}},
		claudetest.Reply(claudetest.ToolUse("ExitPlanMode", map[string]any{"plan": "Write a.txt."})),
		claudetest.Reply(claudetest.Text("Done.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: cwd, PermissionMode: "plan"}, "plan a.txt")
	if err != nil {
		t.Fatal(err)
	}
	for ev, err := range d.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if pr, ok := ev.Body.(*daemon.PermissionRequest); ok {
			if _, _, err := d.Decide(ctx, daemon.Decision{RequestID: pr.RequestID, Allow: true, Client: "alice"}); err != nil {
				t.Fatal(err)
			}
		}
		if mc, ok := ev.Body.(*daemon.PermissionModeChange); ok {
			if mc.Mode != "default" || mc.Requested != "" {
				t.Fatalf("permission_mode event %+v, want default reported by the CLI", mc)
			}
			break
		}
	}
	if got, _ := d.Session(ctx, s.ID); got.PermissionMode != "default" {
		t.Errorf("stored mode after the CLI left plan mode: %q, want default", got.PermissionMode)
	}
	waitStatus(t, d, ctx, s.ID, store.StatusIdle)

	mode, err := d.SetPermissionMode(ctx, s.ID, "plan")
	if err != nil || mode != "plan" {
		t.Fatalf("SetPermissionMode(plan) = %q, %v", mode, err)
	}
	if got, _ := d.Session(ctx, s.ID); got.PermissionMode != "plan" {
		t.Errorf("stored mode after SetPermissionMode(plan): %q", got.PermissionMode)
	}
	// The CLI refuses bypassPermissions in a session not launched with it:
	// the daemon's policy allows it, the CLI says why not, nothing changes.
	mode, err = d.SetPermissionMode(ctx, s.ID, "bypassPermissions")
	var ce *claude.ControlError
	if !errors.As(err, &ce) || ce.Code != "bypass_not_launched" || mode != "" {
		t.Errorf("SetPermissionMode(bypassPermissions) = %q, %v; want the CLI's refusal", mode, err)
	}
	if got, _ := d.Session(ctx, s.ID); got.PermissionMode != "plan" {
		t.Errorf("stored mode after a refused switch: %q, want plan", got.PermissionMode)
	}
	want := []daemon.PermissionModeChange{{Mode: "default"}, {Mode: "plan", Requested: "plan"}}
	if got := modeChanges(t, td, s.ID); !slices.Equal(got, want) {
		t.Errorf("permission_mode events %+v, want %+v", got, want)
	}
}

// A CLI may make another mode than the one asked for the mode in effect,
// or answer without naming one: the daemon records and returns what the
// CLI says, and the mode asked for only when it says nothing.
func TestPermissionModeOtherThanAsked(t *testing.T) {
	cli := &daemontest.InProcessCLI{Answer: func(subtype string, req json.RawMessage) string {
		if subtype != "set_permission_mode" {
			return ""
		}
		var r struct{ Mode string }
		json.Unmarshal(req, &r)
		switch r.Mode {
		case "auto": // not available here: the CLI stays in default
			return `{"mode":"default"}`
		case "dontAsk": // a host that names no mode
			return `{}`
		}
		return `{"mode":"` + r.Mode + `"}`
	}}
	td := daemontest.Start(t, &daemontest.Options{Transport: cli})
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "hi")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, ctx, s.ID, store.StatusIdle)
	for _, c := range []struct{ ask, want string }{{"plan", "plan"}, {"auto", "default"}, {"dontAsk", "dontAsk"}} {
		mode, err := d.SetPermissionMode(ctx, s.ID, c.ask)
		if err != nil || mode != c.want {
			t.Errorf("SetPermissionMode(%s) = %q, %v; want %s", c.ask, mode, err, c.want)
		}
		if got, _ := d.Session(ctx, s.ID); got.PermissionMode != c.want {
			t.Errorf("stored mode after SetPermissionMode(%s): %q, want %s", c.ask, got.PermissionMode, c.want)
		}
	}
	want := []daemon.PermissionModeChange{{Mode: "plan", Requested: "plan"}, {Mode: "default", Requested: "auto"}, {Mode: "dontAsk", Requested: "dontAsk"}}
	if got := modeChanges(t, td, s.ID); !slices.Equal(got, want) {
		t.Errorf("permission_mode events %+v, want %+v", got, want)
	}
	// A CLI that starts in another mode than the session asked for: the
	// init says so, and that is what the session shows.
	cli.Init = func(f map[string]any) { f["permissionMode"] = "default" }
	s2, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir(), PermissionMode: "acceptEdits"}, "hi")
	if err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, d, ctx, s2.ID, store.StatusIdle)
	if got.PermissionMode != "default" {
		t.Errorf("a session asked for acceptEdits whose CLI reports default: stored %q", got.PermissionMode)
	}
}
