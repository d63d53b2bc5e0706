package claude_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
)

// captureTransport remembers the Conn its transport started.
type captureTransport struct {
	claude.Transport
	mu   sync.Mutex
	conn claude.Conn
}

func (c *captureTransport) Start(ctx context.Context, cmd *claude.Command) (claude.Conn, error) {
	conn, err := c.Transport.Start(ctx, cmd)
	c.mu.Lock()
	c.conn = conn
	c.mu.Unlock()
	return conn, err
}

func (c *captureTransport) Conn() claude.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}

// logBuffer is a slog destination safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newWSE2E is newE2E with the CLI run over a WebSocketTransport (CLI 2.1.37).
func newWSE2E(t *testing.T, turns ...claudetest.Turn) (*e2e, *captureTransport, *logBuffer) {
	t.Helper()
	return newWSE2EResponder(t, claudetest.Script(turns...))
}

func newWSE2EResponder(t *testing.T, r claudetest.Responder) (*e2e, *captureTransport, *logBuffer) {
	t.Helper()
	bin := claudetest.SDKURLCLIPath(t)
	e := newE2EResponder(t, r)
	e.opts.CLIPath = bin
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	ct := &captureTransport{Transport: &claude.WebSocketTransport{
		Process: &claude.ProcessTransport{Stderr: func(line string) { t.Logf("cli stderr: %s", line) }},
		Logger:  logger,
	}}
	e.opts.Transport = ct
	e.opts.Logger = logger
	return e, ct, logs
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

// checkUnique fails when two messages share a uuid.
func checkUnique(t *testing.T, msgs []claude.Message) {
	t.Helper()
	seen := map[string]string{}
	for _, m := range msgs {
		var u string
		switch m := m.(type) {
		case *claude.AssistantMessage:
			u = m.UUID
		case *claude.UserMessage:
			u = m.UUID
		case *claude.StreamEvent:
			u = m.UUID
		case *claude.ResultMessage:
			u = m.UUID
		case *claude.SystemInit:
			u = m.UUID
		}
		if u == "" {
			continue
		}
		if prev, dup := seen[u]; dup {
			t.Errorf("uuid %s delivered twice: %s and %s", u, prev, m.Raw())
		}
		seen[u] = string(m.Raw())
	}
}

// streamedText concatenates the text deltas of the stream events.
func streamedText(msgs []claude.Message) string {
	var sb strings.Builder
	for _, m := range msgs {
		if ev, ok := m.(*claude.StreamEvent); ok && ev.Event.Delta != nil {
			sb.WriteString(ev.Event.Delta.Text)
		}
	}
	return sb.String()
}

// mainKinds lists the types of the messages but stream events.
func mainKinds(msgs []claude.Message) []string {
	var out []string
	for _, m := range msgs {
		if _, ok := m.(*claude.StreamEvent); !ok {
			out = append(out, m.Kind())
		}
	}
	return out
}

func TestWebSocketTurnWithPermission(t *testing.T) {
	cwd := t.TempDir()
	target := filepath.Join(cwd, "out.txt")
	e, ct, _ := newWSE2E(t,
		claudetest.Reply(claudetest.Text("I'll write it."), claudetest.ToolUse("Write", map[string]any{"file_path": target, "content": "hello over websocket\n"})),
		claudetest.Reply(claudetest.Text("Written.")),
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "echo probe=$CLAUDECTL_WS_PROBE", "description": "print the probe"})),
		claudetest.Reply(claudetest.Text("Printed.")),
	)
	e.opts.Cwd = cwd
	var mu sync.Mutex
	var asked []string
	e.opts.CanUseTool = func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		mu.Lock()
		asked = append(asked, req.ToolName)
		mu.Unlock()
		return claude.Allow(), nil
	}
	s := e.start()
	init, err := s.Initialize(e.ctx)
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if len(init.Commands) == 0 {
		t.Errorf("initialize response without commands: %s", init.Raw)
	}
	msgs, res := e.turn(s, "write the file")
	if res.IsError || res.Subtype != "success" {
		t.Fatalf("result: %s", res.Raw())
	}
	if got := assistantText(msgs); !strings.Contains(got, "Written.") {
		t.Errorf("assistant text %q", got)
	}
	b, err := os.ReadFile(target)
	if err != nil || string(b) != "hello over websocket\n" {
		t.Errorf("file: %q, %v", b, err)
	}
	mu.Lock()
	if len(asked) != 1 || asked[0] != "Write" {
		t.Errorf("permission asked for %v, want [Write]", asked)
	}
	mu.Unlock()
	checkUnique(t, msgs)

	// update_environment_variables reaches the tools the CLI runs next.
	if err := s.UpdateEnvironment(e.ctx, map[string]string{"CLAUDECTL_WS_PROBE": "xyzzy"}); err != nil {
		t.Fatalf("UpdateEnvironment: %v", err)
	}
	if _, res := e.turn(s, "print the probe"); res.IsError {
		t.Fatalf("result: %s", res.Raw())
	}
	reqs := e.srv.Requests()
	last := reqs[len(reqs)-1]
	uses := last.ToolUses()
	out, isErr, ok := last.ToolResult(uses[len(uses)-1].ID)
	if !ok || isErr || !strings.Contains(out, "probe=xyzzy") {
		t.Errorf("Bash tool result %q (error %v, found %v), want probe=xyzzy", out, isErr, ok)
	}
	conns, dups, _ := claude.WebSocketStats(ct.Conn())
	if conns != 1 || dups != 0 {
		t.Errorf("connections %d, duplicates %d; want 1, 0", conns, dups)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v (stderr %s)", err, s.StderrTail())
	}
}

