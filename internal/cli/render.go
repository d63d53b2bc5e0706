package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/claudectl/claudectl/claude"
)

// maxSummary is how many characters of a tool's input or output one line
// shows.
const maxSummary = 80

// renderer prints a session's messages as a transcript: the reply text as it
// streams, a line per tool call and a short line per tool result. It is used
// from the goroutine reading messages only.
type renderer struct {
	out  io.Writer
	tool *toolLog // tool calls shown, for the permission prompt to wait on

	atLineStart bool
	last        int             // what was printed last: nothing, text or a tool line
	current     string          // id of the main-thread message being streamed
	streamed    map[string]bool // main-thread message ids whose text came as deltas

	pal      palette     // colours for out
	status   *statusLine // what the turn is doing; nil for none
	thinking bool        // show thinking blocks (unless --hide-thinking)
}

const (
	printedNothing = iota
	printedText
	printedTool
	printedPrompt // a user's prompt (attach): what follows is set apart
)

func newRenderer(out io.Writer, tool *toolLog) *renderer {
	return &renderer{out: out, tool: tool, atLineStart: true, streamed: map[string]bool{}}
}

// newTranscript returns the renderer of a command's transcript on
// env.Stdout: coloured on a terminal, telling status (may be nil) what
// happens, with thinking shown (dimmed) unless hideThinking.
func newTranscript(env *Env, tool *toolLog, status *statusLine, hideThinking bool) *renderer {
	r := newRenderer(env.Stdout, tool)
	r.pal = colorFor(env, env.StdoutIsTerminal)
	r.status, r.thinking = status, !hideThinking
	return r
}

func (r *renderer) write(s string) {
	if s == "" {
		return
	}
	io.WriteString(r.out, s)
	r.atLineStart = strings.HasSuffix(s, "\n")
}

// text prints reply text, separated by a blank line from tool lines above.
func (r *renderer) text(s string) {
	if s == "" {
		return
	}
	if r.last == printedTool || r.last == printedPrompt {
		r.endLine()
		r.write("\n")
	}
	r.write(s)
	r.last = printedText
}

// line prints a whole line of tool output, separated by a blank line from
// reply text above.
func (r *renderer) line(s string) {
	r.endLine()
	if r.last == printedText || r.last == printedPrompt {
		r.write("\n")
	}
	r.write(s + "\n")
	r.last = printedTool
}

// endLine ends a partly written line.
func (r *renderer) endLine() {
	if !r.atLineStart {
		r.write("\n")
	}
}

// finish ends the transcript on a new line.
func (r *renderer) finish() { r.endLine() }

// handle prints what m adds to the transcript.
func (r *renderer) handle(m claude.Message) {
	switch m := m.(type) {
	case *claude.StreamEvent:
		if m.ParentToolUseID != "" {
			return // a sub-agent's stream: its tool calls are shown, not its text
		}
		r.streamEvent(m.Event)
	case *claude.AssistantMessage:
		sub := m.ParentToolUseID != ""
		for _, b := range m.Message.Content {
			switch b := b.(type) {
			case *claude.TextBlock:
				// Shown already if it streamed. An API error's text comes
				// back as the result's error, printed on stderr.
				if !sub && !r.streamed[m.Message.ID] && m.Error == "" {
					r.text(b.Text)
				}
			case *claude.ThinkingBlock:
				if !sub && r.thinking {
					r.showThinking(b.Thinking)
				}
			case *claude.ToolUseBlock:
				r.line(indent(sub) + r.toolLine(b.Name, b.Input))
				r.tool.shown(b.ID)
				r.status.set(toolActivity(b.Name, b.Input))
			case *claude.ServerToolUseBlock:
				r.line(indent(sub) + r.toolLine(b.Name, b.Input))
				r.status.set(toolActivity(b.Name, b.Input))
			}
		}
	case *claude.UserMessage:
		sub := m.ParentToolUseID != ""
		if m.Message.Content.IsText() {
			return
		}
		results := false
		for _, b := range m.Message.Content.Blocks {
			if tr, ok := b.(*claude.ToolResultBlock); ok {
				line := indent(sub) + resultLine(tr)
				if tr.IsError {
					line = r.pal.err(line)
				}
				r.line(line)
				results = true
			}
		}
		if results && !sub {
			r.status.set("thinking")
		}
	case *claude.SystemInit:
		r.status.set("thinking")
	case *claude.ResultMessage:
		if claude.ThreadOf(m).IsMain() {
			r.status.idle()
		}
	}
}

