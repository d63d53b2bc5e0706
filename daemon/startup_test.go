package daemon_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// A CLI that refuses to start because an administrator's policy forbids
// the MCP servers a session's options name (managed setting
// disableSideloadFlags, 2.1.331; here given with --managed-settings) fails
// the session in the person's words, and nothing starts it again: not the
// next prompt. On the real CLI.
func TestStartupFailureInPersonsWords(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{Policy: daemon.SessionPolicy{
		ExtraArgs: []string{"--managed-settings", "--mcp-config"}}},
		claudetest.Reply(claudetest.Text("never reached")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir(), ExtraArgs: []string{
		`--managed-settings={"disableSideloadFlags":true}`,
		`--mcp-config={"mcpServers":{"tools":{"type":"stdio","command":"true"}}}`}}, "hi")
	if err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, d, ctx, s.ID, store.StatusFailed)
	const words = "Claude Code refused to start: an administrator's policy forbids per-session MCP servers, plugins and agents"
	if !strings.HasPrefix(got.Error, words) || !strings.Contains(got.Error, "extra_args") ||
		!strings.Contains(got.Error, "Trying again as it is will not help") {
		t.Errorf("the session's error: %q", got.Error)
	}
	var reports []string
	for ev, err := range d.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := ev.Body.(*daemon.ErrorReport); ok {
			reports = append(reports, e.Message)
		}
		if ev.Seq >= got.LastSeq {
			break
		}
	}
	if len(reports) != 1 || !strings.HasPrefix(reports[0], words) {
		t.Errorf("error events %q, want one in the person's words", reports)
	}
	// Not started again: a prompt is refused, and no CLI runs.
	var se *daemon.StateError
	if err := d.Send(ctx, s.ID, "again"); !errors.As(err, &se) {
		t.Errorf("Send to the failed session: %v, want a StateError", err)
	}
	after, _ := d.Session(ctx, s.ID)
	if after.Process != got.Process || after.Status != store.StatusFailed || d.Running() != 0 {
		t.Errorf("after a prompt: process %d (was %d), status %s, %d CLIs running", after.Process, got.Process, after.Status, d.Running())
	}
	if n := len(td.Model.Requests()); n != 0 {
		t.Errorf("%d requests reached the model", n)
	}
}
