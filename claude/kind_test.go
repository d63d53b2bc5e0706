package claude_test

import (
	"testing"

	"github.com/claudectl/claudectl/claude"
)

// TestLineKindAgreesWithDecode checks that classifying a raw line gives
// what decoding it and asking SubtypeOf gives.
func TestLineKindAgreesWithDecode(t *testing.T) {
	for _, line := range []string{
		`{"type":"system","subtype":"init","session_id":"s","model":"m","tools":[]}`,
		`{"subtype":"init","type":"system","session_id":"s"}`,
		`{"type":"result","subtype":"error_max_turns","is_error":true,"session_id":"s"}`,
		`{"type":"control_request","request_id":"r","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{}}}`,
		`{"type":"control_response","response":{"subtype":"success","request_id":"r"}}`,
		`{"type":"user","message":{"role":"user","content":"hi"},"session_id":"s"}`,
		`{"type":"stream_event","event":{"type":"message_stop"},"session_id":"s","uuid":"u"}`,
		`{"type":"brand_new","subtype":"x"}`,
	} {
		typ, sub := claude.LineKind([]byte(line))
		m, err := claude.DecodeMessage([]byte(line))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if typ != m.Kind() || sub != claude.SubtypeOf(m) {
			t.Errorf("%s: LineKind %q/%q, decoded %q/%q", line, typ, sub, m.Kind(), claude.SubtypeOf(m))
		}
	}
}
