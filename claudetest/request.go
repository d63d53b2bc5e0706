package claudetest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// A Request is one decoded Messages API request (POST /v1/messages).
type Request struct {
	Model     string
	MaxTokens int
	Stream    bool
	// System is the text of the system prompt, blocks joined by "\n".
	System string
	// Tools are the names of the tools offered, in order.
	Tools []string
	// Messages are the conversation so far. Besides "user" and "assistant"
	// the CLI also sends "system" messages (environment details).
	Messages []RequestMessage

	// Header is the HTTP request header.
	Header http.Header
	// Raw is the request body as received.
	Raw []byte
}

// RequestMessage is one message of a Request.
type RequestMessage struct {
	Role    string
	Content []RequestBlock
}

// RequestBlock is one content block of a RequestMessage. Which fields are set
// depends on Type.
type RequestBlock struct {
	// Type is "text", "thinking", "tool_use", "tool_result", "image", ...
	Type string
	// Text is the text of a text block or the thinking of a thinking block.
	Text string
	// ID, Name and Input are those of a tool_use block.
	ID    string
	Name  string
	Input json.RawMessage
	// ToolUseID, IsError and Content are those of a tool_result block;
	// Content is its text (text parts joined by "\n").
	ToolUseID string
	IsError   bool
	Content   string
	// Raw is the block as received.
	Raw json.RawMessage
}

// AssistantCount returns the number of assistant messages in the request:
// the number of the conversation turn being asked for, counting from 0.
func (r *Request) AssistantCount() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// LastUserText returns the text of the last user message: its text blocks
// joined by "\n", leaving out the blocks the CLI adds to what the user typed
// (<system-reminder>, and the caveat, name and output of local commands such
// as /model). It is "" when that message holds only tool results.
func (r *Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" {
			return userText(m)
		}
	}
	return ""
}

// injectedPrefixes start the text blocks the CLI adds to a user message.
var injectedPrefixes = []string{
	"<system-reminder>",
	"<local-command-caveat>",
	"<command-name>",
	"<command-message>",
	"<command-args>",
	"<local-command-stdout>",
	"<local-command-stderr>",
}

func isInjected(text string) bool {
	text = strings.TrimSpace(text)
	for _, p := range injectedPrefixes {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return false
}

func userText(m RequestMessage) string {
	var parts []string
	for _, b := range m.Content {
		if b.Type == "text" && !isInjected(b.Text) {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ToolResult returns the content text and is_error flag of the tool_result
// block for toolUseID, searching from the last message back. ok is false if
// there is none.
func (r *Request) ToolResult(toolUseID string) (content string, isError bool, ok bool) {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		for _, b := range r.Messages[i].Content {
			if b.Type == "tool_result" && b.ToolUseID == toolUseID {
				return b.Content, b.IsError, true
			}
		}
	}
	return "", false, false
}

// ToolUses returns the tool_use blocks of all assistant messages, oldest first.
func (r *Request) ToolUses() []RequestBlock {
	var out []RequestBlock
	for _, m := range r.Messages {
		if m.Role != "assistant" {
			continue
		}
		for _, b := range m.Content {
			if b.Type == "tool_use" {
				out = append(out, b)
			}
		}
	}
	return out
}

// firstUserText is the text of the first user message, used to tell
// conversations apart (a sub-agent's from its parent's).
func (r *Request) firstUserText() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return userText(m)
		}
	}
	return ""
}

type wireRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	System    json.RawMessage `json:"system"`
	Tools     []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
}

// decodeRequest decodes a Messages API request body.
func decodeRequest(body []byte, h http.Header) (*Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	r := &Request{
		Model:     w.Model,
		MaxTokens: w.MaxTokens,
		Stream:    w.Stream,
		Header:    h,
		Raw:       body,
	}
	sys, err := decodeBlocks(w.System)
	if err != nil {
		return nil, err
	}
	r.System = joinText(sys)
	for _, t := range w.Tools {
		r.Tools = append(r.Tools, t.Name)
	}
	for _, m := range w.Messages {
		blocks, err := decodeBlocks(m.Content)
		if err != nil {
			return nil, err
		}
		r.Messages = append(r.Messages, RequestMessage{Role: m.Role, Content: blocks})
	}
	return r, nil
}

// decodeBlocks decodes content that is either a string (one text block) or
// an array of blocks.
func decodeBlocks(raw json.RawMessage) ([]RequestBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []RequestBlock{{Type: "text", Text: s, Raw: raw}}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	out := make([]RequestBlock, 0, len(items))
	for _, it := range items {
		var wb wireBlock
		if err := json.Unmarshal(it, &wb); err != nil {
			return nil, err
		}
		b := RequestBlock{Type: wb.Type, Text: wb.Text, Raw: it}
		switch wb.Type {
		case "thinking":
			b.Text = wb.Thinking
		case "tool_use", "server_tool_use":
			b.ID, b.Name, b.Input = wb.ID, wb.Name, wb.Input
		case "tool_result":
			b.ToolUseID, b.IsError = wb.ToolUseID, wb.IsError
			inner, err := decodeBlocks(wb.Content)
			if err != nil {
				return nil, err
			}
			b.Content = joinText(inner)
		}
		out = append(out, b)
	}
	return out, nil
}

func joinText(blocks []RequestBlock) string {
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Transcript returns the text blocks of the request's messages, one
// "role: text" line each, in order: what a test checks to see that a
// resumed or forked conversation reached the model whole.
func (r *Request) Transcript() string {
	var b strings.Builder
	for _, m := range r.Messages {
		for _, c := range m.Content {
			if c.Type == "text" {
				b.WriteString(m.Role + ": " + c.Text + "\n")
			}
		}
	}
	return b.String()
}
