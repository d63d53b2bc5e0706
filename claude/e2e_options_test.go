package claude_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/google/go-cmp/cmp"
)

// systemSeen runs one turn with the given system prompt and returns the
// system prompt of the model request, and the session's working directory.
func systemSeen(t *testing.T, p *claude.SystemPrompt) (system, cwd string) {
	t.Helper()
	e := newE2E(t, claudetest.Reply(claudetest.Text("ok")))
	e.opts.SystemPrompt = p
	s := e.start()
	e.turn(s, "hi")
	for _, r := range e.srv.Requests() {
		if r.LastUserText() == "hi" {
			return r.System, e.opts.Cwd
		}
	}
	t.Fatalf("no model request for the prompt")
	return "", ""
}

const (
	agentSDKIdentity  = "You are a Claude agent, built on Anthropic's Claude Agent SDK."
	claudeCodeHarness = "# Harness"
	// dynamicMemorySection starts a per-user section of Claude Code's prompt
	// (it names the user's memory directory).
	dynamicMemorySection = "# Memory"
)

func TestE2ESystemPromptForms(t *testing.T) {
	t.Run("default is minimal", func(t *testing.T) {
		sys, cwd := systemSeen(t, nil)
		// The official SDKs' default: no Claude Code prompt, only the CLI's
		// one-line identity.
		if !strings.Contains(sys, agentSDKIdentity) || strings.Contains(sys, claudeCodeHarness) || strings.Contains(sys, cwd) || len(sys) > 400 {
			t.Errorf("default system prompt is not the minimal one (%d chars):\n%s", len(sys), sys)
		}
	})
	t.Run("explicitly empty", func(t *testing.T) {
		sys, _ := systemSeen(t, claude.CustomPrompt())
		if !strings.Contains(sys, agentSDKIdentity) || strings.Contains(sys, claudeCodeHarness) || len(sys) > 400 {
			t.Errorf("empty system prompt (%d chars):\n%s", len(sys), sys)
		}
	})
	t.Run("custom blocks", func(t *testing.T) {
		sys, _ := systemSeen(t, claude.CustomPrompt("You are a release bot.", claude.SystemPromptDynamicBoundary, "Today is release day."))
		if !strings.Contains(sys, "You are a release bot.") || !strings.Contains(sys, "Today is release day.") ||
			strings.Contains(sys, claudeCodeHarness) || strings.Contains(sys, claude.SystemPromptDynamicBoundary) {
			t.Errorf("custom system prompt:\n%s", sys)
		}
	})
	t.Run("claude_code preset with append", func(t *testing.T) {
		sys, _ := systemSeen(t, claude.ClaudeCodePrompt("Always answer in haiku."))
		if !strings.Contains(sys, "You are Claude Code") || !strings.Contains(sys, claudeCodeHarness) ||
			!strings.Contains(sys, dynamicMemorySection) || !strings.HasSuffix(strings.TrimSpace(sys), "Always answer in haiku.") {
			t.Errorf("preset system prompt lacks Claude Code's prompt, its memory section or the appended text at its end (%d chars): %s", len(sys), sys)
		}
	})
	t.Run("claude_code preset without dynamic sections", func(t *testing.T) {
		sys, _ := systemSeen(t, &claude.SystemPrompt{Preset: claude.PresetClaudeCode, ExcludeDynamicSections: true})
		if !strings.Contains(sys, claudeCodeHarness) || strings.Contains(sys, dynamicMemorySection) {
			t.Errorf("preset without dynamic sections: has the harness %v, has the per-user memory section %v",
				strings.Contains(sys, claudeCodeHarness), strings.Contains(sys, dynamicMemorySection))
		}
	})
}

