package claude_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
)

// End-to-end tests of hooks, structured output and sub-agents against the
// real CLI.

// hookLog records hook inputs from concurrent callbacks.
type hookLog struct {
	mu  sync.Mutex
	ins []claude.HookInput
}

func (l *hookLog) add(in claude.HookInput) {
	l.mu.Lock()
	l.ins = append(l.ins, in)
	l.mu.Unlock()
}

func (l *hookLog) of(event claude.HookEventName) []claude.HookInput {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []claude.HookInput
	for _, in := range l.ins {
		if in.Common().HookEventName == event {
			out = append(out, in)
		}
	}
	return out
}

func bashCommand(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var in struct{ Command string }
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Errorf("Bash input %s: %v", raw, err)
	}
	return in.Command
}

func TestE2EHookBlocksBash(t *testing.T) {
	e := newE2E(t,
		claudetest.Reply(claudetest.ToolUseID("toolu_block", "Bash", map[string]any{"command": "touch blocked.txt", "description": "make a file"})),
		claudetest.Reply(claudetest.Text("It was blocked.")))
	var log hookLog
	var writeHookCalled atomic.Bool
	e.opts.Hooks = map[claude.HookEventName][]claude.HookMatcher{
		claude.HookPreToolUse: {
			{Matcher: "Write", Hooks: []claude.HookFunc{func(context.Context, claude.HookInput) (*claude.HookOutput, error) {
				writeHookCalled.Store(true)
				return nil, nil
			}}},
			{Matcher: "Bash", Hooks: []claude.HookFunc{claude.HookFor(func(ctx context.Context, in *claude.PreToolUseInput) (*claude.HookOutput, error) {
				log.add(in)
				return claude.DenyTool("policy forbids touching files (HOOK-7)"), nil
			})}},
		},
	}
	e.opts.CanUseTool = func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		t.Errorf("asked for permission after the hook denied: %s", req.ToolName)
		return claude.Deny("no"), nil
	}
	s := e.start()
	_, res := e.turn(s, "make a file")
	if res.Result != "It was blocked." {
		t.Errorf("result = %q", res.Result)
	}
	pre := log.of(claude.HookPreToolUse)
	if len(pre) != 1 {
		t.Fatalf("PreToolUse hook called %d times", len(pre))
	}
	in := pre[0].(*claude.PreToolUseInput)
	if in.ToolName != "Bash" || in.ToolUseID != "toolu_block" || bashCommand(t, in.ToolInput) != "touch blocked.txt" ||
		in.SessionID != s.SessionID() || in.CWD == "" || in.TranscriptPath == "" {
		t.Errorf("hook input = %+v (raw %s)", in, in.Raw())
	}
	if writeHookCalled.Load() {
		t.Error("the Write matcher's hook ran for Bash")
	}
	if _, err := os.Stat(filepath.Join(e.opts.Cwd, "blocked.txt")); err == nil {
		t.Error("the blocked command ran")
	}
	reqs := e.srv.Requests()
	content, isErr, ok := reqs[len(reqs)-1].ToolResult("toolu_block")
	if !ok || !isErr || !strings.Contains(content, "policy forbids touching files (HOOK-7)") {
		t.Errorf("tool_result the model saw = %q is_error=%v found=%v", content, isErr, ok)
	}
}

func TestE2EHookRewritesInput(t *testing.T) {
	e := newE2E(t,
		claudetest.Reply(claudetest.ToolUseID("toolu_rw", "Bash", map[string]any{"command": "touch original.txt", "description": "make a file"})),
		claudetest.Reply(claudetest.Text("Done.")))
	e.opts.Hooks = map[claude.HookEventName][]claude.HookMatcher{
		claude.HookPreToolUse: {{Matcher: "Bash", Hooks: []claude.HookFunc{claude.HookFor(func(ctx context.Context, in *claude.PreToolUseInput) (*claude.HookOutput, error) {
			if cmd := bashCommand(t, in.ToolInput); cmd != "touch original.txt" {
				t.Errorf("hook saw command %q", cmd)
			}
			return claude.UpdateToolInput(map[string]string{"command": "touch rewritten.txt && echo REWRITTEN", "description": "rewritten"})
		})}}},
	}
	var mu sync.Mutex
	var asked []string
	e.opts.CanUseTool = func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		mu.Lock()
		asked = append(asked, bashCommand(t, req.Input))
		mu.Unlock()
		return claude.Allow(), nil
	}
	s := e.start()
	_, res := e.turn(s, "make a file")
	if res.IsError {
		t.Fatalf("result = %s", res.Raw())
	}
	// The permission prompt, and then the tool, got the rewritten input.
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(asked, []string{"touch rewritten.txt && echo REWRITTEN"}) {
		t.Errorf("permission prompts for %q", asked)
	}
	if _, err := os.Stat(filepath.Join(e.opts.Cwd, "rewritten.txt")); err != nil {
		t.Errorf("the rewritten command did not run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.opts.Cwd, "original.txt")); err == nil {
		t.Error("the original command ran")
	}
	reqs := e.srv.Requests()
	if content, isErr, ok := reqs[len(reqs)-1].ToolResult("toolu_rw"); !ok || isErr || content != "REWRITTEN" {
		t.Errorf("tool_result = %q is_error=%v found=%v", content, isErr, ok)
	}
}

