package claude

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PermissionMode is how the CLI decides tool permissions.
type PermissionMode string

// The permission modes the CLI knows.
const (
	PermissionDefault           PermissionMode = "default"
	PermissionAcceptEdits       PermissionMode = "acceptEdits"
	PermissionBypassPermissions PermissionMode = "bypassPermissions"
	PermissionPlan              PermissionMode = "plan"
	PermissionDontAsk           PermissionMode = "dontAsk"
	PermissionAuto              PermissionMode = "auto"
)

// PermissionModes lists the modes in the order the CLI documents them.
var PermissionModes = []PermissionMode{PermissionDefault, PermissionAcceptEdits, PermissionBypassPermissions, PermissionPlan, PermissionDontAsk, PermissionAuto}

// Thinking selects extended thinking.
type Thinking string

// Thinking settings.
const (
	ThinkingAdaptive Thinking = "adaptive"
	ThinkingDisabled Thinking = "disabled"
)

// Options configures a session. A nil *Options is the same as a zero
// Options: the CLI found by [FindBinary], started in the current directory
// with the current environment, the CLI's own defaults for everything else.
// Each field's zero value leaves the matching CLI flag out.
type Options struct {
	// CLIPath is the claude executable; empty means [FindBinary].
	CLIPath string
	// Transport runs the CLI; nil means a [ProcessTransport].
	Transport Transport
	// Cwd is the CLI's working directory; empty means the current one.
	Cwd string
	// Env holds variables added to (or replacing) the current environment
	// for the CLI. An empty value removes the variable.
	Env map[string]string

	// Model and FallbackModel select models (--model, --fallback-model).
	Model         string
	FallbackModel string
	// PermissionMode is the initial permission mode (--permission-mode).
	PermissionMode PermissionMode
	// AllowDangerouslySkipPermissions must be set to start in
	// bypassPermissions mode on some CLI versions.
	AllowDangerouslySkipPermissions bool
	// CanUseTool answers the CLI's permission prompts. When nil the CLI
	// decides alone (what it cannot allow by mode or rule, it denies).
	CanUseTool CanUseToolFunc

	// Tools restricts the built-in tools (--tools). nil leaves the CLI's
	// default set; an empty non-nil slice disables all built-in tools.
	Tools []string
	// AllowedTools and DisallowedTools are permission rules such as "Read"
	// or "Bash(git status:*)" (--allowedTools, --disallowedTools).
	AllowedTools    []string
	DisallowedTools []string
	// AddDirs are more directories the tools may access (--add-dir).
	AddDirs []string
	// MCPConfig holds MCP server configurations: JSON strings or file paths
	// (--mcp-config, one value each).
	MCPConfig []string
	// StrictMCPConfig uses only the servers in MCPConfig.
	StrictMCPConfig bool
	// Settings is a settings file path or a JSON string (--settings).
	Settings string
	// SettingSources chooses which settings files load: "user", "project",
	// "local". nil leaves the CLI's default; an empty non-nil slice loads none.
	SettingSources []string

	// MaxTurns limits agentic turns per prompt (--max-turns); 0 is no limit.
	MaxTurns int
	// MaxBudgetUSD stops the session when spent (--max-budget-usd); 0 is no limit.
	MaxBudgetUSD float64
	// Thinking selects adaptive or disabled thinking (--thinking).
	Thinking Thinking
	// MaxThinkingTokens enables thinking with a budget (--max-thinking-tokens).
	MaxThinkingTokens int
	// Effort is "low", "medium", "high", "xhigh" or "max" (--effort).
	Effort string
	// Betas are API beta headers (--betas).
	Betas []string

	// Resume continues the session with this id (--resume).
	Resume string
	// Continue continues the most recent session in Cwd (--continue).
	Continue bool
	// ForkSession gives a resumed session a new id (--fork-session).
	ForkSession bool
	// ResumeSessionAt resumes from this message uuid (--resume-session-at).
	ResumeSessionAt string
	// SessionID fixes the new session's id, a UUID (--session-id).
	SessionID string
	// NoSessionPersistence keeps the session off disk (--no-session-persistence).
	NoSessionPersistence bool

	// JSONSchema asks for structured output matching this schema (--json-schema).
	JSONSchema json.RawMessage
	// IncludePartialMessages adds *StreamEvent messages (--include-partial-messages).
	IncludePartialMessages bool
	// IncludeHookEvents adds hook lifecycle messages (--include-hook-events).
	IncludeHookEvents bool
	// ReplayUserMessages echoes the user messages written to stdin (--replay-user-messages).
	ReplayUserMessages bool
	// SystemPrompt is the system prompt, sent in initialize as the official
	// SDKs do. nil is their default: an empty custom prompt, so the model
	// gets the CLI's minimal prompt, not Claude Code's own (ask for that
	// with [ClaudeCodePrompt]). See [SystemPrompt] for every form.
	SystemPrompt *SystemPrompt
	// Agents defines custom sub-agents by name, sent in initialize.
	Agents map[string]AgentDefinition
	// Agent runs the main thread as this agent (--agent): one of Agents, or
	// an agent the CLI finds in its settings.
	Agent string
	// ExtraArgs are passed to the CLI after all other flags, as they are.
	ExtraArgs []string

	// (options the official SDKs have; see docs/parity.md)

	// Plugins are local plugin directories to load (--plugin-dir, or
	// --plugin-dir-no-mcp for one with SkipMCPDiscovery).
	Plugins []Plugin
	// Skills enables only these skills, by name (a SKILL.md name or
	// directory name, or "plugin:skill"): each adds Skill(name) to
	// AllowedTools, and the list goes in initialize. Unlisted skills are
	// hidden from the model. nil leaves the CLI's defaults.
	Skills []string
	// AllSkills enables every skill the CLI finds ("Skill" in AllowedTools).
	AllSkills bool
	// Sandbox is Claude Code's "sandbox" settings object (for example
	// {"enabled":true}), merged into the --settings JSON as its "sandbox"
	// key. Settings must then be JSON, not a file path.
	Sandbox json.RawMessage
	// ManagedSettings is a settings object applied as policy-tier settings
	// supplied by this parent process (--managed-settings).
	ManagedSettings json.RawMessage
	// ToolAliases redirects tool names the model uses to other tools, e.g.
	// {"Bash": "mcp__workspace__bash"} (initialize toolAliases). Single hop.
	ToolAliases map[string]string
	// Title names a new session instead of a title generated from its first
	// prompt (initialize title). A resumed session keeps its own.
	Title string
	// PromptSuggestions asks for a *PromptSuggestion message after a turn's
	// result, predicting the next prompt (initialize promptSuggestions).
	PromptSuggestions bool
	// AgentProgressSummaries asks for periodic summaries of running
	// sub-agents in TaskProgress.Summary (initialize agentProgressSummaries).
	AgentProgressSummaries bool
	// ForwardSubagentText forwards sub-agents' text and thinking, not only
	// their tool calls and results (initialize forwardSubagentText).
	ForwardSubagentText bool
	// PlanModeInstructions replaces the workflow instructions the model gets
	// in plan mode (initialize planModeInstructions).
	PlanModeInstructions string
	// PerTaskStopAffordance declares that this program stops background tasks
	// one by one ([Session.StopTask]); an interrupt then spares them
	// (initialize perTaskStopAffordance).
	PerTaskStopAffordance bool
	// TaskBudget is an API-side task budget in tokens, which the model paces
	// itself by (--task-budget); 0 is none.
	TaskBudget int
	// EnableFileCheckpointing backs files up before they are changed, so that
	// [Session.RewindFiles] can restore them (environment
	// CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING=true). An administrator's
	// managed setting fileCheckpointingEnabled: false turns it off all the
	// same (2.1.332: in a session an SDK starts, only an administrator's
	// false applies), and RewindFiles then has nothing to restore.
	EnableFileCheckpointing bool
	// ThinkingDisplay is how thinking is returned: "summarized" or "omitted"
	// (--thinking-display). It needs Thinking adaptive or MaxThinkingTokens.
	ThinkingDisplay string
	// ToolConfig configures built-in tools.
	ToolConfig *ToolConfig
	// Executable runs a JavaScript CLI (a CLIPath ending in .js, .mjs, .ts,
	// .tsx or .jsx): "node" (the default), "bun" or "deno", or a path.
	// ExecutableArgs come before the CLI's own arguments: the runtime's for
	// a JavaScript CLI, and (as in the TypeScript SDK) the native CLI's
	// first arguments otherwise.
	Executable     string
	ExecutableArgs []string
	// Debug turns on the CLI's debug logging (--debug), to DebugFile when it
	// is set (--debug-file), else to stderr.
	Debug     bool
	DebugFile string
	// PermissionPromptToolName routes permission prompts to this MCP tool
	// (--permission-prompt-tool); it cannot be combined with CanUseTool.
	PermissionPromptToolName string
	// PermissionPrompts is who answers permission prompts: "host" (the
	// default: CanUseTool or PermissionPromptToolName) or "none" (what the
	// mode, rules and hooks do not settle is denied) (--permission-prompts).
	PermissionPrompts string
	// ProjectConfigRoot is the absolute path of the checkout that Cwd is a
	// worktree of; project settings, .mcp.json and .claude come from it
	// (--project-config-root).
	ProjectConfigRoot string
	// ResumeDropsTurn, with ResumeSessionAt, is the prompt uuid of the turn
	// the truncating resume discards; the CLI refuses the resume when more
	// than that turn would be lost (--resume-drops-turn).
	ResumeDropsTurn string
	// VerbatimPrompts sends every prompt with client_composed:true: no @path
	// expansion, no slash commands.
	VerbatimPrompts bool
	// PluginsInInitialize sends Plugins in initialize instead of one flag
	// each, with --await-initialize (the official pluginDelivery
	// "initialize"); the CLI then says whether it loaded them
	// (InitializeResponse.PluginsApplied).
	PluginsInInitialize bool
	// MCPServersInInitialize sends MCPServerConfigs in initialize instead of
	// --mcp-config, which keeps their env and headers off the command line,
	// with --await-initialize (the official mcpServersDelivery
	// "initialize"); see InitializeResponse.MCPServersApplied.
	MCPServersInInitialize bool
	// SupportedDialogKinds are the request_user_dialog kinds OnUserDialog
	// can show (initialize supportedDialogKinds); the CLI sends no others.
	SupportedDialogKinds []string
	// OnUserDialog answers the CLI's request_user_dialog requests, of the
	// kinds in SupportedDialogKinds. Without it, they are not answered.
	OnUserDialog UserDialogFunc

	// (hooks, structured output and elicitation options: keep this block for them)

	// Hooks are Go callbacks for the CLI's hook events (see [HookFunc]),
	// registered with the CLI in initialize. Within one session the
	// callbacks are numbered hook_0, hook_1, ... in the order of
	// [HookEventNames] (other event names after, in lexical order), then of
	// the matchers and their Hooks. Event names this package does not know
	// are passed on as they are. nil registers none.
	Hooks map[HookEventName][]HookMatcher
	// OnElicitation answers MCP servers' requests for input from the user;
	// nil declines them all.
	OnElicitation ElicitationFunc

	// (in-process MCP server options: keep this block for them)

	// MCPServers are in-process MCP servers by name, made with the MCP Go
	// SDK (mcp.NewServer, mcp.AddTool). Each runs in this process for the
	// life of the session, with a fresh MCP session each time the CLI
	// (re)connects it. Close cancels the contexts of running tool handlers
	// and waits for them to return.
	//
	// A tool T of server S reaches the model as mcp__S__T. In the default
	// permission mode the CLI runs it only if AllowedTools ("mcp__S__T", or
	// "mcp__S" for all of S's tools) or CanUseTool allows it. The CLI may
	// defer MCP tools behind its tool search (the model sees only their
	// names until it loads them); a tool whose Meta has
	// "anthropic/alwaysLoad": true is always offered in full, and so are
	// all the tools of a server with MCPServerSettings AlwaysLoad.
	//
	// Start asks each server for its initialize and tools/list answers and
	// hands them to the CLI in initialize, so that [Session.MCPStatus]
	// reports the servers connected from the start. Servers can be added
	// and removed later with [Session.AddMCPServer] and
	// [Session.RemoveMCPServer].
	MCPServers map[string]*mcp.Server
	// MCPServerSettings are settings (tool-call timeout, always-load, tool
	// permission policies) of the in-process servers of MCPServers, by the
	// same name, sent in initialize.
	MCPServerSettings map[string]MCPServerSettings
	// MCPServerConfigs are external MCP servers by name, for the CLI to run
	// (stdio) or connect to (http, sse); they are passed in one
	// --mcp-config value, beside those of MCPConfig.
	MCPServerConfigs map[string]MCPServerConfig

	// MaxPayloadBytes is the largest output line delivered whole; longer
	// lines are delivered truncated, with a "[truncated: original_size=N
	// bytes]" marker inside the cut strings and a warning logged. Zero
	// means 10 MiB; a negative value means no limit (memory then grows with
	// the longest line).
	MaxPayloadBytes int
	// Stderr, if set, receives each line the CLI writes on stderr. The last
	// part of stderr is always kept for errors either way.
	Stderr func(line string)
	// Logger receives the SDK's warnings; nil means slog.Default().
	Logger *slog.Logger

	// (control request waiting: keep this block at the end)

	// ControlTimeout bounds the wait for the CLI's answer to each control
	// request the session sends (Initialize, SetModel, Control, ...): when
	// it passes, the request is withdrawn and fails with a
	// *ControlTimeoutError, rather than waiting for ctx to end. Requests
	// that legitimately take long (those that run the model or wait for a
	// person, e.g. side_question or generate_session_title) are not bounded.
	// Zero means DefaultControlTimeout; a negative value turns it off.
	ControlTimeout time.Duration
}

