package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// ResumeCommand is "claudectl resume SESSION_ID [PROMPT...]".
type ResumeCommand struct{ Env *Env }

// Name implements Command.
func (*ResumeCommand) Name() string { return "resume" }

// Summary implements Command.
func (*ResumeCommand) Summary() string {
	return "start a new CLI on a closed or stopped daemon session"
}

func (*ResumeCommand) handlesInterrupts() {}

const resumeUsage = `Usage: claudectl resume [flags] SESSION_ID [PROMPT...]

Starts a new Claude Code CLI on a daemon session that has none (closed,
failed, suspended, or stopped with the daemon) with claude --resume: the
conversation goes on where it stopped. PROMPT, if given, is sent as the
next message; several words are joined with spaces. A session that still
has its CLI (idle, running, waiting) needs no resume: claudectl says so,
and sends PROMPT to it as claudectl send does.

claudectl resume prints the session's id and status and returns; the turn
goes on in the daemon. With --attach it follows the session as claudectl
attach does: with a PROMPT until the reply's result, else until the session
ends; Ctrl-C detaches and leaves it running.
` + lifecycleExitHelp

// Run implements Command.
func (c *ResumeCommand) Run(ctx context.Context, args []string) error {
	return runStart(ctx, c.Env, "resume", resumeUsage, args)
}

// isAlreadyRunning reports whether err is the daemon's refusal to resume a
// session that has its CLI.
func isAlreadyRunning(err error) bool {
	var ce *connect.Error
	return errors.As(err, &ce) && ce.Code() == connect.CodeFailedPrecondition && strings.Contains(ce.Message(), "already running")
}

// resumeRunning is resume of a session that has its CLI: nothing to
// resume; a prompt is sent to it. It returns the session and what was done,
// in words.
func resumeRunning(ctx context.Context, dc *daemonClient, id, prompt string) (*v1.Session, string, error) {
	res, err := dc.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if err != nil {
		return nil, "", err
	}
	sess := res.Msg.Session
	if prompt == "" {
		return sess, fmt.Sprintf("Session %s is %s with its CLI: nothing to resume (claudectl send %s TEXT talks to it).", id, statusName(sess.Status), id), nil
	}
	if _, err := dc.sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: prompt})); err != nil {
		return nil, "", err
	}
	return sess, fmt.Sprintf("Session %s was %s with its CLI: nothing to resume; sent the prompt to it.", id, statusName(sess.Status)), nil
}
