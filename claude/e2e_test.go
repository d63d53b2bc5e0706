package claude_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
)

// End-to-end tests: the real claude CLI (make test installs the pinned
// version) against claudetest's scripted fake of the Messages API.

func TestE2EHello(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("Hello from the fake model.")))
	s := e.start()
	msgs, res := e.turn(s, "Say hello")
	if got := assistantText(msgs); got != "Hello from the fake model." {
		t.Errorf("assistant text = %q", got)
	}
	if res.Subtype != "success" || res.IsError || res.Result != "Hello from the fake model." {
		t.Errorf("result = %s", res.Raw())
	}
	if res.Err() != nil {
		t.Errorf("result.Err() = %v", res.Err())
	}
	if s.SessionID() == "" || res.SessionID != s.SessionID() {
		t.Errorf("session id %q, result's %q", s.SessionID(), res.SessionID)
	}
	var sawInit bool
	for _, m := range msgs {
		if in, ok := m.(*claude.SystemInit); ok {
			sawInit = true
			if in.Model == "" || len(in.Tools) == 0 || in.CWD == "" {
				t.Errorf("system/init lacks fields: %s", in.Raw())
			}
		}
	}
	if !sawInit {
		t.Error("no system/init message")
	}
	init, err := s.Initialize(e.ctx)
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if len(init.Commands) == 0 || init.PID == 0 {
		t.Errorf("initialize response lacks commands or pid: %.300s", init.Raw)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := s.Next(e.ctx); !errors.Is(err, claude.ErrClosed) && err == nil {
		t.Errorf("Next after Close = %v, want an error", err)
	}
}

func TestE2EQuery(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Thinking("Let me think."), claudetest.Text("Forty-two.")))
	var kinds []string
	var res *claude.ResultMessage
	var thought string
	for m, err := range claude.Query(e.ctx, "What is the answer?", e.opts) {
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		kinds = append(kinds, m.Kind())
		if a, ok := m.(*claude.AssistantMessage); ok {
			for _, b := range a.Message.Content {
				if th, ok := b.(*claude.ThinkingBlock); ok {
					thought = th.Thinking
				}
			}
		}
		if r, ok := m.(*claude.ResultMessage); ok {
			res = r
		}
	}
	if res == nil || res.Result != "Forty-two." {
		t.Fatalf("result = %v, message kinds %v", res != nil, kinds)
	}
	if thought != "Let me think." {
		t.Errorf("thinking = %q", thought)
	}
}

func TestE2EMultiTurn(t *testing.T) {
	e := newE2E(t,
		claudetest.Reply(claudetest.Text("first answer")),
		claudetest.Reply(claudetest.Text("second answer")),
		claudetest.Reply(claudetest.Text("third answer")))
	s := e.start()
	for i, want := range []string{"first answer", "second answer", "third answer"} {
		msgs, res := e.turn(s, "question "+string(rune('1'+i)))
		if got := assistantText(msgs); got != want || res.Result != want {
			t.Errorf("turn %d: text %q result %q, want %q", i, got, res.Result, want)
		}
	}
	reqs := e.srv.Requests()
	if got := reqs[len(reqs)-1].LastUserText(); got != "question 3" {
		t.Errorf("last prompt the model saw = %q", got)
	}
}

func writeFileTurns(path string) []claudetest.Turn {
	return []claudetest.Turn{
		claudetest.Reply(claudetest.Text("I'll write it."), claudetest.ToolUseID("toolu_write_1", "Write", map[string]any{"file_path": path, "content": "hello file\n"})),
		claudetest.Reply(claudetest.Text("Done.")),
	}
}

func TestE2EPermissionAllowWrite(t *testing.T) {
	e := newE2E(t)
	path := filepath.Join(e.opts.Cwd, "out.txt")
	e = newE2E(t, writeFileTurns(path)...)
	e.opts.Cwd = filepath.Dir(path)
	var asked []*claude.PermissionRequest
	e.opts.CanUseTool = func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		asked = append(asked, req)
		return claude.Allow(), nil
	}
	s := e.start()
	_, res := e.turn(s, "write the file")
	if res.IsError {
		t.Fatalf("result is an error: %s", res.Raw())
	}
	if len(asked) != 1 || asked[0].ToolName != "Write" || asked[0].ToolUseID != "toolu_write_1" || asked[0].RequestID == "" {
		t.Fatalf("permission requests = %+v", asked)
	}
	if !strings.Contains(string(asked[0].Input), "hello file") {
		t.Errorf("request input = %s", asked[0].Input)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "hello file\n" {
		t.Fatalf("file: %q, %v", b, err)
	}
}