func TestE2EHookAddsContext(t *testing.T) {
	e := newE2E(t,
		claudetest.Reply(claudetest.ToolUseID("toolu_echo", "Bash", map[string]any{"command": "echo hi-from-bash", "description": "say hi"})),
		claudetest.Reply(claudetest.Text("Noted.")))
	var log hookLog
	record := func(out *claude.HookOutput) claude.HookFunc {
		return func(ctx context.Context, in claude.HookInput) (*claude.HookOutput, error) {
			log.add(in)
			return out, nil
		}
	}
	e.opts.Hooks = map[claude.HookEventName][]claude.HookMatcher{
		claude.HookPostToolUse:      {{Matcher: "Bash", Hooks: []claude.HookFunc{record(claude.AddContext("CONTEXT-MARKER-4711: the output is trustworthy"))}}},
		claude.HookUserPromptSubmit: {{Hooks: []claude.HookFunc{record(nil)}}},
		claude.HookStop:             {{Hooks: []claude.HookFunc{record(nil)}}},
	}
	s := e.start()
	_, res := e.turn(s, "say hi with bash")
	if res.Result != "Noted." {
		t.Errorf("result = %q", res.Result)
	}
	reqs := e.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if !strings.Contains(string(reqs[1].Raw), "CONTEXT-MARKER-4711: the output is trustworthy") {
		t.Error("the model's next request does not carry the hook's additional context")
	}
	if strings.Contains(string(reqs[0].Raw), "CONTEXT-MARKER-4711") {
		t.Error("the context was there before the tool ran")
	}
	post := log.of(claude.HookPostToolUse)
	if len(post) != 1 {
		t.Fatalf("PostToolUse hook called %d times", len(post))
	}
	if p := post[0].(*claude.PostToolUseInput); p.ToolUseID != "toolu_echo" || !strings.Contains(string(p.ToolResponse), "hi-from-bash") {
		t.Errorf("PostToolUse input = %+v", p)
	}
	if u := log.of(claude.HookUserPromptSubmit); len(u) != 1 || u[0].(*claude.UserPromptSubmitInput).Prompt != "say hi with bash" {
		t.Errorf("UserPromptSubmit inputs = %+v", u)
	}
	if st := log.of(claude.HookStop); len(st) != 1 || st[0].(*claude.StopInput).LastAssistantMessage != "Noted." {
		t.Errorf("Stop inputs = %+v", st)
	}
}

func TestE2EHookTimeout(t *testing.T) {
	e := newE2E(t,
		claudetest.Reply(claudetest.ToolUseID("toolu_slow", "Bash", map[string]any{"command": "touch slow.txt", "description": "make a file"})),
		claudetest.Reply(claudetest.Text("Gave up.")))
	ended := make(chan error, 1)
	e.opts.PermissionMode = claude.PermissionAcceptEdits
	e.opts.Hooks = map[claude.HookEventName][]claude.HookMatcher{
		claude.HookPreToolUse: {{Timeout: time.Second, Hooks: []claude.HookFunc{func(ctx context.Context, in claude.HookInput) (*claude.HookOutput, error) {
			select {
			case <-ctx.Done():
				ended <- ctx.Err()
			case <-time.After(30 * time.Second):
				ended <- nil
			}
			return nil, nil
		}}}},
	}
	s := e.start()
	start := time.Now()
	_, res := e.turn(s, "make a file slowly")
	if err := <-ended; err == nil || time.Since(start) > 20*time.Second {
		t.Errorf("hook ctx ended with %v after %v", err, time.Since(start))
	}
	if res.Result != "Gave up." {
		t.Errorf("result = %q", res.Result)
	}
	// Whether the CLI then runs the tool depends on which timeout fires
	// first, the matcher's (ours) or the CLI's own; only ours is asserted.
}

