package claude

import (
	"encoding/json"
	"fmt"
	"time"
)

// HookOutput is a hook's answer. Its zero value changes nothing. Fields that
// an event does not take are ignored by the CLI.
type HookOutput struct {
	// Stop ends the turn after this hook ("continue": false); StopReason
	// is shown to the user.
	Stop       bool
	StopReason string
	// SuppressOutput hides the hook's output from the transcript.
	SuppressOutput bool
	// Decision is "approve" or "block", with Reason saying why. "block"
	// on PostToolUse gives Reason to the model as feedback; on Stop and
	// SubagentStop it makes the agent go on, with Reason as its next
	// instruction; on UserPromptSubmit it drops the prompt. (For
	// PreToolUse prefer Specific.PermissionDecision.)
	Decision string
	Reason   string
	// SystemMessage is a warning shown to the user.
	SystemMessage string
	// Specific holds the answers particular to the event
	// ("hookSpecificOutput"); its hookEventName is filled in.
	Specific *HookSpecific

	// Async tells the CLI not to wait for this hook's decision: the other
	// fields are not sent. AsyncTimeout, if set, is how long the CLI keeps
	// the hook registered as running (sent in milliseconds).
	Async        bool
	AsyncTimeout time.Duration
}

// HookPermissionDecision is a PreToolUse hook's verdict on a tool call, or
// a PreSkillShellCommand hook's on a skill's shell command (where only
// HookAllow lets it run, and adds nothing to the CLI's own checks).
type HookPermissionDecision string

// PreToolUse (and PreSkillShellCommand) verdicts.
const (
	// HookAllow runs the tool without asking for permission.
	HookAllow HookPermissionDecision = "allow"
	// HookDeny refuses the tool; the model sees PermissionDecisionReason.
	HookDeny HookPermissionDecision = "deny"
	// HookAsk asks for permission (Options.CanUseTool) even where the mode
	// or the rules would allow the tool.
	HookAsk HookPermissionDecision = "ask"
	// HookDefer leaves the decision to the CLI's usual rules.
	HookDefer HookPermissionDecision = "defer"
)

// HookSpecific is the part of a [HookOutput] particular to one event
// ("hookSpecificOutput"). Set only the fields the event takes (each
// field's comment names its events).
type HookSpecific struct {
	// PermissionDecision (PreToolUse, PreModelSwitch,
	// PreSkillShellCommand) allows, denies or asks about the call;
	// PermissionDecisionReason is shown to the model on a denial, to the
	// user otherwise.
	PermissionDecision       HookPermissionDecision
	PermissionDecisionReason string
	// UpdatedInput (PreToolUse) replaces the tool's input. Without
	// PermissionDecision the usual permission check then applies to the new
	// input. A PreSkillShellCommand hook's is never applied: any value
	// keeps the command from running.
	UpdatedInput json.RawMessage
	// AdditionalContext (PreToolUse, PostToolUse, PostToolUseFailure,
	// UserPromptSubmit, SessionStart, SubagentStart, Notification and most
	// others) is text added to what the model sees next.
	AdditionalContext string
	// UpdatedMCPToolOutput (PostToolUse) replaces an MCP tool's result.
	UpdatedMCPToolOutput json.RawMessage
	// PermissionRequestDecision (PermissionRequest) answers the
	// permission prompt the way [Options.CanUseTool] would: Allow (with
	// UpdatedInput and UpdatedPermissions) or deny (with Message and
	// Interrupt). The CLI (2.1.329) heeds it only when Options.CanUseTool
	// is nil; otherwise CanUseTool decides.
	PermissionRequestDecision *PermissionResult
	// Extra holds fields this package does not type (sessionTitle,
	// watchPaths, updatedToolOutput, ...); the fields above take
	// precedence.
	Extra map[string]any
}

