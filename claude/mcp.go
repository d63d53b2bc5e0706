package claude

import (
	"context"
	"encoding/json"
	"fmt"
)

// addMCPFields adds the "sdkMcpServers" field of initialize. (In-process
// MCP servers are not implemented yet: issue 3.)
func (s *Session) addMCPFields(fields map[string]any) error { return nil }

// answerMCP routes an mcp_message request to an in-process MCP server.
func (s *Session) answerMCP(ctx context.Context, req json.RawMessage) (any, error) {
	var mm struct {
		ServerName string `json:"server_name"`
	}
	_ = unmarshal(req, &mm)
	return nil, fmt.Errorf("SDK MCP server not found: %s", mm.ServerName)
}