// A failing hook blocks the tool when its matcher says OnFailure block; the
// same failure with the default lets the tool run.
func TestE2EHookOnFailureBlock(t *testing.T) {
	for _, tc := range []struct {
		name      string
		onFailure claude.HookFailure
		ran       bool
	}{
		{"block", claude.HookFailureBlock, false},
		{"default", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newE2E(t,
				claudetest.Reply(claudetest.ToolUseID("toolu_fail", "Bash", map[string]any{"command": "touch ran.txt", "description": "make a file"})),
				claudetest.Reply(claudetest.Text("done")))
			e.opts.AllowedTools = []string{"Bash"}
			e.opts.Hooks = map[claude.HookEventName][]claude.HookMatcher{
				claude.HookPreToolUse: {{Matcher: "Bash", OnFailure: tc.onFailure, Hooks: []claude.HookFunc{
					func(context.Context, claude.HookInput) (*claude.HookOutput, error) {
						return nil, errors.New("policy service unreachable")
					}}}},
			}
			s := e.start()
			e.turn(s, "make a file")
			_, err := os.Stat(filepath.Join(e.opts.Cwd, "ran.txt"))
			if ran := err == nil; ran != tc.ran {
				t.Errorf("OnFailure %q: the tool ran = %v, want %v", tc.onFailure, ran, tc.ran)
			}
			if !tc.ran {
				content, isErr := toolResult(t, e.srv, "toolu_fail")
				if !isErr {
					t.Errorf("blocked call's tool_result = %q, not an error", content)
				}
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A plugin directory and skills: the plugin and its skill are loaded
// (system/init), and Skills limits the skills the model is told about to
// the listed ones.
func TestE2EPluginsAndSkills(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("ok")))
	plugin := t.TempDir()
	writeFile(t, filepath.Join(plugin, ".claude-plugin", "plugin.json"), `{"name":"demo-plugin","version":"1.2.3","description":"A demo"}`)
	writeFile(t, filepath.Join(plugin, "skills", "greet", "SKILL.md"), "---\nname: greet\ndescription: Greets people warmly.\n---\nSay hello.\n")
	writeFile(t, filepath.Join(e.opts.Cwd, ".claude", "skills", "deploy", "SKILL.md"), "---\nname: deploy\ndescription: Deploys the app.\n---\nRun make deploy.\n")
	writeFile(t, filepath.Join(e.opts.Cwd, ".claude", "skills", "unlisted", "SKILL.md"), "---\nname: unlisted\ndescription: Should stay hidden.\n---\nHidden.\n")
	e.opts.Plugins = []claude.Plugin{{Path: plugin}}
	e.opts.Skills = []string{"deploy", "demo-plugin:greet"}
	s := e.start()
	msgs, _ := e.turn(s, "hi")
	var init *claude.SystemInit
	for _, m := range msgs {
		if in, ok := m.(*claude.SystemInit); ok {
			init = in
		}
	}
	if init == nil {
		t.Fatal("no system/init")
	}
	var plugins struct {
		Plugins []struct{ Name, Path, Version string } `json:"plugins"`
	}
	if err := json.Unmarshal(init.Raw(), &plugins); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(plugins.Plugins, func(p struct{ Name, Path, Version string }) bool {
		return p.Name == "demo-plugin" && p.Path == plugin && p.Version == "1.2.3"
	}) {
		t.Errorf("system/init plugins = %+v, want demo-plugin from %s", plugins.Plugins, plugin)
	}
	if !slices.Contains(init.Skills, "demo-plugin:greet") || !slices.Contains(init.Skills, "deploy") {
		t.Errorf("system/init skills = %v", init.Skills)
	}
	req := e.srv.Requests()[0]
	raw := string(req.Raw)
	if !strings.Contains(raw, "deploy: Deploys the app.") || !strings.Contains(raw, "demo-plugin:greet: Greets people warmly.") {
		t.Errorf("the model was not told about the listed skills")
	}
	if strings.Contains(raw, "Should stay hidden.") {
		t.Errorf("the model was told about a skill Skills does not list")
	}
}

// Title names the session in its transcript.
func TestE2ETitle(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("ok")))
	e.opts.Title = "Release 1.2 checklist"
	s := e.start()
	e.turn(s, "hi")
	id := s.SessionID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	found, _ := filepath.Glob(filepath.Join(e.opts.Env["HOME"], ".claude", "projects", "*", id+".jsonl"))
	if len(found) != 1 {
		t.Fatalf("transcript of %s: %v", id, found)
	}
	b, err := os.ReadFile(found[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `{"type":"custom-title","customTitle":"Release 1.2 checklist","sessionId":"`+id+`"}`) {
		t.Errorf("the transcript has no custom-title entry for the title")
	}
}

// ToolAliases: a tool_use of the alias runs the tool it stands for.
func TestE2EToolAliases(t *testing.T) {
	e := newE2E(t,
		claudetest.Reply(claudetest.ToolUseID("toolu_alias", "Shell", map[string]any{"command": "touch aliased.txt", "description": "make a file"})),
		claudetest.Reply(claudetest.Text("done")))
	e.opts.ToolAliases = map[string]string{"Shell": "Bash"}
	e.opts.AllowedTools = []string{"Bash"}
	s := e.start()
	e.turn(s, "make a file")
	if _, err := os.Stat(filepath.Join(e.opts.Cwd, "aliased.txt")); err != nil {
		out, isErr := toolResult(t, e.srv, "toolu_alias")
		t.Errorf("the aliased tool did not run (tool_result %q, is_error %v)", out, isErr)
	}
}

// The main thread as an agent of Agents: its prompt is the system prompt,
// its DisallowedTools are gone and its InitialPrompt opens the conversation.
func TestE2EMainThreadAgent(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("reviewed")))
	e.opts.Agents = map[string]claude.AgentDefinition{"reviewer": {
		Description:     "Reviews code",
		Prompt:          "You are REVIEWER-AGENT-7.",
		DisallowedTools: []string{"Bash", "Write"},
		InitialPrompt:   "INITIAL-PROMPT-42: read the README first.",
	}}
	e.opts.Agent = "reviewer"
	s := e.start()
	e.turn(s, "review main.go")
	reqs := e.srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("no model request")
	}
	r := reqs[0]
	if !strings.Contains(r.System, "You are REVIEWER-AGENT-7.") {
		t.Errorf("system prompt lacks the agent's prompt:\n%s", r.System)
	}
	if slices.Contains(r.Tools, "Bash") || slices.Contains(r.Tools, "Write") || !slices.Contains(r.Tools, "Read") {
		t.Errorf("tools offered = %v, want Read but not Bash or Write", r.Tools)
	}
	if !strings.Contains(string(r.Raw), "INITIAL-PROMPT-42") {
		t.Errorf("the agent's initial prompt did not reach the model")
	}
}

