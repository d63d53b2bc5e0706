package cli

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/internal/linkcut"
)

// buildClaudectl builds the claudectl binary into a temporary directory.
func buildClaudectl(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "claudectl")
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not on PATH: %v", err)
	}
	out, err := exec.Command(gobin, "build", "-o", bin, "github.com/claudectl/claudectl/cmd/claudectl").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWorkerEndToEnd runs a session on a "claudectl worker" process (CLI
// 2.1.329 over stdio, fake API) from a controller in this process, and cuts
// the link in the middle of a slowly streamed reply.
func TestWorkerEndToEnd(t *testing.T) {
	cli := claudetest.CLIPath(t)
	claudectlBin := buildClaudectl(t)
	const answer = "Here is a long and slowly streamed answer, which arrives whole even though the link was cut on the way."
	cwd := t.TempDir()
	target := filepath.Join(cwd, "out.txt")
	srv := claudetest.NewServer(claudetest.Script(
		claudetest.Reply(claudetest.Text("Writing the file."), claudetest.ToolUse("Write", map[string]any{"file_path": target, "content": "remote\n"})),
		claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(answer)}, DeltaDelay: 60 * time.Millisecond, ChunkSize: 6},
	))
	defer srv.Close()

	l := &claude.WorkerListener{Token: "token-" + t.Name(), WaitTimeout: 60 * time.Second}
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	u, _ := url.Parse(l.URL())
	proxy, err := linkcut.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte(l.Token+"\n"), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	worker := exec.CommandContext(ctx, claudectlBin, "worker", "--connect", "ws://"+proxy.Addr+u.Path,
		"--token-file", tokenFile, "--cli", cli, "--once", "--reconnect-timeout", "30s", "--name", "e2e-worker", "--verbose")
	var werr syncBuffer
	worker.Stderr = &werr
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	workerDone := make(chan error, 1)
	go func() { workerDone <- worker.Wait() }()
	defer func() {
		t.Logf("worker stderr:\n%s", werr.String())
	}()

	env := srv.EnvMap(t.TempDir())
	var mu sync.Mutex
	var asked []string
	s, err := claude.Start(ctx, &claude.Options{
		Transport:              l,
		Cwd:                    cwd,
		Env:                    env,
		IncludePartialMessages: true,
		CanUseTool: func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
			mu.Lock()
			asked = append(asked, req.ToolName)
			mu.Unlock()
			return claude.Allow(), nil
		},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer s.Close()
	if err := s.SendText(ctx, "write the file, then tell me about it"); err != nil {
		t.Fatal(err)
	}
	var msgs []claude.Message
	deltas, cuts := 0, 0
	for m, err := range s.Turn(ctx) {
		if err != nil {
			t.Fatalf("turn: %v", err)
		}
		msgs = append(msgs, m)
		if ev, ok := m.(*claude.StreamEvent); ok && ev.Event.Delta != nil && strings.Contains(answer, ev.Event.Delta.Text) && ev.Event.Delta.Text != "" {
			deltas++
			if deltas == 3 || deltas == 8 {
				cuts += proxy.Cut() // the link drops while the model streams
			}
		}
	}
	res, _ := msgs[len(msgs)-1].(*claude.ResultMessage)
	if res == nil || res.IsError {
		t.Fatalf("turn did not end in success: %s", msgs[len(msgs)-1].Raw())
	}
	var text strings.Builder
	seen := map[string]bool{}
	for _, m := range msgs {
		var id string
		switch m := m.(type) {
		case *claude.StreamEvent:
			id = m.UUID
			if m.Event.Delta != nil {
				text.WriteString(m.Event.Delta.Text)
			}
		case *claude.AssistantMessage:
			id = m.UUID
		case *claude.UserMessage:
			id = m.UUID
		}
		if id != "" && seen[id] {
			t.Errorf("message %s delivered twice", id)
		}
		seen[id] = true
	}
	if got, want := text.String(), "Writing the file."+answer; got != want {
		t.Errorf("streamed text:\n got %q\nwant %q", got, want)
	}
	mu.Lock()
	if len(asked) != 1 || asked[0] != "Write" {
		t.Errorf("permission asked for %v, want [Write]", asked)
	}
	mu.Unlock()
	if b, err := os.ReadFile(target); err != nil || string(b) != "remote\n" {
		t.Errorf("file: %q %v", b, err)
	}
	if cuts < 2 || proxy.Accepted() < 3 {
		t.Errorf("%d links cut, %d connections: the link was not cut as planned", cuts, proxy.Accepted())
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v (stderr %s)", err, s.StderrTail())
	}
	select {
	case err := <-workerDone:
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			t.Errorf("worker: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the worker did not exit after the session")
		worker.Process.Kill()
		<-workerDone
	}
}

