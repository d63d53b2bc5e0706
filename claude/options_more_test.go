package claude_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Unit tests of the options of options_more.go: each one's flag,
// environment variable or initialize field, as the TypeScript SDK 0.3.330
// writes it.

func TestArgsOfTheOfficialOptions(t *testing.T) {
	base, _ := (&claude.Options{}).Args()
	o := &claude.Options{
		Agent:                    "reviewer",
		TaskBudget:               50000,
		DebugFile:                "/tmp/debug.log",
		Debug:                    true, // DebugFile wins, as in TS
		PermissionPromptToolName: "mcp__perm__ask",
		PermissionPrompts:        "none",
		ProjectConfigRoot:        "/src/main",
		Plugins:                  []claude.Plugin{{Path: "/p/one"}, {Path: "-p two", SkipMCPDiscovery: true}},
		ResumeSessionAt:          "u1",
		ResumeDropsTurn:          "u2",
		ManagedSettings:          json.RawMessage(`{ "permissions": {"deny": ["WebFetch"]} }`),
		Thinking:                 claude.ThinkingAdaptive,
		ThinkingDisplay:          "summarized",
		Skills:                   []string{"pdf", "my-plugin:docx"},
		AllowedTools:             []string{"Read", "Skill(pdf)"},
		SystemPrompt:             &claude.SystemPrompt{File: "/etc/prompt.md"},
	}
	got, err := o.Args()
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(base),
		"--allowedTools=Read,Skill(pdf),Skill(my-plugin:docx)",
		"--thinking=adaptive", "--thinking-display=summarized",
		"--resume-session-at=u1",
		"--agent=reviewer", "--system-prompt-file=/etc/prompt.md", "--task-budget=50000", "--debug-file=/tmp/debug.log",
		"--permission-prompt-tool=mcp__perm__ask", "--permission-prompts=none", "--project-config-root=/src/main",
		"--plugin-dir=/p/one", "--plugin-dir-no-mcp=-p two", "--resume-drops-turn=u2",
		`--managed-settings={"permissions":{"deny":["WebFetch"]}}`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}

	got, _ = (&claude.Options{AllSkills: true, Debug: true}).Args()
	if !slices.Contains(got, "--allowedTools=Skill") || !slices.Contains(got, "--debug") {
		t.Errorf("AllSkills, Debug: %v", got)
	}
	// Plugins and external MCP servers in initialize: no flag of their own,
	// and the CLI waits for initialize.
	got, _ = (&claude.Options{
		Plugins: []claude.Plugin{{Path: "/p"}}, PluginsInInitialize: true,
		MCPServerConfigs: map[string]claude.MCPServerConfig{"x": {Command: "x"}}, MCPServersInInitialize: true,
	}).Args()
	if !slices.Contains(got, "--await-initialize") || slices.ContainsFunc(got, func(a string) bool {
		return strings.HasPrefix(a, "--plugin-dir") || strings.HasPrefix(a, "--mcp-config")
	}) {
		t.Errorf("delivery in initialize: %v", got)
	}
}

func TestSandboxMergesIntoSettings(t *testing.T) {
	for _, tc := range []struct {
		settings, sandbox, want string
	}{
		{"", `{"enabled":true}`, `{"sandbox":{"enabled":true,"failIfUnavailable":true}}`},
		{`{"model":"x","sandbox":{"network":{"allowedDomains":["a"]},"enabled":false}}`, `{"network":{"deniedDomains":["b"]}}`,
			`{"model":"x","sandbox":{"enabled":false,"network":{"allowedDomains":["a"],"deniedDomains":["b"]}}}`},
		{"", `{"enabled":true,"failIfUnavailable":false}`, `{"sandbox":{"enabled":true,"failIfUnavailable":false}}`},
	} {
		got, err := (&claude.Options{Settings: tc.settings, Sandbox: json.RawMessage(tc.sandbox)}).Args()
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(got, func(a string) bool { return strings.HasPrefix(a, "--settings=") })
		if i < 0 {
			t.Fatalf("no --settings in %v", got)
		}
		if diff := cmp.Diff(jsonOf(t, []byte(tc.want)), jsonOf(t, []byte(strings.TrimPrefix(got[i], "--settings=")))); diff != "" {
			t.Errorf("settings %s + sandbox %s (-want +got):\n%s", tc.settings, tc.sandbox, diff)
		}
	}
}