func TestE2EPermissionDenyBash(t *testing.T) {
	e := newE2E(t,
		claudetest.Reply(claudetest.ToolUseID("toolu_bash_1", "Bash", map[string]any{"command": "echo hi > written.txt", "description": "write a file"})),
		claudetest.Reply(claudetest.Text("It was denied.")))
	e.opts.CanUseTool = func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		return claude.Deny("not today: " + req.ToolName), nil
	}
	s := e.start()
	_, res := e.turn(s, "write with bash")
	if res.Result != "It was denied." {
		t.Errorf("result = %q", res.Result)
	}
	if _, err := os.Stat(filepath.Join(e.opts.Cwd, "written.txt")); err == nil {
		t.Error("denied command ran anyway")
	}
	reqs := e.srv.Requests()
	content, isErr, ok := reqs[len(reqs)-1].ToolResult("toolu_bash_1")
	if !ok || !isErr || !strings.Contains(content, "not today: Bash") {
		t.Errorf("tool_result = %q is_error=%v found=%v", content, isErr, ok)
	}
	if len(res.PermissionDenials) != 1 || res.PermissionDenials[0].ToolName != "Bash" {
		t.Errorf("permission_denials = %+v", res.PermissionDenials)
	}
}

func TestE2EAskUserQuestion(t *testing.T) {
	e := newE2E(t,
		claudetest.Reply(claudetest.ToolUseID("toolu_ask_1", "AskUserQuestion", map[string]any{
			"questions": []map[string]any{{
				"question": "Which database?", "header": "DB", "multiSelect": false,
				"options": []map[string]any{{"label": "PostgreSQL", "description": "a server"}, {"label": "SQLite", "description": "a file"}},
			}},
		})),
		claudetest.Reply(claudetest.Text("SQLite it is.")))
	var got []claude.Question
	e.opts.CanUseTool = claude.AnswerQuestions(func(ctx context.Context, qs []claude.Question) (map[string]string, error) {
		got = qs
		return map[string]string{"Which database?": "SQLite"}, nil
	}, nil)
	s := e.start()
	_, res := e.turn(s, "pick a database")
	if len(got) != 1 || got[0].Question != "Which database?" || len(got[0].Options) != 2 || got[0].Options[1].Label != "SQLite" {
		t.Fatalf("questions = %+v", got)
	}
	reqs := e.srv.Requests()
	content, isErr, ok := reqs[len(reqs)-1].ToolResult("toolu_ask_1")
	if !ok || isErr || !strings.Contains(content, "SQLite") {
		t.Errorf("tool_result = %q is_error=%v found=%v", content, isErr, ok)
	}
	if res.Result != "SQLite it is." {
		t.Errorf("result = %q", res.Result)
	}
}

var slowText = strings.Repeat("slow words ", 400)

func slowTurn() claudetest.Turn {
	t := claudetest.Reply(claudetest.Text(slowText))
	t.ChunkSize = 11
	t.DeltaDelay = 25 * time.Millisecond // ~10 s in all
	return t
}

func TestE2EInterruptThenNextPrompt(t *testing.T) {
	e := newE2E(t, slowTurn(), claudetest.Reply(claudetest.Text("after the interrupt")))
	e.opts.IncludePartialMessages = true
	s := e.start()
	if err := s.SendText(e.ctx, "talk slowly"); err != nil {
		t.Fatal(err)
	}
	var res *claude.ResultMessage
	interrupted := false
	streamed := 0
	for m, err := range s.Turn(e.ctx) {
		if err != nil {
			t.Fatalf("turn: %v", err)
		}
		if ev, ok := m.(*claude.StreamEvent); ok && ev.Event.Delta != nil && ev.Event.Delta.Type == "text_delta" {
			streamed += len(ev.Event.Delta.Text)
		}
		if ev, ok := m.(*claude.StreamEvent); ok && !interrupted && ev.Event.Delta != nil && ev.Event.Delta.Type == "text_delta" {
			interrupted = true
			if err := s.Interrupt(e.ctx); err != nil {
				t.Fatalf("Interrupt: %v", err)
			}
		}
		if r, ok := m.(*claude.ResultMessage); ok {
			res = r
		}
	}
	if !interrupted || res == nil {
		t.Fatalf("interrupted=%v result=%v", interrupted, res != nil)
	}
	if res.Subtype != "error_during_execution" {
		t.Errorf("result subtype = %q, want error_during_execution", res.Subtype)
	}
	if streamed >= len(slowText) {
		t.Errorf("the whole reply was streamed (%d bytes): the interrupt did not stop it", streamed)
	}
	msgs, res2 := e.turn(s, "now answer quickly")
	if got := assistantText(msgs); got != "after the interrupt" || res2.IsError {
		t.Errorf("second turn text %q result %s", got, res2.Raw())
	}
}

