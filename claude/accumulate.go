package claude

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrInvalidToolInput matches (errors.Is) the error of a [StreamUpdate] whose
// tool_use block was streamed as input_json_delta pieces that do not join
// into valid JSON.
var ErrInvalidToolInput = errors.New("claude: streamed tool input is not valid JSON")

// A StreamUpdate is what an [Accumulator] makes of one [*StreamEvent]: a
// piece of text, a completed tool call, or an error. Exactly one of Text,
// ToolUse and Err is set.
type StreamUpdate struct {
	// Thread is the conversation the event belongs to (see [ThreadOf]).
	Thread Thread
	// MessageID is the API message id from the thread's latest
	// message_start, or empty if none was seen.
	MessageID string
	// Index is the content block's index within the message.
	Index int

	// Text is a text_delta's text.
	Text string
	// ToolUse is a tool_use block, complete at its content_block_stop. Its
	// Input is the concatenation of the block's input_json_delta pieces (or
	// the block's initial input if there were none) and is valid JSON.
	ToolUse *ToolUseBlock
	// Err reports a tool_use block whose input could not be rebuilt; it
	// matches ErrInvalidToolInput.
	Err error
}

// An Accumulator rebuilds content from the partial stream events a session
// delivers with Options.IncludePartialMessages: it passes on text deltas and
// joins the input_json_delta pieces of each tool_use block into the tool's
// complete input.
//
// Streams of different threads (the main thread and sub-agents) may be
// interleaved: blocks are keyed by thread, message and block index, and a
// message_start resets the state of its thread only, dropping tool_use
// blocks that were never stopped, and message_stop forgets the thread.
//
// The zero Accumulator is ready to use. An Accumulator is not safe for
// concurrent use.
type Accumulator struct {
	threads map[Thread]*accThread
}

type accThread struct {
	messageID string
	tools     map[int]*accTool // tool_use blocks in flight, by index
}

type accTool struct {
	id, name string
	initial  json.RawMessage // the input in content_block_start
	input    []byte          // the input_json_delta pieces so far
	pieces   int
}

// Add feeds m to the accumulator. It reports the update m makes, if any:
// messages other than [*StreamEvent], and events that complete nothing
// (message_start, content_block_start, input_json_delta, thinking, ...),
// give ok == false.
func (a *Accumulator) Add(m Message) (u StreamUpdate, ok bool) {
	ev, isEv := m.(*StreamEvent)
	if !isEv {
		return StreamUpdate{}, false
	}
	th := Thread{ParentToolUseID: ev.ParentToolUseID, AgentID: ev.AgentID}
	e := &ev.Event
	switch e.Type {
	case "message_start":
		t := a.thread(th)
		t.messageID = messageID(e.Message)
		clear(t.tools)
	case "message_stop":
		// Nothing more comes for this message; forget the thread so that
		// finished sub-agents do not accumulate.
		delete(a.threads, th)
	case "content_block_start":
		var b struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		if json.Unmarshal(e.ContentBlock, &b) != nil || b.Type != "tool_use" {
			return StreamUpdate{}, false
		}
		t := a.thread(th)
		if t.tools == nil {
			t.tools = make(map[int]*accTool)
		}
		t.tools[e.Index] = &accTool{id: b.ID, name: b.Name, initial: b.Input}
	case "content_block_delta":
		if e.Delta == nil {
			return StreamUpdate{}, false
		}
		switch e.Delta.Type {
		case "text_delta":
			if e.Delta.Text == "" {
				return StreamUpdate{}, false
			}
			return StreamUpdate{Thread: th, MessageID: a.msgID(th), Index: e.Index, Text: e.Delta.Text}, true
		case "input_json_delta":
			if t := a.threads[th]; t != nil {
				if tool := t.tools[e.Index]; tool != nil {
					tool.input = append(tool.input, e.Delta.PartialJSON...)
					tool.pieces++
				}
			}
		}
	case "content_block_stop":
		t := a.threads[th]
		if t == nil || t.tools[e.Index] == nil {
			return StreamUpdate{}, false
		}
		tool := t.tools[e.Index]
		delete(t.tools, e.Index)
		u := StreamUpdate{Thread: th, MessageID: t.messageID, Index: e.Index}
		input := json.RawMessage(tool.input)
		if tool.pieces == 0 || len(input) == 0 {
			input = append(json.RawMessage(nil), tool.initial...)
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
		}
		if !json.Valid(input) {
			u.Err = fmt.Errorf("%w: tool_use %s (%s), block %d: %q", ErrInvalidToolInput, tool.id, tool.name, e.Index, truncateForError(input))
			return u, true
		}
		u.ToolUse = &ToolUseBlock{ID: tool.id, Name: tool.name, Input: input}
		return u, true
	}
	return StreamUpdate{}, false
}

func (a *Accumulator) thread(th Thread) *accThread {
	if a.threads == nil {
		a.threads = make(map[Thread]*accThread)
	}
	t := a.threads[th]
	if t == nil {
		t = &accThread{}
		a.threads[th] = t
	}
	return t
}

func (a *Accumulator) msgID(th Thread) string {
	if t := a.threads[th]; t != nil {
		return t.messageID
	}
	return ""
}

// messageID returns the "id" field of a message_start's message.
func messageID(raw json.RawMessage) string {
	var m struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	return m.ID
}

func truncateForError(b []byte) string {
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
