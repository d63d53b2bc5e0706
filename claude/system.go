package claude

import (
	"bytes"
	"encoding/json"
)

// SystemBase holds the fields every "system" message shares.
type SystemBase struct {
	Base
	Subtype string `json:"subtype"`
}

func (b *SystemBase) systemBase() *SystemBase { return b }

// SystemInit starts every turn: the session id, model, tools and settings in
// force. The CLI prints it after the first user message and again at the
// start of each later turn.
type SystemInit struct {
	SystemBase
	CWD               string      `json:"cwd"`
	Model             string      `json:"model"`
	PermissionMode    string      `json:"permissionMode"`
	Tools             ToolNames   `json:"tools"`
	MCPServers        []MCPServer `json:"mcp_servers,omitempty"`
	SlashCommands     []string    `json:"slash_commands,omitempty"`
	Agents            []string    `json:"agents,omitempty"`
	Skills            []string    `json:"skills,omitempty"`
	Betas             []string    `json:"betas,omitempty"`
	APIKeySource      string      `json:"apiKeySource,omitempty"`
	ClaudeCodeVersion string      `json:"claude_code_version,omitempty"`
	OutputStyle       string      `json:"output_style,omitempty"`
	// Capabilities are the protocol features this CLI supports (see
	// [Capability]); none from CLIs older than the field.
	Capabilities []Capability `json:"capabilities,omitempty"`
}

// ToolNames lists tools by name. Old CLIs printed tool objects with a name
// and schema; both forms decode.
type ToolNames []string

// UnmarshalJSON accepts ["Bash", ...] and [{"name":"Bash", ...}, ...].
func (t *ToolNames) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(ToolNames, 0, len(raw))
	for _, r := range raw {
		r = bytes.TrimSpace(r)
		if len(r) > 0 && r[0] == '{' {
			var obj struct {
				Name string `json:"name"`
			}
			if err := unmarshal(r, &obj); err != nil {
				return err
			}
			out = append(out, obj.Name)
			continue
		}
		var s string
		if err := unmarshal(r, &s); err != nil {
			return err
		}
		out = append(out, s)
	}
	*t = out
	return nil
}

// MCPServer is an MCP server's name and connection status.
type MCPServer struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Source string `json:"source,omitempty"`
}

// SystemStatus reports a status change ("compacting", "requesting", or
// empty) and, after set_permission_mode, the new mode.
type SystemStatus struct {
	SystemBase
	Status         string `json:"status,omitempty"`
	PermissionMode string `json:"permissionMode,omitempty"`
}

// CompactBoundary marks where the conversation was compacted.
type CompactBoundary struct {
	SystemBase
	CompactMetadata struct {
		Trigger    string `json:"trigger"`
		PreTokens  int64  `json:"pre_tokens"`
		PostTokens int64  `json:"post_tokens,omitempty"`
	} `json:"compact_metadata"`
}

// APIRetry reports that an API request failed and will be retried.
type APIRetry struct {
	SystemBase
	Attempt      int    `json:"attempt"`
	MaxRetries   int    `json:"max_retries"`
	RetryDelayMS int64  `json:"retry_delay_ms"`
	ErrorStatus  int    `json:"error_status,omitempty"`
	Error        string `json:"error,omitempty"`
}

// HookEvent is one of the hook lifecycle messages (subtypes hook_started,
// hook_progress, hook_response; printed with Options.IncludeHookEvents).
type HookEvent struct {
	SystemBase
	HookID    string          `json:"hook_id,omitempty"`
	HookName  string          `json:"hook_name"`
	HookEvent string          `json:"hook_event"`
	Stdout    string          `json:"stdout,omitempty"`
	Stderr    string          `json:"stderr,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	ExitCode  *int            `json:"exit_code,omitempty"`
	Outcome   string          `json:"outcome,omitempty"`
}

// TaskStarted reports that a sub-agent or background task started.
type TaskStarted struct {
	SystemBase
	TaskID         string `json:"task_id"`
	ToolUseID      string `json:"tool_use_id,omitempty"`
	Description    string `json:"description,omitempty"`
	SubagentType   string `json:"subagent_type,omitempty"`
	TaskType       string `json:"task_type,omitempty"`
	IsBackgrounded bool   `json:"is_backgrounded,omitempty"`
	Prompt         string `json:"prompt,omitempty"`
}

// TaskProgress reports a running task's progress.
type TaskProgress struct {
	SystemBase
	TaskID       string `json:"task_id"`
	Description  string `json:"description,omitempty"`
	LastToolName string `json:"last_tool_name,omitempty"`
	Summary      string `json:"summary,omitempty"`
	Usage        struct {
		TotalTokens int64 `json:"total_tokens"`
		ToolUses    int64 `json:"tool_uses"`
		DurationMS  int64 `json:"duration_ms"`
	} `json:"usage"`
}

// TaskUpdated reports a change of a task's state.
type TaskUpdated struct {
	SystemBase
	TaskID string `json:"task_id"`
	Patch  struct {
		Status         string `json:"status,omitempty"`
		Description    string `json:"description,omitempty"`
		Error          string `json:"error,omitempty"`
		IsBackgrounded *bool  `json:"is_backgrounded,omitempty"`
	} `json:"patch"`
}

// TaskNotification reports that a task completed, failed or was stopped.
type TaskNotification struct {
	SystemBase
	TaskID     string `json:"task_id"`
	ToolUseID  string `json:"tool_use_id,omitempty"`
	Status     string `json:"status"`
	OutputFile string `json:"output_file,omitempty"`
	Summary    string `json:"summary,omitempty"`
}

// BackgroundTasksChanged lists the background tasks now running.
type BackgroundTasksChanged struct {
	SystemBase
	Tasks []struct {
		TaskID      string `json:"task_id"`
		TaskType    string `json:"task_type,omitempty"`
		Description string `json:"description,omitempty"`
	} `json:"tasks"`
}

// SessionStateChanged reports "idle", "running" or "requires_action".
type SessionStateChanged struct {
	SystemBase
	State string `json:"state"`
}

// PermissionDenied reports a tool call denied without asking (by a rule or mode).
type PermissionDenied struct {
	SystemBase
	ToolName  string `json:"tool_name"`
	ToolUseID string `json:"tool_use_id"`
	AgentID   string `json:"agent_id,omitempty"`
	Message   string `json:"message,omitempty"`
}
