package claudetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

const (
	defaultChunkSize = 64
	maxDeltas        = 256 // per block, when ChunkSize is 0
	jsonPieces       = 3   // input_json_delta events per tool_use block
	maxUsageTokens   = 10000
)

// reply is a Turn resolved against one request: ids, signatures and usage
// filled in.
type reply struct {
	turn   *Turn
	id     string
	model  string
	blocks []resolvedBlock
	stop   string
	input  int
	output int
}

type resolvedBlock struct {
	kind      string // "text", "thinking", "tool_use"
	text      string // text or thinking
	signature string
	id, name  string
	input     json.RawMessage
}

func resolve(t *Turn, req *Request, msgID string) *reply {
	rp := &reply{turn: t, id: msgID, model: req.Model, stop: t.stopReason()}
	if rp.model == "" {
		rp.model = "claude-test"
	}
	turnNo := req.AssistantCount()
	first := req.firstUserText()
	size := 0
	for i, b := range t.Blocks {
		switch b := b.(type) {
		case *TextBlock:
			rp.blocks = append(rp.blocks, resolvedBlock{kind: "text", text: b.Text})
			size += len(b.Text)
		case *ThinkingBlock:
			sig := b.Signature
			if sig == "" {
				sig = fakeSignature(b.Thinking)
			}
			rp.blocks = append(rp.blocks, resolvedBlock{kind: "thinking", text: b.Thinking, signature: sig})
			size += len(b.Thinking)
		case *ToolUseBlock:
			id := b.ID
			if id == "" {
				id = toolUseID(first, turnNo, i, b.Name, b.Input)
			}
			input := b.Input
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
			rp.blocks = append(rp.blocks, resolvedBlock{kind: "tool_use", id: id, name: b.Name, input: compactJSON(input)})
			size += len(b.Name) + len(input)
		case nil:
			// ignore
		default:
			panic(fmt.Sprintf("claudetest: unknown block type %T", b))
		}
	}
	rp.input = t.InputTokens
	if rp.input == 0 {
		rp.input = min(1+len(req.Raw)/256, maxUsageTokens)
	}
	rp.output = t.OutputTokens
	if rp.output == 0 {
		rp.output = min(1+size/4, maxUsageTokens)
		if req.MaxTokens > 0 {
			rp.output = min(rp.output, req.MaxTokens)
		}
	}
	return rp
}

// toolUseID derives a stable id: "toolu_" and 24 base62-like characters.
func toolUseID(first string, turn, index int, name string, input []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%d\x00%s\x00%s\x00", turn, index, name, first)
	h.Write(input)
	sum := h.Sum(nil)
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var sb strings.Builder
	sb.WriteString("toolu_")
	for _, c := range sum[:24] {
		sb.WriteByte(alphabet[int(c)%len(alphabet)])
	}
	return sb.String()
}

func fakeSignature(thinking string) string {
	sum := sha256.Sum256([]byte("claudetest thinking signature\x00" + thinking))
	return base64.StdEncoding.EncodeToString(append([]byte("claudetest-fake-signature:"), sum[:]...))
}

