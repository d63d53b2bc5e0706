package claudetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// baseArgs are the flags an SDK passes to the CLI.
var baseArgs = []string{
	"--output-format", "stream-json",
	"--input-format", "stream-json",
	"--verbose",
	"--permission-prompt-tool", "stdio",
}

// line is one stdout line of the CLI.
type line struct {
	raw []byte
	m   map[string]any
}

func (l line) str(keys ...string) string {
	var v any = l.m
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

// cliProc is a running claude CLI driven over stdio.
type cliProc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan line
	readWG sync.WaitGroup

	mu     sync.Mutex
	stderr bytes.Buffer
	sent   [][]byte
	out    [][]byte

	waitOnce sync.Once
	waitErr  error
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// startCLI starts the CLI against srv in a fresh HOME and working directory.
// The process is killed when ctx is done and at the end of the test.
func startCLI(ctx context.Context, t testing.TB, srv *Server, workDir string, args ...string) *cliProc {
	t.Helper()
	return startCLIHome(ctx, t, srv, "", workDir, args...)
}

// startCLIHome is startCLI with a given HOME ("" for a fresh one).
func startCLIHome(ctx context.Context, t testing.TB, srv *Server, home, workDir string, args ...string) *cliProc {
	t.Helper()
	bin := CLIPath(t)
	if home == "" {
		home = t.TempDir()
	}
	if workDir == "" {
		workDir = t.TempDir()
	}
	cmd := exec.CommandContext(ctx, bin, append(append([]string(nil), baseArgs...), args...)...)
	cmd.Env = srv.Env(home)
	cmd.Dir = workDir
	cmd.WaitDelay = 5 * time.Second
	p := &cliProc{t: t, cmd: cmd, lines: make(chan line, 1024)}
	cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.readWG.Add(1)
	go func() {
		defer p.readWG.Done()
		defer close(p.lines)
		r := bufio.NewReaderSize(stdout, 1<<16)
		for {
			b, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(b)) > 0 {
				b = bytes.TrimRight(b, "\r\n")
				p.mu.Lock()
				p.out = append(p.out, b)
				p.mu.Unlock()
				l := line{raw: b}
				if jerr := json.Unmarshal(b, &l.m); jerr != nil {
					t.Errorf("CLI printed a non-JSON line: %.200q", b)
				}
				p.lines <- l
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = p.stdin.Close()
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
		}
		p.wait()
		for range p.lines { // drain what is left
		}
		p.readWG.Wait()
	})
	return p
}

func (p *cliProc) wait() error {
	p.waitOnce.Do(func() {
		p.waitErr = p.cmd.Wait()
	})
	return p.waitErr
}

// send writes v as one NDJSON line to the CLI's stdin.
func (p *cliProc) send(v any) {
	p.t.Helper()
	var b []byte
	switch v := v.(type) {
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			p.t.Fatal(err)
		}
	}
	p.mu.Lock()
	p.sent = append(p.sent, b)
	p.mu.Unlock()
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		p.t.Fatalf("write to CLI stdin: %v", err)
	}
}

func userMessage(text string) map[string]any {
	return map[string]any{
		"type":       "user",
		"session_id": "",
		"message": map[string]any{
			"role":    "user",
			"content": []any{map[string]any{"type": "text", "text": text}},
		},
		"parent_tool_use_id": nil,
	}
}

func (p *cliProc) sendUser(text string) { p.t.Helper(); p.send(userMessage(text)) }

func (p *cliProc) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// next returns the next stdout line; ok is false at EOF.
func (p *cliProc) next(ctx context.Context) (line, bool) {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		return l, ok
	case <-ctx.Done():
		p.t.Fatalf("timed out waiting for CLI output: %v\nstderr:\n%s", ctx.Err(), p.stderrText())
		return line{}, false
	}
}

// waitFor reads stdout lines until one satisfies pred and returns it.
func (p *cliProc) waitFor(ctx context.Context, what string, pred func(line) bool) line {
	p.t.Helper()
	for {
		l, ok := p.next(ctx)
		if !ok {
			p.t.Fatalf("CLI closed stdout before %s; stderr:\n%s", what, p.stderrText())
		}
		if pred(l) {
			return l
		}
	}
}

func isType(typ string) func(line) bool {
	return func(l line) bool { return l.str("type") == typ }
}

// isResult matches the result line.
var isResult = isType("result")

// closeAndWait closes stdin, reads until EOF and returns the exit code (-1
// if the process was killed by a signal).
func (p *cliProc) closeAndWait(ctx context.Context) int {
	p.t.Helper()
	_ = p.stdin.Close()
	for {
		if _, ok := p.next(ctx); !ok {
			break
		}
	}
	err := p.wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1
		}
		return ee.ExitCode()
	}
	if err != nil {
		p.t.Fatalf("wait: %v", err)
	}
	return 0
}

// output returns every stdout line so far.
func (p *cliProc) output() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.out...)
}

// assistantTexts returns the text blocks of an assistant line.
func assistantTexts(m map[string]any) []string {
	var out []string
	msg, _ := m["message"].(map[string]any)
	content, _ := msg["content"].([]any)
	for _, c := range content {
		cb, _ := c.(map[string]any)
		if cb["type"] == "text" {
			s, _ := cb["text"].(string)
			out = append(out, s)
		}
	}
	return out
}

// blockTypes returns the content block types of an assistant line.
func blockTypes(m map[string]any) []string {
	var out []string
	msg, _ := m["message"].(map[string]any)
	content, _ := msg["content"].([]any)
	for _, c := range content {
		cb, _ := c.(map[string]any)
		s, _ := cb["type"].(string)
		out = append(out, s)
	}
	return out
}

func truncate(b []byte, n int) string {
	s := string(b)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
