package claude_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/claudectl/claudectl/claude"
)

// ev builds a stream_event line for thread parent (empty: main thread).
func ev(parent, event string) string {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return `{"type":"stream_event","event":` + event + `,"parent_tool_use_id":` + p + `}`
}

func msgStart(parent, id string) string {
	return ev(parent, `{"type":"message_start","message":{"id":"`+id+`","role":"assistant","content":[]}}`)
}

func toolStart(parent string, index int, id, name string) string {
	return ev(parent, `{"type":"content_block_start","index":`+itoa(index)+`,"content_block":{"type":"tool_use","id":"`+id+`","name":"`+name+`","input":{}}}`)
}

func textStart(parent string, index int) string {
	return ev(parent, `{"type":"content_block_start","index":`+itoa(index)+`,"content_block":{"type":"text","text":""}}`)
}

func textDelta(parent string, index int, text string) string {
	b, _ := json.Marshal(text)
	return ev(parent, `{"type":"content_block_delta","index":`+itoa(index)+`,"delta":{"type":"text_delta","text":`+string(b)+`}}`)
}

func jsonDelta(parent string, index int, piece string) string {
	b, _ := json.Marshal(piece)
	return ev(parent, `{"type":"content_block_delta","index":`+itoa(index)+`,"delta":{"type":"input_json_delta","partial_json":`+string(b)+`}}`)
}

func blockStop(parent string, index int) string {
	return ev(parent, `{"type":"content_block_stop","index":`+itoa(index)+`}`)
}