func TestWorkerUsage(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("t"), 0o600)
	ok := []string{"worker", "--connect", "ws://127.0.0.1:1/w", "--token-file", tokenFile}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"worker"}, "missing --connect"},
		{[]string{"worker", "--connect", "http://x"}, "must be a ws://"},
		{[]string{"worker", "--connect", "ws://127.0.0.1:1/w"}, "missing --token-file"},
		{[]string{"worker", "--connect", "ws://127.0.0.1:1/w", "--token-file", "/nonexistent"}, "--token-file"},
		{[]string{"worker", "--connect", "ws://127.0.0.1:1/w,http://x"}, `"http://x" must be a ws://`},
		{append(ok, "--capacity", "0"), "--capacity"},
		{append(ok, "--capacity", "5000"), "from 1 to 1024"},
		{append(ok, "--label", "gpu"), "must be KEY=VALUE"},
		{append(ok, "--label", "bad key=x"), "the key may hold only"},
		{append(ok, "--grace", "10ms"), "must be from 1s to 24h"},
		{append(ok, "--name", "has space"), "only letters, digits"},
		{append(ok, "--name", "remote"), "reserved"},
		{append(ok, "--once", "--name", "has space"), "only letters, digits"},
		{append(ok, "--once", "--name", strings.Repeat("n", 65)), "at most 64 characters"},
		{append(ok, "--once", "--label", "a=b"), "not --once"},
		{append(ok, "--cli-scheduling", "fifo"), `--cli-scheduling: must be "batch" or "normal"`},
	} {
		o := claudectl(t, invocation{}, tc.args...)
		if o.code != ExitUsage || !strings.Contains(o.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, o.code, o.stderr, tc.want)
		}
	}
}

func TestWorkerGivesUp(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("t"), 0o600)
	cli := script(t, `echo "2.1.329 (Claude Code)"`)
	// Nothing listens on this port: the worker must give up after the timeout.
	o := claudectl(t, invocation{}, "worker", "--connect", "ws://127.0.0.1:9/worker", "--token-file", tokenFile, "--cli", cli, "--once", "--reconnect-timeout", "1s")
	if o.code != ExitFailure || !strings.Contains(o.stderr, "gave up") {
		t.Errorf("exit %d, stderr %q; want 1 and gave up", o.code, o.stderr)
	}
}

// Ctrl-C stops a --once worker as it stops a registered one: exit 0, no
// error.
func TestWorkerOnceInterrupted(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("t"), 0o600)
	cli := script(t, `echo "2.1.329 (Claude Code)"`)
	interrupts := make(chan os.Signal, 1)
	time.AfterFunc(500*time.Millisecond, func() { interrupts <- os.Interrupt })
	o := claudectl(t, invocation{interrupts: interrupts}, "worker", "--connect", "ws://127.0.0.1:9/worker", "--token-file", tokenFile, "--cli", cli, "--once", "--reconnect-timeout", "1m")
	if o.code != 0 || o.stderr != "" {
		t.Errorf("exit %d, stderr %q; want 0 and nothing said", o.code, o.stderr)
	}
}
