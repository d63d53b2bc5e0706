package web_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestPageInChromium runs e2e/e2e.mjs in real headless Chromium
// (playwright-core, the browser Debian's chromium package installs)
// against claudectl serve --demo: the real Claude Code CLI and the
// scripted demo model. It restarts the daemon when the script asks.
// Without a browser, node or web/node_modules it is skipped, except under
// CI=true, where it fails: make test installs them.
func TestPageInChromium(t *testing.T) {
	chromium, node, cli := pageTools(t)
	dir := t.TempDir()
	bin := buildClaudectl(t, dir)
	dataDir := filepath.Join(dir, "data")
	cwd := filepath.Join(dir, "work")
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		t.Fatal(err)
	}
	d := &daemonProc{t: t, bin: bin, args: []string{"serve", "--demo", "--listen", freeLoopback(t), "--data-dir", dataDir, "--cli", cli}}
	pageURL := d.start()
	defer d.stop()
	token, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	// Its output is no terminal: the address it prints must not carry the
	// token (it would land in a log). The page is logged in as a person
	// would, with the token file's token in the address's fragment.
	if strings.Contains(pageURL, "token=") {
		t.Errorf("serve --demo, its output a pipe, printed the token in the page's address %q", pageURL)
	}
	loginURL := pageURL + "#token=" + strings.TrimSpace(string(token))

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "e2e/e2e.mjs")
	cmd.Env = append(os.Environ(), "URL="+loginURL, "TOKEN="+strings.TrimSpace(string(token)), "CWD="+cwd, "FILES="+filepath.Join(dataDir, "demo-files"),
		"CHROMIUM="+chromium, "SHOTS="+os.Getenv("CLAUDECTL_WEB_SHOTS"))
	runScript(t, cmd, "the page's end-to-end script", func(line string, stdin io.Writer) {
		switch {
		case line == "RESTART":
			d.stop()
			if u := d.start(); u != pageURL {
				t.Errorf("the restarted daemon's page address %q, want %q", u, pageURL)
			}
			fmt.Fprintln(stdin, "RESTARTED")
		case strings.HasPrefix(line, "SEARCH "):
			// SEARCH ID SEQ WORDS...: claudectl search finds the event too.
			fmt.Fprintln(stdin, cliSearch(t, bin, pageURL, strings.TrimSpace(string(token)), strings.Fields(line)[1:]))
		default: // METRIC lines among them
			t.Log(line)
		}
	})
}

// runScript runs cmd, a node script driving Chromium, and gives each line
// it prints to handle, with the script's stdin for the answers it waits
// for; t fails unless the script printed PASS and exited 0. what names the
// script in the failure, which shows its stderr.
func runScript(t *testing.T, cmd *exec.Cmd, what string, handle func(line string, stdin io.Writer)) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	passed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if line := sc.Text(); line == "PASS" {
			passed = true
		} else {
			handle(line, stdin)
		}
	}
	if err := cmd.Wait(); err != nil || !passed {
		t.Fatalf("%s failed: %v\n%s", what, err, stderr.String())
	}
}

// TestPageNotLoggedIn runs e2e/nologin.mjs in Chromium against claudectl
// serve (not the demo) whose Claude Code has no credentials: a fresh HOME,
// no key. The real CLI refuses the turn ("Not logged in"); the page shows
// the daemon's hint with the error, and no error "(success)".
func TestPageNotLoggedIn(t *testing.T) {
	chromium, node, cli := pageTools(t)
	dir := t.TempDir()
	bin := buildClaudectl(t, dir)
	home, cwd := filepath.Join(dir, "home"), filepath.Join(dir, "work")
	for _, d := range []string{home, cwd} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Offline and without credentials: only what the CLI needs to run.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"ANTHROPIC_BASE_URL=http://127.0.0.1:1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	d := &daemonProc{t: t, bin: bin, env: env,
		args: []string{"serve", "--listen", freeLoopback(t), "--data-dir", filepath.Join(dir, "data"), "--cli", cli}}
	pageURL := d.start()
	defer d.stop()
	token, err := os.ReadFile(filepath.Join(dir, "data", "token"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "e2e/nologin.mjs")
	cmd.Env = append(os.Environ(), "URL="+pageURL+"#token="+strings.TrimSpace(string(token)), "CWD="+cwd, "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.Contains(string(out), "\nPASS\n") {
		t.Fatalf("the page's no-credentials script failed: %v", err)
	}
}

