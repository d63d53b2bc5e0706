package cli

import (
	"context"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// InterruptCommand is "claudectl interrupt SESSION_ID".
type InterruptCommand struct{ Env *Env }

// Name implements Command.
func (*InterruptCommand) Name() string { return "interrupt" }

// Summary implements Command.
func (*InterruptCommand) Summary() string { return "stop a daemon session's running turn" }

const interruptUsage = `Usage: claudectl interrupt [flags] SESSION_ID

Stops the session's running turn, as Esc does in Claude Code: the turn
ends with what was produced so far and the session waits for the next
prompt (claudectl send).
` + clientFlagsHelp

// Run implements Command.
func (c *InterruptCommand) Run(ctx context.Context, args []string) error {
	return runSessionCall(ctx, c.Env, "interrupt", interruptUsage, args, func(ctx context.Context, dc *daemonClient, id string) (string, error) {
		_, err := dc.sessions.Interrupt(ctx, connect.NewRequest(&v1.InterruptRequest{SessionId: id, Client: clientName("interrupt")}))
		return "Interrupted session " + id + ".", err
	})
}
