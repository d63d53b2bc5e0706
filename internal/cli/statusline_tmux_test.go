package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
)

// These tests run claudectl on a real terminal: a tmux pane, read with
// capture-pane (-e keeps the colours as escape sequences).

// tmuxPath returns tmux's path; without tmux the test fails under CI=true
// (make test installs it) and is skipped elsewhere.
func tmuxPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tmux is not installed: the terminal tests need it (make test installs it with apt-get when it can)")
		}
		t.Skip("tmux is not installed: skipping the terminal tests (install tmux, or run make test as root on Debian)")
	}
	return p
}

// pane is a tmux server of the test's own with one pane running a script.
type pane struct {
	tmux, sock string
}

// startPane runs script (a shell script's body) in a new 150×40 pane.
func startPane(t *testing.T, script string) *pane {
	t.Helper()
	dir := t.TempDir()
	p := &pane{tmux: tmuxPath(t), sock: filepath.Join(dir, "tmux.sock")}
	path := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(p.tmux, "-S", p.sock, "-f", "/dev/null", "new-session", "-d", "-x", "150", "-y", "40", path)
	cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	pid := 0
	if out, err := exec.Command(p.tmux, "-S", p.sock, "display-message", "-p", "#{pane_pid}").Output(); err == nil {
		pid, _ = strconv.Atoi(strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		_ = exec.Command(p.tmux, "-S", p.sock, "kill-server").Run()
		// The pane's program (claude, say) may go on writing into the
		// test's directories for a moment after its terminal is gone:
		// the directories are removed once it has ended.
		waitExited(t, pid)
	})
	return p
}

