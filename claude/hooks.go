package claude

import (
	"context"
	"encoding/json"
	"fmt"
)

// addHookFields adds the "hooks" field of initialize. (Hooks are not
// implemented yet: issue 3.)
func (s *Session) addHookFields(fields map[string]any) error { return nil }

// answerHook answers a hook_callback request.
func (s *Session) answerHook(ctx context.Context, req json.RawMessage) (any, error) {
	var hc struct {
		CallbackID string `json:"callback_id"`
	}
	_ = unmarshal(req, &hc)
	return nil, fmt.Errorf("No hook callback found for ID: %s", hc.CallbackID)
}

// answerElicitation answers an elicitation request from an MCP server:
// without a handler, the answer is a decline.
func (s *Session) answerElicitation(ctx context.Context, req json.RawMessage) (any, error) {
	return map[string]any{"action": "decline"}, nil
}