func msgStop(parent string) string { return ev(parent, `{"type":"message_stop"}`) }

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestAccumulator(t *testing.T) {
	sub := claude.Thread{ParentToolUseID: "toolu_agent"}
	tool := func(id, name, input string) *claude.ToolUseBlock {
		return &claude.ToolUseBlock{ID: id, Name: name, Input: json.RawMessage(input)}
	}
	for _, tc := range []struct {
		name  string
		lines []string
		want  []claude.StreamUpdate
	}{
		{
			name: "text",
			lines: []string{
				msgStart("", "msg_1"), textStart("", 0),
				textDelta("", 0, "Hel"), textDelta("", 0, ""), textDelta("", 0, "lo"),
				blockStop("", 0), msgStop(""),
			},
			want: []claude.StreamUpdate{
				{MessageID: "msg_1", Text: "Hel"},
				{MessageID: "msg_1", Text: "lo"},
			},
		},
		{
			name: "tool input in many pieces",
			lines: []string{
				msgStart("", "msg_1"), textStart("", 0), textDelta("", 0, "Let me look."), blockStop("", 0),
				toolStart("", 1, "toolu_1", "Bash"),
				jsonDelta("", 1, ""), jsonDelta("", 1, `{"com`), jsonDelta("", 1, `mand":`),
				jsonDelta("", 1, ` "ls -l`), jsonDelta("", 1, `a \"x\""`), jsonDelta("", 1, `}`),
				blockStop("", 1), msgStop(""),
			},
			want: []claude.StreamUpdate{
				{MessageID: "msg_1", Text: "Let me look."},
				{MessageID: "msg_1", Index: 1, ToolUse: tool("toolu_1", "Bash", `{"command": "ls -la \"x\""}`)},
			},
		},
		{
			name: "tool without deltas keeps its initial input",
			lines: []string{
				msgStart("", "msg_1"), toolStart("", 0, "toolu_1", "TodoRead"), blockStop("", 0),
			},
			want: []claude.StreamUpdate{
				{MessageID: "msg_1", ToolUse: tool("toolu_1", "TodoRead", `{}`)},
			},
		},
		{
			name: "interleaved threads with the same block index",
			lines: []string{
				msgStart("", "msg_main"),
				msgStart("toolu_agent", "msg_sub"),
				toolStart("", 0, "toolu_m", "Read"),
				toolStart("toolu_agent", 0, "toolu_s", "Grep"),
				jsonDelta("", 0, `{"file_path":`),
				jsonDelta("toolu_agent", 0, `{"pattern":`),
				textDelta("toolu_agent", 1, "sub text"),
				jsonDelta("toolu_agent", 0, `"foo"}`),
				jsonDelta("", 0, `"/a"}`),
				blockStop("toolu_agent", 0),
				textDelta("", 1, "main text"),
				blockStop("", 0),
				msgStop("toolu_agent"), msgStop(""),
			},
			want: []claude.StreamUpdate{
				{Thread: sub, MessageID: "msg_sub", Index: 1, Text: "sub text"},
				{Thread: sub, MessageID: "msg_sub", ToolUse: tool("toolu_s", "Grep", `{"pattern":"foo"}`)},
				{MessageID: "msg_main", Index: 1, Text: "main text"},
				{MessageID: "msg_main", ToolUse: tool("toolu_m", "Read", `{"file_path":"/a"}`)},
			},
		},
		{
			name: "message_start drops an unfinished tool",
			lines: []string{
				msgStart("", "msg_1"), toolStart("", 0, "toolu_1", "Bash"), jsonDelta("", 0, `{"comm`),
				msgStart("", "msg_2"), jsonDelta("", 0, `and":"x"}`), blockStop("", 0),
				toolStart("", 0, "toolu_2", "Bash"), jsonDelta("", 0, `{"command":"y"}`), blockStop("", 0),
			},
			want: []claude.StreamUpdate{
				{MessageID: "msg_2", ToolUse: tool("toolu_2", "Bash", `{"command":"y"}`)},
			},
		},
		{
			name: "invalid JSON",
			lines: []string{
				msgStart("", "msg_1"), toolStart("", 2, "toolu_1", "Bash"),
				jsonDelta("", 2, `{"command":`), jsonDelta("", 2, `"ls"`), blockStop("", 2),
				toolStart("", 3, "toolu_2", "Bash"), jsonDelta("", 3, `{"command":"ok"}`), blockStop("", 3),
			},
			want: []claude.StreamUpdate{
				{MessageID: "msg_1", Index: 2, Err: claude.ErrInvalidToolInput},
				{MessageID: "msg_1", Index: 3, ToolUse: tool("toolu_2", "Bash", `{"command":"ok"}`)},
			},
		},
		{
			name: "other messages and stray events are ignored",
			lines: []string{
				`{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}`,
				`{"type":"result","subtype":"success"}`,
				jsonDelta("", 0, `{"x":1}`), blockStop("", 0), msgStop("toolu_unknown"),
				ev("", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`),
				ev("", `{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`),
				textDelta("", 0, "no message_start"),
			},
			want: []claude.StreamUpdate{
				{Text: "no message_start"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a claude.Accumulator
			var got []claude.StreamUpdate
			for _, line := range tc.lines {
				m, err := claude.DecodeMessage([]byte(line))
				if err != nil {
					t.Fatalf("DecodeMessage(%s): %v", line, err)
				}
				if u, ok := a.Add(m); ok {
					got = append(got, u)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("updates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAccumulatorInputIsValidJSON(t *testing.T) {
	var a claude.Accumulator
	for _, line := range []string{
		msgStart("", "m"), toolStart("", 0, "t", "Edit"),
		jsonDelta("", 0, `{"a": [1, `), jsonDelta("", 0, `2], "b": "\u00e9"}`), blockStop("", 0),
	} {
		m, err := claude.DecodeMessage([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		u, ok := a.Add(m)
		if !ok {
			continue
		}
		var v struct {
			A []int
			B string
		}
		if err := json.Unmarshal(u.ToolUse.Input, &v); err != nil || len(v.A) != 2 || v.B != "é" {
			t.Errorf("input %s = %+v, %v", u.ToolUse.Input, v, err)
		}
	}
}