// Validate reports the first option that cannot be used, as an
// *OptionError naming its field; Start calls it.
func (o *Options) Validate() error { return o.validate() }

// DefaultMaxPayloadBytes is the default Options.MaxPayloadBytes.
const DefaultMaxPayloadBytes = 10 << 20

// OptionError reports an option that cannot be used.
type OptionError struct {
	Field string // the Options field, e.g. "PermissionMode"
	Value string
	Msg   string // what is wrong and what to do
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("claude: option %s=%q: %s", e.Field, e.Value, e.Msg)
}

// validate reports the first option that cannot work.
func (o *Options) validate() error {
	if o.PermissionMode != "" && !slices.Contains(PermissionModes, o.PermissionMode) {
		return &OptionError{"PermissionMode", string(o.PermissionMode), "must be one of " + joinModes()}
	}
	if o.Model != "" && o.Model == o.FallbackModel {
		return &OptionError{"FallbackModel", o.FallbackModel, "must differ from Model"}
	}
	if o.Thinking != "" && o.Thinking != ThinkingAdaptive && o.Thinking != ThinkingDisabled {
		return &OptionError{"Thinking", string(o.Thinking), `must be "adaptive" or "disabled" (use MaxThinkingTokens for a budget)`}
	}
	if o.MaxTurns < 0 {
		return &OptionError{"MaxTurns", strconv.Itoa(o.MaxTurns), "must not be negative"}
	}
	if o.MaxBudgetUSD < 0 {
		return &OptionError{"MaxBudgetUSD", fmt.Sprint(o.MaxBudgetUSD), "must not be negative"}
	}
	if o.MaxThinkingTokens < 0 {
		return &OptionError{"MaxThinkingTokens", strconv.Itoa(o.MaxThinkingTokens), "must not be negative"}
	}
	if o.MaxPayloadBytes > 0 && o.MaxPayloadBytes < 1024 {
		return &OptionError{"MaxPayloadBytes", strconv.Itoa(o.MaxPayloadBytes), "must be 0 (10 MiB), negative (no limit) or at least 1024"}
	}
	if o.Effort != "" && !slices.Contains(effortLevels, o.Effort) {
		return &OptionError{"Effort", o.Effort, "must be low, medium, high, xhigh or max"}
	}
	if len(o.JSONSchema) > 0 && !json.Valid(o.JSONSchema) {
		return &OptionError{"JSONSchema", string(o.JSONSchema), "is not valid JSON"}
	}
	if o.ForkSession && o.Resume == "" && !o.Continue {
		return &OptionError{"ForkSession", "true", "needs Resume or Continue"}
	}
	if o.Resume != "" && o.Continue {
		return &OptionError{"Continue", "true", "cannot be combined with Resume"}
	}
	if err := o.validateMore(); err != nil { // options_more.go
		return err
	}
	if err := o.validateHooks(); err != nil { // hooks.go
		return err
	}
	return o.checkArgs() // argv.go
}