const limitedMarker = "You are LIMITED-AGENT-3."

// A sub-agent defined with the newer fields: DisallowedTools, Model,
// CriticalSystemReminder and Skills shape its own requests.
func TestE2ESubagentDefinitionFields(t *testing.T) {
	e := newE2EResponder(t, claudetest.ResponderFunc(func(r *claudetest.Request) claudetest.Turn {
		if strings.Contains(r.System, limitedMarker) {
			return claudetest.Reply(claudetest.Text("limited agent done"))
		}
		if r.AssistantCount() == 0 {
			return claudetest.Reply(claudetest.ToolUseID("toolu_limited", "Agent", map[string]any{
				"description": "limited job", "prompt": "SUBTASK: say done", "subagent_type": "limited"}))
		}
		return claudetest.Reply(claudetest.Text("main done"))
	}))
	writeFile(t, filepath.Join(e.opts.Cwd, ".claude", "skills", "deploy", "SKILL.md"), "---\nname: deploy\ndescription: Deploys the app.\n---\nSKILL-BODY-DEPLOY: run make deploy.\n")
	e.opts.Agents = map[string]claude.AgentDefinition{"limited": {
		Description:            "Does limited things",
		Prompt:                 limitedMarker,
		DisallowedTools:        []string{"Bash"},
		Model:                  "haiku",
		CriticalSystemReminder: "CRITICAL-REMINDER-5",
		Skills:                 []string{"deploy"},
		Background:             false,
	}}
	s := e.start()
	e.turn(s, "delegate")
	for range s.UntilIdle(e.ctx) {
	}
	var sub *claudetest.Request
	for _, r := range e.srv.Requests() {
		if strings.Contains(r.System, limitedMarker) {
			sub = r
		}
	}
	if sub == nil {
		t.Fatal("the sub-agent made no model request")
	}
	if slices.Contains(sub.Tools, "Bash") || !slices.Contains(sub.Tools, "Read") {
		t.Errorf("sub-agent tools = %v, want Read but not Bash", sub.Tools)
	}
	if !strings.Contains(sub.Model, "haiku") {
		t.Errorf("sub-agent model = %q, want a haiku model", sub.Model)
	}
	raw := string(sub.Raw)
	// CriticalSystemReminder is sent too, but CLI 2.1.329 shows no trace of
	// it in a one-request sub-agent.
	if !strings.Contains(raw, "SKILL-BODY-DEPLOY") {
		t.Errorf("the sub-agent's request lacks its preloaded skill")
	}
}

