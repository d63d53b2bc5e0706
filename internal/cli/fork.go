package cli

import (
	"context"
)

// ForkCommand is "claudectl fork SESSION_ID [PROMPT...]".
type ForkCommand struct{ Env *Env }

// Name implements Command.
func (*ForkCommand) Name() string { return "fork" }

// Summary implements Command.
func (*ForkCommand) Summary() string { return "start a new daemon session from another's history" }

func (*ForkCommand) handlesInterrupts() {}

const forkUsage = `Usage: claudectl fork [flags] SESSION_ID [PROMPT...]

Starts a new daemon session that begins with a copy of SESSION_ID's
conversation (claude --resume --fork-session) and goes on apart from it;
the original is left as it is, running or not. PROMPT, if given, is the
fork's first message; several words are joined with spaces.

claudectl fork prints the new session's id and returns. With --attach it
follows the new session as claudectl attach does: with a PROMPT until the
reply's result, else until the session ends; Ctrl-C detaches and leaves it
running.
` + lifecycleExitHelp

// Run implements Command.
func (c *ForkCommand) Run(ctx context.Context, args []string) error {
	return runStart(ctx, c.Env, "fork", forkUsage, args)
}