var effortLevels = []string{"low", "medium", "high", "xhigh", "max"}

func joinModes() string {
	s := make([]string, len(PermissionModes))
	for i, m := range PermissionModes {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// args returns the CLI arguments for o. Every value is passed as a single
// "--flag=value" argument, so values with spaces, quotes or a leading dash
// reach the CLI intact.
func (o *Options) args() ([]string, error) {
	a := []string{"--output-format", "stream-json", "--input-format", "stream-json", "--verbose"}
	flag := func(name, value string) { a = append(a, "--"+name+"="+value) }
	str := func(name, value string) {
		if value != "" {
			flag(name, value)
		}
	}
	list := func(name string, values []string) {
		if values != nil {
			flag(name, strings.Join(values, ","))
		}
	}
	boolean := func(name string, on bool) {
		if on {
			a = append(a, "--"+name)
		}
	}
	if o.CanUseTool != nil {
		flag("permission-prompt-tool", "stdio")
	}
	str("model", o.Model)
	str("fallback-model", o.FallbackModel)
	str("permission-mode", string(o.PermissionMode))
	boolean("allow-dangerously-skip-permissions", o.AllowDangerouslySkipPermissions)
	if o.Tools != nil {
		flag("tools", strings.Join(o.Tools, ","))
	}
	if allowed := o.allowedTools(); len(allowed) > 0 {
		list("allowedTools", allowed)
	}
	if len(o.DisallowedTools) > 0 {
		list("disallowedTools", o.DisallowedTools)
	}
	for _, d := range o.AddDirs {
		flag("add-dir", d)
	}
	for _, c := range o.MCPConfig {
		flag("mcp-config", c)
	}
	if c, err := o.mcpConfigArg(); err != nil { // mcp.go
		return nil, err
	} else if c != "" {
		flag("mcp-config", c)
	}
	boolean("strict-mcp-config", o.StrictMCPConfig)
	if settings, err := o.settingsArg(); err != nil { // options_more.go
		return nil, err
	} else {
		str("settings", settings)
	}
	list("setting-sources", o.SettingSources)
	if o.MaxTurns > 0 {
		flag("max-turns", strconv.Itoa(o.MaxTurns))
	}
	if o.MaxBudgetUSD > 0 {
		flag("max-budget-usd", strconv.FormatFloat(o.MaxBudgetUSD, 'f', -1, 64))
	}
	if o.MaxThinkingTokens > 0 {
		flag("max-thinking-tokens", strconv.Itoa(o.MaxThinkingTokens))
	} else {
		str("thinking", string(o.Thinking))
	}
	str("thinking-display", o.ThinkingDisplay)
	str("effort", o.Effort)
	if len(o.Betas) > 0 {
		list("betas", o.Betas)
	}
	str("resume", o.Resume)
	boolean("continue", o.Continue)
	boolean("fork-session", o.ForkSession)
	str("resume-session-at", o.ResumeSessionAt)
	str("session-id", o.SessionID)
	boolean("no-session-persistence", o.NoSessionPersistence)
	if len(o.JSONSchema) > 0 {
		c, err := compactJSON(o.JSONSchema)
		if err != nil {
			return nil, &OptionError{"JSONSchema", string(o.JSONSchema), "is not valid JSON"}
		}
		flag("json-schema", string(c))
	}
	boolean("include-partial-messages", o.IncludePartialMessages)
	boolean("include-hook-events", o.IncludeHookEvents)
	boolean("replay-user-messages", o.ReplayUserMessages)
	more, err := o.moreArgs() // options_more.go
	if err != nil {
		return nil, err
	}
	a = append(a, more...)
	a = append(a, o.ExtraArgs...)
	return a, nil
}

// environ returns the CLI's environment: this process's, minus variables
// that would confuse a child CLI, plus o.Env.
func (o *Options) environ() []string {
	env := os.Environ()
	set, dropMore := o.moreEnv() // options_more.go
	out := make([]string, 0, len(env)+len(o.Env)+len(set)+1)
	drop := func(k string) bool {
		switch k {
		case "CLAUDECODE", "NODE_OPTIONS": // nested-session guard; node flags meant for us
			return true
		}
		if _, override := o.Env[k]; override {
			return true
		}
		_, override := set[k]
		return override || slices.Contains(dropMore, k)
	}
	hasEntry := false
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if drop(k) {
			continue
		}
		if k == "CLAUDE_CODE_ENTRYPOINT" {
			hasEntry = true
		}
		out = append(out, kv)
	}
	if _, ok := o.Env["CLAUDE_CODE_ENTRYPOINT"]; !hasEntry && !ok {
		out = append(out, "CLAUDE_CODE_ENTRYPOINT=sdk-go")
	}
	if _, ok := o.Env["CLAUDE_CODE_SDK_READS_SESSION_STATE"]; !ok {
		// Ask for session_state_changed messages (Session.UntilIdle).
		out = append(out, "CLAUDE_CODE_SDK_READS_SESSION_STATE=1")
	}
	if _, ok := o.Env["CLAUDE_CODE_STARTUP_FAILURE_RESULTS"]; !ok {
		// Ask for a result saying why the CLI refused to start
		// (ResultMessage.StartupFailureReason), not stderr alone.
		out = append(out, "CLAUDE_CODE_STARTUP_FAILURE_RESULTS=1")
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if _, ok := o.Env[k]; !ok {
			out = append(out, k+"="+set[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(o.Env)) {
		if v := o.Env[k]; v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}
