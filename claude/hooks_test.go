package claude_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/google/go-cmp/cmp"
)

// nextRaw returns the next line the session wrote, as written.
func (c *memConn) nextRaw(t *testing.T) []byte {
	t.Helper()
	select {
	case b := <-c.out:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the session to write")
		return nil
	}
}

// jsonOf decodes b for comparing JSON values with cmp.
func jsonOf(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return v
}

// startMemRaw starts a session on a memConn and returns the initialize
// request as written, after answering it.
func startMemRaw(t *testing.T, opts *claude.Options) (*claude.Session, *memConn, []byte) {
	t.Helper()
	c := newMemConn()
	opts.Transport = memTransport{c}
	s, err := claude.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	line := c.nextRaw(t)
	var init struct {
		RequestID string          `json:"request_id"`
		Request   json.RawMessage `json:"request"`
	}
	if err := json.Unmarshal(line, &init); err != nil {
		t.Fatal(err)
	}
	respond(c, init.RequestID, map[string]any{})
	return s, c, init.Request
}

func noHook(context.Context, claude.HookInput) (*claude.HookOutput, error) { return nil, nil }

func TestHooksInInitialize(t *testing.T) {
	_, _, init := startMemRaw(t, &claude.Options{
		Hooks: map[claude.HookEventName][]claude.HookMatcher{
			// Listed out of order: ids follow HookEventNames, then unknown names.
			claude.HookStop:        {{Hooks: []claude.HookFunc{noHook}}},
			"FutureEvent":          {{Matcher: "x", Hooks: []claude.HookFunc{noHook}}},
			claude.HookPreToolUse:  {{Matcher: "Bash", Timeout: 1500 * time.Millisecond, OnFailure: claude.HookFailureBlock, Hooks: []claude.HookFunc{noHook, noHook}}, {Matcher: "Write|Edit", Hooks: []claude.HookFunc{noHook}}, {Matcher: "empty"}},
			claude.HookPostToolUse: {{Timeout: 30 * time.Second, Hooks: []claude.HookFunc{noHook}}},
			"AnotherFuture":        {{Hooks: []claude.HookFunc{noHook}}},
		},
		Agents: map[string]claude.AgentDefinition{"reviewer": {Description: "Reviews code", Prompt: "You review.", Tools: []string{"Read"}}},
	})
	want := `{
		"subtype": "initialize",
		"hooks": {
			"PreToolUse": [
				{"matcher": "Bash", "hookCallbackIds": ["hook_0", "hook_1"], "timeout": 2, "onFailure": "block"},
				{"matcher": "Write|Edit", "hookCallbackIds": ["hook_2"]}
			],
			"PostToolUse": [{"hookCallbackIds": ["hook_3"], "timeout": 30}],
			"Stop": [{"hookCallbackIds": ["hook_4"]}],
			"AnotherFuture": [{"hookCallbackIds": ["hook_5"]}],
			"FutureEvent": [{"matcher": "x", "hookCallbackIds": ["hook_6"]}]
		},
		"agents": {"reviewer": {"description": "Reviews code", "prompt": "You review.", "tools": ["Read"]}},
		"systemPrompt": [""]
	}`
	if diff := cmp.Diff(jsonOf(t, []byte(want)), jsonOf(t, init)); diff != "" {
		t.Errorf("initialize request (-want +got):\n%s", diff)
	}

	// Without hooks or agents, neither field is sent; the system prompt is
	// the official SDKs' default, an empty one.
	_, _, init = startMemRaw(t, &claude.Options{})
	if diff := cmp.Diff(jsonOf(t, []byte(`{"subtype":"initialize","systemPrompt":[""]}`)), jsonOf(t, init)); diff != "" {
		t.Errorf("plain initialize request (-want +got):\n%s", diff)
	}
}

