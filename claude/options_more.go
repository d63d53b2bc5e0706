package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// This file holds the options the official SDKs have beyond the CLI's
// common flags: their types, validation and how each reaches the CLI (a
// flag, a variable of the environment or a field of initialize), mapped as
// @anthropic-ai/claude-agent-sdk 0.3.330 maps them. docs/parity.md lists
// them all.

// A Plugin is a local plugin directory to load.
type Plugin struct {
	// Path is the plugin's directory.
	Path string
	// SkipMCPDiscovery loads the plugin without the MCP servers it declares
	// (--plugin-dir-no-mcp).
	SkipMCPDiscovery bool
}

// MarshalJSON writes p as initialize's plugins entries:
// {"type":"local","path":...,"skipMcpDiscovery":true}.
func (p Plugin) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Type             string `json:"type"`
		Path             string `json:"path"`
		SkipMCPDiscovery bool   `json:"skipMcpDiscovery,omitempty"`
	}{"local", p.Path, p.SkipMCPDiscovery})
}

// ToolConfig configures built-in tools (the official toolConfig).
type ToolConfig struct {
	AskUserQuestion *AskUserQuestionConfig
}

// AskUserQuestionConfig configures the AskUserQuestion tool.
type AskUserQuestionConfig struct {
	// PreviewFormat is the format of option previews: "markdown" or "html"
	// (environment CLAUDE_CODE_QUESTION_PREVIEW_FORMAT). Empty leaves the
	// CLI's default.
	PreviewFormat string
}

// UserDialogRequest is a blocking dialog the CLI asks this program to show
// (a request_user_dialog control request); each DialogKind has its own
// Payload and result.
type UserDialogRequest struct {
	RequestID  string          `json:"-"`
	DialogKind string          `json:"dialog_kind"`
	Payload    json.RawMessage `json:"payload"`
	ToolUseID  string          `json:"tool_use_id,omitempty"`
}

// UserDialogResult answers a UserDialogRequest: Cancelled (the required
// answer for a kind the program does not know) lets the CLI apply the
// dialog's default; otherwise Result is the dialog's result.
type UserDialogResult struct {
	Cancelled bool
	Result    any
}

// A UserDialogFunc answers a dialog request. It runs on its own goroutine;
// ctx ends when the CLI withdraws the request or the session ends. An error
// is reported to the CLI as a failed request.
type UserDialogFunc func(ctx context.Context, req *UserDialogRequest) (UserDialogResult, error)

// answerUserDialog answers a request_user_dialog request.
func (s *Session) answerUserDialog(ctx context.Context, id string, req json.RawMessage) (any, error) {
	if s.opts.OnUserDialog == nil {
		// The CLI sends only the kinds of SupportedDialogKinds, which needs
		// a handler; cancelled lets it apply the default anyway.
		return map[string]any{"behavior": "cancelled"}, nil
	}
	r := &UserDialogRequest{RequestID: id}
	if err := unmarshal(req, r); err != nil {
		return nil, fmt.Errorf("decoding request_user_dialog request: %w", err)
	}
	res, err := s.opts.OnUserDialog(ctx, r)
	if err != nil {
		return nil, err
	}
	if res.Cancelled {
		return map[string]any{"behavior": "cancelled"}, nil
	}
	return map[string]any{"behavior": "completed", "result": res.Result}, nil
}

// jsCLI reports whether path is a JavaScript CLI, which runs under
// Options.Executable rather than on its own.
func jsCLI(path string) bool {
	for _, ext := range []string{".js", ".mjs", ".tsx", ".ts", ".jsx"} {
		if strings.HasSuffix(path, ext) {
			return true
		}
	}
	return false
}

