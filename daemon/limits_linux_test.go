package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// TestSessionMemoryLimit: a session over its memory cap is reported as
// such: a tool the cap killed, in an error event of its turn (the CLI goes
// on); the CLI itself killed by it, in the failed status's detail. A
// session may ask a lower limit, never a higher one.
func TestSessionMemoryLimit(t *testing.T) {
	limits := claude.ResourceLimits{MemoryMax: 768 << 20}
	if err := claude.CheckLimits(limits); err != nil {
		t.Skipf("resource limits cannot be applied here: %v", err)
	}
	bash := func(id, command string) claudetest.Turn {
		return claudetest.Reply(claudetest.ToolUseID(id, "Bash", map[string]any{"command": command, "description": "use memory"}))
	}
	// tail keeps all of endless input without a newline: it grows until
	// the kernel kills it, the largest process of the session's tree.
	td := daemontest.Start(t, &daemontest.Options{Policy: daemon.SessionPolicy{Limits: limits}},
		bash("toolu_m1", "tail /dev/zero; echo status $?"), claudetest.Reply(claudetest.Text("The tool was killed.")))
	d, ctx := td.D, td.Ctx

	if _, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir(), Limits: &v1.ResourceLimits{MemoryMax: 1 << 30}}, ""); err == nil ||
		!strings.Contains(err.Error(), "options.limits.memory_max") || !strings.Contains(err.Error(), "above the daemon's sessions.limits.memory_max (768 MiB)") {
		t.Errorf("a session asking more memory than the daemon allows: %v", err)
	}

	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir(), AllowedTools: []string{"Bash"}}, "use memory")
	if err != nil {
		t.Fatal(err)
	}
	var reported []string
	for _, ev := range untilIdle(t, d, ctx, s.ID, 0) {
		if ev.Type == "error" {
			var e daemon.ErrorReport
			json.Unmarshal(ev.Raw, &e)
			reported = append(reported, e.Message)
		}
	}
	if out, _, _ := td.Model.Requests()[1].ToolResult("toolu_m1"); !strings.Contains(out, "status 137") {
		t.Errorf("the tool's result: %q, want it killed", out)
	}
	if want := "a process of the session was killed: memory limit 768 MiB reached (sessions.limits.memory_max)"; !containsString(reported, want) {
		t.Errorf("errors of the turn whose tool the limit killed: %q, want %q", reported, want)
	}

	// A session that asks for less memory than its CLI needs: the
	// kernel kills the CLI itself.
	s, err = d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir(), Limits: &v1.ResourceLimits{MemoryMax: 48 << 20}}, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Limits(s); got.MemoryMax != 48<<20 {
		t.Errorf("limits of a session that asked 48 MiB: %v", got)
	}
	got := waitStatus(t, d, ctx, s.ID, store.StatusFailed)
	if want := "the CLI was killed: memory limit 48 MiB reached (the session's limits.memory_max)"; !strings.HasPrefix(got.Error, want) {
		t.Errorf("failed with %q, want %q", got.Error, want)
	}
}

func containsString(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}
