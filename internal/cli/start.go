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

// This file holds what resume and fork share: both start a CLI on a stored
// conversation and may follow the session after.

// lifecycleExitHelp ends the usage of resume and fork.
const lifecycleExitHelp = `
` + findDaemonHelp + `
Exit status: 0 done, 1 the daemon refused or failed or is unreachable (or,
with --attach, the turn or the session failed), 2 bad usage, 130 detached
with Ctrl-C.
`

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
	var done string // what resume did, when it was not a resume
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
		if isAlreadyRunning(err) {
			sess, done, err = resumeRunning(ctx, dc, id, prompt)
		} else if err == nil {
			sess = res.Msg.Session
		}
		if err != nil {
			return interruptedOr(detached, lifecycleError(dc, err, name, id))
		}
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
	case done != "":
		fmt.Fprintln(env.Stdout, done)
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