// validateMore reports the first unusable option of this file.
func (o *Options) validateMore() error {
	for i, p := range o.Plugins {
		if p.Path == "" {
			return &OptionError{"Plugins", "[" + strconv.Itoa(i) + "]", "a plugin needs a Path"}
		}
	}
	if o.AllSkills && o.Skills != nil {
		return &OptionError{"AllSkills", "true", "cannot be combined with Skills (a list enables only those)"}
	}
	for _, name := range o.Skills {
		if msg := checkSkillName(name); msg != "" {
			return &OptionError{"Skills", name, msg}
		}
	}
	if len(o.Sandbox) > 0 {
		if !isJSONObject(o.Sandbox) {
			return &OptionError{"Sandbox", string(o.Sandbox), "must be a JSON object"}
		}
		if o.Settings != "" && !looksLikeJSONObject(o.Settings) {
			return &OptionError{"Sandbox", string(o.Sandbox), "cannot be combined with a settings file path in Settings: put the sandbox configuration in that file"}
		}
	}
	if o.Settings != "" && len(o.Sandbox) > 0 && !isJSONObject([]byte(o.Settings)) {
		return &OptionError{"Settings", o.Settings, "is not a valid JSON object"}
	}
	if len(o.ManagedSettings) > 0 && !isJSONObject(o.ManagedSettings) {
		return &OptionError{"ManagedSettings", string(o.ManagedSettings), "must be a JSON object"}
	}
	for k, v := range o.ToolAliases {
		if k == "" || v == "" {
			return &OptionError{"ToolAliases", k + "=" + v, "an alias and its tool must both be non-empty"}
		}
	}
	if o.TaskBudget < 0 {
		return &OptionError{"TaskBudget", strconv.Itoa(o.TaskBudget), "must not be negative"}
	}
	if o.ThinkingDisplay != "" {
		if o.ThinkingDisplay != "summarized" && o.ThinkingDisplay != "omitted" {
			return &OptionError{"ThinkingDisplay", o.ThinkingDisplay, `must be "summarized" or "omitted"`}
		}
		if o.Thinking == ThinkingDisabled && o.MaxThinkingTokens == 0 {
			return &OptionError{"ThinkingDisplay", o.ThinkingDisplay, "has no effect with Thinking disabled"}
		}
	}
	if o.ToolConfig != nil && o.ToolConfig.AskUserQuestion != nil {
		if f := o.ToolConfig.AskUserQuestion.PreviewFormat; f != "" && f != "markdown" && f != "html" {
			return &OptionError{"ToolConfig.AskUserQuestion.PreviewFormat", f, `must be "markdown" or "html"`}
		}
	}
	if o.PermissionPromptToolName != "" && o.CanUseTool != nil {
		return &OptionError{"PermissionPromptToolName", o.PermissionPromptToolName, "cannot be combined with CanUseTool: use one or the other"}
	}
	if o.PermissionPrompts != "" && o.PermissionPrompts != "host" && o.PermissionPrompts != "none" {
		return &OptionError{"PermissionPrompts", o.PermissionPrompts, `must be "host" or "none"`}
	}
	if o.ProjectConfigRoot != "" && !filepath.IsAbs(o.ProjectConfigRoot) {
		return &OptionError{"ProjectConfigRoot", o.ProjectConfigRoot, "must be an absolute path"}
	}
	if o.ResumeDropsTurn != "" && o.ResumeSessionAt == "" {
		return &OptionError{"ResumeDropsTurn", o.ResumeDropsTurn, "needs ResumeSessionAt"}
	}
	if len(o.SupportedDialogKinds) > 0 && o.OnUserDialog == nil {
		return &OptionError{"SupportedDialogKinds", strings.Join(o.SupportedDialogKinds, ","), "needs OnUserDialog to answer the dialogs"}
	}
	for _, src := range o.SettingSources {
		if src != "user" && src != "project" && src != "local" {
			return &OptionError{"SettingSources", src, `must be "user", "project" or "local"`}
		}
	}
	if err := o.SystemPrompt.check(); err != nil {
		return err
	}
	if err := o.checkMCPOptions(); err != nil { // mcp.go
		return err
	}
	for _, name := range sortedKeys(o.Agents) {
		if err := o.Agents[name].check(); err != nil {
			err.Field = "Agents[" + name + "]." + err.Field
			return err
		}
	}
	return nil
}

