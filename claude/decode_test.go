package claude_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claude"
	"github.com/google/go-cmp/cmp"
)

func mustDecode(t *testing.T, line string) claude.Message {
	t.Helper()
	m, err := claude.DecodeMessage([]byte(line))
	if err != nil {
		t.Fatalf("DecodeMessage(%s): %v", line, err)
	}
	return m
}

// The tolerant-reader rules of seed 000, one test each.

func TestTolerantRule1UnknownFieldsIgnored(t *testing.T) {
	m := mustDecode(t, `{"type":"system","subtype":"init","session_id":"s1","model":"m","cwd":"/tmp","tools":[],"unknown_field":"x","another_unknown":{"nested":true}}`)
	in, ok := m.(*claude.SystemInit)
	if !ok || in.SessionID != "s1" || in.Model != "m" || in.CWD != "/tmp" {
		t.Fatalf("got %T %+v", m, m)
	}
}

func TestTolerantRule2UnknownTypesPassThrough(t *testing.T) {
	var logs bytes.Buffer
	d := &claude.Decoder{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	line := `{"type":"brand_new_thing","uuid":"u9","session_id":"s1","payload":{"a":[1,2]}}`
	m, err := d.Decode([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	u, ok := m.(*claude.UnknownMessage)
	if !ok || u.Kind() != "brand_new_thing" || u.UUID != "u9" || string(u.Raw()) != line || u.Err != nil {
		t.Fatalf("got %T %+v", m, m)
	}
	var v struct{ Payload struct{ A []int } }
	if err := u.Decode(&v); err != nil || len(v.Payload.A) != 2 {
		t.Errorf("Decode: %v %+v", err, v)
	}
	// An unknown system subtype is unknown too, and keeps its subtype.
	m, _ = d.Decode([]byte(`{"type":"system","subtype":"galaxy_brain","session_id":"s1"}`))
	if u, ok := m.(*claude.UnknownMessage); !ok || u.Subtype != "galaxy_brain" || u.Kind() != "system" {
		t.Fatalf("unknown subtype: %T %+v", m, m)
	}
	// The degradation warning fires once, at ten unknown messages.
	for range 12 {
		d.Decode([]byte(`{"type":"brand_new_thing"}`))
	}
	if n := strings.Count(logs.String(), "unknown type"); n != 1 {
		t.Errorf("warnings: %d, want 1:\n%s", n, logs.String())
	}
	if got := d.Stats().Unknown; got["brand_new_thing"] != 13 || got["system/galaxy_brain"] != 1 {
		t.Errorf("stats = %v", got)
	}
}

func TestTolerantRule3MissingOptionalFieldsDefault(t *testing.T) {
	m := mustDecode(t, `{"type":"result","subtype":"success"}`)
	r := m.(*claude.ResultMessage)
	if r.DurationMS != 0 || r.Usage != nil || r.TotalCostUSD != 0 || r.Result != "" || r.Err() != nil {
		t.Errorf("got %+v", r)
	}
	a := mustDecode(t, `{"type":"assistant","message":{}}`).(*claude.AssistantMessage)
	if a.Message.Content != nil || a.Text() != "" {
		t.Errorf("assistant %+v", a)
	}
}

func TestTolerantRule4TypeCoercion(t *testing.T) {
	var d claude.Decoder
	m, err := d.Decode([]byte(`{"type":"result","subtype":"success","duration_ms":"1234","num_turns":"3","total_cost_usd":"0.05","is_error":"false","usage":{"input_tokens":"15400","output_tokens":3200},"session_id":42,"unknown":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	r, ok := m.(*claude.ResultMessage)
	if !ok {
		t.Fatalf("got %T (%v)", m, m.(*claude.UnknownMessage).Err)
	}
	want := claude.Usage{InputTokens: 15400, OutputTokens: 3200}
	if r.DurationMS != 1234 || r.NumTurns != 3 || r.TotalCostUSD != 0.05 || r.IsError || r.SessionID != "42" || r.Usage == nil || *r.Usage != want {
		t.Errorf("coerced result = %+v usage %+v", r, r.Usage)
	}
	if d.Stats().Tolerated != 1 {
		t.Errorf("stats = %+v", d.Stats())
	}
	// A value that cannot be made to fit is dropped, not fatal.
	m = mustDecode(t, `{"type":"result","subtype":"success","duration_ms":{"oops":1},"result":"ok"}`)
	if r := m.(*claude.ResultMessage); r.Result != "ok" || r.DurationMS != 0 {
		t.Errorf("got %+v", r)
	}
}

func TestTolerantRule5NoOrderAssumed(t *testing.T) {
	// result lines do not start with "type"; neither do system lines always.
	m := mustDecode(t, `{"subtype":"init","session_id":"s1","big":"`+strings.Repeat("x", 5000)+`","type":"system","model":"m"}`)
	if in, ok := m.(*claude.SystemInit); !ok || in.Model != "m" {
		t.Fatalf("got %T", m)
	}
	m = mustDecode(t, `{"duration_ms":5,"result":"done","type":"result","subtype":"success"}`)
	if r, ok := m.(*claude.ResultMessage); !ok || r.Result != "done" {
		t.Fatalf("got %T", m)
	}
}

func TestDecodeDropsWhatCannotFit(t *testing.T) {
	// "message" must be an object; a string is dropped, the rest survives.
	m := mustDecode(t, `{"type":"assistant","message":"not an object","uuid":"u1"}`)
	if a, ok := m.(*claude.AssistantMessage); !ok || a.UUID != "u1" {
		t.Fatalf("got %T", m)
	}
}

func TestDecodeNotJSON(t *testing.T) {
	for _, line := range []string{"", "   ", "hello", "[1,2]", `"str"`, `{"type":"assistant"`, "{bad json}"} {
		_, err := claude.DecodeMessage([]byte(line))
		var de *claude.DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%q: err = %v, want *DecodeError", line, err)
		}
	}
}

func TestDecodeKnownTypeThatCannotDecode(t *testing.T) {
	// Content must be a list of blocks; a number is not.
	m := mustDecode(t, `{"type":"assistant","message":{"content":5},"uuid":"u1"}`)
	u, ok := m.(*claude.UnknownMessage)
	if !ok || u.Err == nil || u.Kind() != "assistant" {
		t.Fatalf("got %T %+v", m, m)
	}
}

func TestDecodeEveryType(t *testing.T) {
	cases := []struct {
		line string
		want any
	}{
		{`{"type":"assistant","message":{"id":"msg_1","role":"assistant","model":"m","content":[{"type":"text","text":"hi"},{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"redacted_thinking","data":"xx"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}},{"type":"server_tool_use","id":"s1","name":"web_search","input":{}},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}},{"type":"future_block","x":1}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":2}},"parent_tool_use_id":null,"error":"rate_limit","uuid":"u","session_id":"s"}`, &claude.AssistantMessage{}},
		{`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"out","is_error":true}]},"tool_use_result":{"stdout":"out"},"uuid":"u","session_id":"s"}`, &claude.UserMessage{}},
		{`{"type":"user","message":{"role":"user","content":"plain text"},"isReplay":true}`, &claude.UserMessage{}},
		{`{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["too many"],"modelUsage":{"m":{"inputTokens":5,"costUSD":0.1}},"permission_denials":[{"tool_name":"Bash","tool_use_id":"t","tool_input":{}}],"structured_output":{"a":1}}`, &claude.ResultMessage{}},
		{`{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}},"parent_tool_use_id":"toolu_1"}`, &claude.StreamEvent{}},
		{`{"type":"system","subtype":"init","tools":[{"name":"Bash","description":"old style"}],"session_id":"s"}`, &claude.SystemInit{}},
		{`{"type":"system","subtype":"status","status":"compacting"}`, &claude.SystemStatus{}},
		{`{"type":"system","subtype":"compact_boundary","compact_metadata":{"trigger":"auto","pre_tokens":100}}`, &claude.CompactBoundary{}},
		{`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":5,"retry_delay_ms":500,"error_status":529,"error":"overloaded"}`, &claude.APIRetry{}},
		{`{"type":"system","subtype":"hook_response","hook_name":"h","hook_event":"PreToolUse","exit_code":0,"outcome":"success"}`, &claude.HookEvent{}},
		{`{"type":"system","subtype":"task_started","task_id":"t","tool_use_id":"x","description":"d"}`, &claude.TaskStarted{}},
		{`{"type":"system","subtype":"task_progress","task_id":"t","usage":{"total_tokens":3}}`, &claude.TaskProgress{}},
		{`{"type":"system","subtype":"task_updated","task_id":"t","patch":{"status":"running"}}`, &claude.TaskUpdated{}},
		{`{"type":"system","subtype":"task_notification","task_id":"t","status":"completed","summary":"s"}`, &claude.TaskNotification{}},
		{`{"type":"system","subtype":"background_tasks_changed","tasks":[{"task_id":"t"}]}`, &claude.BackgroundTasksChanged{}},
		{`{"type":"system","subtype":"session_state_changed","state":"idle"}`, &claude.SessionStateChanged{}},
		{`{"type":"system","subtype":"permission_denied","tool_name":"Bash","tool_use_id":"t","message":"no"}`, &claude.PermissionDenied{}},
		{`{"type":"tool_progress","tool_use_id":"t","tool_name":"Bash","elapsed_time_seconds":1.5}`, &claude.ToolProgress{}},
		{`{"type":"tool_use_summary","summary":"ran tests","preceding_tool_use_ids":["a"]}`, &claude.ToolUseSummary{}},
		{`{"type":"auth_status","isAuthenticating":true,"output":["..."],"error":null}`, &claude.AuthStatus{}},
		{`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","utilization":0.9}}`, &claude.RateLimitEvent{}},
		{`{"type":"keep_alive"}`, &claude.KeepAlive{}},
		{`{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{}}}`, &claude.ControlRequest{}},
		{`{"type":"control_response","response":{"subtype":"error","request_id":"r1","error":"nope","error_code":"unsupported_request"}}`, &claude.ControlResponse{}},
		{`{"type":"control_cancel_request","request_id":"r1"}`, &claude.ControlCancelRequest{}},
	}
	for _, tc := range cases {
		m := mustDecode(t, tc.line)
		if got, want := typeName(m), typeName(tc.want); got != want {
			t.Errorf("%.60s: got %s, want %s", tc.line, got, want)
			continue
		}
		if string(m.Raw()) != tc.line {
			t.Errorf("%.60s: Raw() differs", tc.line)
		}
	}
	a := mustDecode(t, cases[0].line).(*claude.AssistantMessage)
	var types []string
	for _, b := range a.Message.Content {
		types = append(types, b.BlockType())
	}
	if diff := cmp.Diff([]string{"text", "thinking", "redacted_thinking", "tool_use", "server_tool_use", "image", "future_block"}, types); diff != "" {
		t.Errorf("block types (-want +got):\n%s", diff)
	}
	if tu := a.Message.Content[3].(*claude.ToolUseBlock); tu.Name != "Bash" || string(tu.Input) != `{"command":"ls"}` {
		t.Errorf("tool_use = %+v", tu)
	}
	if a.Error != "rate_limit" || a.ParentToolUseID != "" {
		t.Errorf("assistant error %q parent %q", a.Error, a.ParentToolUseID)
	}
	u := mustDecode(t, cases[1].line).(*claude.UserMessage)
	tr := u.Message.Content.Blocks[0].(*claude.ToolResultBlock)
	if tr.ToolUseID != "t1" || !tr.IsError || !tr.Content.IsText() || tr.Content.Text != "out" {
		t.Errorf("tool_result = %+v", tr)
	}
	if u2 := mustDecode(t, cases[2].line).(*claude.UserMessage); !u2.Message.Content.IsText() || u2.Message.Content.String() != "plain text" || !u2.IsReplay {
		t.Errorf("user string content = %+v", u2)
	}
	r := mustDecode(t, cases[3].line).(*claude.ResultMessage)
	var re *claude.ResultError
	if !errors.As(r.Err(), &re) || re.Errors[0] != "too many" || r.ModelUsage["m"].CostUSD != 0.1 {
		t.Errorf("result err %v usage %+v", r.Err(), r.ModelUsage)
	}
	if cr := mustDecode(t, cases[22].line).(*claude.ControlRequest); cr.Subtype != "can_use_tool" {
		t.Errorf("control_request subtype = %q", cr.Subtype)
	}
	if in := mustDecode(t, cases[5].line).(*claude.SystemInit); len(in.Tools) != 1 || in.Tools[0] != "Bash" {
		t.Errorf("old-style tools = %v", in.Tools)
	}
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }

func TestBlocksRoundTrip(t *testing.T) {
	in := `[{"type":"text","text":"hi"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}},{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"x"}]},{"type":"weird","z":[1]}]`
	var bs claude.Blocks
	if err := json.Unmarshal([]byte(in), &bs); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(bs)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	json.Unmarshal([]byte(in), &a)
	json.Unmarshal(out, &b)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("round trip (-in +out):\n%s", diff)
	}
}

func TestSniffKindMatchesDecoding(t *testing.T) {
	for _, line := range []string{
		`{"type":"system","subtype":"init"}`,
		`{"subtype":"x","a":{"type":"nested"},"type":"system"}`,
		`{"a":"has \"type\":\"fake\" inside","type":"real"}`,
		`{"t\u0079pe":"escaped-key","type":"plain"}`,
		`{"type":"es\u0063aped"}`,
		` { "type" : "spaced" , "subtype" : "s" } `,
	} {
		typ, _ := claude.SniffKind([]byte(line))
		var v struct{ Type string }
		json.Unmarshal([]byte(line), &v)
		if typ != v.Type {
			t.Errorf("%s: sniffed %q, decoded %q", line, typ, v.Type)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}`,
		`{"type":"result","subtype":"success","duration_ms":"12"}`,
		`{"type":"system","subtype":"init","tools":["Bash"]}`,
		`{"type":"user","message":{"content":"x"}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}}`,
		`{"type":"control_request","request_id":"r","request":{"subtype":"can_use_tool"}}`,
		`{"type":"x\"y"}`, `{`, `[]`, `{"type":1}`, `{"type":"user","message":{"content":[{"type":"tool_result","content":[{"type":"image"}]}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var d claude.Decoder
		d.Logger = slog.New(slog.DiscardHandler)
		m, err := d.Decode(line)
		if err != nil {
			var de *claude.DecodeError
			if !errors.As(err, &de) || m != nil {
				t.Fatalf("error %v (%T) with message %v", err, err, m)
			}
			return
		}
		if m == nil || !bytes.Equal(m.Raw(), line) {
			t.Fatalf("message %T does not carry its line", m)
		}
		var v map[string]any // exact key match, unlike struct decoding
		if json.Unmarshal(line, &v) == nil {
			if typ, ok := v["type"].(string); ok && m.Kind() != typ {
				t.Fatalf("Kind() = %q, the line's type is %q", m.Kind(), typ)
			}
			// The Go type is the one the line's (last) type and subtype
			// name: the same as for a line with only those two members.
			typ, _ := v["type"].(string)
			sub, _ := v["subtype"].(string)
			canon, _ := json.Marshal(map[string]string{"type": typ, "subtype": sub})
			if want, err := claude.DecodeMessage(canon); err == nil && fmt.Sprintf("%T", want) != fmt.Sprintf("%T", m) {
				if _, failed := m.(*claude.UnknownMessage); !failed {
					t.Fatalf("decoded as %T, but type %q subtype %q is %T", m, typ, sub, want)
				}
			}
			if got, ok := claude.SystemSubtypeOf(m); ok && got != sub {
				t.Fatalf("Subtype %q, the line's subtype is %q", got, sub)
			}
		}
	})
}

// FuzzStreamEventFastPath checks that every line the stream_event fast path
// accepts decodes exactly as the general decoder decodes it.
func FuzzStreamEventFastPath(f *testing.F) {
	for _, s := range []string{
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi \"there\"\n\u00e9\ud83d\ude00"}},"parent_tool_use_id":null,"uuid":"u","session_id":"s"}`,
		`{"type":"stream_event","event":{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"Bash","input":{}}},"session_id":"s","api_message_id":"m","ttft_ms":12}`,
		`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m","content":[]}},"parent_tool_use_id":"toolu_1"}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}},"extra":[1,2.5e3,true,false,null,{"x":"y"}]}`,
		`{"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}}`,
		`{"type":"stream_event","Event":{"index":3},"event":{"index":-0}}`,
		`{"type":"stream_event","event":{"delta":{"text":"a"},"delta":{"type":"t"}}}`,
		`{"type":"stream_event","event":null,"uuid":null}`,
		`{"type":"stream_event","event":{"index":1.5}}`,
		`{"type":"stream_event","event":{"content_block":null}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fast, ok := claude.DecodeStreamEventFast(line)
		if !ok {
			return
		}
		var slow claude.StreamEvent
		if err := claude.UnmarshalGeneral(line, &slow); err != nil {
			t.Fatalf("fast path accepted a line the general decoder rejects: %v", err)
		}
		if diff := cmp.Diff(&slow, fast, cmp.AllowUnexported(claude.Base{}), cmpRawJSON); diff != "" {
			t.Fatalf("fast path differs (-general +fast):\n%s", diff)
		}
	})
}

// FuzzStreamEventShape: a line decoded by the shape learned from another
// decodes as the general decoder decodes it, whatever the two lines.
func FuzzStreamEventShape(f *testing.F) {
	text := `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}},"parent_tool_use_id":null,"uuid":"u1","session_id":"s"}`
	for _, pair := range [][2]string{
		{text, `{"type":"stream_event","event":{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"\u00e9 \"x\""}},"parent_tool_use_id":"toolu_1","uuid":null,"session_id":"s2"}`},
		{text, `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}},"parent_tool_use_id":null,"uuid":"u1","session_id":"s","x":1}`},
		{text, `{"type":"stream_event","event":{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"hi"}},"parent_tool_use_id":null,"uuid":"u1","session_id":"s"}`},
		{text, `{"type":"stream_event","event":{"type":"content_block_delta","index":null,"delta":{"type":"text_delta","text":null}},"parent_tool_use_id":null,"uuid":"u1","session_id":null}`},
		{`{"type": "stream_event", "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"a"}}, "ttft_ms": 5, "uuid": "u"}`,
			`{"type": "stream_event", "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "1}"}}, "ttft_ms": -7, "uuid": "v"}  `},
		{`{"type":"stream_event","event":{"delta":{"text":"a"},"delta":{"type":"t","text":"b"}},"uuid":"u","uuid":"w"}`,
			`{"type":"stream_event","event":{"delta":{"text":"c"},"delta":{"type":"t","text":null}},"uuid":"x","uuid":null}`},
	} {
		f.Add([]byte(pair[0]), []byte(pair[1]))
	}
	f.Fuzz(func(t *testing.T, learn, line []byte) {
		fast, _, ok := claude.DecodeStreamEventShaped(learn, line)
		if !ok {
			return
		}
		var slow claude.StreamEvent
		if err := claude.UnmarshalGeneral(line, &slow); err != nil {
			t.Fatalf("a line the general decoder rejects was accepted: %v", err)
		}
		if diff := cmp.Diff(&slow, fast, cmp.AllowUnexported(claude.Base{}), cmpRawJSON); diff != "" {
			t.Fatalf("decoded differently (-general +fast):\n%s", diff)
		}
	})
}