func TestE2ESetModel(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("one")), claudetest.Reply(claudetest.Text("two")))
	s := e.start()
	e.turn(s, "first")
	if first := e.srv.Requests()[0].Model; first == "claude-sonnet-4-5" {
		t.Fatalf("the default model is already %s; pick another for this test", first)
	}
	if err := s.SetModel(e.ctx, "claude-sonnet-4-5"); err != nil {
		t.Fatalf("SetModel: %v", err)
	}
	_, res := e.turn(s, "second")
	if res.Result != "two" {
		t.Errorf("result %q", res.Result)
	}
	reqs := e.srv.Requests()
	last := reqs[len(reqs)-1]
	if last.Model != "claude-sonnet-4-5" {
		t.Errorf("model of the last request = %q, want claude-sonnet-4-5", last.Model)
	}
	// A control request the CLI does not know comes back typed.
	_, err := s.Control(e.ctx, "bogus_subtype", nil)
	var ce *claude.ControlError
	if !errors.As(err, &ce) || !errors.Is(err, claude.ErrUnsupportedRequest) || ce.Subtype != "bogus_subtype" {
		t.Errorf("bogus control request: %v", err)
	}
	if mode, err := s.SetPermissionMode(e.ctx, claude.PermissionAcceptEdits); err != nil || mode != claude.PermissionAcceptEdits {
		t.Errorf("SetPermissionMode = %q, %v; want acceptEdits in effect", mode, err)
	}
	if st, err := s.MCPStatus(e.ctx); err != nil || st == nil && false {
		t.Errorf("MCPStatus: %v", err)
	}
}

func TestE2EResumeAndFork(t *testing.T) {
	e := newE2E(t,
		claudetest.Reply(claudetest.Text("remembered: blue")),
		claudetest.Reply(claudetest.Text("resumed answer")),
		claudetest.Reply(claudetest.Text("forked answer")))
	s := e.start()
	e.turn(s, "my colour is blue")
	id := s.SessionID()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	e.opts.Resume = id
	s2 := e.start()
	_, res := e.turn(s2, "what was my colour?")
	if s2.SessionID() != id {
		t.Errorf("resumed session id = %q, want %q", s2.SessionID(), id)
	}
	if res.Result != "resumed answer" {
		t.Errorf("resumed result = %q (the history did not reach the model?)", res.Result)
	}
	s2.Close()
	reqs := e.srv.Requests()
	if n := reqs[len(reqs)-1].AssistantCount(); n != 1 {
		t.Errorf("resumed request carried %d assistant messages, want 1", n)
	}

	e.opts.ForkSession = true
	s3 := e.start()
	_, res = e.turn(s3, "and in the fork?")
	if s3.SessionID() == "" || s3.SessionID() == id {
		t.Errorf("forked session id = %q, want a new one (original %q)", s3.SessionID(), id)
	}
	if res.Result != "forked answer" {
		t.Errorf("forked result = %q", res.Result)
	}
}

