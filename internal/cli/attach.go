package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claude"
)

// AttachCommand is "claudectl attach SESSION_ID": it follows a daemon
// session in the terminal and answers its permission requests.
type AttachCommand struct{ Env *Env }

// Name implements Command.
func (*AttachCommand) Name() string { return "attach" }

// Summary implements Command.
func (*AttachCommand) Summary() string {
	return "follow a daemon session and answer its permission requests"
}

func (*AttachCommand) handlesInterrupts() {}

const attachUsage = `Usage: claudectl attach [flags] SESSION_ID

Follows a session of the claudectl daemon: its history from the start (or
from --from-seq N; with --tail only what happens from now on), then what
happens live, shown as "claudectl run" shows its stream: the prompts, the
reply as it streams, Claude's thinking (dimmed; --hide-thinking hides it),
tool calls and results on stdout; status changes, usage, errors and
permission decisions (a question's with its answer) on stderr. SESSION_ID
may be a unique start of the id.

When a permission request is pending, claudectl asks on the terminal:
  y = allow once, n = deny (the default), a = allow and remember the rule;
AskUserQuestion shows each question with its options and sends your
answers. The first decision wins: if another client decides first,
claudectl says who. Requests already settled in the history are shown, not
asked. When stdin is not a terminal, requests are shown and left to others
(claudectl approve/deny REQUEST_ID).

Attaching at a terminal to a suspended session starts its Claude Code
again (resumed, as a prompt would), so that what you send next with
"claudectl send" finds it running; if nothing is sent, it is suspended
again after the daemon's sessions.idle_timeout.

If the daemon drops the stream (this client fell behind, or the connection
broke), claudectl subscribes again from the last event it saw.

Ctrl-C detaches and leaves the session running. attach ends by itself
when the session ends.

Exit status: 0 the session closed, 1 it failed or the daemon failed or is
unreachable, 2 bad usage, 130 detached with Ctrl-C.

` + findDaemonHelp

// Run implements Command.
func (c *AttachCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var asJSON, tail, hideThinking bool
	fromSeq := int64(1)
	fs := newFlagSet("attach")
	fs.Func("from-seq", "replay from event `N` on (default 1: the whole history)", func(s string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < 1 {
			return errors.New("must be a whole number >= 1")
		}
		fromSeq = n
		return nil
	})
	fs.BoolVar(&tail, "tail", false, "skip the history: show only new events (and the requests pending now)")
	fs.BoolVar(&asJSON, "json", false, "print the events as JSON lines instead")
	fs.BoolVar(&hideThinking, "hide-thinking", false, "do not show Claude's thinking (shown dimmed by default)")
	cf.register(fs)
	pos, help, err := parseClient(env, attachUsage, fs, args)
	if help || err != nil {
		return err
	}
	switch {
	case len(pos) == 0 || strings.TrimSpace(pos[0]) == "":
		return usagef("missing SESSION_ID: attach needs the id of a daemon session (see claudectl sessions)")
	case len(pos) > 1:
		return usagef("unexpected argument %q: attach takes one SESSION_ID", pos[1])
	}
	if tail && fromSeq != 1 {
		return usagef("--tail and --from-seq exclude each other: --tail skips the whole history")
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

	// Ctrl-C detaches: this command watches it itself so that it can say so.
	ctx, detached, stopWatching := watchInterrupt(ctx, env)
	defer stopWatching()

	res, err := dc.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if err != nil {
		if detached.Load() {
			return exitSilently(ExitInterrupted)
		}
		if connect.CodeOf(err) == connect.CodeNotFound {
			return noSession(id)
		}
		return dc.explain(err, fmt.Sprintf("attaching to session %s", id))
	}
	sess := res.Msg.Session
	if sess.Status == v1.SessionStatus_SESSION_STATUS_SUSPENDED && env.StdinIsTerminal() {
		// Someone at a terminal attaching to a sleeping session is about
		// to write to it (claudectl send): its CLI starts now, and the
		// prompt finds it running. Best effort: a viewer may not operate
		// it, and a resume no prompt follows sleeps again.
		// It returns once the resume has begun, not when it is done.
		dc.sessions.Typing(ctx, connect.NewRequest(&v1.TypingRequest{SessionId: id}))
	}
	if fromSeq-1 > sess.LastSeq {
		// The store would refuse the replay as "events unavailable: after
		// seq N, the log ends at M".
		return badValue("from-seq", strconv.FormatInt(fromSeq, 10), fmt.Sprintf("session %s has %d events so far (--from-seq %d shows only new ones)", id, sess.LastSeq, sess.LastSeq+1))
	}

	env, status := withStatusLine(env, !asJSON)
	defer status.close()
	f := &follower{env: env, dc: dc, id: id, asJSON: asJSON, attach: true,
		client: clientName("attach"), lastSeq: fromSeq - 1}
	if !asJSON {
		f.tools = newToolLog()
		f.render = newTranscript(env, f.tools, status, hideThinking)
	}
	if env.StdinIsTerminal() {
		ask := newAsker(env.Stderr, env.Stdin, f.tools)
		ask.pal = colorFor(env, env.StderrIsTerminal)
		defer ask.close()
		f.decide = claude.AnswerQuestions(ask.answer, ask.canUseTool)
	}
	if !asJSON {
		what := "history and live events"
		if tail {
			what = "new events"
		}
		fmt.Fprintf(env.Stderr, "claudectl: attached to session %s (%s, in %s): %s; Ctrl-C detaches\n",
			id, statusName(sess.Status), sess.Cwd, what)
	}
	if tail {
		f.lastSeq = sess.LastSeq
		// The history holds the pending requests: show them now.
		if pres, err := dc.perms.ListPending(ctx, connect.NewRequest(&v1.ListPendingRequest{SessionId: id})); err == nil {
			for _, pr := range pres.Msg.Requests {
				f.permissionRequest(ctx, pr)
			}
		}
	}

	err = f.follow(ctx)
	f.stopAsking()
	if f.render != nil {
		f.render.finish()
	}
	if detached.Load() {
		fmt.Fprintf(env.Stderr, "claudectl: detached from session %s; it goes on (claudectl attach %s)\n", id, id)
		return exitSilently(ExitInterrupted)
	}
	if !errors.Is(err, errStreamEnded) {
		return err
	}
	return f.ended(ctx)
}

// ended reports how the session ended, once its stream has: exit 0 when
// it closed, 1 when it failed.
func (f *follower) ended(ctx context.Context) error {
	st, detail := f.finalStatus(ctx)
	stderr := f.env.Stderr
	switch st {
	case v1.SessionStatus_SESSION_STATUS_FAILED:
		if detail == "" {
			detail = "no detail"
		}
		fmt.Fprintf(stderr, "claudectl: session %s failed: %s\n", f.id, detail)
		return exitSilently(ExitFailure)
	case v1.SessionStatus_SESSION_STATUS_CLOSED:
		if by, ok := strings.CutPrefix(detail, "closed "); ok { // "closed by client:alice"
			fmt.Fprintf(stderr, "claudectl: session %s closed %s\n", f.id, by)
		} else if detail != "" {
			fmt.Fprintf(stderr, "claudectl: session %s closed: %s\n", f.id, detail)
		} else {
			fmt.Fprintf(stderr, "claudectl: session %s closed\n", f.id)
		}
		return nil
	}
	fmt.Fprintf(stderr, "claudectl: session %s is %s, with no CLI running (claudectl send resumes it)\n", f.id, statusName(st))
	return nil
}
