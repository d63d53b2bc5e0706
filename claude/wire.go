package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The CLI dies on a malformed stdin line ("Error parsing streaming input
// line"), so everything written to it goes through encodeLine, which
// guarantees one complete, valid, newline-free JSON value per line.

// encodeLine marshals v as one NDJSON line, with the trailing newline.
func encodeLine(v any) ([]byte, error) {
	b, err := json.Marshal(v) // validates and compacts any json.RawMessage inside
	if err != nil {
		return nil, fmt.Errorf("claude: encoding stdin line: %w", err)
	}
	if bytes.IndexByte(b, '\n') >= 0 || !json.Valid(b) {
		return nil, fmt.Errorf("claude: encoding stdin line: result is not a single JSON line")
	}
	return append(b, '\n'), nil
}

func compactJSON(raw json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// wireUser is a user message as written to stdin.
type wireUser struct {
	Type            string      `json:"type"`
	SessionID       string      `json:"session_id"`
	Message         UserContent `json:"message"`
	ParentToolUseID *string     `json:"parent_tool_use_id"`
	UUID            string      `json:"uuid,omitempty"`
	// ClientComposed asks the CLI to take the prompt as written
	// (Options.VerbatimPrompts).
	ClientComposed bool `json:"client_composed,omitempty"`
}

type wireControlRequest struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	Request   any    `json:"request"`
}

type wireControlResponse struct {
	Type     string              `json:"type"`
	Response wireControlRespBody `json:"response"`
}

type wireControlRespBody struct {
	Subtype   string `json:"subtype"`
	RequestID string `json:"request_id"`
	Response  any    `json:"response,omitempty"`
	Error     string `json:"error,omitempty"`
	ErrorCode string `json:"error_code,omitempty"`
}

type wireCancel struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
}
