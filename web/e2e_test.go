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
	chromium := os.Getenv("CLAUDECTL_TEST_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	cli := os.Getenv("CLAUDECTL_TEST_CLI")
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

	dir := t.TempDir()
	bin := filepath.Join(dir, "claudectl")
	build := exec.Command("go", "build", "-o", bin, "github.com/claudectl/claudectl/cmd/claudectl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building claudectl: %v\n%s", err, out)
	}
	dataDir := filepath.Join(dir, "data")
	cwd := filepath.Join(dir, "work")
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	d := &daemonProc{t: t, bin: bin, args: []string{"serve", "--demo", "--listen", addr, "--data-dir", dataDir, "--cli", cli}}
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
		line := sc.Text()
		switch {
		case line == "RESTART":
			d.stop()
			if u := d.start(); u != pageURL {
				t.Errorf("the restarted daemon's page address %q, want %q", u, pageURL)
			}
			fmt.Fprintln(stdin, "RESTARTED")
		case line == "PASS":
			passed = true
		case strings.HasPrefix(line, "METRIC "):
			t.Log(line)
		default:
			t.Log(line)
		}
	}
	err = cmd.Wait()
	if err != nil || !passed {
		t.Fatalf("the page's end-to-end script failed: %v\n%s", err, stderr.String())
	}
}

// daemonProc is a claudectl serve --demo the test starts and stops.
type daemonProc struct {
	t    *testing.T
	bin  string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// start starts the daemon and returns the page address it prints.
func (d *daemonProc) start() string {
	d.t.Helper()
	cmd := exec.Command(d.bin, d.args...)
	cmd.Env = os.Environ()
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
			if strings.HasPrefix(line, "Web page") {
				next = true
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
		d.t.Fatal("claudectl serve --demo ended before serving")
	case <-time.After(60 * time.Second):
		d.t.Fatal("claudectl serve --demo printed no page address")
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
