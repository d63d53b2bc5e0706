package claudetest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// These tests run the real claude CLI (see CLIPath) against the fake.

func cliContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func checkNoUnhandled(t *testing.T, s *Server) {
	t.Helper()
	if u := s.Unhandled(); len(u) != 0 {
		t.Errorf("the fake could not answer some requests: %q", u)
	}
}

func TestCLITextReply(t *testing.T) {
	t.Parallel()
	s := NewServer(Script(Reply(Text("hello"))))
	defer s.Close()
	ctx := cliContext(t, 30*time.Second)
	p := startCLI(ctx, t, s, "")
	p.sendUser("hi")

	var sawAssistant bool
	res := p.waitFor(ctx, "result", func(l line) bool {
		if l.str("type") == "assistant" && strings.Join(assistantTexts(l.m), "") == "hello" {
			sawAssistant = true
		}
		return isResult(l)
	})
	if !sawAssistant {
		t.Error("no assistant line with the text hello")
	}
	if res.str("subtype") != "success" || res.str("result") != "hello" || res.m["is_error"] != false {
		t.Errorf("result line: %s", truncate(res.raw, 500))
	}
	if code := p.closeAndWait(ctx); code != 0 {
		t.Errorf("exit code %d", code)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if !r.Stream || r.LastUserText() != "hi" || r.AssistantCount() != 0 || len(r.Tools) == 0 || r.System == "" || r.Model == "" {
		t.Errorf("request: stream=%v last=%q tools=%v model=%q", r.Stream, r.LastUserText(), r.Tools, r.Model)
	}
	checkNoUnhandled(t, s)
}

func TestCLIThinkingAndPartialMessages(t *testing.T) {
	t.Parallel()
	text := "The answer is 42, as everyone knows. " + strings.Repeat("More words. ", 10)
	turn := Reply(Thinking("Let me think about this."), Text(text))
	turn.ChunkSize = 16
	s := NewServer(Script(turn))
	defer s.Close()
	ctx := cliContext(t, 30*time.Second)
	p := startCLI(ctx, t, s, "", "--include-partial-messages")
	p.sendUser("what is the answer?")

	var deltas, thinkingDeltas, signatures int
	var streamed strings.Builder
	var blocks []string
	res := p.waitFor(ctx, "result", func(l line) bool {
		switch l.str("type") {
		case "stream_event":
			ev, _ := l.m["event"].(map[string]any)
			if ev["type"] == "content_block_delta" {
				d, _ := ev["delta"].(map[string]any)
				switch d["type"] {
				case "text_delta":
					deltas++
					s, _ := d["text"].(string)
					streamed.WriteString(s)
				case "thinking_delta":
					thinkingDeltas++
				case "signature_delta":
					signatures++
				}
			}
		case "assistant":
			blocks = append(blocks, blockTypes(l.m)...)
		}
		return isResult(l)
	})
	if deltas < 2 || streamed.String() != text {
		t.Errorf("%d text_delta stream events adding up to %q, want %q", deltas, streamed.String(), text)
	}
	if thinkingDeltas < 1 || signatures != 1 {
		t.Errorf("%d thinking_delta and %d signature_delta stream events", thinkingDeltas, signatures)
	}
	if strings.Join(blocks, ",") != "thinking,text" {
		t.Errorf("assistant blocks %v, want thinking then text", blocks)
	}
	if res.str("subtype") != "success" || res.str("result") != text {
		t.Errorf("result line: %s", truncate(res.raw, 500))
	}
	p.closeAndWait(ctx)
	checkNoUnhandled(t, s)
}

func TestCLIToolUseBash(t *testing.T) {
	t.Parallel()
	s := NewServer(Script(
		Reply(Text("I will run it."), ToolUse("Bash", map[string]any{"command": "echo hi", "description": "say hi"})),
		Reply(Text("It printed hi.")),
	))
	defer s.Close()
	ctx := cliContext(t, 40*time.Second)
	// bypassPermissions is refused when running as root; allow the tool instead.
	p := startCLI(ctx, t, s, "", "--allowedTools", "Bash")
	p.sendUser("run echo hi")
	var toolResult string
	res := p.waitFor(ctx, "result", func(l line) bool {
		if l.str("type") == "user" {
			msg, _ := l.m["message"].(map[string]any)
			content, _ := msg["content"].([]any)
			for _, c := range content {
				if cb, _ := c.(map[string]any); cb["type"] == "tool_result" {
					toolResult, _ = cb["content"].(string)
				}
			}
		}
		return isResult(l)
	})
	if toolResult != "hi" {
		t.Errorf("tool_result on stdout = %q, want hi", toolResult)
	}
	if res.str("result") != "It printed hi." || res.str("subtype") != "success" {
		t.Errorf("result line: %s", truncate(res.raw, 500))
	}
	p.closeAndWait(ctx)

	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	uses := reqs[1].ToolUses()
	if len(uses) != 1 || uses[0].Name != "Bash" || !strings.HasPrefix(uses[0].ID, "toolu_") {
		t.Fatalf("tool uses in the second request: %+v", uses)
	}
	content, isErr, ok := reqs[1].ToolResult(uses[0].ID)
	if !ok || isErr || content != "hi" {
		t.Errorf("second request's tool_result = %q, is_error %v, found %v; want hi", content, isErr, ok)
	}
	if reqs[1].AssistantCount() != 1 {
		t.Errorf("second request has %d assistant messages", reqs[1].AssistantCount())
	}
	checkNoUnhandled(t, s)
}

func TestCLIMultiTurn(t *testing.T) {
	t.Parallel()
	s := NewServer(Script(Reply(Text("first answer")), Reply(Text("second answer"))))
	defer s.Close()
	ctx := cliContext(t, 40*time.Second)
	p := startCLI(ctx, t, s, "")
	var sessionIDs []string
	for _, tc := range []struct{ prompt, want string }{{"one", "first answer"}, {"two", "second answer"}} {
		p.sendUser(tc.prompt)
		res := p.waitFor(ctx, "result", isResult)
		if res.str("result") != tc.want || res.str("subtype") != "success" {
			t.Errorf("after %q: result line %s", tc.prompt, truncate(res.raw, 300))
		}
		sessionIDs = append(sessionIDs, res.str("session_id"))
	}
	if sessionIDs[0] == "" || sessionIDs[0] != sessionIDs[1] {
		t.Errorf("session ids %q", sessionIDs)
	}
	if code := p.closeAndWait(ctx); code != 0 {
		t.Errorf("exit code %d", code)
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if r := reqs[1]; r.AssistantCount() != 1 || r.LastUserText() != "two" {
		t.Errorf("second request: %d assistant messages, last user text %q", r.AssistantCount(), r.LastUserText())
	}
	checkNoUnhandled(t, s)
}

func TestCLIHugeReply(t *testing.T) {
	t.Parallel()
	const size = 12 << 20
	text := strings.Repeat("0123456789abcdef", size/16)
	s := NewServer(Script(Reply(Text(text))))
	defer s.Close()
	ctx := cliContext(t, 90*time.Second)
	p := startCLI(ctx, t, s, "")
	p.sendUser("say a lot")
	var longest int
	var got string
	res := p.waitFor(ctx, "result", func(l line) bool {
		longest = max(longest, len(l.raw))
		if l.str("type") == "assistant" {
			got = strings.Join(assistantTexts(l.m), "")
		}
		return isResult(l)
	})
	if longest <= size {
		t.Errorf("longest stdout line %d bytes, want > %d", longest, size)
	}
	if got != text {
		t.Errorf("assistant text has %d bytes, want the %d sent", len(got), len(text))
	}
	if res.str("result") != text {
		t.Errorf("result text has %d bytes, want %d", len(res.str("result")), len(text))
	}
	p.closeAndWait(ctx)
	checkNoUnhandled(t, s)
}

func TestCLIHTTPError(t *testing.T) {
	t.Parallel()
	s := NewServer(Script(Error(400, "invalid_request_error", "claudetest says no")))
	defer s.Close()
	ctx := cliContext(t, 30*time.Second)
	p := startCLI(ctx, t, s, "")
	p.sendUser("hi")
	var errorText string
	res := p.waitFor(ctx, "result", func(l line) bool {
		if l.str("type") == "assistant" {
			errorText = strings.Join(assistantTexts(l.m), "")
		}
		return isResult(l)
	})
	if res.m["is_error"] != true {
		t.Errorf("result is not an error: %s", truncate(res.raw, 500))
	}
	if !strings.Contains(res.str("result"), "claudetest says no") && !strings.Contains(errorText, "claudetest says no") {
		t.Errorf("error message missing; assistant %q, result %s", errorText, truncate(res.raw, 500))
	}
	if code := p.closeAndWait(ctx); code != 1 {
		t.Errorf("exit code %d after an error result, want 1", code)
	}
	// On a 400 the CLI retries a few times with fewer beta features (6
	// requests with 2.1.329), all for the same turn.
	reqs := s.Requests()
	if len(reqs) == 0 {
		t.Fatal("no request")
	}
	for _, r := range reqs {
		if r.AssistantCount() != 0 || r.LastUserText() != "hi" {
			t.Errorf("request for another turn: %d assistant messages, last user text %q", r.AssistantCount(), r.LastUserText())
		}
	}
	if res.str("api_error_type") != "" && res.str("api_error_type") != "invalid_request_error" {
		t.Errorf("api_error_type = %q", res.str("api_error_type"))
	}
}

func TestCLIPermissionPrompt(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	target := filepath.Join(work, "out.txt")
	s := NewServer(Script(
		Reply(ToolUse("Write", map[string]any{"file_path": target, "content": "written by the fake\n"})),
		Reply(Text("done")),
	))
	defer s.Close()
	ctx := cliContext(t, 40*time.Second)
	p := startCLI(ctx, t, s, work)
	p.sendUser("write the file")
	req := p.waitFor(ctx, "can_use_tool", func(l line) bool {
		r, _ := l.m["request"].(map[string]any)
		return l.str("type") == "control_request" && r["subtype"] == "can_use_tool"
	})
	r := req.m["request"].(map[string]any)
	if r["tool_name"] != "Write" || req.str("request_id") == "" {
		t.Errorf("can_use_tool: %s", truncate(req.raw, 500))
	}
	p.send(map[string]any{
		"type": "control_response",
		"response": map[string]any{
			"subtype":    "success",
			"request_id": req.str("request_id"),
			"response":   map[string]any{"behavior": "allow", "updatedInput": r["input"]},
		},
	})
	res := p.waitFor(ctx, "result", isResult)
	if res.str("result") != "done" {
		t.Errorf("result line: %s", truncate(res.raw, 500))
	}
	p.closeAndWait(ctx)
	if b, err := os.ReadFile(target); err != nil || string(b) != "written by the fake\n" {
		t.Errorf("file: %q %v", b, err)
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	id := reqs[1].ToolUses()[0].ID
	if _, isErr, ok := reqs[1].ToolResult(id); !ok || isErr {
		t.Errorf("tool_result found %v, is_error %v", ok, isErr)
	}
	checkNoUnhandled(t, s)
}

func TestCLIInterrupt(t *testing.T) {
	t.Parallel()
	slow := Turn{Blocks: []Block{Text(strings.Repeat("slow ", 400))}, ChunkSize: 5, DeltaDelay: 20 * time.Millisecond}
	s := NewServer(Script(slow, Reply(Text("after the interrupt"))))
	defer s.Close()
	ctx := cliContext(t, 40*time.Second)
	p := startCLI(ctx, t, s, "", "--include-partial-messages")
	p.sendUser("go slowly")
	p.waitFor(ctx, "a text delta", func(l line) bool {
		ev, _ := l.m["event"].(map[string]any)
		return l.str("type") == "stream_event" && ev["type"] == "content_block_delta"
	})
	p.send(`{"type":"control_request","request_id":"int-1","request":{"subtype":"interrupt"}}`)
	res := p.waitFor(ctx, "result", isResult)
	if res.str("subtype") != "error_during_execution" {
		t.Errorf("result after interrupt: %s", truncate(res.raw, 500))
	}
	waitFor(t, 30*time.Second, "the fake to notice the aborted request", func() bool { return s.InFlight() == 0 })

	p.sendUser("next")
	res = p.waitFor(ctx, "result", isResult)
	if res.str("subtype") != "success" {
		t.Errorf("result after the next message: %s", truncate(res.raw, 500))
	}
	p.closeAndWait(ctx)
	checkNoUnhandled(t, s)
}

// Killing the CLI in the middle of a slow stream must leave no goroutine of
// the fake behind once it is closed. Not parallel: it checks every goroutine.
func TestCLIKilledMidStreamNoLeak(t *testing.T) {
	s := NewServer(Script(Turn{Blocks: []Block{Text(strings.Repeat("slow ", 1000))}, ChunkSize: 5, DeltaDelay: 20 * time.Millisecond}))
	ctx := cliContext(t, 30*time.Second)
	p := startCLI(ctx, t, s, "", "--include-partial-messages")
	p.sendUser("go slowly")
	p.waitFor(ctx, "a text delta", func(l line) bool {
		ev, _ := l.m["event"].(map[string]any)
		return l.str("type") == "stream_event" && ev["type"] == "content_block_delta"
	})
	if s.InFlight() != 1 {
		t.Errorf("InFlight = %d while streaming", s.InFlight())
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := p.closeAndWait(ctx); code != -1 {
		t.Errorf("exit code %d, want killed", code)
	}
	waitFor(t, 30*time.Second, "the fake to notice the CLI is gone", func() bool { return s.InFlight() == 0 })
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close hangs")
	}
	goleak.VerifyNone(t)
}

// The non-streaming probe the CLI sends after set_model is answered too.
func TestCLISetModelProbe(t *testing.T) {
	t.Parallel()
	s := NewServer(Script(Reply(Text("one")), Reply(Text("two"))))
	defer s.Close()
	ctx := cliContext(t, 40*time.Second)
	p := startCLI(ctx, t, s, "")
	p.send(`{"type":"control_request","request_id":"init-1","request":{"subtype":"initialize"}}`)
	init := p.waitFor(ctx, "initialize response", isType("control_response"))
	if resp, _ := init.m["response"].(map[string]any); resp["subtype"] != "success" || resp["request_id"] != "init-1" {
		t.Errorf("initialize: %s", truncate(init.raw, 300))
	}
	p.sendUser("hi")
	p.waitFor(ctx, "result", isResult)
	p.send(`{"type":"control_request","request_id":"m-1","request":{"subtype":"set_model","model":"claude-sonnet-4-5"}}`)
	p.waitFor(ctx, "set_model response", isType("control_response"))
	p.sendUser("hi again")
	res := p.waitFor(ctx, "result", isResult)
	if res.str("result") != "two" {
		t.Errorf("result: %s", truncate(res.raw, 300))
	}
	p.closeAndWait(ctx)
	var models []string
	probe := false
	for _, r := range s.Requests() {
		models = append(models, r.Model)
		if !r.Stream && r.MaxTokens == 1 {
			probe = true
		}
	}
	if models[len(models)-1] != "claude-sonnet-4-5" {
		t.Errorf("models requested: %v", models)
	}
	t.Logf("requests: models %v, probe seen: %v", models, probe)
	checkNoUnhandled(t, s)
}

// Script picks turns from the request alone, so a resumed or forked session
// continues where the script left off.
func TestCLIResumeAndFork(t *testing.T) {
	t.Parallel()
	s := NewServer(Script(Reply(Text("first answer")), Reply(Text("second answer"))))
	defer s.Close()
	ctx := cliContext(t, 60*time.Second)
	home, work := t.TempDir(), t.TempDir()

	p := startCLIHome(ctx, t, s, home, work)
	p.sendUser("one")
	res := p.waitFor(ctx, "result", isResult)
	session := res.str("session_id")
	if res.str("result") != "first answer" || session == "" {
		t.Fatalf("first session: %s", truncate(res.raw, 300))
	}
	p.closeAndWait(ctx)

	for _, tc := range []struct {
		name string
		args []string
	}{
		// Fork first: it leaves the original session as it was.
		{"fork", []string{"--resume", session, "--fork-session"}},
		{"resume", []string{"--resume", session}},
	} {
		p := startCLIHome(ctx, t, s, home, work, tc.args...)
		p.sendUser("two")
		res := p.waitFor(ctx, "result", isResult)
		if res.str("result") != "second answer" {
			t.Errorf("%s: result %s", tc.name, truncate(res.raw, 300))
		}
		if same := res.str("session_id") == session; same != (tc.name == "resume") {
			t.Errorf("%s: session id %q, first session %q", tc.name, res.str("session_id"), session)
		}
		p.closeAndWait(ctx)
	}
	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for _, r := range reqs[1:] {
		if r.AssistantCount() != 1 || r.LastUserText() != "two" {
			t.Errorf("resumed request: %d assistant messages, last user text %q", r.AssistantCount(), r.LastUserText())
		}
	}
	checkNoUnhandled(t, s)
}
