package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/internal/serve"
)

// TestTerminalDemoTour takes the demo's tour on a real terminal, as a
// newcomer does after reading the banner: claudectl run 'tour' in a
// checkout, answering on the keyboard. The thinking the tour promises is
// shown, dimmed; each permission prompt shows the request's id, the one
// claudectl approve takes; the Write is shown as a diff; the answer to the
// question is the answer; and the checkout holds no new file afterwards.
func TestTerminalDemoTour(t *testing.T) {
	bin := buildClaudectl(t)
	old := demoPace
	demoPace = time.Millisecond
	defer func() { demoPace = old }()
	data := t.TempDir()
	s := startServe(t, map[string]string{"HOME": t.TempDir(), "PATH": os.Getenv("PATH")},
		"--demo", "--listen", freeAddr(t), "--data-dir", data, "--cli", claudetest.CLIPath(t))
	waitFor(t, "the demo's banner", func() bool { return strings.Contains(s.stderr.String(), "Ctrl-C stops the demo.") })
	token, err := os.ReadFile(serve.TokenPath(data))
	if err != nil {
		t.Fatal(err)
	}
	checkout := t.TempDir()
	writeFile(t, filepath.Join(checkout, "main.go"), "package main\n")
	env := shellEnv(map[string]string{"CLAUDECTL_SERVER": "http://" + s.addr, "CLAUDECTL_TOKEN": strings.TrimSpace(string(token))})
	p := startPane(t, env+"unset NO_COLOR\n"+fmt.Sprintf("cd %q && %q run 'tour'\necho \"EXIT=$?\"\nsleep 600", checkout, bin))

	screen := p.waitScreen(t, "the Bash prompt", true, func(s string) bool { return strings.Contains(s, "Allow Bash") })
	if !regexp.MustCompile(`\x1b\[2m✻ Thinking…`).MatchString(screen) || !strings.Contains(screen, "To show a tool, a harmless command") {
		t.Errorf("the tour's thinking is not on the screen, dimmed:\n%q", screen)
	}
	plain := p.capture(t, false)
	m := regexp.MustCompile(`request (\S+) \(claudectl approve (\S+), or deny, from another terminal\)\nAllow Bash`).FindStringSubmatch(plain)
	if m == nil || m[1] != m[2] {
		t.Errorf("the Bash prompt does not show its request id:\n%s", plain)
	}
	p.sendKeys(t, "y", "Enter")
	p.waitScreen(t, "the question", false, func(s string) bool { return strings.Contains(s, "Choose 1-2") })
	p.sendKeys(t, "2", "Enter")
	plain = p.waitScreen(t, "the Write prompt", false, func(s string) bool { return strings.Contains(s, "Allow Write") })
	for _, want := range []string{"you chose Thinking", "+# claudectl demo", "Allow Write: " + filepath.Join(data, "demo-files", claudetest.DemoFile)} {
		if !strings.Contains(plain, want) {
			t.Errorf("the screen lacks %q:\n%s", want, plain)
		}
	}
	p.sendKeys(t, "y", "Enter")
	plain = p.waitScreen(t, "the end of the tour", false, func(s string) bool { return strings.Contains(s, "EXIT=") })
	if !strings.Contains(plain, "EXIT=0") || !strings.Contains(plain, "That was the tour") {
		t.Errorf("the tour did not end well:\n%s", plain)
	}
	if ents, err := os.ReadDir(checkout); err != nil || len(ents) != 1 {
		t.Errorf("the checkout holds %d entries after the tour (%v), want only main.go", len(ents), err)
	}
}
