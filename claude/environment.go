package claude

import "context"

// UpdateEnvironment sets environment variables in the running CLI (an
// update_environment_variables message): the tools and hooks it starts
// afterwards see them. It is fire-and-forget: the CLI does not answer. It
// works over every transport; with a WebSocketTransport it is how a server
// refreshes credentials of a long-running CLI.
func (s *Session) UpdateEnvironment(ctx context.Context, vars map[string]string) error {
	if vars == nil {
		vars = map[string]string{}
	}
	return s.opErr("update_environment_variables", s.write(ctx, wireUpdateEnv{Type: "update_environment_variables", Variables: vars}))
}

type wireUpdateEnv struct {
	Type      string            `json:"type"`
	Variables map[string]string `json:"variables"`
}