func TestEnvironOfTheOfficialOptions(t *testing.T) {
	t.Setenv("CLAUDE_CODE_QUESTION_EXTENDED", "1")
	t.Setenv("CLAUDE_CODE_AGENT_PROGRESS_SUMMARIES", "1")
	env := (&claude.Options{
		EnableFileCheckpointing: true,
		ToolConfig:              &claude.ToolConfig{AskUserQuestion: &claude.AskUserQuestionConfig{PreviewFormat: "html"}},
	}).Environ()
	for _, kv := range []string{"CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING=true", "CLAUDE_CODE_QUESTION_PREVIEW_FORMAT=html"} {
		if !slices.Contains(env, kv) {
			t.Errorf("env lacks %s", kv)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "CLAUDE_CODE_QUESTION_EXTENDED=") || strings.HasPrefix(kv, "CLAUDE_CODE_AGENT_PROGRESS_SUMMARIES=") {
			t.Errorf("inherited %s was not dropped (the TS SDK drops it)", kv)
		}
	}
	// Env wins over what an option sets.
	env = (&claude.Options{EnableFileCheckpointing: true, Env: map[string]string{"CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING": "false"}}).Environ()
	if !slices.Contains(env, "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING=false") || slices.Contains(env, "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING=true") {
		t.Errorf("Env did not override the option")
	}
}

func TestInitializeFieldsOfTheOfficialOptions(t *testing.T) {
	snap := false
	_, _, init := startMemRaw(t, &claude.Options{
		SystemPrompt:           &claude.SystemPrompt{Preset: claude.PresetClaudeCode, Append: "Be brief.", ExcludeDynamicSections: true, Snapshot: &snap},
		PlanModeInstructions:   "Plan in three steps.",
		ToolAliases:            map[string]string{"Bash": "mcp__ws__bash"},
		Title:                  "Release 1.2",
		Skills:                 []string{"pdf"},
		PromptSuggestions:      true,
		AgentProgressSummaries: true,
		ForwardSubagentText:    true,
		PerTaskStopAffordance:  true,
		SupportedDialogKinds:   []string{"refusal_fallback_prompt"},
		OnUserDialog: func(context.Context, *claude.UserDialogRequest) (claude.UserDialogResult, error) {
			return claude.UserDialogResult{Cancelled: true}, nil
		},
		Plugins:                []claude.Plugin{{Path: "/p", SkipMCPDiscovery: true}},
		PluginsInInitialize:    true,
		MCPServerConfigs:       map[string]claude.MCPServerConfig{"web": {Type: claude.MCPHTTP, URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "secret"}}},
		MCPServersInInitialize: true,
		JSONSchema:             json.RawMessage(`{"type": "object"}`),
	})
	want := `{
		"subtype": "initialize",
		"appendSystemPrompt": "Be brief.",
		"excludeDynamicSections": true,
		"systemPromptSnapshot": false,
		"planModeInstructions": "Plan in three steps.",
		"toolAliases": {"Bash": "mcp__ws__bash"},
		"title": "Release 1.2",
		"skills": ["pdf"],
		"promptSuggestions": true,
		"agentProgressSummaries": true,
		"forwardSubagentText": true,
		"perTaskStopAffordance": true,
		"supportedDialogKinds": ["refusal_fallback_prompt"],
		"plugins": [{"type": "local", "path": "/p", "skipMcpDiscovery": true}],
		"mcpServers": {"web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "secret"}}},
		"jsonSchema": {"type": "object"}
	}`
	if diff := cmp.Diff(jsonOf(t, []byte(want)), jsonOf(t, init)); diff != "" {
		t.Errorf("initialize (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		p    *claude.SystemPrompt
		want string
	}{
		{nil, `{"subtype":"initialize","systemPrompt":[""]}`},
		{claude.CustomPrompt(), `{"subtype":"initialize","systemPrompt":[""]}`},
		{claude.CustomPrompt("a", claude.SystemPromptDynamicBoundary, "b"), `{"subtype":"initialize","systemPrompt":["a","__SYSTEM_PROMPT_DYNAMIC_BOUNDARY__","b"]}`},
		{claude.ClaudeCodePrompt(""), `{"subtype":"initialize"}`},
		{claude.SystemPromptFromFlags("custom", "more"), `{"subtype":"initialize","systemPrompt":["custom"],"appendSystemPrompt":"more"}`},
		{claude.SystemPromptFromFlags("", "more"), `{"subtype":"initialize","appendSystemPrompt":"more"}`},
		{&claude.SystemPrompt{File: "/p.md"}, `{"subtype":"initialize"}`},
	} {
		_, _, init := startMemRaw(t, &claude.Options{SystemPrompt: tc.p})
		if diff := cmp.Diff(jsonOf(t, []byte(tc.want)), jsonOf(t, init)); diff != "" {
			t.Errorf("SystemPrompt %+v (-want +got):\n%s", tc.p, diff)
		}
	}
}