// checkSkillName returns why name cannot name a skill, or "" (the rules of
// the TypeScript SDK: the name becomes a Skill(name) permission rule).
func checkSkillName(name string) string {
	switch {
	case strings.TrimSpace(name) == "":
		return "a skill name must not be empty"
	case strings.TrimSpace(name) != name:
		return "a skill name must not have surrounding spaces"
	case strings.ContainsFunc(name, func(r rune) bool { return r == '(' || r == ')' || r == ',' || unicode.IsControl(r) }):
		return "a skill name must not contain parentheses, commas or control characters"
	case name == "*":
		return "use AllSkills to enable every skill"
	case strings.HasSuffix(name, ":*") || strings.HasSuffix(name, " *"):
		return "wildcards are not allowed: list each skill by its name"
	case strings.HasPrefix(name, "/"):
		return "a skill name does not start with '/': give the skill's directory name, or plugin:skill"
	case strings.Contains(name, `\\`):
		return "a skill name must not contain consecutive backslashes"
	case strings.HasSuffix(name, `\`):
		return "a skill name must not end with a backslash"
	}
	return ""
}

func isJSONObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// looksLikeJSONObject is the TypeScript SDK's test that a settings value is
// JSON rather than a file path.
func looksLikeJSONObject(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}")
}

// allowedTools returns AllowedTools plus the rules that Skills and AllSkills
// add.
func (o *Options) allowedTools() []string {
	if !o.AllSkills && len(o.Skills) == 0 {
		return o.AllowedTools
	}
	extra := []string{"Skill"}
	if !o.AllSkills {
		extra = extra[:0]
		for _, s := range o.Skills {
			extra = append(extra, "Skill("+s+")")
		}
	}
	out := slices.Clone(o.AllowedTools)
	for _, e := range extra {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// settingsArg returns the --settings value: Settings, with Sandbox merged
// into its "sandbox" key (then always JSON).
func (o *Options) settingsArg() (string, error) {
	if len(o.Sandbox) == 0 {
		return o.Settings, nil
	}
	settings := map[string]any{}
	if o.Settings != "" {
		if err := json.Unmarshal([]byte(strings.TrimSpace(o.Settings)), &settings); err != nil {
			return "", &OptionError{"Settings", o.Settings, "is not valid JSON"}
		}
	}
	var sb map[string]any
	if err := json.Unmarshal(o.Sandbox, &sb); err != nil {
		return "", &OptionError{"Sandbox", string(o.Sandbox), "must be a JSON object"}
	}
	base, _ := settings["sandbox"].(map[string]any)
	merged := mergeObjects(base, sb)
	if merged["enabled"] == true {
		if _, set := merged["failIfUnavailable"]; !set {
			// As the TypeScript SDK: a sandbox asked for here fails the
			// session when it cannot be set up, rather than run unsandboxed.
			merged["failIfUnavailable"] = true
		}
	}
	settings["sandbox"] = merged
	b, err := json.Marshal(settings)
	if err != nil {
		return "", &OptionError{"Sandbox", string(o.Sandbox), err.Error()}
	}
	return string(b), nil
}

// mergeObjects returns base with over's keys set on it, objects merged
// recursively.
func mergeObjects(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if b, ok := out[k].(map[string]any); ok {
			if ov, ok := v.(map[string]any); ok {
				out[k] = mergeObjects(b, ov)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// awaitInitialize reports whether launch options go in initialize, so that
// the CLI must wait for it before it starts (--await-initialize).
func (o *Options) awaitInitialize() bool {
	return (o.PluginsInInitialize && len(o.Plugins) > 0) || (o.MCPServersInInitialize && len(o.MCPServerConfigs) > 0)
}

// moreArgs returns the flags of this file's options, in the order the
// TypeScript SDK writes them.
func (o *Options) moreArgs() ([]string, error) {
	var a []string
	flag := func(name, value string) { a = append(a, "--"+name+"="+value) }
	if o.Agent != "" {
		flag("agent", o.Agent)
	}
	if o.SystemPrompt != nil && o.SystemPrompt.File != "" {
		flag("system-prompt-file", o.SystemPrompt.File)
	}
	if o.TaskBudget > 0 {
		flag("task-budget", strconv.Itoa(o.TaskBudget))
	}
	if o.DebugFile != "" {
		flag("debug-file", o.DebugFile)
	} else if o.Debug {
		a = append(a, "--debug")
	}
	if o.PermissionPromptToolName != "" {
		flag("permission-prompt-tool", o.PermissionPromptToolName)
	}
	if o.PermissionPrompts != "" {
		flag("permission-prompts", o.PermissionPrompts)
	}
	if o.ProjectConfigRoot != "" {
		flag("project-config-root", o.ProjectConfigRoot)
	}
	if o.awaitInitialize() {
		a = append(a, "--await-initialize")
	}
	if !o.PluginsInInitialize {
		for _, p := range o.Plugins {
			if p.SkipMCPDiscovery {
				flag("plugin-dir-no-mcp", p.Path)
			} else {
				flag("plugin-dir", p.Path)
			}
		}
	}
	if o.ResumeDropsTurn != "" {
		flag("resume-drops-turn", o.ResumeDropsTurn)
	}
	if len(o.ManagedSettings) > 0 {
		c, err := compactJSON(o.ManagedSettings)
		if err != nil {
			return nil, &OptionError{"ManagedSettings", string(o.ManagedSettings), "is not valid JSON"}
		}
		flag("managed-settings", string(c))
	}
	return a, nil
}

// moreEnv returns the variables this file's options set, and reports the
// inherited ones to drop (as the TypeScript SDK does when it is given no
// env of its own).
func (o *Options) moreEnv() (set map[string]string, drop []string) {
	set = map[string]string{}
	if o.EnableFileCheckpointing {
		set["CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING"] = "true"
	}
	if o.ToolConfig != nil && o.ToolConfig.AskUserQuestion != nil && o.ToolConfig.AskUserQuestion.PreviewFormat != "" {
		set["CLAUDE_CODE_QUESTION_PREVIEW_FORMAT"] = o.ToolConfig.AskUserQuestion.PreviewFormat
	}
	drop = []string{"CLAUDE_CODE_QUESTION_EXTENDED", "CLAUDE_CODE_QUESTION_OPTIONAL_DESCRIPTIONS", "CLAUDE_CODE_AGENT_PROGRESS_SUMMARIES"}
	return set, drop
}

// addMoreFields adds the initialize fields of this file's options, as the
// TypeScript SDK sends them.
func (s *Session) addMoreFields(fields map[string]any) error {
	o := &s.opts
	if o.PlanModeInstructions != "" {
		fields["planModeInstructions"] = o.PlanModeInstructions
	}
	if len(o.ToolAliases) > 0 {
		fields["toolAliases"] = o.ToolAliases
	}
	if o.Title != "" {
		fields["title"] = o.Title
	}
	if o.Skills != nil {
		fields["skills"] = nonNil(o.Skills)
	}
	if o.PromptSuggestions {
		fields["promptSuggestions"] = true
	}
	if o.AgentProgressSummaries {
		fields["agentProgressSummaries"] = true
	}
	if o.ForwardSubagentText {
		fields["forwardSubagentText"] = true
	}
	if len(o.SupportedDialogKinds) > 0 {
		fields["supportedDialogKinds"] = o.SupportedDialogKinds
	}
	if o.PerTaskStopAffordance {
		fields["perTaskStopAffordance"] = true
	}
	if o.PluginsInInitialize && len(o.Plugins) > 0 {
		fields["plugins"] = o.Plugins
	}
	if len(o.JSONSchema) > 0 {
		c, err := compactJSON(o.JSONSchema)
		if err != nil {
			return &OptionError{"JSONSchema", string(o.JSONSchema), "is not valid JSON"}
		}
		fields["jsonSchema"] = json.RawMessage(c)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// launch returns the program and arguments that run the CLI at path with
// args: a JavaScript CLI runs under Executable (default node) with
// ExecutableArgs before it; a native one gets ExecutableArgs first, as the
// TypeScript SDK does.
func (o *Options) launch(path string, args []string) (string, []string) {
	if path != "" && jsCLI(path) {
		exe := o.Executable
		if exe == "" {
			exe = "node"
		}
		return exe, slices.Concat(o.ExecutableArgs, []string{path}, args)
	}
	if len(o.ExecutableArgs) == 0 {
		return path, args
	}
	return path, slices.Concat(o.ExecutableArgs, args)
}

// findJSCLI checks a JavaScript CLI path: it must be an existing regular
// file (it need not be executable). It returns the absolute path.
func findJSCLI(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", &NotFoundError{Tried: []Candidate{{Source: SourceOption, Path: path, Reason: err.Error()}}}
	}
	fi, err := os.Stat(abs)
	switch {
	case err != nil:
		return "", &NotFoundError{Tried: []Candidate{{Source: SourceOption, Path: path, Reason: "does not exist"}}}
	case !fi.Mode().IsRegular():
		return "", &NotFoundError{Tried: []Candidate{{Source: SourceOption, Path: path, Reason: "not a regular file"}}}
	}
	return abs, nil
}
