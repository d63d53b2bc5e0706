package daemon_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// TestSandboxEnforced: with sessions.sandbox set, every session's CLI runs
// inside Claude Code's sandbox (a Bash command cannot write outside the
// session's directory; without the setting it can), and a client cannot
// pass the flags that would change it, even when allowed_extra_args lists
// them.
func TestSandboxEnforced(t *testing.T) {
	for _, tool := range []string{"bwrap", "socat"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing (make test installs it)", tool)
			}
			t.Skipf("Claude Code's sandbox needs %s on Linux: make sandbox installs it", tool)
		}
	}
	outside := t.TempDir()
	escape := func(id string) claudetest.Turn {
		return claudetest.Reply(claudetest.ToolUseID(id, "Bash", map[string]any{
			"command": "echo inside > inside.txt; echo escaped > " + filepath.Join(outside, id+".txt"), "description": "write files"}))
	}
	turns := []claudetest.Turn{escape("toolu_sb1"), claudetest.Reply(claudetest.Text("Done."))}
	for _, enforced := range []bool{false, true} {
		policy := daemon.SessionPolicy{ExtraArgs: []string{"--settings", "--verbose"}}
		if enforced {
			policy.Sandbox = json.RawMessage(`{"enabled": true}`)
		}
		td := daemontest.Start(t, &daemontest.Options{Policy: policy}, turns...)
		d, ctx := td.D, td.Ctx
		cwd := t.TempDir()
		s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: cwd, AllowedTools: []string{"Bash"}}, "write the files")
		if err != nil {
			t.Fatal(err)
		}
		untilIdle(t, d, ctx, s.ID, 0)
		_, err = os.Stat(filepath.Join(outside, "toolu_sb1.txt"))
		if escaped := err == nil; escaped == enforced {
			t.Errorf("sandbox enforced %v: the command wrote outside its directory: %v", enforced, escaped)
		}
		if _, err := os.Stat(filepath.Join(cwd, "inside.txt")); err != nil {
			t.Errorf("sandbox enforced %v: the command could not write in its directory: %v", enforced, err)
		}
		os.Remove(filepath.Join(outside, "toolu_sb1.txt"))

		_, err = d.Create(ctx, &daemon.SessionOptions{Cwd: cwd, ExtraArgs: []string{"--verbose", `--settings={"sandbox":{"enabled":false}}`}}, "")
		var ia *daemon.InvalidArgumentError
		switch {
		case !enforced && err != nil:
			t.Errorf("no sandbox: --settings is allowed, got %v", err)
		case enforced && (!errors.As(err, &ia) || ia.Field != "options.extra_args[1]" || !strings.Contains(ia.Reason, "sessions.sandbox")):
			t.Errorf("sandbox enforced: --settings gave %v, want it refused naming sessions.sandbox", err)
		}
	}
}