// A JavaScript CLI (2.1.37's cli.js) runs under Executable, node.
func TestE2EJavaScriptCLIUnderNode(t *testing.T) {
	js, err := filepath.EvalSymlinks(claudetest.SDKURLCLIPath(t))
	if err != nil || !strings.HasSuffix(js, ".js") {
		t.Skipf("the older CLI is not a cli.js (%s, %v)", js, err)
	}
	e := newE2E(t, claudetest.Reply(claudetest.Text("hello from node")))
	e.opts.CLIPath = js
	e.opts.Executable = "node"
	e.opts.ExecutableArgs = []string{"--no-warnings"}
	s := e.start()
	_, res := e.turn(s, "hi")
	if res.Result != "hello from node" {
		t.Errorf("result = %q", res.Result)
	}
}

// Plugins and external MCP servers sent in initialize rather than on the
// command line: the CLI says it applied them, and they work.
func TestE2EPluginsAndMCPServersInInitialize(t *testing.T) {
	bin := buildTestMCP(t)
	e := newE2E(t, weatherTurns("toolu_init_mcp", "mcp__wx__lookup_weather", "Kyiv", "ok")...)
	plugin := t.TempDir()
	writeFile(t, filepath.Join(plugin, ".claude-plugin", "plugin.json"), `{"name":"init-plugin","version":"0.0.1"}`)
	writeFile(t, filepath.Join(plugin, "skills", "wave", "SKILL.md"), "---\nname: wave\ndescription: Waves.\n---\nWave.\n")
	e.opts.Plugins = []claude.Plugin{{Path: plugin}}
	e.opts.PluginsInInitialize = true
	e.opts.MCPServerConfigs = map[string]claude.MCPServerConfig{"wx": {Command: bin, Args: []string{"-name", "wx"}}}
	e.opts.MCPServersInInitialize = true
	e.opts.AllowedTools = []string{"mcp__wx"}
	s := e.start()
	r, err := s.Initialize(e.ctx)
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if r.PluginsApplied == nil || !*r.PluginsApplied || r.MCPServersApplied == nil || !*r.MCPServersApplied {
		t.Errorf("plugins_applied %v, mcp_servers_applied %v; response %s", r.PluginsApplied, r.MCPServersApplied, r.Raw)
	}
	msgs, _ := e.turn(s, "Weather in Kyiv?")
	for _, m := range msgs {
		if in, ok := m.(*claude.SystemInit); ok && !slices.Contains(in.Skills, "init-plugin:wave") {
			t.Errorf("system/init skills %v lack the plugin's skill", in.Skills)
		}
	}
	if out, isErr := toolResult(t, e.srv, "toolu_init_mcp"); isErr || out != "wx says: sunny in Kyiv" {
		t.Errorf("tool_result of the server sent in initialize = %q (is_error %v)", out, isErr)
	}
}