func compactJSON(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

// marshal encodes v as JSON without HTML escaping, as the API does.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("claudetest: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// chunks splits s into pieces of about size bytes without splitting a UTF-8
// sequence. It returns no pieces for "".
func chunks(s string, size int) []string {
	if size < 1 {
		size = 1
	}
	var out []string
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 { // size smaller than the first rune
			_, n = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// textChunks splits a text or thinking block into deltas per the Turn's
// ChunkSize rules.
func (t *Turn) textChunks(s string) []string {
	size := t.ChunkSize
	if size <= 0 {
		size = max(defaultChunkSize, (len(s)+maxDeltas-1)/maxDeltas)
	}
	return chunks(s, size)
}

// jsonChunks splits tool input JSON into a few input_json_delta pieces.
func jsonChunks(raw []byte) []string {
	s := string(raw)
	if len(s) <= jsonPieces {
		return []string{s}
	}
	return chunks(s, (len(s)+jsonPieces-1)/jsonPieces)
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// message is the JSON Message object (non-streaming reply, and the
// message_start payload with empty content).
type message struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []any   `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        usage   `json:"usage"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type thinkingContent struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type toolUseContent struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// messageJSON is the non-streaming reply body.
func (rp *reply) messageJSON() []byte {
	content := make([]any, 0, len(rp.blocks))
	for _, b := range rp.blocks {
		switch b.kind {
		case "text":
			content = append(content, textContent{"text", b.text})
		case "thinking":
			content = append(content, thinkingContent{"thinking", b.text, b.signature})
		case "tool_use":
			content = append(content, toolUseContent{"tool_use", b.id, b.name, b.input})
		}
	}
	stop := rp.stop
	return marshal(message{
		ID: rp.id, Type: "message", Role: "assistant", Model: rp.model,
		Content: content, StopReason: &stop,
		Usage: usage{InputTokens: rp.input, OutputTokens: rp.output},
	})
}

// errorJSON is an Anthropic-style error body.
func errorJSON(errType, msg, requestID string) []byte {
	type apiError struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	return marshal(struct {
		Type      string   `json:"type"`
		Error     apiError `json:"error"`
		RequestID string   `json:"request_id,omitempty"`
	}{"error", apiError{errType, msg}, requestID})
}

// sseWriter writes server-sent events, flushing after each one.
type sseWriter struct {
	ctx   context.Context
	w     io.Writer
	flush func() error
}

func (e *sseWriter) event(name string, data []byte) error {
	if err := e.ctx.Err(); err != nil {
		return err
	}
	buf := make([]byte, 0, len(name)+len(data)+16)
	buf = append(buf, "event: "...)
	buf = append(buf, name...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := e.w.Write(buf); err != nil {
		return err
	}
	return e.flush()
}

// sleep waits d or until the request is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// stream writes the reply as Anthropic SSE events. It returns early with an
// error when the client goes away or the server closes.
func (rp *reply) stream(e *sseWriter) error {
	t := rp.turn
	start := message{
		ID: rp.id, Type: "message", Role: "assistant", Model: rp.model,
		Content: []any{},
		Usage:   usage{InputTokens: rp.input, OutputTokens: 1},
	}
	if err := e.event("message_start", marshal(struct {
		Type    string  `json:"type"`
		Message message `json:"message"`
	}{"message_start", start})); err != nil {
		return err
	}
	if err := e.event("ping", []byte(`{"type": "ping"}`)); err != nil {
		return err
	}
	delta := func(index int, d any) error {
		if err := sleep(e.ctx, t.DeltaDelay); err != nil {
			return err
		}
		return e.event("content_block_delta", marshal(struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
			Delta any    `json:"delta"`
		}{"content_block_delta", index, d}))
	}
	for i, b := range rp.blocks {
		var cb any
		switch b.kind {
		case "text":
			cb = textContent{"text", ""}
		case "thinking":
			cb = thinkingContent{"thinking", "", ""}
		case "tool_use":
			cb = toolUseContent{"tool_use", b.id, b.name, json.RawMessage("{}")}
		}
		if err := e.event("content_block_start", marshal(struct {
			Type         string `json:"type"`
			Index        int    `json:"index"`
			ContentBlock any    `json:"content_block"`
		}{"content_block_start", i, cb})); err != nil {
			return err
		}
		switch b.kind {
		case "text":
			for _, c := range t.textChunks(b.text) {
				if err := delta(i, textContent{"text_delta", c}); err != nil {
					return err
				}
			}
		case "thinking":
			for _, c := range t.textChunks(b.text) {
				if err := delta(i, struct {
					Type     string `json:"type"`
					Thinking string `json:"thinking"`
				}{"thinking_delta", c}); err != nil {
					return err
				}
			}
			if err := delta(i, struct {
				Type      string `json:"type"`
				Signature string `json:"signature"`
			}{"signature_delta", b.signature}); err != nil {
				return err
			}
		case "tool_use":
			for _, c := range jsonChunks(b.input) {
				if err := delta(i, struct {
					Type        string `json:"type"`
					PartialJSON string `json:"partial_json"`
				}{"input_json_delta", c}); err != nil {
					return err
				}
			}
		}
		if err := e.event("content_block_stop", marshal(struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
		}{"content_block_stop", i})); err != nil {
			return err
		}
	}
	stop := rp.stop
	if err := e.event("message_delta", marshal(struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   *string `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage usage `json:"usage"`
	}{Type: "message_delta", Delta: struct {
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}{StopReason: &stop}, Usage: usage{InputTokens: rp.input, OutputTokens: rp.output}})); err != nil {
		return err
	}
	return e.event("message_stop", []byte(`{"type":"message_stop"}`))
}