func TestInitializeIsWrittenBeforeThePrompt(t *testing.T) {
	c := newMemConn()
	s, err := claude.Start(context.Background(), &claude.Options{Transport: memTransport{c}, Hooks: map[claude.HookEventName][]claude.HookMatcher{
		claude.HookUserPromptSubmit: {{Hooks: []claude.HookFunc{noHook}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Sent at once: the CLI would run a prompt it reads first without the hooks.
	if err := s.SendText(context.Background(), "hi"); err != nil {
		t.Fatal(err)
	}
	if first := c.next(t); first["type"] != "control_request" || first["request"].(map[string]any)["subtype"] != "initialize" {
		t.Fatalf("first line = %v", first)
	}
	if second := c.next(t); second["type"] != "user" {
		t.Fatalf("second line = %v", second)
	}
}

func TestHookOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		hooks map[claude.HookEventName][]claude.HookMatcher
		value string
	}{
		{map[claude.HookEventName][]claude.HookMatcher{claude.HookStop: {{Hooks: []claude.HookFunc{noHook, nil}}}}, "Stop[0].Hooks[1]"},
		{map[claude.HookEventName][]claude.HookMatcher{claude.HookStop: {{Timeout: -time.Second, Hooks: []claude.HookFunc{noHook}}}}, "Stop[0]"},
		{map[claude.HookEventName][]claude.HookMatcher{"": {{Hooks: []claude.HookFunc{noHook}}}}, ""},
		{map[claude.HookEventName][]claude.HookMatcher{claude.HookStop: {{OnFailure: "explode", Hooks: []claude.HookFunc{noHook}}}}, "Stop[0].OnFailure=explode"},
	} {
		_, err := claude.Start(context.Background(), &claude.Options{Transport: memTransport{newMemConn()}, Hooks: tc.hooks})
		var oe *claude.OptionError
		if !errors.As(err, &oe) || oe.Field != "Hooks" || oe.Value != tc.value {
			t.Errorf("Start(%v) = %v, want an OptionError for Hooks %q", tc.hooks, err, tc.value)
		}
	}
}

// hookCall makes the fake CLI call a hook and returns the session's response.
func hookCall(t *testing.T, c *memConn, id, callbackID string, input any) map[string]any {
	t.Helper()
	c.print(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{
		"subtype": "hook_callback", "callback_id": callbackID, "input": input, "tool_use_id": "toolu_1"}})
	r := c.nextOf(t, "control_response")["response"].(map[string]any)
	if r["request_id"] != id {
		t.Fatalf("response to %v, want %s", r["request_id"], id)
	}
	return r
}

func TestHookCallback(t *testing.T) {
	var mu sync.Mutex
	var got []claude.HookInput
	record := func(out *claude.HookOutput) claude.HookFunc {
		return func(ctx context.Context, in claude.HookInput) (*claude.HookOutput, error) {
			mu.Lock()
			got = append(got, in)
			mu.Unlock()
			return out, nil
		}
	}
	_, c, _ := startMemRaw(t, &claude.Options{Hooks: map[claude.HookEventName][]claude.HookMatcher{
		claude.HookPreToolUse: {{Matcher: "Bash", Hooks: []claude.HookFunc{
			record(claude.DenyTool("not rm")),
			claude.HookFor(func(ctx context.Context, in *claude.PreToolUseInput) (*claude.HookOutput, error) {
				var cmd struct{ Command string }
				if err := json.Unmarshal(in.ToolInput, &cmd); err != nil {
					return nil, err
				}
				return claude.UpdateToolInput(map[string]string{"command": cmd.Command + " --safe"})
			}),
		}}},
		claude.HookPostToolUse:   {{Hooks: []claude.HookFunc{record(claude.AddContext("more context"))}}},
		claude.HookStop:          {{Hooks: []claude.HookFunc{record(nil)}}},
		claude.HookPostToolBatch: {{Hooks: []claude.HookFunc{record(&claude.HookOutput{Async: true, AsyncTimeout: 2 * time.Second})}}},
	}})
	base := map[string]any{"session_id": "s1", "transcript_path": "/t.jsonl", "cwd": "/w", "prompt_id": "p1",
		"permission_mode": "default", "effort": map[string]any{"level": "medium"}}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	pre := with("hook_event_name", "PreToolUse", "tool_name", "Bash", "tool_input", map[string]any{"command": "rm -rf /"}, "tool_use_id", "toolu_1",
		"agent_id", "a1", "agent_type", "general-purpose")
	for _, tc := range []struct {
		callback string
		input    map[string]any
		want     string
	}{
		{"hook_0", pre, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"not rm"}}`},
		{"hook_1", pre, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"command":"rm -rf / --safe"}}}`},
		{"hook_2", with("hook_event_name", "PostToolUse", "tool_name", "Bash", "tool_input", map[string]any{}, "tool_response", map[string]any{"stdout": "hi"}, "tool_use_id", "toolu_1", "duration_ms", 42),
			`{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"more context"}}`},
		{"hook_3", with("hook_event_name", "PostToolBatch", "tool_calls", []any{}), `{"async":true,"asyncTimeout":2000}`},
		{"hook_4", with("hook_event_name", "Stop", "stop_hook_active", false, "last_assistant_message", "done"), `{}`},
	} {
		r := hookCall(t, c, "req-"+tc.callback, tc.callback, tc.input)
		if r["subtype"] != "success" {
			t.Errorf("%s: response %v", tc.callback, r)
			continue
		}
		b, _ := json.Marshal(r["response"])
		if diff := cmp.Diff(jsonOf(t, []byte(tc.want)), jsonOf(t, b)); diff != "" {
			t.Errorf("%s: output (-want +got):\n%s", tc.callback, diff)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 4 {
		t.Fatalf("recorded %d inputs", len(got))
	}
	p, ok := got[0].(*claude.PreToolUseInput)
	if !ok || p.ToolName != "Bash" || p.ToolUseID != "toolu_1" || string(p.ToolInput) != `{"command":"rm -rf /"}` ||
		p.SessionID != "s1" || p.TranscriptPath != "/t.jsonl" || p.CWD != "/w" || p.PromptID != "p1" ||
		p.PermissionMode != claude.PermissionDefault || p.AgentID != "a1" || p.AgentType != "general-purpose" ||
		p.Common().HookEventName != claude.HookPreToolUse || !strings.Contains(string(p.Raw()), `"effort"`) {
		t.Errorf("PreToolUse input = %#v", got[0])
	}
	if post, ok := got[1].(*claude.PostToolUseInput); !ok || string(post.ToolResponse) != `{"stdout":"hi"}` || post.DurationMS != 42 {
		t.Errorf("PostToolUse input = %#v", got[1])
	}
	if raw, ok := got[2].(*claude.RawHookInput); !ok || raw.HookEventName != claude.HookPostToolBatch || !strings.Contains(string(raw.Raw()), "tool_calls") {
		t.Errorf("PostToolBatch input = %#v", got[2])
	}
	var effort struct{ Effort struct{ Level string } }
	if err := got[2].Common().Decode(&effort); err != nil || effort.Effort.Level != "medium" {
		t.Errorf("Decode = %+v, %v", effort, err)
	}
	if stop, ok := got[3].(*claude.StopInput); !ok || stop.LastAssistantMessage != "done" || stop.StopHookActive {
		t.Errorf("Stop input = %#v", got[3])
	}
}

func TestHookCallbackFailures(t *testing.T) {
	cancelled := make(chan error, 1)
	timedOut := make(chan error, 1)
	_, c, _ := startMemRaw(t, &claude.Options{Hooks: map[claude.HookEventName][]claude.HookMatcher{
		claude.HookPreToolUse: {{Hooks: []claude.HookFunc{
			func(context.Context, claude.HookInput) (*claude.HookOutput, error) { return nil, errors.New("kaput") },
			func(context.Context, claude.HookInput) (*claude.HookOutput, error) { panic("boom") },
			func(ctx context.Context, in claude.HookInput) (*claude.HookOutput, error) {
				<-ctx.Done()
				cancelled <- ctx.Err()
				return claude.DenyTool("too late"), nil
			},
			claude.HookFor(func(ctx context.Context, in *claude.StopInput) (*claude.HookOutput, error) { return nil, nil }),
			func(context.Context, claude.HookInput) (*claude.HookOutput, error) {
				return &claude.HookOutput{Specific: &claude.HookSpecific{UpdatedInput: json.RawMessage(`{bad json`)}}, nil
			},
		}}},
		claude.HookStop: {{Timeout: 50 * time.Millisecond, Hooks: []claude.HookFunc{
			func(ctx context.Context, in claude.HookInput) (*claude.HookOutput, error) {
				<-ctx.Done()
				timedOut <- ctx.Err()
				return nil, ctx.Err()
			},
		}}},
	}})
	input := map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": map[string]any{}, "tool_use_id": "toolu_1"}
	errorOf := func(r map[string]any) string {
		t.Helper()
		if r["subtype"] != "error" {
			t.Errorf("response %v, want an error", r)
			return ""
		}
		return r["error"].(string)
	}

	// The cancelled one first: it must stay unanswered while the others are.
	c.print(map[string]any{"type": "control_request", "request_id": "r-wait", "request": map[string]any{"subtype": "hook_callback", "callback_id": "hook_2", "input": input}})
	if e := errorOf(hookCall(t, c, "r-err", "hook_0", input)); !strings.Contains(e, "kaput") || !strings.Contains(e, "hook_0") || !strings.Contains(e, "PreToolUse") {
		t.Errorf("error response %q", e)
	}
	if e := errorOf(hookCall(t, c, "r-panic", "hook_1", input)); !strings.Contains(e, "boom") {
		t.Errorf("panic response %q", e)
	}
	if e := errorOf(hookCall(t, c, "r-unknown", "hook_99", input)); e != "No hook callback found for ID: hook_99" {
		t.Errorf("unknown id response %q", e)
	}
	if e := errorOf(hookCall(t, c, "r-type", "hook_3", input)); !strings.Contains(e, "*claude.StopInput") || !strings.Contains(e, "*claude.PreToolUseInput") {
		t.Errorf("HookFor mismatch response %q", e)
	}
	if e := errorOf(hookCall(t, c, "r-badjson", "hook_4", input)); !strings.Contains(e, "encoding output") {
		t.Errorf("bad output response %q", e)
	}
	c.print(map[string]any{"type": "control_cancel_request", "request_id": "r-wait"})
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled hook's ctx.Err() = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("control_cancel_request did not cancel the hook's ctx")
	}

	// The matcher's Timeout bounds the ctx; the CLI gets an error.
	stop := map[string]any{"hook_event_name": "Stop", "stop_hook_active": false}
	start := time.Now()
	r := hookCall(t, c, "r-timeout", "hook_5", stop)
	if err := <-timedOut; !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 30*time.Second {
		t.Errorf("timed-out hook's ctx.Err() = %v after %v", err, time.Since(start))
	}
	if e := errorOf(r); !strings.Contains(e, "deadline exceeded") {
		t.Errorf("timeout response %q", e)
	}

	// Nothing was sent for the withdrawn request, and the session goes on.
	r = hookCall(t, c, "r-after", "hook_3", stop)
	if r["subtype"] != "success" {
		t.Errorf("response after failures = %v", r)
	}
}

func TestHookInputTypes(t *testing.T) {
	for _, tc := range []struct {
		input string
		check func(claude.HookInput) bool
	}{
		{`{"hook_event_name":"PostToolUseFailure","tool_name":"Bash","tool_input":{},"tool_use_id":"t","error":"exit 1","is_interrupt":true}`,
			func(in claude.HookInput) bool {
				f, ok := in.(*claude.PostToolUseFailureInput)
				return ok && f.Error == "exit 1" && f.IsInterrupt
			}},
		{`{"hook_event_name":"UserPromptSubmit","prompt":"hello"}`,
			func(in claude.HookInput) bool {
				u, ok := in.(*claude.UserPromptSubmitInput)
				return ok && u.Prompt == "hello"
			}},
		{`{"hook_event_name":"SubagentStart","agent_id":"a9","agent_type":"Explore"}`,
			func(in claude.HookInput) bool {
				s, ok := in.(*claude.SubagentStartInput)
				return ok && s.AgentID == "a9" && s.AgentType == "Explore"
			}},
		{`{"hook_event_name":"SubagentStop","agent_id":"a9","agent_transcript_path":"/a.jsonl","stop_hook_active":true,"last_assistant_message":"bye"}`,
			func(in claude.HookInput) bool {
				s, ok := in.(*claude.SubagentStopInput)
				return ok && s.AgentID == "a9" && s.AgentTranscriptPath == "/a.jsonl" && s.StopHookActive && s.LastAssistantMessage == "bye"
			}},
		{`{"hook_event_name":"PreCompact","trigger":"auto","custom_instructions":"keep it"}`,
			func(in claude.HookInput) bool {
				p, ok := in.(*claude.PreCompactInput)
				return ok && p.Trigger == "auto" && p.CustomInstructions == "keep it"
			}},
		{`{"hook_event_name":"SessionStart","source":"resume","model":"m"}`,
			func(in claude.HookInput) bool {
				s, ok := in.(*claude.SessionStartInput)
				return ok && s.Source == "resume" && s.Model == "m"
			}},
		{`{"hook_event_name":"SessionEnd","reason":"other"}`,
			func(in claude.HookInput) bool {
				s, ok := in.(*claude.SessionEndInput)
				return ok && s.Reason == "other"
			}},
		{`{"hook_event_name":"Notification","message":"m","title":"t","notification_type":"idle_prompt"}`,
			func(in claude.HookInput) bool {
				n, ok := in.(*claude.NotificationInput)
				return ok && n.Message == "m" && n.Title == "t" && n.NotificationType == "idle_prompt"
			}},
		{`{"hook_event_name":"PermissionRequest","tool_name":"Write","tool_input":{"file_path":"/x"},"permission_suggestions":[{"type":"setMode","mode":"acceptEdits","destination":"session"}]}`,
			func(in claude.HookInput) bool {
				p, ok := in.(*claude.PermissionRequestInput)
				return ok && p.ToolName == "Write" && len(p.PermissionSuggestions) == 1 && p.PermissionSuggestions[0].Mode == claude.PermissionAcceptEdits
			}},
		// A field of an unexpected type is dropped, not fatal.
		{`{"hook_event_name":"UserPromptSubmit","prompt":"p","permission_mode":42}`,
			func(in claude.HookInput) bool {
				u, ok := in.(*claude.UserPromptSubmitInput)
				return ok && u.Prompt == "p" && u.PermissionMode == "42"
			}},
		{`{"hook_event_name":"ConfigChange","source":"user"}`,
			func(in claude.HookInput) bool { _, ok := in.(*claude.RawHookInput); return ok }},
	} {
		got := make(chan claude.HookInput, 1)
		_, c, _ := startMemRaw(t, &claude.Options{Hooks: map[claude.HookEventName][]claude.HookMatcher{
			"Any": {{Hooks: []claude.HookFunc{func(ctx context.Context, in claude.HookInput) (*claude.HookOutput, error) {
				got <- in
				return nil, nil
			}}}},
		}})
		r := hookCall(t, c, "r1", "hook_0", json.RawMessage(tc.input))
		if r["subtype"] != "success" {
			t.Errorf("%s: response %v", tc.input, r)
			continue
		}
		in := <-got
		if !tc.check(in) || string(in.Raw()) != tc.input {
			t.Errorf("%s: decoded as %#v", tc.input, in)
		}
	}
}

func TestHookOutputs(t *testing.T) {
	for _, tc := range []struct {
		event claude.HookEventName
		out   *claude.HookOutput
		want  string
	}{
		{claude.HookStop, &claude.HookOutput{Stop: true, StopReason: "enough", SuppressOutput: true, SystemMessage: "note"},
			`{"continue":false,"stopReason":"enough","suppressOutput":true,"systemMessage":"note"}`},
		{claude.HookStop, &claude.HookOutput{Decision: "block", Reason: "run the tests first"},
			`{"decision":"block","reason":"run the tests first"}`},
		{claude.HookPreToolUse, &claude.HookOutput{Specific: &claude.HookSpecific{PermissionDecision: claude.HookAllow, PermissionDecisionReason: "safe",
			UpdatedInput: json.RawMessage(`{"a":1}`), AdditionalContext: "ctx"}},
			`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"safe","updatedInput":{"a":1},"additionalContext":"ctx"}}`},
		{claude.HookPostToolUse, &claude.HookOutput{Specific: &claude.HookSpecific{UpdatedMCPToolOutput: json.RawMessage(`{"content":[]}`)}},
			`{"hookSpecificOutput":{"hookEventName":"PostToolUse","updatedMCPToolOutput":{"content":[]}}}`},
		{claude.HookPermissionRequest, &claude.HookOutput{Specific: &claude.HookSpecific{PermissionRequestDecision: &claude.PermissionResult{
			Allow: true, UpdatedInput: json.RawMessage(`{"b":2}`), UpdatedPermissions: []claude.PermissionUpdate{{Type: "setMode", Mode: claude.PermissionAcceptEdits, Destination: "session"}}}}},
			`{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow","updatedInput":{"b":2},"updatedPermissions":[{"type":"setMode","mode":"acceptEdits","destination":"session"}]}}}`},
		{claude.HookPermissionRequest, &claude.HookOutput{Specific: &claude.HookSpecific{PermissionRequestDecision: &claude.PermissionResult{Message: "no", Interrupt: true}}},
			`{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"no","interrupt":true}}}`},
		{claude.HookSessionStart, &claude.HookOutput{Specific: &claude.HookSpecific{AdditionalContext: "welcome", Extra: map[string]any{"sessionTitle": "T", "hookEventName": "ignored"}}},
			`{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"welcome","sessionTitle":"T"}}`},
		{claude.HookPreToolUse, &claude.HookOutput{Async: true, Stop: true}, `{"async":true}`},
	} {
		out := tc.out
		_, c, _ := startMemRaw(t, &claude.Options{Hooks: map[claude.HookEventName][]claude.HookMatcher{
			tc.event: {{Hooks: []claude.HookFunc{func(context.Context, claude.HookInput) (*claude.HookOutput, error) { return out, nil }}}},
		}})
		r := hookCall(t, c, "r1", "hook_0", map[string]any{"hook_event_name": tc.event})
		b, _ := json.Marshal(r["response"])
		if diff := cmp.Diff(jsonOf(t, []byte(tc.want)), jsonOf(t, b)); diff != "" {
			t.Errorf("%s %+v: output (-want +got):\n%s", tc.event, tc.out, diff)
		}
	}
}

func TestElicitation(t *testing.T) {
	elicit := func(c *memConn, id string) map[string]any {
		c.print(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{
			"subtype": "elicitation", "mcp_server_name": "srv", "message": "Your name?", "mode": "form",
			"requested_schema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}},
			"elicitation_id":   "e1", "title": "Name"}})
		return c.nextOf(t, "control_response")["response"].(map[string]any)
	}
	// Without a handler: decline.
	_, c, _ := startMemRaw(t, &claude.Options{})
	if r := elicit(c, "r1"); r["subtype"] != "success" || !cmp.Equal(r["response"], map[string]any{"action": "decline"}) {
		t.Errorf("default answer = %v", r)
	}

	var got *claude.ElicitationRequest
	answers := []claude.ElicitationResult{
		{Action: claude.ElicitationAccept, Content: map[string]any{"name": "Ada"}},
		{},
		{Action: claude.ElicitationCancel},
	}
	_, c, _ = startMemRaw(t, &claude.Options{OnElicitation: func(ctx context.Context, req *claude.ElicitationRequest) (claude.ElicitationResult, error) {
		got = req
		if len(answers) == 0 {
			return claude.ElicitationResult{}, errors.New("no more answers")
		}
		a := answers[0]
		answers = answers[1:]
		return a, nil
	}})
	for i, want := range []map[string]any{
		{"action": "accept", "content": map[string]any{"name": "Ada"}},
		{"action": "decline"},
		{"action": "cancel"},
	} {
		r := elicit(c, "r"+string(rune('a'+i)))
		if diff := cmp.Diff(want, r["response"]); r["subtype"] != "success" || diff != "" {
			t.Errorf("answer %d (-want +got):\n%s", i, diff)
		}
	}
	if got == nil || got.ServerName != "srv" || got.Message != "Your name?" || got.Mode != "form" || got.ElicitationID != "e1" ||
		got.Title != "Name" || !strings.Contains(string(got.RequestedSchema), `"name"`) || len(got.Raw) == 0 {
		t.Errorf("request = %+v", got)
	}
	if r := elicit(c, "r-err"); r["subtype"] != "error" || r["error"] != "no more answers" {
		t.Errorf("error answer = %v", r)
	}
}
