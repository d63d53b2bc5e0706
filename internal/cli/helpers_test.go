package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// outcome is what one claudectl invocation did.
type outcome struct {
	code           int
	stdout, stderr string
}

// invocation is how to run claudectl in a test.
type invocation struct {
	stdin      string
	tty        bool              // pretend stdin is a terminal
	interrupts chan os.Signal    // Ctrl-C; nil for none
	stdout     io.Writer         // receives stdout too, if set
	getenv     map[string]string // claudectl's environment; nothing else is visible
	cliEnv     map[string]string // added to the CLI's environment
	timeout    time.Duration     // default 90s
}

// claudectl runs Main with args in-process.
func claudectl(t *testing.T, inv invocation, args ...string) outcome {
	t.Helper()
	var stdout, stderr lockedBuffer
	var out io.Writer = &stdout
	if inv.stdout != nil {
		out = io.MultiWriter(&stdout, inv.stdout)
	}
	env := &Env{
		Stdin:  strings.NewReader(inv.stdin),
		Stdout: out,
		Stderr: &stderr,
		Getenv: func(k string) string { return inv.getenv[k] },
		CLIEnv: inv.cliEnv,
		StdinIsTerminal: func() bool {
			return inv.tty
		},
	}
	if inv.interrupts != nil {
		env.Interrupts = inv.interrupts
	}
	ctx := context.Background()
	timeout := inv.timeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code := Main(ctx, env, args)
	o := outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
	t.Logf("claudectl %s\n-> exit %d\n--- stdout:\n%s--- stderr:\n%s---", strings.Join(args, " "), o.code, o.stdout, o.stderr)
	return o
}

// touchMade is the model asking to create made.txt with Bash.
func touchMade() claudetest.Block {
	return claudetest.ToolUse("Bash", map[string]any{"command": "touch made.txt", "description": "create a file"})
}

// makeFileSession starts a daemon whose model asks to create made.txt with
// Bash, then says reply, and a session in a new directory that prompts it.
func makeFileSession(t *testing.T, opts *daemontest.Options, reply string) (d *testDaemon, model *claudetest.Server, dir, id string) {
	d, model = startDaemonModel(t, opts, claudetest.Reply(touchMade()), claudetest.Reply(claudetest.Text(reply)))
	dir = t.TempDir()
	return d, model, dir, d.create(t, dir, "make the file")
}

// colorQuestion is the model asking which color, red or blue
// (AskUserQuestion).
func colorQuestion() claudetest.Block {
	return claudetest.ToolUse("AskUserQuestion", map[string]any{"questions": []any{map[string]any{
		"question": "Which color?", "header": "Color", "multiSelect": false,
		"options": []any{
			map[string]any{"label": "red", "description": "warm"},
			map[string]any{"label": "blue", "description": "cold"},
		},
	}}})
}

// attachTerminal runs "claudectl attach id" on a terminal on which nobody
// types; done receives its exit code.
func attachTerminal(t *testing.T, d *testDaemon, id string) (stdout, stderr *lockedBuffer, done <-chan int) {
	stdin, typist := io.Pipe()
	t.Cleanup(func() { typist.Close() })
	stdout, stderr = &lockedBuffer{}, &lockedBuffer{}
	env := &Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, StdinIsTerminal: func() bool { return true },
		Getenv: func(k string) string { return d.inv().getenv[k] }}
	ch := make(chan int, 1)
	go func() { ch <- Main(d.ctx, env, []string{"attach", id}) }()
	return stdout, stderr, ch
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fake is the real CLI against a scripted fake API, in a fresh HOME and
// working directory.
type fake struct {
	srv *claudetest.Server
	cli string
	cwd string
	env map[string]string
}

func newFake(t *testing.T, turns ...claudetest.Turn) *fake {
	t.Helper()
	cli := claudetest.CLIPath(t)
	srv := claudetest.NewServer(claudetest.Script(turns...))
	t.Cleanup(srv.Close)
	env := srv.EnvMap(t.TempDir())
	return &fake{srv: srv, cli: cli, cwd: t.TempDir(), env: env}
}

// run runs "claudectl run --cli CLI --cwd CWD args..." against the fake.
func (f *fake) run(t *testing.T, inv invocation, args ...string) outcome {
	t.Helper()
	inv.cliEnv = f.env
	return claudectl(t, inv, append([]string{"run", "--cli", f.cli, "--cwd", f.cwd}, args...)...)
}

// toolResult returns the tool_result the model got for its first tool call.
func (f *fake) toolResult(t *testing.T) (content string, isError bool) {
	t.Helper()
	reqs := f.srv.Requests()
	if len(reqs) < 2 {
		t.Fatalf("the model got %d requests, want at least 2 (one after the tool call)", len(reqs))
	}
	last := reqs[len(reqs)-1]
	uses := last.ToolUses()
	if len(uses) == 0 {
		t.Fatalf("no tool call in the conversation")
	}
	content, isError, ok := last.ToolResult(uses[0].ID)
	if !ok {
		t.Fatalf("no tool_result for %s %s", uses[0].Name, uses[0].ID)
	}
	return content, isError
}

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