// DenyTool returns a PreToolUse output that refuses the tool call; the model
// sees reason in the tool's error result. For PreSkillShellCommand it keeps
// the skill's shell command from running.
func DenyTool(reason string) *HookOutput {
	return &HookOutput{Specific: &HookSpecific{PermissionDecision: HookDeny, PermissionDecisionReason: reason}}
}

// UpdateToolInput returns a PreToolUse output that replaces the tool's
// input with v (marshalled to JSON). The usual permission check then
// applies to the new input.
func UpdateToolInput(v any) (*HookOutput, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("claude: UpdateToolInput: %w", err)
	}
	return &HookOutput{Specific: &HookSpecific{UpdatedInput: b}}, nil
}

// AddContext returns an output that adds text to what the model sees next,
// for the events that take additionalContext (PostToolUse,
// UserPromptSubmit, SessionStart, ...).
func AddContext(text string) *HookOutput {
	return &HookOutput{Specific: &HookSpecific{AdditionalContext: text}}
}

// wireHookOutput is a HookOutput as the CLI reads it.
type wireHookOutput struct {
	Async              bool           `json:"async,omitempty"`
	AsyncTimeout       int64          `json:"asyncTimeout,omitempty"` // milliseconds
	Continue           *bool          `json:"continue,omitempty"`
	SuppressOutput     bool           `json:"suppressOutput,omitempty"`
	StopReason         string         `json:"stopReason,omitempty"`
	Decision           string         `json:"decision,omitempty"`
	SystemMessage      string         `json:"systemMessage,omitempty"`
	Reason             string         `json:"reason,omitempty"`
	HookSpecificOutput map[string]any `json:"hookSpecificOutput,omitempty"`
}

// wire returns the response to a hook_callback for event.
func (o *HookOutput) wire(event HookEventName) wireHookOutput {
	if o == nil {
		return wireHookOutput{}
	}
	if o.Async {
		return wireHookOutput{Async: true, AsyncTimeout: o.AsyncTimeout.Milliseconds()}
	}
	w := wireHookOutput{
		SuppressOutput: o.SuppressOutput,
		StopReason:     o.StopReason,
		Decision:       o.Decision,
		SystemMessage:  o.SystemMessage,
		Reason:         o.Reason,
	}
	if o.Stop {
		w.Continue = new(false)
	}
	if o.Specific != nil {
		w.HookSpecificOutput = o.Specific.wire(event)
	}
	return w
}

func (h *HookSpecific) wire(event HookEventName) map[string]any {
	m := make(map[string]any, len(h.Extra)+4)
	for k, v := range h.Extra {
		m[k] = v
	}
	m["hookEventName"] = event
	set := func(k string, v any, ok bool) {
		if ok {
			m[k] = v
		}
	}
	set("permissionDecision", h.PermissionDecision, h.PermissionDecision != "")
	set("permissionDecisionReason", h.PermissionDecisionReason, h.PermissionDecisionReason != "")
	set("updatedInput", h.UpdatedInput, len(h.UpdatedInput) > 0)
	set("additionalContext", h.AdditionalContext, h.AdditionalContext != "")
	set("updatedMCPToolOutput", h.UpdatedMCPToolOutput, len(h.UpdatedMCPToolOutput) > 0)
	if d := h.PermissionRequestDecision; d != nil {
		m["decision"] = d.hookWire()
	}
	return m
}

// hookWire is r as a PermissionRequest hook's decision.
func (r *PermissionResult) hookWire() map[string]any {
	if r.Allow {
		m := map[string]any{"behavior": "allow"}
		if len(r.UpdatedInput) > 0 {
			m["updatedInput"] = r.UpdatedInput
		}
		if len(r.UpdatedPermissions) > 0 {
			m["updatedPermissions"] = r.UpdatedPermissions
		}
		return m
	}
	m := map[string]any{"behavior": "deny"}
	if r.Message != "" {
		m["message"] = r.Message
	}
	if r.Interrupt {
		m["interrupt"] = true
	}
	return m
}
