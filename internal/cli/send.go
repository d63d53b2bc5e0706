package cli

import (
	"context"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// SendCommand is "claudectl send ID TEXT".
type SendCommand struct{ Env *Env }

// Name implements Command.
func (*SendCommand) Name() string { return "send" }

// Summary implements Command.
func (*SendCommand) Summary() string { return "send a message to a daemon session" }

const sendUsage = `Usage: claudectl send [flags] SESSION_ID TEXT...

Sends TEXT to the session as a user message: a new turn, or queued behind
the running one. Several words are joined with spaces. SESSION_ID may be
a unique start of the id.
` + clientFlagsHelp

// Run implements Command.
func (c *SendCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	fs := newFlagSet("send")
	cf.register(fs)
	pos, help, err := parseClient(env, sendUsage, fs, args)
	if help || err != nil {
		return err
	}
	switch {
	case len(pos) == 0 || strings.TrimSpace(pos[0]) == "":
		return usagef("missing SESSION_ID: send needs SESSION_ID TEXT")
	case len(pos) == 1:
		return usagef("missing TEXT: send needs SESSION_ID TEXT")
	}
	text := strings.Join(pos[1:], " ")
	if strings.TrimSpace(text) == "" {
		return usagef("TEXT is empty")
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	id, err := resolveSession(ctx, dc, pos[0])
	if err != nil {
		return err
	}
	_, err = dc.sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: text}))
	if err != nil {
		if connect.CodeOf(err) == connect.CodeNotFound {
			return noSession(id) // as resume, close, attach… say it
		}
		return dc.explain(err, fmt.Sprintf("sending to session %s", id))
	}
	fmt.Fprintf(env.Stdout, "Sent to session %s.\n", id)
	return nil
}