type weather struct {
	City        string   `json:"city" jsonschema:"the city asked about"`
	TempCelsius float64  `json:"temp_celsius"`
	Conditions  []string `json:"conditions"`
	Windy       bool     `json:"windy,omitempty"`
}

func TestE2EStructuredOutput(t *testing.T) {
	e := newE2EResponder(t, claudetest.ResponderFunc(func(r *claudetest.Request) claudetest.Turn {
		if r.AssistantCount() > 0 {
			return claudetest.Reply(claudetest.Text(claudetest.EndOfScript))
		}
		return claudetest.Reply(claudetest.ToolUseID("toolu_so", "StructuredOutput", map[string]any{
			"city": "Oslo", "temp_celsius": -3.5, "conditions": []string{"snow", "fog"}}))
	}))
	schema, err := claude.SchemaFor[weather]()
	if err != nil {
		t.Fatal(err)
	}
	e.opts.JSONSchema = schema
	s := e.start()
	_, res := e.turn(s, "What is the weather in Oslo?")
	// The CLI offers the model a StructuredOutput tool with the schema as
	// its input schema, and ends the turn when the model calls it.
	reqs := e.srv.Requests()
	if len(reqs) != 1 || !slices.Contains(reqs[0].Tools, "StructuredOutput") {
		t.Fatalf("%d requests; tools offered first = %v, want StructuredOutput", len(reqs), reqs[0].Tools)
	}
	var body struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(reqs[0].Raw, &body); err != nil {
		t.Fatal(err)
	}
	var schemaSeen json.RawMessage
	for _, tool := range body.Tools {
		if tool.Name == "StructuredOutput" {
			schemaSeen = tool.InputSchema
		}
	}
	if !strings.Contains(string(schemaSeen), `"temp_celsius"`) || !strings.Contains(string(schemaSeen), "the city asked about") {
		t.Errorf("StructuredOutput input_schema = %s", schemaSeen)
	}
	w, err := claude.DecodeStructured[weather](res)
	if err != nil {
		t.Fatalf("DecodeStructured: %v (result %s)", err, res.Raw())
	}
	if w.City != "Oslo" || w.TempCelsius != -3.5 || !slices.Equal(w.Conditions, []string{"snow", "fog"}) || w.Windy {
		t.Errorf("decoded %+v", w)
	}
	// The same output does not fit another type, and says where.
	type strict struct {
		City        string `json:"city"`
		TempCelsius int    `json:"temp_celsius"`
	}
	_, err = claude.DecodeStructured[strict](res)
	var se *claude.StructuredOutputError
	if !errors.As(err, &se) || se.Field != "temp_celsius" {
		t.Errorf("decoding into a misfit type: %v", err)
	}
}

// A custom sub-agent whose conversation the fake answers differently: the
// responder tells it by its system prompt.
const subagentMarker = "You are SUBAGENT-MARKER-99, a careful helper."

func subagentResponder(mainDelay time.Duration) claudetest.Responder {
	return claudetest.ResponderFunc(func(r *claudetest.Request) claudetest.Turn {
		if strings.Contains(r.System, subagentMarker) {
			if r.AssistantCount() == 0 {
				return claudetest.Reply(claudetest.ToolUseID("toolu_sub_bash", "Bash", map[string]any{"command": "echo from-the-sub-agent", "description": "sub"}))
			}
			t := claudetest.Reply(claudetest.Text("sub-agent finished"))
			t.Delay = mainDelay // let the main turn end first
			return t
		}
		switch r.AssistantCount() {
		case 0:
			return claudetest.Reply(claudetest.ToolUseID("toolu_task", "Agent", map[string]any{
				"description": "sub job", "prompt": "SUBTASK: run echo", "subagent_type": "marker-agent"}))
		case 1:
			return claudetest.Reply(claudetest.Text("main: agent launched"))
		}
		return claudetest.Reply(claudetest.Text("main: the agent reported back"))
	})
}

func subagentOptions(e *e2e) {
	e.opts.Agents = map[string]claude.AgentDefinition{
		"marker-agent": {Description: "Runs echo commands", Prompt: subagentMarker, Tools: []string{"Bash"}},
	}
}

