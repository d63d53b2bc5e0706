package claude

import "encoding/json"

// A Message is one line the CLI printed on stdout, decoded.
//
// The set of implementations is closed (see the list below), but the CLI adds
// message types without notice: a type or subtype this package does not know
// arrives as an [*UnknownMessage] carrying the raw line, never as an error.
// Every message keeps the raw bytes it was decoded from ([Message.Raw]).
//
// Implementations: [*AssistantMessage], [*UserMessage], [*ResultMessage],
// [*StreamEvent], [*SystemInit], [*SystemStatus], [*CompactBoundary],
// [*APIRetry], [*HookEvent], [*TaskStarted], [*TaskProgress], [*TaskUpdated],
// [*TaskNotification], [*BackgroundTasksChanged], [*SessionStateChanged],
// [*PermissionDenied], [*ToolProgress], [*ToolUseSummary], [*AuthStatus],
// [*RateLimitEvent], [*KeepAlive], [*ControlRequest], [*ControlResponse],
// [*ControlCancelRequest], [*UnknownMessage].
type Message interface {
	// Kind returns the message's "type" field ("assistant", "system", ...).
	Kind() string
	// Raw returns the line as read from the CLI, without its newline. If the
	// line was longer than the session's MaxPayloadBytes, it is the truncated
	// line (see [Base.Truncated]). The bytes are read-only: decoded strings
	// of stream events share them, and small lines share a 64 KiB block, so
	// a program that keeps a few messages for long while dropping the rest
	// should keep copies.
	Raw() []byte
	base() *Base
}

// Base holds the fields every message shares. It is embedded in each message type.
type Base struct {
	Type      string `json:"type"`
	UUID      string `json:"uuid,omitempty"`
	SessionID string `json:"session_id,omitempty"`

	raw          []byte
	originalSize int64        // > 0 when the line was truncated
	lineSeq      uint64       // Line.Seq of the line
	strictErr    *DecodeError // set when only the tolerant path decoded the line (DecodeErrorOf)
}

// Kind returns the message's "type" field.
func (b *Base) Kind() string { return b.Type }

// Raw returns the line the message was decoded from.
func (b *Base) Raw() []byte { return b.raw }

// Truncated reports whether the line was longer than the payload limit and was
// cut, and if so how long it was originally (in bytes).
func (b *Base) Truncated() (originalSize int64, truncated bool) {
	return b.originalSize, b.originalSize > 0
}

func (b *Base) base() *Base { return b }

// LineSeq returns the number its connection gave the line m was decoded
// from (Line.Seq: a remote worker's frame number), 0 when the connection
// does not number lines. See [Session.Release].
func LineSeq(m Message) uint64 { return m.base().lineSeq }

// AssistantMessage is a model reply. The CLI prints one line per content block
// of an API message; the lines of one API message share Message.ID.
type AssistantMessage struct {
	Base
	Message APIMessage `json:"message"`
	// ParentToolUseID is the id of the Task tool call that started the
	// sub-agent this message belongs to; empty on the main thread.
	ParentToolUseID string `json:"parent_tool_use_id,omitempty"`
	// AgentID identifies the sub-agent; empty on the main thread.
	AgentID string `json:"agent_id,omitempty"`
	// Error is set when the turn failed at the API: "authentication_failed",
	// "billing_error", "rate_limit", "invalid_request", "server_error",
	// "overloaded", "max_output_tokens", "unknown", ...
	Error     string `json:"error,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// APIMessage is the Anthropic Messages API message inside an assistant line.
type APIMessage struct {
	ID           string `json:"id,omitempty"`
	Type         string `json:"type,omitempty"`
	Role         string `json:"role,omitempty"`
	Model        string `json:"model,omitempty"`
	Content      Blocks `json:"content"`
	StopReason   string `json:"stop_reason,omitempty"`
	StopSequence string `json:"stop_sequence,omitempty"`
	Usage        *Usage `json:"usage,omitempty"`
}

// Text returns the concatenated text of the message's text blocks.
func (m *AssistantMessage) Text() string { return m.Message.Content.Text() }

// UserMessage is a user turn as the CLI echoes it: tool results, replays of
// prompts (with --replay-user-messages or on resume) and synthetic messages
// such as "[Request interrupted by user]".
type UserMessage struct {
	Base
	Message         UserContent     `json:"message"`
	ParentToolUseID string          `json:"parent_tool_use_id,omitempty"`
	AgentID         string          `json:"agent_id,omitempty"`
	ToolUseResult   json.RawMessage `json:"tool_use_result,omitempty"`
	IsSynthetic     bool            `json:"isSynthetic,omitempty"`
	IsReplay        bool            `json:"isReplay,omitempty"`
	Timestamp       string          `json:"timestamp,omitempty"`
}

// UserContent is the message of a user line. Content is either a plain string
// or content blocks; both decode into [Content].
type UserContent struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// ResultMessage ends a turn. Subtype is "success" or one of the error
// subtypes ("error_during_execution", "error_max_turns",
// "error_max_budget_usd", "error_max_structured_output_retries"); IsError is
// the CLI's own verdict.
type ResultMessage struct {
	Base
	Subtype           string                `json:"subtype"`
	IsError           bool                  `json:"is_error"`
	DurationMS        int64                 `json:"duration_ms"`
	DurationAPIMS     int64                 `json:"duration_api_ms"`
	NumTurns          int                   `json:"num_turns"`
	Result            string                `json:"result,omitempty"`
	StopReason        string                `json:"stop_reason,omitempty"`
	TotalCostUSD      float64               `json:"total_cost_usd"`
	Usage             *Usage                `json:"usage,omitempty"`
	ModelUsage        map[string]ModelUsage `json:"modelUsage,omitempty"`
	PermissionDenials []PermissionDenial    `json:"permission_denials,omitempty"`
	StructuredOutput  json.RawMessage       `json:"structured_output,omitempty"`
	Errors            []string              `json:"errors,omitempty"`
	TerminalReason    string                `json:"terminal_reason,omitempty"`
	APIErrorStatus    int                   `json:"api_error_status,omitempty"`
	// StartupFailureReason is set on the result the CLI prints before it
	// exits for a known startup failure (see [StartupFailureReason]), and
	// InvalidConfigFile with config_file_invalid.
	StartupFailureReason StartupFailureReason `json:"startup_failure_reason,omitempty"`
	InvalidConfigFile    *InvalidConfigFile   `json:"invalid_config_file,omitempty"`
}

// Usage counts tokens, as in the Anthropic API.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens,omitempty"`
}