// waitExited waits until process pid has ended (gone, or a zombie that
// nobody reaps), killing it after 20 s; it gives up 10 s later.
func waitExited(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		return
	}
	alive := func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// The state follows the command's closing parenthesis.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
	}
	deadline, killed := time.Now().Add(20*time.Second), false
	for alive() {
		if time.Now().After(deadline) {
			if killed {
				t.Logf("the pane's process %d is still there after SIGKILL", pid)
				return
			}
			t.Logf("the pane's process %d did not end 20 s after its terminal: killing it", pid)
			syscall.Kill(pid, syscall.SIGKILL)
			deadline, killed = time.Now().Add(10*time.Second), true
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// capture returns what the pane shows; with escapes, its colours too.
func (p *pane) capture(t *testing.T, escapes bool) string {
	t.Helper()
	args := []string{"-S", p.sock, "capture-pane", "-p"}
	if escapes {
		args = append(args, "-e")
	}
	out, err := exec.Command(p.tmux, args...).Output()
	if err != nil {
		t.Fatalf("tmux capture-pane: %v", err)
	}
	return string(out)
}

// shellEnv is env as export lines for a shell script.
func shellEnv(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s='%s'\n", k, strings.ReplaceAll(env[k], "'", `'\''`))
	}
	return b.String()
}

var statusRE = regexp.MustCompile(`[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] (thinking|running Bash ` + "`sleep 2; echo hi`" + `)… \(\d+s`)

func TestTerminalStatusLine(t *testing.T) {
	t.Parallel()
	bin := buildClaudectl(t)
	for _, noColor := range []bool{false, true} {
		t.Run(fmt.Sprintf("NO_COLOR=%v", noColor), func(t *testing.T) {
			t.Parallel()
			// The model thinks for 3 s before it calls Bash, which takes 2 s.
			f := newFake(t,
				claudetest.Turn{Delay: 3 * time.Second, Blocks: []claudetest.Block{
					claudetest.ToolUse("Bash", map[string]any{"command": "sleep 2; echo hi"})}},
				claudetest.Turn{Delay: time.Second, Blocks: []claudetest.Block{claudetest.Text("All done.")}})
			env := shellEnv(f.env) + "unset NO_COLOR\n"
			if noColor {
				env += "export NO_COLOR=1\n"
			}
			p := startPane(t, env+fmt.Sprintf("%q run --cli %q --cwd %q --allow Bash 'check the files'\necho \"EXIT=$?\"\nsleep 600",
				bin, f.cli, f.cwd))

			seen := map[string]bool{}
			deadline := time.Now().Add(2 * time.Minute) // a loaded machine is slow
			var screen string
			for time.Now().Before(deadline) {
				screen = p.capture(t, false)
				for _, m := range statusRE.FindAllStringSubmatch(screen, -1) {
					seen[m[1]] = true
				}
				if strings.Contains(screen, "EXIT=") {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("the pane at the end:\n%s", screen)
			if !strings.Contains(screen, "EXIT=0") {
				t.Fatalf("claudectl run did not end with 0 within 2 minutes; its goroutines:\n%s", p.dumpGoroutines(t))
			}
			for _, want := range []string{"thinking", "running Bash `sleep 2; echo hi`"} {
				if !seen[want] {
					t.Errorf("the status line never said %q while the turn ran (saw %v)", want, seen)
				}
			}
			if statusRE.MatchString(screen) || strings.Contains(screen, "thinking…") {
				t.Errorf("the status line is still on the screen after the run:\n%s", screen)
			}
			for _, want := range []string{"⏺ Bash(sleep 2; echo hi)", "  ⎿  hi", "All done."} {
				if !strings.Contains(screen, want) {
					t.Errorf("the transcript lacks %q", want)
				}
			}
			coloured := p.capture(t, true)
			switch {
			case noColor && strings.Contains(coloured, "\x1b["):
				t.Errorf("escape codes on the screen with NO_COLOR:\n%q", coloured)
			case !noColor && !regexp.MustCompile(`\x1b\[[0-9;]*m\s*Bash`).MatchString(coloured):
				t.Errorf("the tool's name is not coloured on a terminal:\n%q", coloured)
			}
		})
	}
}

// dumpGoroutines asks the claudectl running in the pane (a child of the
// pane's shell) for its goroutines (SIGQUIT) and returns the pane's history.
func (p *pane) dumpGoroutines(t *testing.T) string {
	out, err := exec.Command(p.tmux, "-S", p.sock, "display-message", "-p", "#{pane_pid}").Output()
	if err != nil {
		return fmt.Sprintf("(no pane pid: %v)", err)
	}
	shell := strings.TrimSpace(string(out))
	kids, _ := filepath.Glob("/proc/" + shell + "/task/*/children")
	for _, k := range kids {
		b, _ := os.ReadFile(k)
		for _, pid := range strings.Fields(string(b)) {
			if exe, _ := os.Readlink("/proc/" + pid + "/exe"); filepath.Base(exe) == "claudectl" {
				_ = exec.Command("kill", "-QUIT", pid).Run()
			}
		}
	}
	time.Sleep(time.Second)
	hist, err := exec.Command(p.tmux, "-S", p.sock, "capture-pane", "-p", "-S", "-5000").Output()
	if err != nil {
		return fmt.Sprintf("(capture: %v)", err)
	}
	return string(hist)
}

// sendKeys types keys into the pane.
func (p *pane) sendKeys(t *testing.T, keys ...string) {
	t.Helper()
	if out, err := exec.Command(p.tmux, append([]string{"-S", p.sock, "send-keys"}, keys...)...).CombinedOutput(); err != nil {
		t.Fatalf("tmux send-keys: %v\n%s", err, out)
	}
}

// waitScreen polls the pane until cond holds for what it shows, for up to
// two minutes (a loaded machine is slow).
func (p *pane) waitScreen(t *testing.T, what string, escapes bool, cond func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s := p.capture(t, escapes)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; the pane:\n%s\nclaudectl's goroutines:\n%s", what, s, p.dumpGoroutines(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTerminalPermissionDiff answers a Write's permission prompt typed
// into a real terminal: the prompt shows the diff in colour, and after
// the answer the turn goes on to its end with the status line gone.
func TestTerminalPermissionDiff(t *testing.T) {
	t.Parallel()
	bin := buildClaudectl(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "notes.txt")
	writeFile(t, path, "keep\nold line\n")
	f := newFake(t,
		claudetest.Reply(claudetest.ToolUse("Read", map[string]any{"file_path": path})),
		claudetest.Reply(claudetest.ToolUse("Write", map[string]any{"file_path": path, "content": "keep\nnew line\n"})),
		claudetest.Turn{Delay: 2 * time.Second, Blocks: []claudetest.Block{claudetest.Text("Rewritten.")}})
	f.cwd = dir
	p := startPane(t, shellEnv(f.env)+"unset NO_COLOR\n"+fmt.Sprintf("%q run --cli %q --cwd %q --allow Read 'rewrite the notes'\necho \"EXIT=$?\"\nsleep 600", bin, f.cli, f.cwd))

	screen := p.waitScreen(t, "the permission prompt", true, func(s string) bool { return strings.Contains(s, "Allow Write") })
	plain := p.capture(t, false)
	for _, want := range []string{"@@ -1,2 +1,2 @@", " keep", "-old line", "+new line"} {
		if !strings.Contains(plain, want) {
			t.Errorf("the prompt lacks the diff line %q:\n%s", want, plain)
		}
	}
	if !regexp.MustCompile(`\x1b\[[0-9;]*m\s*\+new line`).MatchString(screen) || !regexp.MustCompile(`\x1b\[[0-9;]*m\s*-old line`).MatchString(screen) {
		t.Errorf("the diff is not coloured:\n%q", screen)
	}
	p.sendKeys(t, "y", "Enter")
	screen = p.waitScreen(t, "the end of the run", false, func(s string) bool { return strings.Contains(s, "EXIT=") })
	t.Logf("the pane at the end:\n%s", screen)
	if !strings.Contains(screen, "EXIT=0") || !strings.Contains(screen, "Rewritten.") {
		t.Errorf("the run did not end well:\n%s", screen)
	}
	if statusRE.MatchString(screen) || strings.Contains(screen, "thinking…") {
		t.Errorf("the status line is still on the screen:\n%s", screen)
	}
	if b, _ := os.ReadFile(path); string(b) != "keep\nnew line\n" {
		t.Errorf("the file after the Write: %q", b)
	}
}