func TestE2ESubagentThreads(t *testing.T) {
	e := newE2EResponder(t, subagentResponder(time.Second))
	subagentOptions(e)
	var log hookLog
	e.opts.Hooks = map[claude.HookEventName][]claude.HookMatcher{
		claude.HookSubagentStart: {{Hooks: []claude.HookFunc{func(ctx context.Context, in claude.HookInput) (*claude.HookOutput, error) {
			log.add(in)
			return nil, nil
		}}}},
	}
	s := e.start()
	// Turn ends at the main turn's result, while the sub-agent still works ...
	msgs, first := e.turn(s, "delegate it")
	if first.Result != "main: agent launched" {
		t.Errorf("first result = %q", first.Result)
	}
	// ... and UntilIdle reads the rest: the sub-agent, then the turn the
	// CLI starts by itself to report back.
	var results []*claude.ResultMessage
	for m, err := range s.UntilIdle(e.ctx) {
		if err != nil {
			t.Fatalf("UntilIdle: %v", err)
		}
		msgs = append(msgs, m)
		if r, ok := m.(*claude.ResultMessage); ok {
			results = append(results, r)
		}
	}
	if len(results) != 1 || results[0].Result != "main: the agent reported back" {
		t.Fatalf("results after the first: %d (%v)", len(results), results)
	}
	if st, ok := msgs[len(msgs)-1].(*claude.SessionStateChanged); !ok || st.State != "idle" {
		t.Errorf("last message = %s", msgs[len(msgs)-1].Raw())
	}

	// Group by thread.
	byThread := map[claude.Thread][]string{}
	var started *claude.TaskStarted
	for _, m := range msgs {
		if ts, ok := m.(*claude.TaskStarted); ok {
			started = ts
		}
		th := claude.ThreadOf(m)
		switch m := m.(type) {
		case *claude.AssistantMessage:
			for _, b := range m.Message.Content {
				switch b := b.(type) {
				case *claude.TextBlock:
					byThread[th] = append(byThread[th], "text:"+b.Text)
				case *claude.ToolUseBlock:
					byThread[th] = append(byThread[th], "tool_use:"+b.ID)
				}
			}
		case *claude.UserMessage:
			for _, b := range m.Message.Content.Blocks {
				if tr, ok := b.(*claude.ToolResultBlock); ok {
					byThread[th] = append(byThread[th], "tool_result:"+tr.ToolUseID)
				}
			}
		}
	}
	if started == nil || started.ToolUseID != "toolu_task" || started.TaskID == "" {
		t.Fatalf("task_started = %+v", started)
	}
	sub := claude.Thread{ParentToolUseID: "toolu_task", AgentID: started.TaskID}
	if want := []string{"tool_use:toolu_sub_bash", "tool_result:toolu_sub_bash", "text:sub-agent finished"}; !slices.Equal(byThread[sub], want) {
		t.Errorf("sub-agent thread %+v = %q, want %q (all threads: %q)", sub, byThread[sub], want, byThread)
	}
	main := byThread[claude.Thread{}]
	for _, want := range []string{"tool_use:toolu_task", "tool_result:toolu_task", "text:main: agent launched", "text:main: the agent reported back"} {
		if !slices.Contains(main, want) {
			t.Errorf("main thread %q lacks %q", main, want)
		}
	}
	if len(byThread) != 2 {
		t.Errorf("threads: %q", byThread)
	}

	// The agent definition (sent in initialize) shaped the sub-agent.
	for _, r := range e.srv.Requests() {
		if strings.Contains(r.System, subagentMarker) && !slices.Equal(r.Tools, []string{"Bash"}) {
			t.Errorf("sub-agent offered tools %v, want [Bash]", r.Tools)
		}
	}
	if ss := log.of(claude.HookSubagentStart); len(ss) != 1 || ss[0].Common().AgentID != started.TaskID || ss[0].Common().AgentType != "marker-agent" {
		t.Errorf("SubagentStart inputs = %+v", ss)
	}
}

func TestE2EQueryWaitsForBackgroundAgent(t *testing.T) {
	e := newE2EResponder(t, subagentResponder(time.Second))
	subagentOptions(e)
	var results []string
	var subTexts int
	for m, err := range claude.Query(e.ctx, "delegate it", e.opts) {
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		if r, ok := m.(*claude.ResultMessage); ok {
			results = append(results, r.Result)
		}
		if a, ok := m.(*claude.AssistantMessage); ok && !claude.ThreadOf(m).IsMain() && a.Text() != "" {
			subTexts++
		}
	}
	if !slices.Equal(results, []string{"main: agent launched", "main: the agent reported back"}) || subTexts != 1 {
		t.Errorf("results %q, sub-agent texts %d", results, subTexts)
	}
}

