package claude

import (
	"context"
	"encoding/json"
	"fmt"
)

// Typed methods for the control requests that the official SDKs expose and
// that have no other home in this package. Each one is a thin wrapper of
// [Session.Control]: an error answer is a *ControlError carrying the CLI's
// message, and a request the CLI leaves unanswered fails after
// Options.ControlTimeout (see control_wait.go).

// controlInto sends a control request and decodes its response into out
// (nil: the response is ignored).
func (s *Session) controlInto(ctx context.Context, subtype string, payload, out any) error {
	raw, err := s.Control(ctx, subtype, payload)
	if err != nil {
		return err
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("claude: decoding %s response: %w", subtype, err)
	}
	return nil
}

// InterruptOptions are the options of [Session.InterruptWith].
type InterruptOptions struct {
	// CancelQueued also drops the prompts that were sent during the turn
	// and are waiting to run after it.
	CancelQueued bool
}

// InterruptResult is the CLI's answer to an interrupt.
type InterruptResult struct {
	// StillQueued are the uuids of queued prompts that will still run.
	StillQueued []string `json:"still_queued"`
	// Cancelled are the uuids of queued prompts that were dropped
	// (with InterruptOptions.CancelQueued).
	Cancelled []string `json:"cancelled,omitempty"`
}

// InterruptWith is [Session.Interrupt] with options, reporting which
// queued prompts still run and which were cancelled.
func (s *Session) InterruptWith(ctx context.Context, opts *InterruptOptions) (*InterruptResult, error) {
	payload := map[string]any{}
	if opts != nil && opts.CancelQueued {
		payload["cancel_queued"] = true
	}
	var r InterruptResult
	if err := s.controlInto(ctx, "interrupt", payload, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// NotePromptDraftActivity tells the CLI that a person is typing a prompt
// for this session in the program's own composer (it carries none of the
// text). Send it at the first key and about every 10 seconds while the
// typing goes on: between turns the CLI may use the time to get the next
// request ready; during a turn it does nothing.
//
// Experimental: the official SDK sends it (notePromptDraftActivity, the
// prompt_draft_activity control request, 0.3.332) but documents it in
// none of its types, so it may change or go. A CLI without it answers
// with an error that matches ErrUnsupportedRequest.
func (s *Session) NotePromptDraftActivity(ctx context.Context) error {
	return s.controlInto(ctx, "prompt_draft_activity", nil, nil)
}

// RenameSession sets the session's title (what `claude --resume` and
// [ListSessions] show). The CLI records it in the session's transcript.
func (s *Session) RenameSession(ctx context.Context, title string) error {
	payload := map[string]any{"title": title, "source": "host"}
	if id := s.SessionID(); id != "" {
		payload["session_id"] = id
	}
	return s.controlInto(ctx, "rename_session", payload, nil)
}

// SettingsSource names a settings file the CLI can write.
type SettingsSource string

// The settings sources [Session.UpdateSettings] accepts.
const (
	SettingsLocal SettingsSource = "localSettings" // .claude/settings.local.json in the project
	SettingsUser  SettingsSource = "userSettings"  // ~/.claude/settings.json
)

// SettingsReport is the CLI's view of its settings, from [Session.GetSettings].
type SettingsReport struct {
	// Effective is the merged settings in force, as a JSON object.
	Effective json.RawMessage `json:"effective"`
	// Sources are the settings layers that contributed, lowest first.
	Sources []SettingsLayer `json:"sources"`
	// Applied is what the CLI applied from them (model, effort, ...).
	Applied json.RawMessage `json:"applied,omitempty"`
	// Raw is the whole response.
	Raw json.RawMessage `json:"-"`
}

// SettingsLayer is one source of settings in a [SettingsReport].
type SettingsLayer struct {
	Source   string          `json:"source"` // e.g. "userSettings", "flagSettings"
	Settings json.RawMessage `json:"settings"`
}

// GetSettings returns the settings in force and where they come from.
func (s *Session) GetSettings(ctx context.Context) (*SettingsReport, error) {
	raw, err := s.Control(ctx, "get_settings", nil)
	if err != nil {
		return nil, err
	}
	r := &SettingsReport{Raw: raw}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("claude: decoding get_settings response: %w", err)
	}
	return r, nil
}

// ApplyFlagSettings applies settings (a JSON object: a map, a struct, or
// json.RawMessage) for this session only, as --settings would at start.
func (s *Session) ApplyFlagSettings(ctx context.Context, settings any) error {
	return s.controlInto(ctx, "apply_flag_settings", map[string]any{"settings": settings}, nil)
}

// UpdateSettings writes settings into a settings file. The CLI accepts only
// some keys this way; others are refused with a *ControlError naming them.
func (s *Session) UpdateSettings(ctx context.Context, source SettingsSource, settings any) error {
	return s.controlInto(ctx, "update_settings", map[string]any{"source": source, "settings": settings}, nil)
}

// SlashCommand is a command the CLI offers (built in, from a plugin or a skill).
type SlashCommand struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	ArgumentHint string   `json:"argumentHint,omitempty"`
	Aliases      []string `json:"aliases,omitempty"`
	Builtin      bool     `json:"builtin,omitempty"`
}