func TestWebSocketInterrupt(t *testing.T) {
	// 2.1.37 does not keep an interrupted reply in the history, so the
	// reply is chosen by the prompt rather than by the turn count.
	e, _, _ := newWSE2EResponder(t, claudetest.ResponderFunc(func(r *claudetest.Request) claudetest.Turn {
		if strings.Contains(r.LastUserText(), "again") {
			return claudetest.Reply(claudetest.Text("Second answer."))
		}
		return claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("a long answer ", 200))}, DeltaDelay: 50 * time.Millisecond, ChunkSize: 16}
	}))
	e.opts.IncludePartialMessages = true
	s := e.start()
	if err := s.SendText(e.ctx, "talk for a while"); err != nil {
		t.Fatal(err)
	}
	var res *claude.ResultMessage
	interrupted := false
	for m, err := range s.Turn(e.ctx) {
		if err != nil {
			t.Fatalf("turn: %v", err)
		}
		if ev, ok := m.(*claude.StreamEvent); ok && !interrupted && ev.Event.Delta != nil && ev.Event.Delta.Text != "" {
			interrupted = true
			if err := s.Interrupt(e.ctx); err != nil {
				t.Fatalf("Interrupt: %v", err)
			}
		}
		if r, ok := m.(*claude.ResultMessage); ok {
			res = r
		}
	}
	if res == nil || res.Subtype != "error_during_execution" {
		t.Fatalf("result after interrupt: %v", res)
	}
	msgs, res := e.turn(s, "again")
	if res.IsError || !strings.Contains(assistantText(msgs), "Second answer.") {
		t.Errorf("turn after interrupt: %s / %q", res.Raw(), assistantText(msgs))
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestWebSocketReconnect(t *testing.T) {
	cwd := t.TempDir()
	target := filepath.Join(cwd, "out.txt")
	const answer = "The file is written and the link came back."
	e, ct, logs := newWSE2E(t,
		claudetest.Reply(claudetest.Text("Writing."), claudetest.ToolUse("Write", map[string]any{"file_path": target, "content": "x\n"})),
		// The model thinks for a while: the connection is dropped meanwhile.
		claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(answer)}, Delay: 5 * time.Second, ChunkSize: 5},
	)
	e.opts.Cwd = cwd
	e.opts.IncludePartialMessages = true
	e.opts.CanUseTool = func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		// Mid-turn, while the CLI waits for this answer: drop its
		// connection. The answer is written while it is away and must
		// reach it once it is back.
		if err := claude.DropWebSocket(ct.Conn()); err != nil {
			t.Errorf("drop: %v", err)
		}
		return claude.Allow(), nil
	}
	s := e.start()
	if err := s.SendText(e.ctx, "write it"); err != nil {
		t.Fatal(err)
	}
	var msgs []claude.Message
	dropped := false
	for m, err := range s.Turn(e.ctx) {
		if err != nil {
			t.Fatalf("turn: %v (stderr %s)", err, s.StderrTail())
		}
		msgs = append(msgs, m)
		if u, ok := m.(*claude.UserMessage); ok && !dropped && strings.Contains(string(u.Raw()), "tool_result") {
			// The tool ran; the CLI now waits for the model: drop again.
			dropped = true
			if err := claude.DropWebSocket(ct.Conn()); err != nil {
				t.Errorf("second drop: %v", err)
			}
		}
	}
	res, _ := msgs[len(msgs)-1].(*claude.ResultMessage)
	if res == nil || res.IsError {
		t.Fatalf("turn did not end in success: %v", mainKinds(msgs))
	}
	if got := streamedText(msgs); !strings.Contains(got, answer) || !strings.HasPrefix(got, "Writing.") {
		t.Errorf("streamed text %q, want Writing. then %q", got, answer)
	}
	if got := assistantText(msgs); got != "Writing."+answer {
		t.Errorf("assistant text %q", got)
	}
	checkUnique(t, msgs)
	want := []string{"system", "assistant", "assistant", "user", "assistant", "result"}
	if got := mainKinds(msgs); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("messages %v, want %v", got, want)
	}
	if _, err := os.Stat(target); err != nil {
		t.Errorf("the tool did not run: %v", err)
	}
	conns, dups, _ := claude.WebSocketStats(ct.Conn())
	if conns != 3 {
		t.Errorf("the CLI connected %d times, want 3", conns)
	}
	if dups != 0 {
		t.Errorf("%d duplicates dropped, want 0", dups)
	}
	if strings.Contains(logs.String(), "never arrived") {
		t.Errorf("messages were lost:\n%s", logs.String())
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestWebSocketRefusesWrongToken(t *testing.T) {
	e, ct, logs := newWSE2E(t, claudetest.Reply(claudetest.Text("Still fine.")))
	s := e.start()
	url, token, postURL := claude.WebSocketURL(ct.Conn())
	const wrong = "not-the-token-0123456789"
	for _, h := range []http.Header{
		nil,
		{"Authorization": {"Bearer " + wrong}},
		{"Authorization": {"Basic " + wrong}},
	} {
		c, resp, err := websocket.Dial(e.ctx, url, &websocket.DialOptions{HTTPHeader: h})
		if err == nil {
			c.CloseNow()
			t.Fatalf("dial with %v succeeded", h)
		}
		if resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("dial with %v: %v, want 401", h, err)
		}
	}
	req, _ := http.NewRequestWithContext(e.ctx, http.MethodPost, postURL, strings.NewReader(`{"events":[{"type":"result"}]}`))
	req.Header.Set("Authorization", "Bearer "+wrong)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST with a wrong token: %d, want 401", resp.StatusCode)
	}
	// The right CLI still works.
	if _, res := e.turn(s, "hello"); res.IsError {
		t.Errorf("result: %s", res.Raw())
	}
	log := logs.String()
	if n := strings.Count(log, "refused a connection"); n != 4 {
		t.Errorf("%d refusals logged, want 4:\n%s", n, log)
	}
	if strings.Contains(log, token) || strings.Contains(log, wrong) {
		t.Errorf("a token was logged:\n%s", log)
	}
	if !strings.Contains(log, "wrong token") || !strings.Contains(log, "no Authorization header") {
		t.Errorf("refusal reasons missing:\n%s", log)
	}
}

