package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claude"
)

// This file holds the commands that change a daemon session's life:
// resume, fork, close and interrupt.

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

// lifecycleExitHelp ends the usage of resume and fork.
const lifecycleExitHelp = `
The daemon's address comes from --server, else CLAUDECTL_SERVER, else
` + defaultServer + `. A bearer token comes from --token-file, else
CLAUDECTL_TOKEN, if either is set.

Exit status: 0 done, 1 the daemon refused or failed or is unreachable (or,
with --attach, the turn or the session failed), 2 bad usage, 130 detached
with Ctrl-C.
`

// Run implements Command.
func (c *ResumeCommand) Run(ctx context.Context, args []string) error {
	return runStart(ctx, c.Env, "resume", resumeUsage, args)
}

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

// runStart runs resume or fork (name): both start a CLI on a stored
// conversation and may follow the session after.
func runStart(ctx context.Context, env *Env, name, text string, args []string) error {
	env = env.withDefaults()
	var cf clientFlags
	var attach, asJSON bool
	fs := newFlagSet(name)
	fs.BoolVar(&attach, "attach", false, "follow the session after, as claudectl attach does")
	fs.BoolVar(&asJSON, "json", false, "print the session as JSON")
	cf.register(fs)
	pos, help, err := parseClient(env, text, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) == 0 || strings.TrimSpace(pos[0]) == "" {
		return usagef("missing SESSION_ID: %s needs the id of a daemon session (see claudectl sessions)", name)
	}
	if attach && asJSON {
		return usagef("--attach and --json exclude each other (claudectl attach --json prints events as JSON)")
	}
	id, prompt := pos[0], strings.Join(pos[1:], " ")
	if len(pos) > 1 && strings.TrimSpace(prompt) == "" {
		return usagef("PROMPT is empty: leave it out to %s without a message", name)
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()

	// Ctrl-C during the call stops waiting for it; while attached, it
	// detaches.
	ctx, detached, stopWatching := watchInterrupt(ctx, env)
	defer stopWatching()

	var sess *v1.Session
	var after int64 // follow the events after this one
	switch name {
	case "resume":
		if attach {
			// The prompt and the reply come after the events logged so far.
			res, err := dc.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
			if err != nil {
				return interruptedOr(detached, lifecycleError(dc, err, name, id))
			}
			after = res.Msg.Session.LastSeq
		}
		res, err := dc.sessions.ResumeSession(ctx, connect.NewRequest(&v1.ResumeSessionRequest{SessionId: id, Prompt: prompt}))
		if err != nil {
			return interruptedOr(detached, lifecycleError(dc, err, name, id))
		}
		sess = res.Msg.Session
	case "fork":
		res, err := dc.sessions.ForkSession(ctx, connect.NewRequest(&v1.ForkSessionRequest{SessionId: id, Prompt: prompt}))
		if err != nil {
			return interruptedOr(detached, lifecycleError(dc, err, name, id))
		}
		sess = res.Msg.Session
	default:
		panic("runStart: unknown command " + name)
	}

	switch {
	case asJSON:
		return writeJSON(env.Stdout, sessionToJSON(sess))
	case name == "fork":
		fmt.Fprintf(env.Stdout, "Forked session %s as %s (%s).\n", id, sess.Id, statusName(sess.Status))
	default:
		fmt.Fprintf(env.Stdout, "Resumed session %s (%s).\n", sess.Id, statusName(sess.Status))
	}
	if !attach {
		if prompt != "" {
			fmt.Fprintf(env.Stderr, "claudectl: the turn goes on in the daemon (claudectl attach %s follows it)\n", sess.Id)
		}
		return nil
	}
	return followStarted(ctx, env, dc, sess, after, prompt != "", detached, name)
}

// interruptedOr returns err, or exit status 130 when Ctrl-C ended the call.
func interruptedOr(detached *atomic.Bool, err error) error {
	if detached.Load() {
		return exitSilently(ExitInterrupted)
	}
	return err
}

// followStarted follows session sess from event after on, as attach does;
// untilResult stops at the first result of the main thread. detached is
// set by the caller when Ctrl-C cancelled ctx.
func followStarted(ctx context.Context, env *Env, dc *daemonClient, sess *v1.Session, after int64, untilResult bool, detached *atomic.Bool, cmd string) error {
	id := sess.Id
	var result *claude.ResultMessage
	f := &follower{env: env, dc: dc, id: id, attach: true, client: clientName(cmd), lastSeq: after}
	f.tools = newToolLog()
	f.render = newRenderer(env.Stdout, f.tools)
	if untilResult {
		f.onMessage = func(m claude.Message) bool {
			if r, ok := m.(*claude.ResultMessage); ok && claude.ThreadOf(m).IsMain() {
				result = r
				return true
			}
			return false
		}
	}
	if env.StdinIsTerminal() {
		ask := newAsker(env.Stderr, env.Stdin, f.tools)
		defer ask.close()
		f.decide = claude.AnswerQuestions(ask.answer, ask.canUseTool)
	}
	fmt.Fprintf(env.Stderr, "claudectl: attached to session %s (in %s); Ctrl-C detaches\n", id, sess.Cwd)
	err := f.follow(ctx)
	f.stopAsking()
	f.render.finish()
	switch {
	case detached.Load():
		fmt.Fprintf(env.Stderr, "claudectl: detached from session %s; it goes on (claudectl attach %s)\n", id, id)
		return exitSilently(ExitInterrupted)
	case result != nil:
		if result.Err() != nil {
			fmt.Fprintf(env.Stderr, "claudectl %s: %s\n", cmd, describeResultError(result))
			return exitSilently(ExitFailure)
		}
		return nil
	case errors.Is(err, errStreamEnded):
		return f.ended(ctx)
	}
	return err
}

// lifecycleError explains an error of command name on session id. A
// refusal because of the session's state keeps the daemon's words and
// adds what to do instead.
func lifecycleError(dc *daemonClient, err error, name, id string) error {
	what := map[string]string{"resume": "resuming", "fork": "forking", "close": "closing", "interrupt": "interrupting"}[name] +
		" session " + id
	explained := dc.explain(err, what)
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition {
		return explained
	}
	var hint string
	switch msg := ce.Message(); {
	case name == "resume" && strings.Contains(msg, "already running"):
		hint = fmt.Sprintf("it still has its CLI: claudectl send %s TEXT talks to it, claudectl close %s ends it", id, id)
	case name == "interrupt" && strings.Contains(msg, "not running"):
		hint = fmt.Sprintf("no turn can run without a CLI: claudectl resume %s starts one", id)
	default:
		return explained
	}
	return exitWith(ExitFailure, "%v (%s)", explained, hint)
}

// CloseCommand is "claudectl close SESSION_ID".
type CloseCommand struct{ Env *Env }

// Name implements Command.
func (*CloseCommand) Name() string { return "close" }

// Summary implements Command.
func (*CloseCommand) Summary() string { return "end a daemon session's CLI" }

const closeUsage = `Usage: claudectl close [flags] SESSION_ID

Ends the session's CLI process and marks the session closed; its history
stays (claudectl attach replays it, claudectl resume goes on with it).
Closing a session that has no CLI is not an error.
` + clientFlagsHelp

// Run implements Command.
func (c *CloseCommand) Run(ctx context.Context, args []string) error {
	return runSessionCall(ctx, c.Env, "close", closeUsage, args, func(ctx context.Context, dc *daemonClient, id string) (string, error) {
		_, err := dc.sessions.CloseSession(ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: id}))
		return "Closed session " + id + ".", err
	})
}

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
		_, err := dc.sessions.Interrupt(ctx, connect.NewRequest(&v1.InterruptRequest{SessionId: id}))
		return "Interrupted session " + id + ".", err
	})
}

// runSessionCall runs a command that makes one call about one session and
// prints what call says it did.
func runSessionCall(ctx context.Context, env *Env, name, text string, args []string,
	call func(context.Context, *daemonClient, string) (string, error)) error {
	env = env.withDefaults()
	var cf clientFlags
	fs := newFlagSet(name)
	cf.register(fs)
	pos, help, err := parseClient(env, text, fs, args)
	if help || err != nil {
		return err
	}
	switch {
	case len(pos) == 0 || strings.TrimSpace(pos[0]) == "":
		return usagef("missing SESSION_ID: %s needs the id of a daemon session (see claudectl sessions)", name)
	case len(pos) > 1:
		return usagef("unexpected argument %q: %s takes one SESSION_ID", pos[1], name)
	}
	id := pos[0]
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	done, err := call(ctx, dc, id)
	if err != nil {
		return lifecycleError(dc, err, name, id)
	}
	fmt.Fprintln(env.Stdout, done)
	return nil
}