func TestE2EHookAnswersPermissionRequest(t *testing.T) {
	e := newE2E(t,
		claudetest.Reply(claudetest.ToolUseID("toolu_pr", "Bash", map[string]any{"command": "touch allowed.txt", "description": "make a file"})),
		claudetest.Reply(claudetest.Text("Done.")))
	var log hookLog
	e.opts.Hooks = map[claude.HookEventName][]claude.HookMatcher{
		claude.HookPermissionRequest: {{Matcher: "Bash", Hooks: []claude.HookFunc{func(ctx context.Context, in claude.HookInput) (*claude.HookOutput, error) {
			log.add(in)
			return &claude.HookOutput{Specific: &claude.HookSpecific{PermissionRequestDecision: &claude.PermissionResult{Allow: true}}}, nil
		}}}},
	}
	// No CanUseTool: with one, the CLI asks it instead and the hook's
	// decision does not count. Without either, the CLI would deny.
	s := e.start()
	_, res := e.turn(s, "make a file")
	if res.IsError || len(res.PermissionDenials) != 0 {
		t.Fatalf("result = %s", res.Raw())
	}
	pr := log.of(claude.HookPermissionRequest)
	if len(pr) != 1 {
		t.Fatalf("PermissionRequest hook called %d times", len(pr))
	}
	if in := pr[0].(*claude.PermissionRequestInput); in.ToolName != "Bash" || bashCommand(t, in.ToolInput) != "touch allowed.txt" {
		t.Errorf("PermissionRequest input = %+v (raw %s)", in, in.Raw())
	}
	if _, err := os.Stat(filepath.Join(e.opts.Cwd, "allowed.txt")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
}

// writeSkill writes a project skill whose text holds a shell command.
func writeSkill(t *testing.T, cwd, name, command string) {
	t.Helper()
	writeFile(t, filepath.Join(cwd, ".claude", "skills", name, "SKILL.md"),
		"---\nname: "+name+"\ndescription: Says what a command printed.\n---\nThe command printed: !`"+command+"`.\n")
}

// loadSkill is the scripted turns in which the model loads skill name.
func loadSkill(name string) []claudetest.Turn {
	return []claudetest.Turn{
		claudetest.Reply(claudetest.ToolUse("Skill", map[string]any{"skill": name})),
		claudetest.Reply(claudetest.Text("Done.")),
	}
}

// skillText returns the text the model got for a loaded skill: the user
// message after the Skill tool's result, or "".
func skillText(srv *claudetest.Server) string {
	reqs := srv.Requests()
	if len(reqs) < 2 {
		return ""
	}
	return string(reqs[1].Raw)
}

// A PreSkillShellCommand hook (2.1.332) sees a skill's shell command, typed,
// before it runs: allowed, it runs; denied, it does not, and the model is
// told so in the skill's text. A read-only command (echo) runs without
// any hook or permission prompt otherwise.
func TestE2EPreSkillShellCommand(t *testing.T) {
	for _, c := range []struct {
		decision claude.HookPermissionDecision
		ran      bool
	}{{claude.HookAllow, true}, {claude.HookDeny, false}, {claude.HookAsk, false}} {
		t.Run(string(c.decision), func(t *testing.T) {
			e := newE2E(t, loadSkill("shelly")...)
			writeSkill(t, e.opts.Cwd, "shelly", "echo RAN$((40+2))")
			var got atomic.Pointer[claude.PreSkillShellCommandInput]
			e.opts.Hooks = map[claude.HookEventName][]claude.HookMatcher{claude.HookPreSkillShellCommand: {{
				Hooks: []claude.HookFunc{claude.HookFor(func(ctx context.Context, in *claude.PreSkillShellCommandInput) (*claude.HookOutput, error) {
					got.Store(in)
					return &claude.HookOutput{Specific: &claude.HookSpecific{PermissionDecision: c.decision,
						PermissionDecisionReason: "claudectl test"}}, nil
				})}}}}
			s := e.start()
			e.turn(s, "use shelly")
			in := got.Load()
			if in == nil {
				t.Fatal("the PreSkillShellCommand hook was not called")
			}
			if in.HookEventName != claude.HookPreSkillShellCommand || in.ToolName != "Bash" || in.Command() != "echo RAN$((40+2))" ||
				in.CommandName != "shelly" || in.InvokedBy != "claude" || in.ToolUseID == "" || in.SessionID == "" {
				t.Errorf("hook input %+v (command %q)", in, in.Command())
			}
			text := skillText(e.srv)
			if ran := strings.Contains(text, "RAN42"); ran != c.ran {
				t.Errorf("the command ran = %v, want %v; the skill's text: %.300s", ran, c.ran, text)
			}
			if !c.ran && !strings.Contains(text, "not run") {
				t.Errorf("the model was not told the command did not run: %.300s", text)
			}
		})
	}
}