// ReloadPluginsOptions are the options of [Session.ReloadPlugins].
type ReloadPluginsOptions struct {
	// RefuseIfBusy makes the CLI refuse while a turn is running.
	RefuseIfBusy bool
	// HoldOnCacheImpact makes the CLI hold the reload back when it would
	// invalidate the prompt cache, and report it (PluginsReload.Held).
	HoldOnCacheImpact bool
}

// PluginsReload is the CLI's state after [Session.ReloadPlugins].
type PluginsReload struct {
	Commands   []SlashCommand  `json:"commands"`
	Agents     json.RawMessage `json:"agents,omitempty"`
	Plugins    json.RawMessage `json:"plugins,omitempty"`
	MCPServers json.RawMessage `json:"mcpServers,omitempty"`
	ErrorCount int             `json:"error_count"`
	Held       bool            `json:"held,omitempty"`
	// Raw is the whole response.
	Raw json.RawMessage `json:"-"`
}

// ReloadPlugins re-reads plugins (and the commands, agents and MCP servers
// they bring) from disk.
func (s *Session) ReloadPlugins(ctx context.Context, opts *ReloadPluginsOptions) (*PluginsReload, error) {
	payload := map[string]any{}
	if opts != nil {
		if opts.RefuseIfBusy {
			payload["refuse_if_busy"] = true
		}
		if opts.HoldOnCacheImpact {
			payload["hold_on_cache_impact"] = true
		}
	}
	raw, err := s.Control(ctx, "reload_plugins", payload)
	if err != nil {
		return nil, err
	}
	r := &PluginsReload{Raw: raw}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("claude: decoding reload_plugins response: %w", err)
	}
	return r, nil
}

// SkillInfo is a skill the CLI has loaded.
type SkillInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Raw is the skill's whole entry.
	Raw json.RawMessage `json:"-"`
}

// ReloadSkills re-reads the skills from disk and returns those loaded.
func (s *Session) ReloadSkills(ctx context.Context) ([]SkillInfo, error) {
	var r struct {
		Skills []json.RawMessage `json:"skills"`
	}
	if err := s.controlInto(ctx, "reload_skills", nil, &r); err != nil {
		return nil, err
	}
	out := make([]SkillInfo, 0, len(r.Skills))
	for _, raw := range r.Skills {
		sk := SkillInfo{Raw: raw}
		if err := json.Unmarshal(raw, &sk); err != nil {
			return nil, fmt.Errorf("claude: decoding reload_skills response: %w", err)
		}
		out = append(out, sk)
	}
	return out, nil
}

// ReloadOutputStyles re-reads the output styles and returns their names.
func (s *Session) ReloadOutputStyles(ctx context.Context) ([]string, error) {
	var r struct {
		Styles []string `json:"available_output_styles"`
	}
	if err := s.controlInto(ctx, "reload_output_styles", nil, &r); err != nil {
		return nil, err
	}
	return r.Styles, nil
}

// ReadFileOptions are the options of [Session.ReadFile].
type ReadFileOptions struct {
	// MaxBytes caps how much is read; 0 is the CLI's default.
	MaxBytes int
	// Encoding is "utf-8" (the default) or "base64".
	Encoding string
}

