package claude

import (
	"context"
	"encoding/json"
	"fmt"
)

// ElicitationFunc answers an MCP server's request for input from the user
// (an MCP elicitation, relayed by the CLI). It runs on its own goroutine;
// ctx is cancelled when the CLI withdraws the request or the session ends.
// An error is sent to the CLI as an error response. Close waits only a
// second for one that ignores its ctx (see [Session.Close]).
type ElicitationFunc func(ctx context.Context, req *ElicitationRequest) (ElicitationResult, error)

// ElicitationRequest is the CLI's elicitation request.
type ElicitationRequest struct {
	// ServerName is the MCP server asking.
	ServerName string `json:"mcp_server_name"`
	// Message says what the server wants.
	Message string `json:"message"`
	// Mode is "form" (fill in RequestedSchema) or "url" (visit URL).
	Mode          string `json:"mode,omitempty"`
	URL           string `json:"url,omitempty"`
	ElicitationID string `json:"elicitation_id,omitempty"`
	// RequestedSchema is the JSON schema of the content a form asks for.
	RequestedSchema json.RawMessage `json:"requested_schema,omitempty"`
	Title           string          `json:"title,omitempty"`
	DisplayName     string          `json:"display_name,omitempty"`
	Description     string          `json:"description,omitempty"`
	// Raw is the whole request payload.
	Raw json.RawMessage `json:"-"`
}

// Elicitation actions.
const (
	ElicitationAccept  = "accept"
	ElicitationDecline = "decline"
	ElicitationCancel  = "cancel"
)

// ElicitationResult is the user's answer to an elicitation.
type ElicitationResult struct {
	// Action is ElicitationAccept, ElicitationDecline or ElicitationCancel;
	// empty means decline.
	Action string `json:"action"`
	// Content is the form's content, for an accepted form.
	Content map[string]any `json:"content,omitempty"`
}

// answerElicitation answers an elicitation request from an MCP server:
// without a handler, the answer is a decline.
func (s *Session) answerElicitation(ctx context.Context, req json.RawMessage) (any, error) {
	if s.opts.OnElicitation == nil {
		return ElicitationResult{Action: ElicitationDecline}, nil
	}
	er := &ElicitationRequest{Raw: req}
	if err := unmarshal(req, er); err != nil {
		return nil, fmt.Errorf("decoding elicitation request: %w", err)
	}
	res, err := s.opts.OnElicitation(ctx, er)
	if err != nil {
		return nil, err
	}
	if res.Action == "" {
		res.Action = ElicitationDecline
	}
	return res, nil
}