// ModelUsage is one model's usage in a result. It is cumulative for the CLI
// process, not per turn.
type ModelUsage struct {
	InputTokens              int64   `json:"inputTokens"`
	OutputTokens             int64   `json:"outputTokens"`
	CacheReadInputTokens     int64   `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64   `json:"cacheCreationInputTokens"`
	WebSearchRequests        int64   `json:"webSearchRequests"`
	CostUSD                  float64 `json:"costUSD"`
	ContextWindow            int64   `json:"contextWindow,omitempty"`
	MaxOutputTokens          int64   `json:"maxOutputTokens,omitempty"`
}

// PermissionDenial is a tool call that was denied during the turn.
type PermissionDenial struct {
	ToolName  string          `json:"tool_name"`
	ToolUseID string          `json:"tool_use_id"`
	ToolInput json.RawMessage `json:"tool_input,omitempty"`
}

// StreamEvent is a raw Anthropic streaming event (present only with
// Options.IncludePartialMessages).
type StreamEvent struct {
	Base
	Event           StreamEventData `json:"event"`
	ParentToolUseID string          `json:"parent_tool_use_id,omitempty"`
	AgentID         string          `json:"agent_id,omitempty"`
	TTFTMS          int64           `json:"ttft_ms,omitempty"`
}

// StreamEventData is an Anthropic SSE event: message_start, content_block_start,
// content_block_delta, content_block_stop, message_delta, message_stop.
type StreamEventData struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	// Delta is set on content_block_delta and message_delta events.
	Delta *Delta `json:"delta,omitempty"`
	// ContentBlock is set on content_block_start (the block's first state).
	ContentBlock json.RawMessage `json:"content_block,omitempty"`
	// Message is set on message_start.
	Message json.RawMessage `json:"message,omitempty"`
	Usage   *Usage          `json:"usage,omitempty"`
}

// Delta is the change carried by a delta event. Type is "text_delta",
// "input_json_delta", "thinking_delta", "signature_delta" or, on
// message_delta, empty with StopReason set.
type Delta struct {
	Type        string `json:"type,omitempty"`
	Text        string `json:"text,omitempty"`
	PartialJSON string `json:"partial_json,omitempty"`
	Thinking    string `json:"thinking,omitempty"`
	Signature   string `json:"signature,omitempty"`
	StopReason  string `json:"stop_reason,omitempty"`
}

// ToolProgress reports a long-running tool.
type ToolProgress struct {
	Base
	ToolUseID          string  `json:"tool_use_id"`
	ToolName           string  `json:"tool_name"`
	ParentToolUseID    string  `json:"parent_tool_use_id,omitempty"`
	ElapsedTimeSeconds float64 `json:"elapsed_time_seconds"`
	TaskID             string  `json:"task_id,omitempty"`
}

// ToolUseSummary summarises a run of tool calls.
type ToolUseSummary struct {
	Base
	Summary             string   `json:"summary"`
	PrecedingToolUseIDs []string `json:"preceding_tool_use_ids,omitempty"`
}

// AuthStatus reports authentication progress.
type AuthStatus struct {
	Base
	IsAuthenticating bool     `json:"isAuthenticating"`
	Output           []string `json:"output,omitempty"`
	Error            string   `json:"error,omitempty"`
}

// RateLimitEvent reports the account's rate-limit state.
type RateLimitEvent struct {
	Base
	RateLimitInfo RateLimitInfo `json:"rate_limit_info"`
}

// RateLimitInfo is the payload of a [RateLimitEvent].
type RateLimitInfo struct {
	Status        string  `json:"status"` // "allowed", "allowed_warning", "rejected"
	ResetsAt      int64   `json:"resetsAt,omitempty"`
	RateLimitType string  `json:"rateLimitType,omitempty"`
	Utilization   float64 `json:"utilization,omitempty"`
}

// KeepAlive is a heartbeat; it carries nothing.
type KeepAlive struct{ Base }

// UnknownMessage is a line whose type (or system subtype) this package does
// not know, or a known type whose fields could not be decoded even
// tolerantly (then Err says why). Raw holds the whole line.
type UnknownMessage struct {
	Base
	Subtype string
	// Err is nil for an unknown type; for a known type that failed to decode
	// it is a *DecodeError.
	Err error
}

// Decode unmarshals the raw line into v.
func (m *UnknownMessage) Decode(v any) error { return json.Unmarshal(m.raw, v) }
