package cli

import (
	"context"
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
failed, or stopped with the daemon) with claude --resume: the conversation
goes on where it stopped. PROMPT, if given, is sent as the next message;
several words are joined with spaces. A session that still runs cannot be
resumed (claudectl send talks to it).

claudectl resume prints the session's id and status and returns; the turn
goes on in the daemon. With --attach it follows the session as claudectl
attach does: with a PROMPT until the reply's result, else until the session
ends; Ctrl-C detaches and leaves it running.
` + lifecycleExitHelp

// Run implements Command.
func (c *ResumeCommand) Run(ctx context.Context, args []string) error {
	return runStart(ctx, c.Env, "resume", resumeUsage, args)
}