// ThinkingDisplay and TaskBudget reach the model request (2.1.329 asks
// the API for "updates" when the display is "omitted").
func TestE2EThinkingDisplayAndTaskBudget(t *testing.T) {
	for display, want := range map[string]string{"summarized": "summarized", "omitted": "updates"} {
		t.Run(display, func(t *testing.T) {
			e := newE2E(t, claudetest.Reply(claudetest.Text("ok")))
			e.opts.Thinking = claude.ThinkingAdaptive
			e.opts.ThinkingDisplay = display
			e.opts.TaskBudget = 40000
			s := e.start()
			e.turn(s, "hi")
			var body struct {
				Thinking struct {
					Type    string `json:"type"`
					Display string `json:"display"`
				} `json:"thinking"`
				OutputConfig struct {
					TaskBudget json.RawMessage `json:"task_budget"`
				} `json:"output_config"`
			}
			r := e.srv.Requests()[0]
			if err := json.Unmarshal(r.Raw, &body); err != nil {
				t.Fatal(err)
			}
			if body.Thinking.Type != "adaptive" || body.Thinking.Display != want {
				t.Errorf("thinking = %+v, want display %q", body.Thinking, want)
			}
			if !strings.Contains(string(body.OutputConfig.TaskBudget), "40000") {
				t.Errorf("output_config.task_budget = %s", body.OutputConfig.TaskBudget)
			}
		})
	}
}