// TestPageWorktreeAndBudget runs e2e/isolation.mjs in Chromium against
// claudectl serve --demo with a tiny spend cap per session and a git
// repository: a worktree session from the form, its Changes view and
// merge, and the budget card that releases it (issue 41).
func TestPageWorktreeAndBudget(t *testing.T) {
	chromium, node, cli := pageTools(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	bin := buildClaudectl(t, dir)
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("a repository\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "--quiet", "--initial-branch=main"}, {"add", "."}, {"commit", "--quiet", "-m", "first"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	settings := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(settings, []byte(`{"budgets": {"session_usd": 0.0001}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "data")
	d := &daemonProc{t: t, bin: bin, args: []string{"serve", "--demo", "--config", settings, "--listen", freeLoopback(t),
		"--data-dir", dataDir, "--cli", cli}}
	pageURL := d.start()
	defer d.stop()
	token, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "e2e/isolation.mjs")
	cmd.Env = append(os.Environ(), "URL="+pageURL+"#token="+strings.TrimSpace(string(token)), "TOKEN="+strings.TrimSpace(string(token)),
		"REPO="+repo, "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.Contains(string(out), "\nPASS\n") {
		t.Fatalf("the page's worktree and budget script failed: %v", err)
	}
}

// pageTools returns what the page's browser tests need: Chromium, node
// (with web/node_modules) and the Claude Code CLI. Without one the test
// is skipped, except under CI=true, where it fails: make test installs
// them.
func pageTools(t *testing.T) (chromium, node, cli string) {
	t.Helper()
	chromium = os.Getenv("CLAUDECTL_TEST_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	cli = os.Getenv("CLAUDECTL_TEST_CLI")
	missing := func(what string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing (make test installs it)", what)
		}
		t.Skipf("%s is missing: run make test, which installs it", what)
	}
	if _, err := os.Stat(chromium); err != nil {
		missing("Chromium (" + chromium + ")")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node")
	}
	if _, err := os.Stat("node_modules/playwright-core"); err != nil {
		missing("web/node_modules (npm ci in web/)")
	}
	if cli == "" {
		missing("the Claude Code CLI (CLAUDECTL_TEST_CLI)")
	}
	return chromium, node, cli
}

// buildClaudectl builds claudectl into dir and returns its path.
func buildClaudectl(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "claudectl")
	build := exec.Command("go", "build", "-o", bin, "github.com/claudectl/claudectl/cmd/claudectl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building claudectl: %v\n%s", err, out)
	}
	return bin
}

// freeLoopback returns a free address on 127.0.0.1.
func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// daemonProc is a claudectl serve the test starts and stops.
type daemonProc struct {
	t    *testing.T
	bin  string
	args []string
	env  []string // nil: this process's

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// start starts the daemon and returns the page address it prints.
func (d *daemonProc) start() string {
	d.t.Helper()
	cmd := exec.Command(d.bin, d.args...)
	cmd.Env = d.env
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		d.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	done := make(chan struct{})
	urls := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		next := false
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if next && strings.HasPrefix(line, "http") {
				urls <- line
				next = false
			}
			if rest, ok := strings.CutPrefix(line, "Web page:"); ok && strings.HasPrefix(strings.TrimSpace(rest), "http") {
				urls <- strings.Fields(rest)[0] // serve's "Web page: URL (log in with …)"
			} else if strings.HasPrefix(line, "Web page") {
				next = true // the demo's banner: the address on the next line
			}
		}
		io.Copy(io.Discard, out)
	}()
	d.mu.Lock()
	d.cmd, d.done = cmd, done
	d.mu.Unlock()
	select {
	case u := <-urls:
		return u
	case <-done:
		cmd.Wait()
		d.t.Fatal("claudectl serve ended before serving")
	case <-time.After(60 * time.Second):
		d.t.Fatal("claudectl serve printed no page address")
	}
	return ""
}

// stop stops the daemon with SIGTERM and waits for it.
func (d *daemonProc) stop() {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.cmd = nil
	d.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		cmd.Process.Kill()
		<-done
	}
	cmd.Wait()
}

// cliSearch runs claudectl search --json WORDS against the daemon and
// says "SEARCHED" when its one match is event SEQ of session ID, else
// what it printed.
func cliSearch(t *testing.T, bin, server, token string, args []string) string {
	if len(args) < 3 {
		return "bad SEARCH line"
	}
	id, seq, words := args[0], args[1], args[2:]
	cmd := exec.Command(bin, append([]string{"search", "--json", "--server", strings.TrimSuffix(server, "/")}, words...)...)
	cmd.Env = append(os.Environ(), "CLAUDECTL_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	t.Logf("claudectl search --json %s: %v\n%s", strings.Join(words, " "), err, out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := fmt.Sprintf(`{"session_id":%q,"seq":%s,`, id, seq)
	if err != nil || len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
		return fmt.Sprintf("claudectl search printed %q (%v), want one line starting %s", out, err, want)
	}
	return "SEARCHED"
}