// The shape of a text delta decodes the text deltas that follow it, and
// a line that differs in anything but its values is parsed whole.
func TestStreamEventShape(t *testing.T) {
	learn := []byte(`{"type": "stream_event", "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "one"}}, "parent_tool_use_id": null, "uuid": "u1", "session_id": "s"}`)
	for line, wantShaped := range map[string]bool{
		`{"type": "stream_event", "event": {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "two \u00e9"}}, "parent_tool_use_id": "toolu_9", "uuid": "u2", "session_id": "s"}`: true,
		`{"type": "stream_event", "event": {"type": "content_block_delta", "index": 2, "delta": {"type": "thinking_delta", "thinking": "hm"}}, "parent_tool_use_id": null, "uuid": "u2", "session_id": "s"}`:      false,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"compact"}},"parent_tool_use_id":null,"uuid":"u2","session_id":"s"}`:                          false,
	} {
		ev, shaped, ok := claude.DecodeStreamEventShaped(learn, []byte(line))
		if !ok || shaped != wantShaped {
			t.Errorf("%s: shaped %v, ok %v; want shaped %v", line, shaped, ok, wantShaped)
			continue
		}
		var slow claude.StreamEvent
		if err := claude.UnmarshalGeneral([]byte(line), &slow); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&slow, ev, cmp.AllowUnexported(claude.Base{}), cmpRawJSON); diff != "" {
			t.Errorf("%s: (-general +shaped)\n%s", line, diff)
		}
	}
}

// A Decoder keeps the shape of a turn's deltas until the turn's result:
// an idle session keeps none.
func TestStreamEventShapeForgottenAtResult(t *testing.T) {
	var d claude.Decoder
	for _, line := range []string{
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}},"uuid":"u1","session_id":"s"}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b"}},"uuid":"u2","session_id":"s"}`,
	} {
		if _, err := d.Decode([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if !claude.HasShape(&d) {
		t.Fatal("no shape kept after two text deltas")
	}
	if _, err := d.Decode([]byte(`{"type":"result","subtype":"success","is_error":false,"session_id":"s"}`)); err != nil {
		t.Fatal(err)
	}
	if claude.HasShape(&d) {
		t.Error("the shape is kept after the turn's result")
	}
}

// A batch's events come in chunks no larger than its lines: a batch of
// one line (a model streaming in real time) allocates one event.
func TestEventArenaChunks(t *testing.T) {
	for _, tc := range []struct {
		lines, events int
		want          []int
	}{
		{1, 1, []int{1}},
		{2, 2, []int{2}},
		{100, 100, []int{64, 36}},
		{2, 4, []int{2, 1, 1}}, // more events than lines (parses given up): one at a time
	} {
		if got := claude.ArenaChunks(tc.lines, tc.events); !slices.Equal(got, tc.want) {
			t.Errorf("%d lines, %d events: chunks %v, want %v", tc.lines, tc.events, got, tc.want)
		}
	}
}

// cmpRawJSON compares json.RawMessage by content, treating nil and empty alike.
var cmpRawJSON = cmp.Comparer(func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })

// A line with two "type" (or "subtype") members is sniffed and decoded by
// the same rule, the last exact key wins, as encoding/json does.
func TestDecodeDuplicateKindKeys(t *testing.T) {
	for line, want := range map[string]string{
		`{"type":"0","type":""}`:                                         "*claude.UnknownMessage /",
		`{"type":"system","subtype":"init","type":"result"}`:             "*claude.ResultMessage result/",
		`{"type":"result","type":"system","subtype":"status"}`:           "*claude.SystemStatus system/status",
		`{"type":"system","subtype":"init","subtype":"status"}`:          "*claude.SystemStatus system/status",
		`{"type":"system","subtype":"status","Subtype":"init"}`:          "*claude.SystemStatus system/status",
		`{"type":"user","Type":"assistant"}`:                             "*claude.UserMessage user/",
		`{"typ\u0065":"result"}`:                                         "*claude.ResultMessage result/",
		`{"type":"result","type":1}`:                                     "*claude.UnknownMessage /",
		`{"type":"stream_event","event":{},"type":"assistant"}`:          "*claude.AssistantMessage assistant/",
		`{"type":"assistant","type":"stream_event","event":{"index":1}}`: "*claude.StreamEvent stream_event/",
	} {
		m, err := claude.DecodeMessage([]byte(line))
		if err != nil {
			t.Errorf("%s: %v", line, err)
			continue
		}
		sub := ""
		if got, ok := claude.SystemSubtypeOf(m); ok {
			sub = got
		}
		if got := fmt.Sprintf("%T %s/%s", m, m.Kind(), sub); got != want {
			t.Errorf("%s: got %s, want %s", line, got, want)
		}
	}
}
