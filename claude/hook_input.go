package claude

import "encoding/json"

// A HookInput is what the CLI says about the event a hook was called for.
// Its concrete type depends on the event:
//
//	PreToolUse          *PreToolUseInput
//	PostToolUse         *PostToolUseInput
//	PostToolUseFailure  *PostToolUseFailureInput
//	UserPromptSubmit    *UserPromptSubmitInput
//	Stop                *StopInput
//	SubagentStart       *SubagentStartInput
//	SubagentStop        *SubagentStopInput
//	PreCompact          *PreCompactInput
//	SessionStart        *SessionStartInput
//	SessionEnd          *SessionEndInput
//	Notification        *NotificationInput
//	PermissionRequest   *PermissionRequestInput
//	PreSkillShellCommand *PreSkillShellCommandInput
//	any other event     *RawHookInput
//
// Every input keeps the JSON it was decoded from (Raw), for the fields this
// package does not type.
type HookInput interface {
	// Common returns the fields every input has.
	Common() *HookBase
	// Raw returns the input as the CLI sent it.
	Raw() json.RawMessage
	hookInput()
}

// HookBase holds the fields every hook input has. It is embedded in each
// input type.
type HookBase struct {
	HookEventName  HookEventName  `json:"hook_event_name"`
	SessionID      string         `json:"session_id"`
	TranscriptPath string         `json:"transcript_path"`
	CWD            string         `json:"cwd"`
	PromptID       string         `json:"prompt_id,omitempty"`
	PermissionMode PermissionMode `json:"permission_mode,omitempty"`
	// AgentID and AgentType identify the sub-agent the event happened in
	// (or, for SubagentStart and SubagentStop, the sub-agent itself); empty
	// on the main thread.
	AgentID   string `json:"agent_id,omitempty"`
	AgentType string `json:"agent_type,omitempty"`

	raw json.RawMessage
}

// Common returns b.
func (b *HookBase) Common() *HookBase { return b }

// Raw returns the input as the CLI sent it.
func (b *HookBase) Raw() json.RawMessage { return b.raw }

// Decode unmarshals the raw input into v, for fields this package does not
// type.
func (b *HookBase) Decode(v any) error { return json.Unmarshal(b.raw, v) }

func (*HookBase) hookInput() {}

// PreToolUseInput is the input of PreToolUse: a tool is about to run (before
// any permission prompt).
type PreToolUseInput struct {
	HookBase
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input"`
	ToolUseID string          `json:"tool_use_id"`
}

// PostToolUseInput is the input of PostToolUse: a tool ran.
type PostToolUseInput struct {
	HookBase
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input"`
	// ToolResponse is the tool's result; its shape depends on the tool
	// (Bash: {"stdout", "stderr", "interrupted", ...}).
	ToolResponse json.RawMessage `json:"tool_response"`
	ToolUseID    string          `json:"tool_use_id"`
	DurationMS   int64           `json:"duration_ms,omitempty"`
}

// PostToolUseFailureInput is the input of PostToolUseFailure: a tool failed.
type PostToolUseFailureInput struct {
	HookBase
	ToolName    string          `json:"tool_name"`
	ToolInput   json.RawMessage `json:"tool_input"`
	ToolUseID   string          `json:"tool_use_id"`
	Error       string          `json:"error"`
	IsInterrupt bool            `json:"is_interrupt,omitempty"`
}

// UserPromptSubmitInput is the input of UserPromptSubmit: a prompt is about
// to be sent to the model.
type UserPromptSubmitInput struct {
	HookBase
	Prompt string `json:"prompt"`
}

// StopInput is the input of Stop: the model finished its turn.
type StopInput struct {
	HookBase
	// StopHookActive is true when the turn goes on because a Stop hook
	// blocked an earlier stop; check it to avoid blocking forever.
	StopHookActive       bool   `json:"stop_hook_active"`
	LastAssistantMessage string `json:"last_assistant_message,omitempty"`
}

// SubagentStartInput is the input of SubagentStart; AgentID and AgentType
// identify the sub-agent.
type SubagentStartInput struct {
	HookBase
}

// SubagentStopInput is the input of SubagentStop: a sub-agent finished.
// AgentID and AgentType identify it.
type SubagentStopInput struct {
	HookBase
	StopHookActive       bool   `json:"stop_hook_active"`
	AgentTranscriptPath  string `json:"agent_transcript_path,omitempty"`
	LastAssistantMessage string `json:"last_assistant_message,omitempty"`
}

// PreCompactInput is the input of PreCompact: the conversation is about to
// be compacted.
type PreCompactInput struct {
	HookBase
	Trigger            string `json:"trigger"` // "manual" or "auto"
	CustomInstructions string `json:"custom_instructions,omitempty"`
}

