package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// DecideCommand is "claudectl approve" or "claudectl deny".
type DecideCommand struct {
	Env   *Env
	Allow bool
}

// Name implements Command.
func (c *DecideCommand) Name() string {
	if c.Allow {
		return "approve"
	}
	return "deny"
}

// Summary implements Command.
func (c *DecideCommand) Summary() string {
	if c.Allow {
		return "allow a pending permission request"
	}
	return "deny a pending permission request"
}

const approveUsage = `Usage: claudectl approve [flags] REQUEST_ID

Allows the pending permission request (REQUEST_ID, or a unique start of
it: claudectl pending lists them). With --always, the CLI's suggested
permission is also stored as a rule of the daemon's: claudectl pending
shows these rules before, and approve prints what it did. The first
decision wins: if someone else decided first, approve fails and says who.
A question Claude asks (AskUserQuestion) needs answers, not an approval:
answer it in claudectl attach SESSION_ID, or refuse it with claudectl deny.
` + clientFlagsHelp

const denyUsage = `Usage: claudectl deny [flags] REQUEST_ID

Denies the pending permission request (REQUEST_ID, or a unique start of
it: claudectl pending lists them), with --message telling Claude why.
The first decision wins: if someone else decided first, deny fails and
says who.
` + clientFlagsHelp

// notAllowable is approve's error for a question (AskUserQuestion): it
// has answers to give, not a permission to allow.
func notAllowable(id, session string) error {
	if session == "" {
		session = "SESSION_ID"
	}
	return exitWith(ExitFailure, "request %s is a question Claude asks, not a permission: answer it in claudectl attach %s, or refuse it with claudectl deny %s", id, session, id)
}

// Run implements Command.
func (c *DecideCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	name := c.Name()
	var cf clientFlags
	var always bool
	var message string
	fs := newFlagSet(name)
	text := denyUsage
	if c.Allow {
		text = approveUsage
		fs.BoolVar(&always, "always", false, "also store the CLI's suggested permission as a rule")
	} else {
		fs.StringVar(&message, "message", "", "tell Claude why, in `TEXT`")
	}
	cf.register(fs)
	pos, help, err := parseClient(env, text, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) == 0 || strings.TrimSpace(pos[0]) == "" {
		return usagef("missing REQUEST_ID: %s needs the id of a pending request (claudectl pending lists them)", name)
	}
	if len(pos) > 1 {
		return usagef("unexpected argument %q: %s takes one REQUEST_ID", pos[1], name)
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	req, err := resolveRequest(ctx, dc, pos[0])
	if err != nil {
		return err
	}
	id := req.RequestId
	if c.Allow && req.ToolName == "AskUserQuestion" {
		return notAllowable(id, req.SessionId)
	}
	b := v1.Behavior_BEHAVIOR_DENY
	if c.Allow {
		b = v1.Behavior_BEHAVIOR_ALLOW
	}
	res, err := dc.perms.Decide(ctx, connect.NewRequest(&v1.DecideRequest{RequestId: id, Behavior: b,
		Message: message, Always: always, Client: clientName(name)}))
	if err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) && ce.Code() == connect.CodeFailedPrecondition && strings.Contains(ce.Message(), "already") {
			// The first decision wins; the message names the winner.
			return exitWith(ExitFailure, "too late: %s (the first decision wins)", strings.TrimPrefix(ce.Message(), "permission: "))
		}
		if connect.CodeOf(err) == connect.CodeNotFound {
			return noRequest(id) // decided or withdrawn since it was listed
		}
		if c.Allow && connect.CodeOf(err) == connect.CodeInvalidArgument && strings.Contains(err.Error(), "AskUserQuestion") {
			return notAllowable(id, req.SessionId) // not listed: the daemon's words name the tool
		}
		return dc.explain(err, fmt.Sprintf("deciding request %s", id))
	}
	d := res.Msg.Decision
	if res.Msg.AwaitingApprovals {
		// A two-person rule: counted, still pending.
		fmt.Fprintf(env.Stdout, "Allowed %s: %d of %d allows (%s); it waits for another person's claudectl approve.\n",
			id, len(d.GetApprovedBy()), res.Msg.ApprovalsNeeded, strings.Join(d.GetApprovedBy(), ", "))
		return nil
	}
	verb := "Denied"
	if c.Allow {
		verb = "Allowed"
	}
	fmt.Fprintf(env.Stdout, "%s %s", verb, id)
	if d.GetToolName() != "" {
		fmt.Fprintf(env.Stdout, " (%s in session %s)", d.ToolName, d.SessionId)
	}
	if by := d.GetDecidedBy(); strings.HasPrefix(by, "user:") { // a token's person, as the daemon verified them
		fmt.Fprintf(env.Stdout, " as %s", by)
	}
	fmt.Fprintln(env.Stdout, ".")
	if always {
		if parts := describeAlways(req); len(parts) > 0 {
			fmt.Fprintln(env.Stdout, "Always also did:")
			for _, p := range parts {
				fmt.Fprintf(env.Stdout, "  - %s\n", p)
			}
		} else if req.ToolName != "" {
			fmt.Fprintln(env.Stdout, "Always stored no rule: the request came with no suggestion the daemon keeps.")
		}
	}
	return nil
}