func TestAgentDefinitionJSON(t *testing.T) {
	d := claude.AgentDefinition{
		Description: "Reviews", Prompt: "You review.", Tools: []string{"Read"}, DisallowedTools: []string{"mcp__web"},
		Model: "inherit", MCPServers: []claude.AgentMCPServer{{Name: "weather"}, {Name: "own", Config: &claude.MCPServerConfig{Command: "srv"}}},
		CriticalSystemReminder: "Never push.", Skills: []string{"pdf"}, InitialPrompt: "/review", MaxTurns: 4,
		AutoCompactWindow: 50000, Background: true, OmitClaudeMd: true, Memory: "project", Effort: "12",
		PermissionMode: claude.PermissionPlan, Observer: "watcher", ObserverMessage: "Be terse.",
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"description":"Reviews","prompt":"You review.","tools":["Read"],"disallowedTools":["mcp__web"],"model":"inherit",
		"mcpServers":["weather",{"own":{"type":"stdio","command":"srv","args":[]}}],
		"criticalSystemReminder_EXPERIMENTAL":"Never push.","skills":["pdf"],"initialPrompt":"/review","maxTurns":4,
		"autoCompactWindow":50000,"background":true,"omitClaudeMd":true,"memory":"project","effort":12,
		"permissionMode":"plan","observer":"watcher","observerMessage":"Be terse."}`
	if diff := cmp.Diff(jsonOf(t, []byte(want)), jsonOf(t, b)); diff != "" {
		t.Errorf("AgentDefinition JSON (-want +got):\n%s", diff)
	}
	b, _ = json.Marshal(claude.AgentDefinition{Description: "d", Prompt: "p", Effort: "high"})
	if string(b) != `{"description":"d","prompt":"p","effort":"high"}` {
		t.Errorf("minimal AgentDefinition = %s", b)
	}
}

func TestOptionErrorsOfTheOfficialOptions(t *testing.T) {
	dialog := func(context.Context, *claude.UserDialogRequest) (claude.UserDialogResult, error) {
		return claude.UserDialogResult{}, nil
	}
	agent := func(mod func(*claude.AgentDefinition)) map[string]claude.AgentDefinition {
		d := claude.AgentDefinition{Description: "d", Prompt: "p"}
		mod(&d)
		return map[string]claude.AgentDefinition{"a": d}
	}
	for _, tc := range []struct {
		o            claude.Options
		field, value string
	}{
		{claude.Options{Plugins: []claude.Plugin{{}}}, "Plugins", "[0]"},
		{claude.Options{Skills: []string{"pdf"}, AllSkills: true}, "AllSkills", "true"},
		{claude.Options{Skills: []string{"*"}}, "Skills", "*"},
		{claude.Options{Skills: []string{"/pdf"}}, "Skills", "/pdf"},
		{claude.Options{Skills: []string{"a,b"}}, "Skills", "a,b"},
		{claude.Options{Skills: []string{" pdf"}}, "Skills", " pdf"},
		{claude.Options{Skills: []string{"x:*"}}, "Skills", "x:*"},
		{claude.Options{Sandbox: json.RawMessage(`[1]`)}, "Sandbox", "[1]"},
		{claude.Options{Sandbox: json.RawMessage(`{"enabled":true}`), Settings: "/etc/settings.json"}, "Sandbox", `{"enabled":true}`},
		{claude.Options{ManagedSettings: json.RawMessage(`"x"`)}, "ManagedSettings", `"x"`},
		{claude.Options{ToolAliases: map[string]string{"Bash": ""}}, "ToolAliases", "Bash="},
		{claude.Options{TaskBudget: -1}, "TaskBudget", "-1"},
		{claude.Options{ThinkingDisplay: "verbose"}, "ThinkingDisplay", "verbose"},
		{claude.Options{ThinkingDisplay: "omitted", Thinking: claude.ThinkingDisabled}, "ThinkingDisplay", "omitted"},
		{claude.Options{ToolConfig: &claude.ToolConfig{AskUserQuestion: &claude.AskUserQuestionConfig{PreviewFormat: "pdf"}}}, "ToolConfig.AskUserQuestion.PreviewFormat", "pdf"},
		{claude.Options{PermissionPromptToolName: "mcp__p__ask", CanUseTool: claude.AnswerQuestions(nil, nil)}, "PermissionPromptToolName", "mcp__p__ask"},
		{claude.Options{PermissionPrompts: "robot"}, "PermissionPrompts", "robot"},
		{claude.Options{ProjectConfigRoot: "relative"}, "ProjectConfigRoot", "relative"},
		{claude.Options{ResumeDropsTurn: "u"}, "ResumeDropsTurn", "u"},
		{claude.Options{SupportedDialogKinds: []string{"k"}}, "SupportedDialogKinds", "k"},
		{claude.Options{SettingSources: []string{"user", "global"}}, "SettingSources", "global"},
		{claude.Options{SystemPrompt: &claude.SystemPrompt{Preset: "fancy"}}, "SystemPrompt.Preset", "fancy"},
		{claude.Options{SystemPrompt: &claude.SystemPrompt{Preset: claude.PresetClaudeCode, Blocks: []string{"x"}}}, "SystemPrompt.Preset", "claude_code"},
		{claude.Options{SystemPrompt: &claude.SystemPrompt{Blocks: []string{"x"}, ExcludeDynamicSections: true}}, "SystemPrompt.ExcludeDynamicSections", "true"},
		{claude.Options{SystemPrompt: &claude.SystemPrompt{Blocks: []string{"x"}, File: "/f"}}, "SystemPrompt.File", "/f"},
		{claude.Options{Agents: agent(func(d *claude.AgentDefinition) { d.Prompt = "" })}, "Agents[a].Prompt", ""},
		{claude.Options{Agents: agent(func(d *claude.AgentDefinition) { d.Memory = "team" })}, "Agents[a].Memory", "team"},
		{claude.Options{Agents: agent(func(d *claude.AgentDefinition) { d.Effort = "huge" })}, "Agents[a].Effort", "huge"},
		{claude.Options{Agents: agent(func(d *claude.AgentDefinition) { d.PermissionMode = "yolo" })}, "Agents[a].PermissionMode", "yolo"},
		{claude.Options{Agents: agent(func(d *claude.AgentDefinition) { d.MaxTurns = -2 })}, "Agents[a].MaxTurns", "-2"},
		{claude.Options{Agents: agent(func(d *claude.AgentDefinition) {
			d.MCPServers = []claude.AgentMCPServer{{Name: "x", Config: &claude.MCPServerConfig{}}}
		})}, "Agents[a].MCPServers", "x"},
		{claude.Options{MCPServerSettings: map[string]claude.MCPServerSettings{"ghost": {}}}, "MCPServerSettings", "ghost"},
		{claude.Options{MCPServerConfigs: map[string]claude.MCPServerConfig{"x": {Command: "x", Tools: []claude.MCPToolPolicy{{Name: "t"}}}}}, "MCPServerConfigs", "x"},
		{claude.Options{MCPServerConfigs: map[string]claude.MCPServerConfig{"x": {Type: claude.MCPHTTP, URL: "http://h", Tools: []claude.MCPToolPolicy{{Name: "t", PermissionPolicy: "maybe"}}}}}, "MCPServerConfigs", "x"},
		{claude.Options{Hooks: nil, OnUserDialog: dialog, SupportedDialogKinds: nil, CLIPath: "/no/such/cli.js"}, "", ""},
	} {
		_, err := claude.Start(t.Context(), &tc.o)
		if tc.field == "" {
			// A JavaScript CLI that does not exist is not found, whatever Executable.
			if !errors.Is(err, claude.ErrNotFound) || !strings.Contains(err.Error(), "/no/such/cli.js") {
				t.Errorf("missing JavaScript CLI: err = %v", err)
			}
			continue
		}
		var oe *claude.OptionError
		if !errors.As(err, &oe) || oe.Field != tc.field || oe.Value != tc.value {
			t.Errorf("Start(%+v) = %v, want an OptionError for %s=%q", tc.o, err, tc.field, tc.value)
		}
	}
}

func TestMCPServerConfigSettingsJSON(t *testing.T) {
	no := false
	for _, tc := range []struct {
		c    claude.MCPServerConfig
		want string
	}{
		{claude.MCPServerConfig{Command: "srv", Timeout: 90_000_000_000, AlwaysLoad: &no},
			`{"type":"stdio","command":"srv","args":[],"timeout":90000,"alwaysLoad":false}`},
		{claude.MCPServerConfig{Type: claude.MCPSSE, URL: "http://h/sse", Tools: []claude.MCPToolPolicy{{Name: "t", PermissionPolicy: "always_ask", OrgMaxPermission: "ask"}}},
			`{"type":"sse","url":"http://h/sse","tools":[{"name":"t","permission_policy":"always_ask","org_max_permission":"ask"}]}`},
	} {
		b, err := json.Marshal(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(jsonOf(t, []byte(tc.want)), jsonOf(t, b)); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.c, diff)
		}
	}
}

// A JavaScript CLI runs under Executable with ExecutableArgs first; a
// native one gets ExecutableArgs first.
func TestExecutableForAJavaScriptCLI(t *testing.T) {
	dir := t.TempDir()
	cli := filepath.Join(dir, "cli.mjs")
	if err := os.WriteFile(cli, []byte("// not executable\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got *claude.Command
	tr := recordTransport{&got}
	_, err := claude.Start(t.Context(), &claude.Options{CLIPath: cli, Transport: tr, Executable: "bun", ExecutableArgs: []string{"--smol"}})
	if err == nil || got == nil {
		t.Fatalf("Start = %v, command %v", err, got)
	}
	if got.Path != "bun" || len(got.Args) < 3 || got.Args[0] != "--smol" || got.Args[1] != cli || got.Args[2] != "--output-format" {
		t.Errorf("command = %s %q", got.Path, got.Args)
	}
	_, _ = claude.Start(t.Context(), &claude.Options{CLIPath: cli, Transport: tr})
	if got.Path != "node" || got.Args[0] != cli {
		t.Errorf("default runtime: command = %s %q", got.Path, got.Args)
	}
}

// recordTransport records the command it is asked to start, and fails.
type recordTransport struct{ got **claude.Command }

func (r recordTransport) Start(ctx context.Context, cmd *claude.Command) (claude.Conn, error) {
	*r.got = cmd
	return nil, errors.New("recordTransport starts nothing")
}

func TestUserDialog(t *testing.T) {
	var got *claude.UserDialogRequest
	_, c, _ := startMemRaw(t, &claude.Options{
		SupportedDialogKinds: []string{"refusal_fallback_prompt", "pick"},
		OnUserDialog: func(ctx context.Context, req *claude.UserDialogRequest) (claude.UserDialogResult, error) {
			got = req
			if req.DialogKind != "pick" {
				return claude.UserDialogResult{Cancelled: true}, nil
			}
			return claude.UserDialogResult{Result: map[string]any{"choice": 2}}, nil
		},
	})
	ask := func(id, kind string) map[string]any {
		c.print(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{
			"subtype": "request_user_dialog", "dialog_kind": kind, "payload": map[string]any{"options": []int{1, 2}}, "tool_use_id": "toolu_9"}})
		return c.nextOf(t, "control_response")["response"].(map[string]any)
	}
	r := ask("d1", "pick")
	if diff := cmp.Diff(map[string]any{"behavior": "completed", "result": map[string]any{"choice": 2.0}}, r["response"]); diff != "" {
		t.Errorf("completed dialog (-want +got):\n%s", diff)
	}
	if got == nil || got.RequestID != "d1" || got.ToolUseID != "toolu_9" || string(got.Payload) != `{"options":[1,2]}` {
		t.Errorf("request = %+v", got)
	}
	r = ask("d2", "refusal_fallback_prompt")
	if diff := cmp.Diff(map[string]any{"behavior": "cancelled"}, r["response"]); diff != "" {
		t.Errorf("cancelled dialog (-want +got):\n%s", diff)
	}
}

func TestVerbatimPrompts(t *testing.T) {
	s, c, _ := startMemRaw(t, &claude.Options{VerbatimPrompts: true})
	if err := s.SendText(t.Context(), "@secret.txt /help"); err != nil {
		t.Fatal(err)
	}
	if u := c.nextOf(t, "user"); u["client_composed"] != true {
		t.Errorf("user line without client_composed: %v", u)
	}
	s, c, _ = startMemRaw(t, &claude.Options{})
	if err := s.SendText(t.Context(), "hi"); err != nil {
		t.Fatal(err)
	}
	if u := c.nextOf(t, "user"); u["client_composed"] != nil {
		t.Errorf("client_composed sent without VerbatimPrompts: %v", u)
	}
}

// AddMCPServer and RemoveMCPServer send the whole set: the external servers
// MCPSetServers set and every in-process server with its settings.
func TestAddRemoveMCPServerRequests(t *testing.T) {
	ts := newTestServer(1)
	s, c, _ := startMemRaw(t, &claude.Options{MCPServers: map[string]*mcp.Server{"calc": ts.Server}})
	ctx := t.Context()
	type result struct {
		r   *claude.MCPSetServersResult
		err error
	}
	call := func(f func() (*claude.MCPSetServersResult, error)) map[string]any {
		t.Helper()
		done := make(chan result, 1)
		go func() { r, err := f(); done <- result{r, err} }()
		req := c.nextOf(t, "control_request")
		respond(c, req["request_id"], map[string]any{"added": []string{}, "removed": []string{}, "errors": map[string]string{}})
		if r := <-done; r.err != nil {
			t.Fatal(r.err)
		}
		return req["request"].(map[string]any)["servers"].(map[string]any)
	}
	got := call(func() (*claude.MCPSetServersResult, error) {
		return s.MCPSetServers(ctx, map[string]claude.MCPServerConfig{"ext": {Command: "e"}})
	})
	if diff := cmp.Diff(map[string]any{
		"ext":  map[string]any{"type": "stdio", "command": "e", "args": []any{}},
		"calc": map[string]any{"type": "sdk", "name": "calc"},
	}, got); diff != "" {
		t.Errorf("MCPSetServers (-want +got):\n%s", diff)
	}
	got = call(func() (*claude.MCPSetServersResult, error) {
		return s.AddMCPServer(ctx, "late", ts.Server, &claude.MCPServerSettings{Timeout: 5 * time.Second, Tools: []claude.MCPToolPolicy{{Name: "add", PermissionPolicy: "always_deny"}}})
	})
	if diff := cmp.Diff(map[string]any{
		"ext":  map[string]any{"type": "stdio", "command": "e", "args": []any{}},
		"calc": map[string]any{"type": "sdk", "name": "calc"},
		"late": map[string]any{"type": "sdk", "name": "late", "timeout": 5000.0, "tools": []any{map[string]any{"name": "add", "permission_policy": "always_deny"}}},
	}, got); diff != "" {
		t.Errorf("AddMCPServer (-want +got):\n%s", diff)
	}
	got = call(func() (*claude.MCPSetServersResult, error) { return s.RemoveMCPServer(ctx, "calc") })
	if diff := cmp.Diff([]string{"ext", "late"}, slices.Sorted(maps.Keys(got))); diff != "" {
		t.Errorf("RemoveMCPServer (-want +got):\n%s", diff)
	}
	// The removed server is unknown to the router now.
	c.print(map[string]any{"type": "control_request", "request_id": "m1", "request": map[string]any{
		"subtype": "mcp_message", "server_name": "calc", "message": map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}}})
	r := c.nextOf(t, "control_response")["response"].(map[string]any)
	if e, _ := r["response"].(map[string]any)["mcp_response"].(map[string]any)["error"].(map[string]any); e["code"] != -32601.0 {
		t.Errorf("message to a removed server: %v", r)
	}
	if _, err := s.RemoveMCPServer(ctx, "calc"); err == nil {
		t.Error("removing an unknown server succeeded")
	}
	if _, err := s.AddMCPServer(ctx, "ext", ts.Server, nil); err == nil {
		t.Error("adding an in-process server under an external server's name succeeded")
	}
	if _, err := s.MCPSetServers(ctx, map[string]claude.MCPServerConfig{"late": {Command: "x"}}); err == nil {
		t.Error("MCPSetServers naming an in-process server succeeded")
	}
}
