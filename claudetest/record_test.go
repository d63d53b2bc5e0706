package claudetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecordTranscripts records what the real CLI prints in a few scenarios,
// for contract tests of code that parses it. It runs only when
// CLAUDETEST_RECORD names the output directory, which must be named after
// the CLI's version; `make fixtures CLI=<version>` runs it as
//
//	CLAUDETEST_RECORD=$PWD/claude/testdata/real/<version> CLAUDECTL_TEST_CLI=<that CLI> go test -run TestRecordTranscripts ./claudetest/
//
// Each scenario NAME gets NAME.ndjson, the CLI's stdout byte for byte, and
// README.md describes the scenarios: flags, script, and the lines written to
// stdin.
func TestRecordTranscripts(t *testing.T) {
	dir := os.Getenv("CLAUDETEST_RECORD")
	if dir == "" {
		t.Skip("set CLAUDETEST_RECORD to a directory to record transcripts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	version, err := exec.Command(CLIPath(t), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	// The contract tests take the folder's name for the version recorded.
	if v, _, _ := strings.Cut(strings.TrimSpace(string(version)), " "); v != filepath.Base(dir) {
		t.Fatalf("CLAUDETEST_RECORD=%s: the folder must be named after the CLI's version, %s", dir, v)
	}
	var readme bytes.Buffer
	fmt.Fprintf(&readme, "# Recorded transcripts of the real claude CLI\n\n"+
		"Recorded with `%s` by `make fixtures CLI=<version>` (claudetest's TestRecordTranscripts),\n"+
		"the CLI running offline against the `claudetest` fake with `Server.Env` (fresh HOME) and the flags\n"+
		"`%s` plus the extra flags listed per scenario.\n\n"+
		"Each `NAME.ndjson` is the CLI's stdout, byte for byte. Session ids, uuids, timestamps, temp paths and\n"+
		"durations differ from run to run. Below, for each scenario: what the fake was scripted to answer and the\n"+
		"lines written to the CLI's stdin, in order (after the last one stdin was closed).\n",
		strings.TrimSpace(string(version)), strings.Join(baseArgs, " "))

	initialize := `{"type":"control_request","request_id":"init-1","request":{"subtype":"initialize"}}`
	isControlRequest := func(subtype string) func(line) bool {
		return func(l line) bool {
			r, _ := l.m["request"].(map[string]any)
			return l.str("type") == "control_request" && r["subtype"] == subtype
		}
	}
	isResponseTo := func(id string) func(line) bool {
		return func(l line) bool {
			r, _ := l.m["response"].(map[string]any)
			return l.str("type") == "control_response" && r["request_id"] == id
		}
	}
	firstDelta := func(l line) bool {
		ev, _ := l.m["event"].(map[string]any)
		return l.str("type") == "stream_event" && ev["type"] == "content_block_delta"
	}
	permissionReply := func(req line, allow bool) map[string]any {
		r := req.m["request"].(map[string]any)
		resp := map[string]any{"behavior": "deny", "message": "the user said no"}
		if allow {
			resp = map[string]any{"behavior": "allow", "updatedInput": r["input"]}
		}
		return map[string]any{
			"type": "control_response",
			"response": map[string]any{
				"subtype":    "success",
				"request_id": req.str("request_id"),
				"response":   resp,
			},
		}
	}

	type scenario struct {
		name, about string
		script      []Turn
		args        []string
		run         func(ctx context.Context, p *cliProc, work string)
	}
	scenarios := []scenario{
		{
			name:  "initialize",
			about: "Only the initialize control_request; the CLI answers it (commands, agents, models, account, ...) and exits when stdin closes.",
			run: func(ctx context.Context, p *cliProc, _ string) {
				p.send(initialize)
				p.waitFor(ctx, "initialize response", isResponseTo("init-1"))
			},
		},
		{
			name:   "text",
			about:  "initialize, then one user message answered with the text \"hello\".",
			script: []Turn{Reply(Text("hello"))},
			run: func(ctx context.Context, p *cliProc, _ string) {
				p.send(initialize)
				p.waitFor(ctx, "initialize response", isResponseTo("init-1"))
				p.sendUser("hi")
				p.waitFor(ctx, "result", isResult)
			},
		},
		{
			name:   "text-partial",
			about:  "A text reply streamed in 8-byte text_delta events, with --include-partial-messages (stream_event lines).",
			args:   []string{"--include-partial-messages"},
			script: []Turn{{Blocks: []Block{Text("Hello there, this reply is streamed.")}, ChunkSize: 8}},
			run: func(ctx context.Context, p *cliProc, _ string) {
				p.sendUser("hi")
				p.waitFor(ctx, "result", isResult)
			},
		},
		{
			name:   "thinking",
			about:  "A thinking block then a text block, with --include-partial-messages: thinking_delta, signature_delta and text_delta stream events, one assistant line per block, system/thinking_tokens lines.",
			args:   []string{"--include-partial-messages"},
			script: []Turn{{Blocks: []Block{Thinking("The user wants the answer. It is 42."), Text("The answer is 42.")}, ChunkSize: 16}},
			run: func(ctx context.Context, p *cliProc, _ string) {
				p.sendUser("what is the answer?")
				p.waitFor(ctx, "result", isResult)
			},
		},
		{
			name:  "tool-bash",
			about: "A text block and a Bash tool_use (echo hi) in one reply, allowed by --allowedTools Bash (no permission prompt; bypassPermissions is refused as root); the tool_result \"hi\" comes back as a user line, then the final text.",
			args:  []string{"--allowedTools", "Bash"},
			script: []Turn{
				Reply(Text("I will run it."), ToolUse("Bash", map[string]any{"command": "echo hi", "description": "Print hi"})),
				Reply(Text("It printed hi.")),
			},
			run: func(ctx context.Context, p *cliProc, _ string) {
				p.sendUser("run echo hi")
				p.waitFor(ctx, "result", isResult)
			},
		},
		{
			name:  "permission-allow",
			about: "Default permission mode; the model calls Write, the CLI sends a can_use_tool control_request and the client allows it (control_response behavior allow with updatedInput); the file is written.",
			script: []Turn{
				Reply(ToolUse("Write", map[string]any{"file_path": "WORK/hello.txt", "content": "hello from the fake\n"})),
				Reply(Text("The file is written.")),
			},
			run: func(ctx context.Context, p *cliProc, _ string) {
				p.send(initialize)
				p.waitFor(ctx, "initialize response", isResponseTo("init-1"))
				p.sendUser("write hello.txt")
				req := p.waitFor(ctx, "can_use_tool", isControlRequest("can_use_tool"))
				p.send(permissionReply(req, true))
				p.waitFor(ctx, "result", isResult)
			},
		},
		{
			name:  "permission-deny",
			about: "Like permission-allow, but the client denies (behavior deny, message \"the user said no\"): the tool_result is an error.",
			script: []Turn{
				Reply(ToolUse("Write", map[string]any{"file_path": "WORK/hello.txt", "content": "hello from the fake\n"})),
				Reply(Text("I was not allowed to write it.")),
			},
			run: func(ctx context.Context, p *cliProc, _ string) {
				p.sendUser("write hello.txt")
				req := p.waitFor(ctx, "can_use_tool", isControlRequest("can_use_tool"))
				p.send(permissionReply(req, false))
				p.waitFor(ctx, "result", isResult)
			},
		},
		{
			name:   "multi-turn",
			about:  "Two user messages in one session, each answered by the next scripted turn: system/init and result for each.",
			script: []Turn{Reply(Text("first answer")), Reply(Text("second answer"))},
			run: func(ctx context.Context, p *cliProc, _ string) {
				p.sendUser("one")
				p.waitFor(ctx, "result", isResult)
				p.sendUser("two")
				p.waitFor(ctx, "result", isResult)
			},
		},
		{
			name:   "http-error-400",
			about:  "Every request is answered with HTTP 400 invalid_request_error \"claudetest says no\". The CLI retries with fewer betas (6 requests), then prints a synthetic assistant line \"API Error: 400 ...\" and a result with is_error true (subtype success!, api_error_status 400); exit code 1.",
			script: []Turn{Error(400, "invalid_request_error", "claudetest says no")},
			run: func(ctx context.Context, p *cliProc, _ string) {
				p.sendUser("hi")
				p.waitFor(ctx, "result", isResult)
			},
		},
		{
			name:   "overloaded-529",
			about:  "Every request is answered with HTTP 529 overloaded_error: system/api_retry lines, then an error result; exit code 1.",
			script: []Turn{Error(529, "", "")},
			run: func(ctx context.Context, p *cliProc, _ string) {
				p.sendUser("hi")
				p.waitFor(ctx, "result", isResult)
			},
		},
		{
			name:  "interrupt",
			about: "A slow stream (20 ms between 5-byte deltas) interrupted by an interrupt control_request after the first delta, then a second user message answered normally. With --include-partial-messages.",
			args:  []string{"--include-partial-messages"},
			script: []Turn{
				{Blocks: []Block{Text(strings.Repeat("slow ", 200))}, ChunkSize: 5, DeltaDelay: 20 * time.Millisecond},
				Reply(Text("after the interrupt")),
			},
			run: func(ctx context.Context, p *cliProc, _ string) {
				p.sendUser("go slowly")
				p.waitFor(ctx, "a delta", firstDelta)
				p.send(`{"type":"control_request","request_id":"int-1","request":{"subtype":"interrupt"}}`)
				p.waitFor(ctx, "result", isResult)
				p.sendUser("next")
				p.waitFor(ctx, "result", isResult)
			},
		},
		{
			name:   "control-requests",
			about:  "After one turn: set_model, set_permission_mode, mcp_status and an unknown subtype, each awaited; then a turn on the new model (the CLI first sends a non-streaming max_tokens:1 probe for it).",
			script: []Turn{Reply(Text("one")), Reply(Text("two"))},
			run: func(ctx context.Context, p *cliProc, _ string) {
				p.send(initialize)
				p.waitFor(ctx, "initialize response", isResponseTo("init-1"))
				p.sendUser("hi")
				p.waitFor(ctx, "result", isResult)
				for i, req := range []string{
					`{"subtype":"set_model","model":"claude-sonnet-4-5"}`,
					`{"subtype":"set_permission_mode","mode":"acceptEdits"}`,
					`{"subtype":"mcp_status"}`,
					`{"subtype":"no_such_subtype"}`,
				} {
					id := fmt.Sprintf("c-%d", i+1)
					p.send(fmt.Sprintf(`{"type":"control_request","request_id":%q,"request":%s}`, id, req))
					p.waitFor(ctx, "response to "+id, isResponseTo(id))
				}
				p.sendUser("hi again")
				p.waitFor(ctx, "result", isResult)
			},
		},
	}

	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			work := t.TempDir()
			script := make([]Turn, len(sc.script))
			for i, turn := range sc.script {
				turn.Blocks = append([]Block(nil), turn.Blocks...)
				for j, b := range turn.Blocks {
					if tu, ok := b.(*ToolUseBlock); ok {
						in := strings.ReplaceAll(string(tu.Input), "WORK", work)
						turn.Blocks[j] = &ToolUseBlock{ID: tu.ID, Name: tu.Name, Input: []byte(in)}
					}
				}
				script[i] = turn
			}
			s := NewServer(Script(script...))
			defer s.Close()
			ctx := cliContext(t, 60*time.Second)
			p := startCLI(ctx, t, s, work, sc.args...)
			sc.run(ctx, p, work)
			code := p.closeAndWait(ctx)

			var out bytes.Buffer
			for _, l := range p.output() {
				out.Write(l)
				out.WriteByte('\n')
			}
			if err := os.WriteFile(filepath.Join(dir, sc.name+".ndjson"), out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&readme, "\n## %s.ndjson\n\n%s\n\n", sc.name, sc.about)
			if len(sc.args) > 0 {
				fmt.Fprintf(&readme, "Extra flags: `%s`. ", strings.Join(sc.args, " "))
			}
			var kinds []string
			for _, r := range s.Requests() {
				k := "stream"
				if !r.Stream {
					k = fmt.Sprintf("non-streaming max_tokens:%d", r.MaxTokens)
				}
				kinds = append(kinds, fmt.Sprintf("%s (%s)", r.Model, k))
			}
			fmt.Fprintf(&readme, "Exit code %d. Requests to the fake: %d", code, len(kinds))
			if len(kinds) > 0 {
				fmt.Fprintf(&readme, ": %s", strings.Join(kinds, ", "))
			}
			if u := s.Unhandled(); len(u) > 0 {
				fmt.Fprintf(&readme, "; unhandled: %q", u)
			}
			readme.WriteString(".\n\nstdin:\n\n```\n")
			p.mu.Lock()
			for _, l := range p.sent {
				readme.Write(l)
				readme.WriteByte('\n')
			}
			p.mu.Unlock()
			readme.WriteString("```\n")
		})
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), readme.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