// settingsOf asks the CLI for its settings (get_settings): the effective
// ones and which source gave what.
func settingsOf(t *testing.T, e *e2e, s *claude.Session) (effective map[string]any, sources map[string]map[string]any) {
	t.Helper()
	raw, err := s.Control(e.ctx, "get_settings", nil)
	if err != nil {
		t.Fatalf("get_settings: %v", err)
	}
	var r struct {
		Effective map[string]any `json:"effective"`
		Sources   []struct {
			Source   string         `json:"source"`
			Settings map[string]any `json:"settings"`
		} `json:"sources"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	sources = map[string]map[string]any{}
	for _, src := range r.Sources {
		sources[src.Source] = src.Settings
	}
	return r.Effective, sources
}

// Sandbox is merged into the --settings JSON, ManagedSettings arrive as
// policy settings, and SettingSources chooses the settings files.
func TestE2ESettingsSandboxManagedAndSources(t *testing.T) {
	e := newE2E(t)
	writeFile(t, filepath.Join(e.opts.Cwd, ".claude", "settings.json"), `{"env":{"FROM_PROJECT":"1"}}`)
	e.opts.Settings = `{"env":{"FROM_FLAG":"1"}}`
	e.opts.Sandbox = json.RawMessage(`{"enabled":false,"network":{"allowedDomains":["example.com"]}}`)
	e.opts.ManagedSettings = json.RawMessage(`{"permissions":{"deny":["WebFetch"]}}`)
	e.opts.SettingSources = []string{"project"}
	s := e.start()
	_, sources := settingsOf(t, e, s)
	want := map[string]any{
		"env":     map[string]any{"FROM_FLAG": "1"},
		"sandbox": map[string]any{"enabled": false, "network": map[string]any{"allowedDomains": []any{"example.com"}}},
	}
	if diff := cmp.Diff(want, sources["flagSettings"]); diff != "" {
		t.Errorf("flag settings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"permissions": map[string]any{"deny": []any{"WebFetch"}}}, sources["policySettings"]); diff != "" {
		t.Errorf("policy settings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"env": map[string]any{"FROM_PROJECT": "1"}}, sources["projectSettings"]); diff != "" {
		t.Errorf("project settings with SettingSources [project] (-want +got):\n%s", diff)
	}
	s.Close()

	// No setting sources: the project's file is not read.
	e2 := newE2E(t)
	writeFile(t, filepath.Join(e2.opts.Cwd, ".claude", "settings.json"), `{"env":{"FROM_PROJECT":"1"}}`)
	e2.opts.SettingSources = []string{}
	s2 := e2.start()
	if _, sources := settingsOf(t, e2, s2); sources["projectSettings"] != nil {
		t.Errorf("project settings read with no setting sources: %v", sources["projectSettings"])
	}
}

// PromptSuggestions: after a turn's result (not the first turn's) the CLI
// asks the model for the user's likely next prompt and prints it.
func TestE2EPromptSuggestions(t *testing.T) {
	e := newE2EResponder(t, claudetest.ResponderFunc(func(r *claudetest.Request) claudetest.Turn {
		switch r.LastUserText() {
		case "first":
			return claudetest.Reply(claudetest.Text("one"))
		case "second":
			return claudetest.Reply(claudetest.Text("two"))
		}
		return claudetest.Reply(claudetest.Text("run the tests"))
	}))
	e.opts.PromptSuggestions = true
	s := e.start()
	e.turn(s, "first")
	e.turn(s, "second")
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	for {
		m, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("no prompt suggestion after the second turn: %v", err)
		}
		if ps, ok := m.(*claude.PromptSuggestion); ok {
			if ps.Suggestion != "run the tests" {
				t.Errorf("suggestion = %q", ps.Suggestion)
			}
			return
		}
	}
}

// EnableFileCheckpointing: a file the model changed can be rewound to its
// state at the prompt; without it the CLI cannot rewind.
func TestE2EFileCheckpointing(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			var file string
			e := newE2EResponder(t, claudetest.ResponderFunc(func(r *claudetest.Request) claudetest.Turn {
				if r.AssistantCount() == 0 {
					return claudetest.Reply(claudetest.ToolUseID("toolu_write", "Write", map[string]any{"file_path": file, "content": "new\n"}))
				}
				return claudetest.Reply(claudetest.Text("written"))
			}))
			file = filepath.Join(e.opts.Cwd, "notes.txt")
			writeFile(t, file, "old\n")
			e.opts.EnableFileCheckpointing = on
			e.opts.ReplayUserMessages = true
			e.opts.AllowedTools = []string{"Write", "Read"}
			s := e.start()
			msgs, _ := e.turn(s, "rewrite the notes")
			var prompt string
			for _, m := range msgs {
				if u, ok := m.(*claude.UserMessage); ok && u.IsReplay && prompt == "" {
					prompt = u.UUID
				}
			}
			if b, _ := os.ReadFile(file); string(b) != "new\n" || prompt == "" {
				t.Fatalf("file after the turn %q, prompt uuid %q", b, prompt)
			}
			r, err := s.RewindFiles(e.ctx, prompt, true)
			if !on {
				if err == nil && r.CanRewind {
					t.Errorf("rewind possible without checkpointing: %+v", r)
				}
				return
			}
			if err != nil || !r.CanRewind || !slices.Contains(r.FilesChanged, file) {
				t.Fatalf("RewindFiles dry run = %+v, %v", r, err)
			}
			if _, err := s.RewindFiles(e.ctx, prompt, false); err != nil {
				t.Fatalf("RewindFiles: %v", err)
			}
			if b, _ := os.ReadFile(file); string(b) != "old\n" {
				t.Errorf("file after the rewind = %q, want its old content", b)
			}
		})
	}
}

// An administrator's managed setting disableSideloadFlags refuses a launch
// that names MCP servers of its own (2.1.331): the CLI prints a result
// saying why (startup_failure_reason sideload_flags_disabled, which the SDK
// asks for) and exits; the session's end is the CLI's exit code 1.
func TestE2EStartupFailureReason(t *testing.T) {
	e := newE2E(t)
	e.opts.ManagedSettings = json.RawMessage(`{"disableSideloadFlags":true}`)
	e.opts.MCPConfig = []string{`{"mcpServers":{"tools":{"type":"stdio","command":"true"}}}`}
	s := e.start()
	var res *claude.ResultMessage
	var end error
	for m, err := range s.Messages(e.ctx) {
		if err != nil {
			end = err
			break
		}
		if r, ok := m.(*claude.ResultMessage); ok {
			res = r
		}
	}
	if res == nil {
		t.Fatalf("no result before the end (%v); stderr: %s", end, s.StderrTail())
	}
	var re *claude.ResultError
	if res.StartupFailureReason != claude.StartupSideloadFlagsDisabled || res.StartupFailureReason.Retryable() ||
		!errors.As(res.Err(), &re) || re.StartupFailureReason != claude.StartupSideloadFlagsDisabled ||
		!strings.Contains(re.Error(), "refused to start (sideload_flags_disabled)") || !strings.Contains(re.Error(), "disableSideloadFlags") {
		t.Errorf("result %s, err %v", res.Raw(), res.Err())
	}
	var ee *claude.ExitError
	if !errors.As(end, &ee) || ee.Code != 1 {
		t.Errorf("the session ended with %v, want the CLI's exit code 1", end)
	}
	if n := len(e.srv.Requests()); n != 0 {
		t.Errorf("%d requests reached the model", n)
	}
}
