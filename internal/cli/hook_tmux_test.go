package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// TestHookInteractiveClaude: the real interactive claude, started by hand
// in a terminal (a tmux pane) against the scripted model, with claudectl's
// hook installed by claudectl hook install. Its Bash request appears in
// claudectl pending, claudectl approve lets it run (the file appears, and
// the terminal's dialog, shown meanwhile, goes away). With the daemon stopped, the next request
// shows Claude Code's own dialog in the terminal.
func TestHookInteractiveClaude(t *testing.T) {
	cli := os.Getenv("CLAUDECTL_TEST_CLI")
	if cli == "" {
		t.Skip("CLAUDECTL_TEST_CLI is not set")
	}
	tmuxPath(t)
	bin := buildClaudectl(t)
	dd := daemontest.Start(t, &daemontest.Options{},
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "touch hooked.txt", "description": "Create hooked.txt"})),
		claudetest.Reply(claudetest.Text("Created it.")),
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "touch second.txt", "description": "Create second.txt"})),
		claudetest.Reply(claudetest.Text("Created the second.")))
	url, _ := dd.Serve()
	d := &testDaemon{url: url, token: dd.Token(), ctx: dd.Ctx}
	home, cwd := t.TempDir(), t.TempDir()
	// A person who has used claude before: onboarding done, this folder
	// trusted, the key in the environment approved.
	state := map[string]any{"hasCompletedOnboarding": true, "lastOnboardingVersion": "2.1.332", "theme": "dark",
		"customApiKeyResponses": map[string]any{"approved": []string{"sk-ant-test"}, "rejected": []string{}},
		"projects":              map[string]any{cwd: map[string]any{"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}}}
	b, _ := json.Marshal(state)
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// Asked, as in the default mode (auto mode, Claude Code's default,
	// would let its classifier run "touch" unasked).
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(`{"permissions": {"defaultMode": "default"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := claudectl(t, invocation{getenv: map[string]string{"HOME": home}}, "hook", "install", "--claudectl", bin, "--server", url, "--wait", "60s")
	if o.code != 0 {
		t.Fatalf("hook install: exit %d, stderr %q", o.code, o.stderr)
	}
	env := dd.Model.EnvMap(home)
	env["CLAUDECTL_TOKEN"] = dd.Token()
	p := startPane(t, shellEnv(env)+"cd '"+cwd+"'\nexec '"+cli+"'")
	p.waitScreen(t, "claude's prompt", false, func(s string) bool { return strings.Contains(s, "❯") || strings.Contains(s, ">") })
	p.sendKeys(t, "-l", "make hooked.txt")
	p.sendKeys(t, "Enter")

	var pend []pendingJSON
	deadline := time.Now().Add(60 * time.Second)
	for len(pend) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no request in claudectl pending; the terminal shows:\n%s", p.capture(t, false))
		}
		o := claudectl(t, d.inv(), "pending", "--json")
		json.Unmarshal([]byte(o.stdout), &pend)
		if len(pend) == 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if pend[0].Tool != "Bash" || pend[0].Summary != "touch hooked.txt" {
		t.Errorf("pending: %+v", pend[0])
	}
	// Claude Code shows its own dialog while the hook runs: whichever
	// answers first wins. The approval from outside closes it.
	if o := claudectl(t, d.inv(), "approve", pend[0].RequestID); o.code != 0 {
		t.Fatalf("approve: exit %d, stderr %q", o.code, o.stderr)
	}
	p.waitScreen(t, "the turn's end", false, func(s string) bool {
		return strings.Contains(s, "Created it.") && !strings.Contains(s, "Do you want to proceed?")
	})
	if !fileExists(filepath.Join(cwd, "hooked.txt")) {
		t.Errorf("hooked.txt was not created; the terminal shows:\n%s", p.capture(t, false))
	}

	// The daemon gone: the terminal's own dialog asks.
	dd.Stop()
	p.sendKeys(t, "-l", "make second.txt")
	p.sendKeys(t, "Enter")
	p.waitScreen(t, "Claude Code's own dialog", false, func(s string) bool { return strings.Contains(s, "Do you want to proceed?") })
	// Yes. Claude Code ignores keys for a moment after a dialog opens (no
	// accidental answer): pressed until the dialog goes.
	for end := time.Now().Add(30 * time.Second); strings.Contains(p.capture(t, false), "Do you want to proceed?"); {
		if time.Now().After(end) {
			t.Fatalf("the dialog took no answer:\n%s", p.capture(t, false))
		}
		p.sendKeys(t, "Enter")
		time.Sleep(300 * time.Millisecond)
	}
	p.waitScreen(t, "the second turn's end", false, func(s string) bool { return strings.Contains(s, "Created the second.") })
	if !fileExists(filepath.Join(cwd, "second.txt")) {
		t.Errorf("second.txt was not created")
	}
}
