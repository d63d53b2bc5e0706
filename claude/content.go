package claude

import (
	"bytes"
	"encoding/json"
	"strings"
)

// A ContentBlock is one block of a message's content. Implementations:
// [*TextBlock], [*ThinkingBlock], [*RedactedThinkingBlock], [*ToolUseBlock],
// [*ServerToolUseBlock], [*ToolResultBlock], [*ImageBlock] and, for a type
// this package does not know, [*UnknownBlock].
type ContentBlock interface {
	// BlockType returns the block's "type" field.
	BlockType() string
	isBlock()
}

// TextBlock is text.
type TextBlock struct {
	Text string `json:"text"`
}

// ThinkingBlock is extended thinking with its signature.
type ThinkingBlock struct {
	Thinking  string `json:"thinking"`
	Signature string `json:"signature,omitempty"`
}

// RedactedThinkingBlock is thinking the API returned encrypted.
type RedactedThinkingBlock struct {
	Data string `json:"data"`
}

// ToolUseBlock is a tool call by the model.
type ToolUseBlock struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ServerToolUseBlock is a call of a tool the API runs itself (web search, ...).
type ServerToolUseBlock struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ToolResultBlock is a tool's result as sent back to the model.
type ToolResultBlock struct {
	ToolUseID string  `json:"tool_use_id"`
	Content   Content `json:"content"`
	IsError   bool    `json:"is_error,omitempty"`
}

// ImageBlock is an image.
type ImageBlock struct {
	Source ImageSource `json:"source"`
}

// ImageSource is where an image's bytes come from.
type ImageSource struct {
	Type      string `json:"type"` // "base64" or "url"
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// UnknownBlock is a content block of a type this package does not know.
type UnknownBlock struct {
	Type string
	Raw  json.RawMessage
}

func (*TextBlock) BlockType() string             { return "text" }
func (*ThinkingBlock) BlockType() string         { return "thinking" }
func (*RedactedThinkingBlock) BlockType() string { return "redacted_thinking" }
func (*ToolUseBlock) BlockType() string          { return "tool_use" }
func (*ServerToolUseBlock) BlockType() string    { return "server_tool_use" }
func (*ToolResultBlock) BlockType() string       { return "tool_result" }
func (*ImageBlock) BlockType() string            { return "image" }
func (b *UnknownBlock) BlockType() string        { return b.Type }

func (*TextBlock) isBlock()             {}
func (*ThinkingBlock) isBlock()         {}
func (*RedactedThinkingBlock) isBlock() {}
func (*ToolUseBlock) isBlock()          {}
func (*ServerToolUseBlock) isBlock()    {}
func (*ToolResultBlock) isBlock()       {}
func (*ImageBlock) isBlock()            {}
func (*UnknownBlock) isBlock()          {}

// Blocks is a list of content blocks. It decodes each block by its type and
// encodes back to the wire form.
type Blocks []ContentBlock

// Text returns the concatenated text of the text blocks.
func (bs Blocks) Text() string {
	var sb strings.Builder
	for _, b := range bs {
		if t, ok := b.(*TextBlock); ok {
			sb.WriteString(t.Text)
		}
	}
	return sb.String()
}

// UnmarshalJSON decodes each element according to its "type".
func (bs *Blocks) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("null")) {
		*bs = nil
		return nil
	}
	var raws []json.RawMessage
	if err := unmarshal(data, &raws); err != nil {
		return err
	}
	out := make(Blocks, 0, len(raws))
	for _, r := range raws {
		b, err := decodeBlock(r)
		if err != nil {
			return err
		}
		out = append(out, b)
	}
	*bs = out
	return nil
}

// MarshalJSON encodes each block with its "type" field.
func (bs Blocks) MarshalJSON() ([]byte, error) {
	if bs == nil {
		return []byte("[]"), nil
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, b := range bs {
		if i > 0 {
			buf.WriteByte(',')
		}
		enc, err := MarshalBlock(b)
		if err != nil {
			return nil, err
		}
		buf.Write(enc)
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// MarshalBlock encodes one content block in its wire form, with "type".
func MarshalBlock(b ContentBlock) ([]byte, error) {
	if u, ok := b.(*UnknownBlock); ok {
		return compactJSON(u.Raw)
	}
	body, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	// Splice "type" in front of the block's own fields.
	typ, _ := json.Marshal(b.BlockType())
	out := make([]byte, 0, len(body)+len(typ)+10)
	out = append(out, `{"type":`...)
	out = append(out, typ...)
	if len(body) > 2 {
		out = append(out, ',')
	}
	out = append(out, body[1:]...)
	return out, nil
}

func decodeBlock(r json.RawMessage) (ContentBlock, error) {
	typ, _ := sniffKind(r)
	var b ContentBlock
	switch typ {
	case "text":
		b = new(TextBlock)
	case "thinking":
		b = new(ThinkingBlock)
	case "redacted_thinking":
		b = new(RedactedThinkingBlock)
	case "tool_use":
		b = new(ToolUseBlock)
	case "server_tool_use":
		b = new(ServerToolUseBlock)
	case "tool_result":
		b = new(ToolResultBlock)
	case "image":
		b = new(ImageBlock)
	default:
		return &UnknownBlock{Type: typ, Raw: r}, nil
	}
	if err := unmarshal(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// Content is message content that is either a plain string or a list of
// blocks, as user messages and tool results allow. Exactly one of Text and
// Blocks is meaningful: IsText reports which.
type Content struct {
	Text   string
	Blocks Blocks
	isText bool
}

// TextContent returns string content.
func TextContent(s string) Content { return Content{Text: s, isText: true} }

// BlockContent returns block content.
func BlockContent(blocks ...ContentBlock) Content { return Content{Blocks: blocks} }

// IsText reports whether the content was a plain string.
func (c Content) IsText() bool { return c.isText }

// String returns the string content, or the concatenated text of the blocks.
func (c Content) String() string {
	if c.isText {
		return c.Text
	}
	return c.Blocks.Text()
}

// UnmarshalJSON accepts a string, an array of blocks, or null.
func (c *Content) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) > 0 && data[0] == '"':
		c.isText = true
		c.Blocks = nil
		return unmarshal(data, &c.Text)
	case bytes.Equal(data, []byte("null")):
		*c = Content{}
		return nil
	default:
		c.isText = false
		c.Text = ""
		return c.Blocks.UnmarshalJSON(data)
	}
}

// MarshalJSON writes a string or an array of blocks.
func (c Content) MarshalJSON() ([]byte, error) {
	if c.isText {
		return json.Marshal(c.Text)
	}
	return c.Blocks.MarshalJSON()
}
