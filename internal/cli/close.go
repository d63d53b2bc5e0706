package cli

import (
	"context"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// CloseCommand is "claudectl close SESSION_ID".
type CloseCommand struct{ Env *Env }

// Name implements Command.
func (*CloseCommand) Name() string { return "close" }

// Summary implements Command.
func (*CloseCommand) Summary() string { return "end a daemon session's CLI" }

const closeUsage = `Usage: claudectl close [flags] SESSION_ID

Ends the session's CLI process and marks the session closed; its history
stays (claudectl attach replays it, claudectl resume goes on with it).
Closing a session that has no CLI is not an error. SESSION_ID may be a
unique start of the id.
` + clientFlagsHelp

// Run implements Command.
func (c *CloseCommand) Run(ctx context.Context, args []string) error {
	return runSessionCall(ctx, c.Env, "close", closeUsage, args, func(ctx context.Context, dc *daemonClient, id string) (string, error) {
		_, err := dc.sessions.CloseSession(ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: id, Client: clientName("close")}))
		return "Closed session " + id + ".", err
	})
}
