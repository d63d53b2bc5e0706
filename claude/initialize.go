package claude

import "encoding/json"

// initializeRequest builds the initialize control request. Each feature
// that configures the CLI through initialize adds its fields here through
// its own function (hooks, in-process MCP servers, ...), so that the pieces
// stay in their own files.
func (s *Session) initializeRequest() (json.RawMessage, error) {
	fields := map[string]any{"subtype": "initialize"}
	for _, add := range []func(map[string]any) error{
		s.addHookFields,         // hooks.go
		s.addAgentFields,        // agents.go
		s.addMCPFields,          // mcp.go
		s.addSystemPromptFields, // systemprompt.go
		s.addMoreFields,         // options_more.go
	} {
		if err := add(fields); err != nil {
			return nil, err
		}
	}
	return json.Marshal(fields)
}