func TestWebSocketHybridIngress(t *testing.T) {
	e, ct, _ := newWSE2E(t, claudetest.Reply(claudetest.Text("Posted back.")))
	ct.Transport.(*claude.WebSocketTransport).HybridIngress = true
	s := e.start()
	msgs, res := e.turn(s, "hello")
	if res.IsError || !strings.Contains(assistantText(msgs), "Posted back.") {
		t.Fatalf("result %s, text %q", res.Raw(), assistantText(msgs))
	}
	checkUnique(t, msgs)
	if _, _, posts := claude.WebSocketStats(ct.Conn()); posts == 0 {
		t.Errorf("no message came by HTTP POST")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestWebSocketRefusesNewCLI(t *testing.T) {
	bin := claudetest.CLIPath(t)
	v, err := claude.VersionOf(context.Background(), bin)
	if err != nil {
		t.Fatal(err)
	}
	if v.SupportsSDKURLHost() {
		t.Skipf("CLI %s still accepts --sdk-url to a local host", v)
	}
	_, err = claude.Start(context.Background(), &claude.Options{CLIPath: bin, Transport: &claude.WebSocketTransport{}})
	var ue *claude.SDKURLUnsupportedError
	if !errors.As(err, &ue) {
		t.Fatalf("Start: %v, want *SDKURLUnsupportedError", err)
	}
	if ue.Version.String() != v.String() || !strings.Contains(err.Error(), v.String()) || !strings.Contains(err.Error(), "claudectl worker") {
		t.Errorf("error %q (version %s)", err, ue.Version)
	}
}

func TestWebSocketCloseInput(t *testing.T) {
	e, _, _ := newWSE2E(t, claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text("Finished anyway.")}, Delay: 500 * time.Millisecond})
	s := e.start()
	if err := s.SendText(e.ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	// No more input: the turn still completes, then the CLI is stopped and
	// the session ends cleanly.
	if err := s.CloseInput(); err != nil {
		t.Fatal(err)
	}
	var last claude.Message
	for m, err := range s.Messages(e.ctx) {
		if err != nil {
			t.Fatalf("messages: %v", err)
		}
		last = m
	}
	if r, ok := last.(*claude.ResultMessage); !ok || r.IsError {
		t.Fatalf("last message %v, want a successful result", last)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// A CLI that fails before it connects is reported like over stdio.
func TestWebSocketCLIFails(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "claude")
	os.WriteFile(bin, []byte("#!/bin/sh\necho \"error: unknown option '--bogus'\" >&2\nexit 3\n"), 0o755)
	s, err := claude.Start(context.Background(), &claude.Options{CLIPath: bin, Transport: &claude.WebSocketTransport{SkipVersionCheck: true}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Next(context.Background())
	var ee *claude.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || !strings.Contains(ee.Stderr, "--bogus") {
		t.Errorf("Next: %v, want exit 3 with the stderr", err)
	}
	if err := s.Close(); !errors.As(err, &ee) {
		t.Errorf("Close: %v", err)
	}
}

// Cancelling the session's context tears the CLI and the server down.
func TestWebSocketContextCancel(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "claude")
	os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := claude.Start(ctx, &claude.Options{CLIPath: bin, Transport: &claude.WebSocketTransport{SkipVersionCheck: true}})
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, err := s.Next(context.Background()); err == nil {
		t.Error("Next after cancel: no error")
	}
	s.Close()
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("teardown took %v", d)
	}
}
