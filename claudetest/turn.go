package claudetest

import (
	"encoding/json"
	"fmt"
	"time"
)

// A Responder picks the reply to one Messages API request.
//
// Respond is called concurrently when the CLI sends concurrent requests
// (for example a sub-agent's requests beside the main conversation's), so it
// must be safe for concurrent use.
type Responder interface {
	Respond(*Request) Turn
}

// ResponderFunc adapts a function to the Responder interface.
type ResponderFunc func(*Request) Turn

// Respond calls f(r).
func (f ResponderFunc) Respond(r *Request) Turn { return f(r) }

// EndOfScript is the text Script replies with once its turns are used up.
const EndOfScript = "(end of script)"

// Script returns a stateless Responder that answers a request with turns[N],
// where N is the number of assistant messages in the request
// (Request.AssistantCount). Because the choice depends only on the request,
// the script keeps working across multi-turn sessions, --resume and
// --fork-session, and retried requests get the same answer.
//
// Past the end of the script it replies Reply(Text(EndOfScript)).
//
// Each tool round trip is one conversation turn: a ToolUse turn is followed by
// a request whose last user message holds the tool_result, and that request is
// answered by the next turn. An interrupted reply that the CLI keeps in its
// history also counts as an assistant message.
func Script(turns ...Turn) Responder {
	turns = append([]Turn(nil), turns...)
	return ResponderFunc(func(r *Request) Turn {
		n := r.AssistantCount()
		if n < len(turns) {
			return turns[n]
		}
		return Reply(Text(EndOfScript))
	})
}

// A Turn is the fake model's reply to one request: either a message made of
// Blocks, or, if Status is not zero, an HTTP error.
type Turn struct {
	// Blocks are the content blocks of the reply, streamed in order.
	Blocks []Block

	// StopReason is the reply's stop_reason. If empty it is "tool_use"
	// when any block is a ToolUse block, else "end_turn".
	StopReason string

	// Delay is waited before the first byte of the response (before the
	// HTTP status line, so also before an error reply).
	Delay time.Duration

	// DeltaDelay is waited before every content_block_delta event: use it
	// for a slow stream, e.g. for interrupt tests.
	DeltaDelay time.Duration

	// ChunkSize is the number of bytes of text (or thinking) per delta.
	// Zero means 64, grown automatically so that one block never needs
	// more than 256 deltas (a 12 MB reply is sent in ~48 KB deltas).
	// Chunks never split a UTF-8 sequence.
	ChunkSize int

	// InputTokens and OutputTokens override the usage reported for the
	// reply. Zero means a small plausible number derived from the request
	// and the reply size.
	InputTokens  int
	OutputTokens int

	// Status, if not zero, makes the server answer with this HTTP status
	// and an Anthropic-style JSON error body instead of a message.
	// ErrorType defaults to the API's type for the status (400
	// invalid_request_error, 429 rate_limit_error, 529 overloaded_error, ...)
	// and ErrorMessage to a short description.
	// Note that the CLI retries 408, 409, 429 and 5xx errors (with backoff)
	// before it gives up.
	Status       int
	ErrorType    string
	ErrorMessage string
}

// Reply returns a Turn with the given content blocks.
func Reply(blocks ...Block) Turn { return Turn{Blocks: blocks} }

// Error returns a Turn that answers with an HTTP error. errType and message
// may be empty for the defaults of status.
func Error(status int, errType, message string) Turn {
	return Turn{Status: status, ErrorType: errType, ErrorMessage: message}
}

// A Block is one content block of a reply: a *TextBlock, *ThinkingBlock or
// *ToolUseBlock, made by Text, Thinking, ToolUse and ToolUseID.
type Block interface{ isBlock() }

// TextBlock is a text content block, streamed as text_delta events.
type TextBlock struct {
	Text string
}

// ThinkingBlock is an extended-thinking block, streamed as thinking_delta
// events followed by one signature_delta.
type ThinkingBlock struct {
	Thinking string
	// Signature is the block's signature; empty means a fake one derived
	// from the text.
	Signature string
}

// ToolUseBlock is a tool call, streamed as input_json_delta events.
type ToolUseBlock struct {
	// ID is the tool_use id; empty means a deterministic "toolu_" id (see
	// ToolUse).
	ID    string
	Name  string
	Input json.RawMessage
}

func (*TextBlock) isBlock()     {}
func (*ThinkingBlock) isBlock() {}
func (*ToolUseBlock) isBlock()  {}

// Text returns a text block.
func Text(s string) Block { return &TextBlock{Text: s} }

// Thinking returns a thinking block with a fake signature.
func Thinking(text string) Block { return &ThinkingBlock{Thinking: text} }

// ToolUse returns a tool_use block calling the tool name with input, which is
// encoded with encoding/json (pass a map, a struct or a json.RawMessage; it
// should encode to a JSON object). It panics if input cannot be encoded.
//
// Its id is "toolu_" followed by 24 characters derived from the conversation's
// first user message, the turn number, the block's position, name and input:
// stable across retries and resumed sessions, distinct within a conversation.
// Use ToolUseID to choose the id.
func ToolUse(name string, input any) Block { return ToolUseID("", name, input) }

// ToolUseID is like ToolUse with the given tool_use id.
func ToolUseID(id, name string, input any) Block {
	var raw json.RawMessage
	switch v := input.(type) {
	case nil:
		raw = json.RawMessage("{}")
	default:
		b, err := json.Marshal(v)
		if err != nil {
			panic(fmt.Sprintf("claudetest: ToolUse(%q): cannot encode input: %v", name, err))
		}
		raw = b
	}
	return &ToolUseBlock{ID: id, Name: name, Input: raw}
}

func (t *Turn) stopReason() string {
	if t.StopReason != "" {
		return t.StopReason
	}
	for _, b := range t.Blocks {
		if _, ok := b.(*ToolUseBlock); ok {
			return "tool_use"
		}
	}
	return "end_turn"
}

// errorType returns the Anthropic error type for an HTTP status.
func errorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 408:
		return "timeout_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}