// streamEvent handles an event of the main thread's stream: reply text is
// printed as it comes; the rest tells the status line what happens.
func (r *renderer) streamEvent(ev claude.StreamEventData) {
	switch ev.Type {
	case "message_start":
		var msg struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(ev.Message, &msg)
		r.current = msg.ID
		r.status.messageStarted()
		r.status.set("thinking")
	case "content_block_start":
		var b struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		_ = json.Unmarshal(ev.ContentBlock, &b)
		switch b.Type {
		case "thinking", "redacted_thinking":
			r.status.set("thinking")
		case "text":
			r.status.set("writing")
		case "tool_use", "server_tool_use":
			r.status.set("preparing " + b.Name)
		}
	case "content_block_delta":
		d := ev.Delta
		if d == nil {
			return
		}
		r.status.streamed(len(d.Text) + len(d.Thinking) + len(d.PartialJSON))
		if d.Type == "text_delta" {
			r.streamed[r.current] = true
			r.text(d.Text)
		}
	case "message_delta":
		if ev.Usage != nil && ev.Usage.OutputTokens > 0 {
			r.status.outputTokens(ev.Usage.OutputTokens)
		}
	}
}

// showThinking prints a thinking block, dimmed, set apart like a tool line.
func (r *renderer) showThinking(text string) {
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	r.endLine()
	if r.last == printedText || r.last == printedPrompt {
		r.write("\n")
	}
	r.write(r.pal.dim("✻ Thinking…") + "\n")
	for _, l := range strings.Split(text, "\n") {
		r.write(r.pal.dim("  "+l) + "\n")
	}
	r.last = printedTool
}

// toolLine is toolLine with the tool's name coloured.
func (r *renderer) toolLine(name string, input json.RawMessage) string {
	if !r.pal.on {
		return toolLine(name, input)
	}
	if s := toolSummary(name, input); s != "" {
		return "⏺ " + r.pal.tool(name) + "(" + s + ")"
	}
	return "⏺ " + r.pal.tool(name)
}

func indent(sub bool) string {
	if sub {
		return "  "
	}
	return ""
}

// toolLine is the line shown for a tool call: "⏺ Bash(echo hi)".
func toolLine(name string, input json.RawMessage) string {
	if s := toolSummary(name, input); s != "" {
		return "⏺ " + name + "(" + s + ")"
	}
	return "⏺ " + name
}

// resultLine is the line shown for a tool result: "  ⎿  first line…".
func resultLine(tr *claude.ToolResultBlock) string {
	text := strings.TrimSpace(tr.Content.String())
	first, more := firstLine(text)
	if tr.IsError {
		if !strings.HasPrefix(strings.ToLower(first), "error") {
			first = "Error: " + first
		}
	} else if first == "" {
		first = "(no output)"
	}
	s := "  ⎿  " + truncate(first, maxSummary)
	if more > 0 {
		s += fmt.Sprintf(" (+%d more %s)", more, plural(more, "line", "lines"))
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// firstLine returns the first non-blank line of s and how many lines follow.
func firstLine(s string) (string, int) {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			return strings.TrimSpace(l), len(lines) - i - 1
		}
	}
	return "", 0
}

// summaryFields are the input fields that best describe a tool call, in the
// order they are tried.
var summaryFields = []string{"command", "file_path", "notebook_path", "pattern", "path", "url", "query", "skill", "description", "prompt"}

// toolSummary describes a tool call's input in one short line: its command,
// file, pattern, ... or else its first string field.
func toolSummary(name string, input json.RawMessage) string {
	fields, order := objectFields(input)
	if fields == nil {
		return ""
	}
	if name == "AskUserQuestion" {
		var qs []claude.Question
		if json.Unmarshal(fields["questions"], &qs) == nil && len(qs) > 0 {
			return oneLine(qs[0].Question)
		}
	}
	str := func(k string) string {
		var s string
		if json.Unmarshal(fields[k], &s) != nil {
			return ""
		}
		return oneLine(s)
	}
	for _, k := range summaryFields {
		if s := str(k); s != "" {
			return s
		}
	}
	for _, k := range order {
		if s := str(k); s != "" {
			return s
		}
	}
	return ""
}

// objectFields decodes a JSON object's fields and returns them with their
// keys in document order; nil if input is not an object.
func objectFields(input json.RawMessage) (map[string]json.RawMessage, []string) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(input, &fields) != nil || fields == nil {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	var order []string
	if _, err := dec.Token(); err != nil { // {
		return fields, nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		k, _ := t.(string)
		order = append(order, k)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
	}
	return fields, order
}

// oneLine collapses whitespace (newlines included) and truncates s.
func oneLine(s string) string {
	return truncate(strings.Join(strings.Fields(s), " "), maxSummary)
}

// truncate cuts s to n characters, marking the cut with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:n-1]) + "…"
}