func TestE2EHugeReply(t *testing.T) {
	huge := strings.Repeat("0123456789abcdef", (12<<20)/16) // 12 MiB
	for _, tc := range []struct {
		name      string
		max       int
		truncated bool
	}{
		{"default limit", 0, true},
		{"raised limit", 16 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newE2E(t, claudetest.Reply(claudetest.Text(huge)))
			e.opts.MaxPayloadBytes = tc.max
			s := e.start()
			msgs, res := e.turn(s, "say a lot")
			var a *claude.AssistantMessage
			for _, m := range msgs {
				if am, ok := m.(*claude.AssistantMessage); ok {
					a = am
				}
			}
			if a == nil {
				t.Fatal("no assistant message")
			}
			orig, trunc := a.Truncated()
			text := a.Text()
			if trunc != tc.truncated {
				t.Fatalf("truncated = %v (original %d bytes, text %d bytes)", trunc, orig, len(text))
			}
			if tc.truncated {
				if orig <= 12<<20 || len(a.Raw()) > claude.DefaultMaxPayloadBytes+200 {
					t.Errorf("original size %d, raw %d bytes", orig, len(a.Raw()))
				}
				if !strings.Contains(text, "[truncated: original_size=") || !strings.HasPrefix(text, "0123456789abcdef") {
					t.Errorf("truncated text lacks the marker or the start: %.60s ... %s", text, text[max(0, len(text)-60):])
				}
				if a.Message.ID == "" || a.UUID == "" || a.SessionID == "" {
					t.Errorf("ids lost in truncation: id %q uuid %q session %q", a.Message.ID, a.UUID, a.SessionID)
				}
			} else if text != huge {
				t.Errorf("text is %d bytes, want %d", len(text), len(huge))
			}
			if res.Subtype != "success" {
				t.Errorf("result subtype %q", res.Subtype)
			}
		})
	}
}

func TestE2EKilledMidTurn(t *testing.T) {
	e := newE2E(t, slowTurn())
	e.opts.IncludePartialMessages = true
	s := e.start()
	init, err := s.Initialize(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid := init.PID
	if err := s.SendText(e.ctx, "talk slowly"); err != nil {
		t.Fatal(err)
	}
	var endErr error
	killed := false
	for m, err := range s.Messages(e.ctx) {
		if err != nil {
			endErr = err
			break
		}
		if _, ok := m.(*claude.StreamEvent); ok && !killed {
			killed = true
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill: %v", err)
			}
		}
	}
	var ee *claude.ExitError
	if !errors.As(endErr, &ee) {
		t.Fatalf("end error = %v (%T), want *claude.ExitError", endErr, endErr)
	}
	if ee.Signal != "killed" || ee.During != "mid-turn" || ee.SessionID == "" || !errors.Is(endErr, claude.ErrClosed) {
		t.Errorf("exit error = %+v", ee)
	}
	if !strings.Contains(ee.Error(), "signal killed") || !strings.Contains(ee.Error(), "mid-turn") {
		t.Errorf("message = %q", ee.Error())
	}
	if err := s.SendText(e.ctx, "are you there?"); err == nil {
		t.Error("SendText after the CLI died succeeded")
	}
	s.Close()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("CLI process %d still exists (kill 0: %v)", pid, err)
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("CLI process group %d still has members (kill 0: %v)", pid, err)
	}
}

func TestE2EMissingBinary(t *testing.T) {
	_, err := claude.Start(context.Background(), &claude.Options{CLIPath: filepath.Join(t.TempDir(), "no-such-claude")})
	if !errors.Is(err, claude.ErrNotFound) || !strings.Contains(err.Error(), "no-such-claude") {
		t.Fatalf("err = %v", err)
	}
	// Without an explicit path, the error lists every place searched.
	t.Setenv("CLAUDE_BIN", "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	_, err = claude.Start(context.Background(), nil)
	var nf *claude.NotFoundError
	if !errors.As(err, &nf) || len(nf.Tried) < 3 {
		t.Fatalf("err = %v", err)
	}
}

func TestE2EArgumentsReachCLIIntact(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("ok")))
	tricky := `-starts with a dash, has "double" and 'single' quotes, $HOME, a; semicolon and --flag=like text`
	// The system prompt goes in initialize; the CLI's own flag carries the
	// tricky text on the command line.
	e.opts.SystemPrompt = claude.ClaudeCodePrompt("")
	e.opts.ExtraArgs = []string{"--append-system-prompt=" + tricky}
	e.opts.Model = "claude-sonnet-4-5"
	s := e.start()
	e.turn(s, "hi")
	var found bool
	for _, r := range e.srv.Requests() {
		if strings.Contains(r.System, tricky) {
			found = true
		}
	}
	if !found {
		t.Errorf("the appended system prompt did not reach the model intact")
	}
}

func TestE2EBadFlagReportsStderr(t *testing.T) {
	e := newE2E(t)
	e.opts.ExtraArgs = []string{"--bogus-flag"}
	s := e.start()
	_, err := s.Next(e.ctx)
	var ee *claude.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(ee.Stderr, "unknown option") {
		t.Fatalf("err = %v", err)
	}
	if _, err := s.Initialize(e.ctx); err == nil {
		t.Error("Initialize succeeded on a CLI that exited")
	}
}
