package cli

import (
	"context"
	"fmt"

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
prompt (claudectl send). A session with no turn running (idle, suspended)
is left as it is, and claudectl says so. SESSION_ID may be a unique start
of the id.
` + clientFlagsHelp

// Run implements Command.
func (c *InterruptCommand) Run(ctx context.Context, args []string) error {
	return runSessionCall(ctx, c.Env, "interrupt", interruptUsage, args, func(ctx context.Context, dc *daemonClient, id string) (string, error) {
		// Whether a turn runs: the daemon answers OK either way.
		before := v1.SessionStatus_SESSION_STATUS_UNSPECIFIED
		if res, err := dc.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id})); err == nil {
			before = res.Msg.Session.Status
		}
		_, err := dc.sessions.Interrupt(ctx, connect.NewRequest(&v1.InterruptRequest{SessionId: id, Client: clientName("interrupt")}))
		switch before {
		case v1.SessionStatus_SESSION_STATUS_IDLE, v1.SessionStatus_SESSION_STATUS_SUSPENDED, v1.SessionStatus_SESSION_STATUS_INTERRUPTED:
			return fmt.Sprintf("Session %s is %s: no turn was running, nothing to interrupt.", id, statusName(before)), err
		}
		return "Interrupted session " + id + ".", err
	})
}