// SessionStartInput is the input of SessionStart.
type SessionStartInput struct {
	HookBase
	Source string `json:"source"` // "startup", "resume", "clear", "compact" or "fork"
	Model  string `json:"model,omitempty"`
}

// SessionEndInput is the input of SessionEnd.
type SessionEndInput struct {
	HookBase
	Reason string `json:"reason"` // "clear", "resume", "logout", "prompt_input_exit" or "other"
}

// NotificationInput is the input of Notification: the CLI would notify the
// user.
type NotificationInput struct {
	HookBase
	Message          string `json:"message"`
	Title            string `json:"title,omitempty"`
	NotificationType string `json:"notification_type,omitempty"`
}

// PermissionRequestInput is the input of PermissionRequest: the CLI is
// about to ask for permission to run a tool.
type PermissionRequestInput struct {
	HookBase
	ToolName              string             `json:"tool_name"`
	ToolInput             json.RawMessage    `json:"tool_input"`
	PermissionSuggestions []PermissionUpdate `json:"permission_suggestions,omitempty"`
}

// PreSkillShellCommandInput is the input of PreSkillShellCommand: a shell
// command that the text of a skill or command holds (!`cmd`) is about to
// run while the skill or command loads, outside any tool call of the
// model's. Answer with PermissionDecision HookAllow to let it run; any
// other answer, no answer (a defer) or an UpdatedInput keeps it from
// running, and the skill's text then says "[not run: blocked by hook]".
type PreSkillShellCommandInput struct {
	HookBase
	// ToolName is the shell tool that would run the command: "Bash" or
	// "PowerShell".
	ToolName string `json:"tool_name"`
	// ToolInput is {"command": ...}, the command as it would run, with
	// the skill's arguments filled in; Command is that command.
	ToolInput json.RawMessage `json:"tool_input"`
	// ToolUseID identifies the command; it names no tool call in the
	// transcript.
	ToolUseID string `json:"tool_use_id"`
	// CommandName is the skill or command whose text holds the command,
	// and CommandSource where it was loaded from ("projectSettings", a
	// plugin, ...; may be empty).
	CommandName   string `json:"command_name"`
	CommandSource string `json:"command_source,omitempty"`
	// InvokedBy is who started the load: "user" (typed, or sent by an SDK
	// host), "claude" (the Skill tool, or a turn Claude scheduled) or
	// "other" (a sub-agent's preload, a channel message, or not known).
	InvokedBy string `json:"invoked_by"`
}

// Command returns the shell command, from ToolInput.
func (in *PreSkillShellCommandInput) Command() string {
	var ti struct {
		Command string `json:"command"`
	}
	_ = json.Unmarshal(in.ToolInput, &ti)
	return ti.Command
}

// RawHookInput is the input of an event without a typed input here; decode
// Raw (or use Decode) for its fields.
type RawHookInput struct {
	HookBase
}

// decodeHookInput decodes a hook_callback's input into the type for its
// event (registered is the event the callback was registered for, used
// when the input does not say).
func decodeHookInput(raw json.RawMessage, registered HookEventName) (HookInput, error) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	var head struct {
		Event HookEventName `json:"hook_event_name"`
	}
	_ = unmarshal(raw, &head)
	event := head.Event
	if event == "" {
		event = registered
	}
	var in HookInput
	switch event {
	case HookPreToolUse:
		in = &PreToolUseInput{}
	case HookPostToolUse:
		in = &PostToolUseInput{}
	case HookPostToolUseFailure:
		in = &PostToolUseFailureInput{}
	case HookUserPromptSubmit:
		in = &UserPromptSubmitInput{}
	case HookStop:
		in = &StopInput{}
	case HookSubagentStart:
		in = &SubagentStartInput{}
	case HookSubagentStop:
		in = &SubagentStopInput{}
	case HookPreCompact:
		in = &PreCompactInput{}
	case HookSessionStart:
		in = &SessionStartInput{}
	case HookSessionEnd:
		in = &SessionEndInput{}
	case HookNotification:
		in = &NotificationInput{}
	case HookPermissionRequest:
		in = &PermissionRequestInput{}
	case HookPreSkillShellCommand:
		in = &PreSkillShellCommandInput{}
	default:
		in = &RawHookInput{}
	}
	if err := unmarshal(raw, in); err != nil {
		// A field of an unexpected type: keep what fits.
		if err := decodeTolerant(raw, in); err != nil {
			return nil, err
		}
	}
	b := in.Common()
	b.raw = raw
	b.HookEventName = event
	return in, nil
}