// FileContents is a file read by the CLI with [Session.ReadFile].
type FileContents struct {
	Contents  string `json:"contents"`
	AbsPath   string `json:"absPath"`
	Truncated bool   `json:"truncated,omitempty"`
	Encoding  string `json:"encoding,omitempty"`
	// Lossy is set when bytes that are not valid UTF-8 were replaced.
	Lossy bool `json:"lossy,omitempty"`
}

// ReadFile reads a file through the CLI, under its permission rules; a
// relative path is taken from the CLI's working directory. A file the CLI
// may not or cannot read gives a *ControlError ("read denied: ...").
func (s *Session) ReadFile(ctx context.Context, path string, opts *ReadFileOptions) (*FileContents, error) {
	payload := map[string]any{"path": path}
	if opts != nil {
		if opts.MaxBytes > 0 {
			payload["max_bytes"] = opts.MaxBytes
		}
		if opts.Encoding != "" {
			payload["encoding"] = opts.Encoding
		}
	}
	var r FileContents
	if err := s.controlInto(ctx, "read_file", payload, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// MCPResourceContents is one part of an MCP resource.
type MCPResourceContents struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"` // base64
}

// ReadMCPResource reads a resource of one of the session's MCP servers
// (the CLI allows only ui:// resources).
func (s *Session) ReadMCPResource(ctx context.Context, server, uri string) ([]MCPResourceContents, error) {
	var r struct {
		Contents []MCPResourceContents `json:"contents"`
	}
	if err := s.controlInto(ctx, "mcp_read_resource", map[string]any{"serverName": server, "uri": uri}, &r); err != nil {
		return nil, err
	}
	return r.Contents, nil
}

// BackgroundTasks moves the running foreground tasks (a Bash command, a
// sub-agent) to the background, or only the one started by toolUseID when it
// is not empty. It reports whether anything was moved.
func (s *Session) BackgroundTasks(ctx context.Context, toolUseID string) (bool, error) {
	payload := map[string]any{}
	if toolUseID != "" {
		payload["tool_use_id"] = toolUseID
	}
	var r struct {
		Backgrounded *bool `json:"backgrounded"`
	}
	if err := s.controlInto(ctx, "background_tasks", payload, &r); err != nil {
		return false, err
	}
	return r.Backgrounded == nil || *r.Backgrounded, nil
}

// TaskOutput is what a background shell task has printed so far.
type TaskOutput struct {
	Output     string `json:"output"`
	TotalBytes int64  `json:"total_bytes"`
	Truncated  bool   `json:"truncated"`
}

// TaskOutput returns the output of a background shell or Monitor task.
func (s *Session) TaskOutput(ctx context.Context, taskID string) (*TaskOutput, error) {
	var r TaskOutput
	if err := s.controlInto(ctx, "get_task_output", map[string]any{"task_id": taskID}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ModelInfo describes a model the CLI offers.
type ModelInfo struct {
	Value                    string   `json:"value"` // what SetModel takes
	ResolvedModel            string   `json:"resolvedModel,omitempty"`
	DisplayName              string   `json:"displayName"`
	Description              string   `json:"description"`
	SupportsEffort           bool     `json:"supportsEffort,omitempty"`
	SupportedEffortLevels    []string `json:"supportedEffortLevels,omitempty"`
	SupportsAdaptiveThinking bool     `json:"supportsAdaptiveThinking,omitempty"`
	SupportsFastMode         bool     `json:"supportsFastMode,omitempty"`
	SupportsAutoMode         bool     `json:"supportsAutoMode,omitempty"`
}

// SupportedModels asks the CLI for the models it offers now.
func (s *Session) SupportedModels(ctx context.Context) ([]ModelInfo, error) {
	var r struct {
		Models []ModelInfo `json:"models"`
	}
	if err := s.controlInto(ctx, "list_models", nil, &r); err != nil {
		return nil, err
	}
	return r.Models, nil
}

// UsageReport is the session's cost and token use, from [Session.Usage].
type UsageReport struct {
	Session struct {
		TotalCostUSD       float64               `json:"total_cost_usd"`
		TotalAPIDurationMS int64                 `json:"total_api_duration_ms"`
		TotalDurationMS    int64                 `json:"total_duration_ms"`
		TotalLinesAdded    int                   `json:"total_lines_added"`
		TotalLinesRemoved  int                   `json:"total_lines_removed"`
		ModelUsage         map[string]ModelUsage `json:"model_usage"`
	} `json:"session"`
	SubscriptionType    string          `json:"subscription_type,omitempty"`
	RateLimitsAvailable bool            `json:"rate_limits_available"`
	RateLimits          json.RawMessage `json:"rate_limits,omitempty"`
	// Raw is the whole response.
	Raw json.RawMessage `json:"-"`
}

// Usage returns the session's cost and token use so far.
func (s *Session) Usage(ctx context.Context) (*UsageReport, error) {
	raw, err := s.Control(ctx, "get_usage", nil)
	if err != nil {
		return nil, err
	}
	r := &UsageReport{Raw: raw}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("claude: decoding get_usage response: %w", err)
	}
	return r, nil
}

// ContextDetail selects how much [Session.ContextUsageReport] reports.
type ContextDetail string

// The detail levels of a context usage report.
const (
	ContextSummary ContextDetail = "summary"
	ContextFull    ContextDetail = "full"
)

// ContextUsage is the CLI's report of what fills the context window.
type ContextUsage struct {
	Categories []ContextCategory `json:"categories"`
	// TotalTokens are the tokens used; MaxTokens the window's size.
	TotalTokens int64 `json:"totalTokens"`
	MaxTokens   int64 `json:"maxTokens"`
	// Percentage is how full the window is, 0 to 100.
	Percentage float64 `json:"percentage"`
	// Raw is the whole response, with the per-item detail when asked for.
	Raw json.RawMessage `json:"-"`
}

// ContextCategory is one part of the context window (system prompt,
// skills, messages, free space, ...).
type ContextCategory struct {
	ID     string `json:"id,omitempty"`
	Name   string `json:"name"`
	Tokens int64  `json:"tokens"`
	Kind   string `json:"kind,omitempty"` // "used" or "free"
}

// ContextUsageReport returns the context window's use; detail "" leaves
// the CLI's default. (ContextUsage returns the same report raw.)
func (s *Session) ContextUsageReport(ctx context.Context, detail ContextDetail) (*ContextUsage, error) {
	var payload any
	if detail != "" {
		payload = map[string]any{"detail": detail}
	}
	raw, err := s.Control(ctx, "get_context_usage", payload)
	if err != nil {
		return nil, err
	}
	r := &ContextUsage{Raw: raw}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("claude: decoding get_context_usage response: %w", err)
	}
	return r, nil
}

// CancelQueuedMessage drops a prompt that was sent while a turn was running
// and has not started yet, by the uuid of its user message. It reports
// whether it was dropped (false when it already ran or is unknown).
func (s *Session) CancelQueuedMessage(ctx context.Context, messageUUID string) (bool, error) {
	var r struct {
		Cancelled bool `json:"cancelled"`
	}
	if err := s.controlInto(ctx, "cancel_async_message", map[string]any{"message_uuid": messageUUID}, &r); err != nil {
		return false, err
	}
	return r.Cancelled, nil
}

// SetMCPPermissionModeOverride sets the permission mode for the tools of one
// MCP server; "" removes the override. The CLI only lets it tighten
// ("default" or "auto"). It returns the CLI's warning, if any.
func (s *Session) SetMCPPermissionModeOverride(ctx context.Context, server string, mode PermissionMode) (warning string, err error) {
	var m any
	if mode != "" {
		m = mode
	}
	var r struct {
		Warning string `json:"warning"`
	}
	if err := s.controlInto(ctx, "set_mcp_permission_mode_override", map[string]any{"serverName": server, "mode": m}, &r); err != nil {
		return "", err
	}
	return r.Warning, nil
}

// Reinitialize sends the initialize request again, with what Options puts in
// it (hooks, agents, in-process MCP servers, ...), and returns the CLI's new
// answer. [Session.Initialize] keeps returning the first one.
func (s *Session) Reinitialize(ctx context.Context) (*InitializeResponse, error) {
	req, err := s.initializeRequest()
	if err != nil {
		return nil, err
	}
	raw, err := s.request(ctx, "initialize", req)
	if err != nil {
		return nil, err
	}
	r := &InitializeResponse{Raw: raw}
	if err := unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("claude: decoding initialize response: %w", err)
	}
	return r, nil
}
