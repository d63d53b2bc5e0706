package claude

import "encoding/json"

// The less common system subtypes and message types of the CLI's stdout
// (official SDK §6). Each is a plain struct; fields not listed stay in Raw.

// FilesPersisted reports files uploaded for the session.
type FilesPersisted struct {
	SystemBase
	Files []struct {
		Filename string `json:"filename"`
		FileID   string `json:"file_id"`
	} `json:"files"`
	Failed []struct {
		Filename string `json:"filename"`
		Error    string `json:"error"`
	} `json:"failed"`
	ProcessedAt string `json:"processed_at,omitempty"`
}

// LocalCommandOutput is the output of a local slash command.
type LocalCommandOutput struct {
	SystemBase
	Content string `json:"content"`
}

// CommandsChanged lists the slash commands now available.
type CommandsChanged struct {
	SystemBase
	Commands []struct {
		Name         string `json:"name"`
		Description  string `json:"description"`
		ArgumentHint string `json:"argumentHint,omitempty"`
	} `json:"commands"`
}

// SystemNotification is a notification for the user.
type SystemNotification struct {
	SystemBase
	Key       string `json:"key"`
	Text      string `json:"text"`
	Priority  string `json:"priority,omitempty"`
	Color     string `json:"color,omitempty"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// Informational is an informational note from the CLI.
type Informational struct {
	SystemBase
	Content             string `json:"content"`
	Level               string `json:"level,omitempty"`
	ToolUseID           string `json:"tool_use_id,omitempty"`
	PreventContinuation bool   `json:"prevent_continuation,omitempty"`
	Tag                 string `json:"tag,omitempty"`
}

// ThinkingTokens estimates the thinking tokens used so far.
type ThinkingTokens struct {
	SystemBase
	EstimatedTokens      int64 `json:"estimated_tokens"`
	EstimatedTokensDelta int64 `json:"estimated_tokens_delta"`
}

// ModelRefusal reports a refusal and the fallback taken, if any (subtypes
// model_refusal_fallback and model_refusal_no_fallback).
type ModelRefusal struct {
	SystemBase
	OriginalModel string `json:"original_model"`
	FallbackModel string `json:"fallback_model,omitempty"`
	Direction     string `json:"direction,omitempty"`
	Content       string `json:"content,omitempty"`
}

// ElicitationComplete reports that an MCP elicitation finished.
type ElicitationComplete struct {
	SystemBase
	MCPServerName string `json:"mcp_server_name"`
	ElicitationID string `json:"elicitation_id"`
}

// MemoryRecall lists memories recalled into the context.
type MemoryRecall struct {
	SystemBase
	Mode     string `json:"mode"`
	Memories []struct {
		Path    string `json:"path"`
		Scope   string `json:"scope"`
		Content string `json:"content,omitempty"`
	} `json:"memories"`
}

// PluginInstall reports a plugin installation.
type PluginInstall struct {
	SystemBase
	Status string `json:"status"`
	Name   string `json:"name,omitempty"`
	Error  string `json:"error,omitempty"`
}

// SessionWritesLost reports transcript writes lost to a full disk.
type SessionWritesLost struct {
	SystemBase
	ErrorCode string          `json:"error_code"`
	Lost      json.RawMessage `json:"lost,omitempty"`
}

// WorkerShuttingDown reports that the CLI is shutting down.
type WorkerShuttingDown struct {
	SystemBase
	Reason string `json:"reason"`
}

// ControlRequestProgress reports progress of a long control request.
type ControlRequestProgress struct {
	SystemBase
	RequestID string `json:"request_id"`
	Status    string `json:"status"`
	Attempt   int    `json:"attempt,omitempty"`
}

// PromptSuggestion suggests the user's next prompt.
type PromptSuggestion struct {
	Base
	Suggestion string `json:"suggestion"`
}

// ConversationReset reports that the conversation was reset (e.g. /clear).
type ConversationReset struct {
	Base
	NewConversationID string `json:"new_conversation_id"`
	Trigger           string `json:"trigger,omitempty"`
	UserMessageUUID   string `json:"user_message_uuid,omitempty"`
}

func newSystemMore(sub string) Message {
	switch sub {
	case "files_persisted":
		return new(FilesPersisted)
	case "local_command_output":
		return new(LocalCommandOutput)
	case "commands_changed":
		return new(CommandsChanged)
	case "notification":
		return new(SystemNotification)
	case "informational":
		return new(Informational)
	case "thinking_tokens":
		return new(ThinkingTokens)
	case "model_refusal_fallback", "model_refusal_no_fallback":
		return new(ModelRefusal)
	case "elicitation_complete":
		return new(ElicitationComplete)
	case "memory_recall":
		return new(MemoryRecall)
	case "plugin_install":
		return new(PluginInstall)
	case "session_writes_lost":
		return new(SessionWritesLost)
	case "worker_shutting_down":
		return new(WorkerShuttingDown)
	case "control_request_progress":
		return new(ControlRequestProgress)
	}
	return nil
}
