package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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

A suspended session is resumed first; when the daemon's
sessions.max_running sessions all have work, it waits (queued) for a free
slot: send says so and returns once the prompt is sent, and Ctrl-C gives
up (the prompt is not sent and the session is left as it was).

When the daemon expects the turn to fail for lack of credentials (its
Claude Code found none as it started, or its last turn was refused for
that), send says so after sending, with where the key goes.
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
	hint, err := sendWaiting(ctx, env, dc, id, text)
	if err != nil {
		if se := (*statusError)(nil); errors.As(err, &se) {
			return err // said already
		}
		if connect.CodeOf(err) == connect.CodeNotFound {
			return noSession(id) // as resume, close, attach… say it
		}
		return dc.explain(err, fmt.Sprintf("sending to session %s", id))
	}
	if strings.HasPrefix(hint, "waiting for budget") { // held at a spend cap: kept, not sent
		fmt.Fprintf(env.Stdout, "Kept for session %s, %s.\n", id, hint)
		return nil
	}
	fmt.Fprintf(env.Stdout, "Sent to session %s.\n", id)
	if hint != "" {
		fmt.Fprintf(env.Stderr, "claudectl send: warning: the daemon expects this turn to fail for lack of credentials\nclaudectl send: hint: %s\n", hint)
	}
	return nil
}

// sendWaiting sends text to session id, and returns the daemon's hint
// when it expects the turn to fail for lack of credentials. The Send call
// lasts while the session waits for a slot (a suspended session resumed
// beyond sessions.max_running): after queuedProbeAfter it looks whether
// the session is queued and says so, rather than hang silently.
func sendWaiting(ctx context.Context, env *Env, dc *daemonClient, id, text string) (hint string, _ error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		hint string
		err  error
	}
	sent := make(chan answer, 1)
	go func() {
		res, err := dc.sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: text}))
		if err != nil {
			sent <- answer{err: err}
			return
		}
		sent <- answer{hint: res.Msg.GetHint()}
	}()
	probe := time.NewTimer(queuedProbeAfter)
	defer probe.Stop()
	next := 2 * queuedProbeAfter
	for {
		select {
		case a := <-sent:
			return a.hint, a.err
		case <-probe.C:
			if queued, detail := sessionQueued(ctx, dc, id); queued {
				fmt.Fprintf(env.Stderr, "claudectl: session %s is queued: %s; the prompt goes to it then (Ctrl-C gives up: the prompt is not sent)\n", id, queueText(detail))
				a := <-sent
				if a.err != nil && ctx.Err() != nil {
					return "", exitWith(ExitInterrupted, "gave up waiting for a slot: the prompt was not sent to session %s, which is left as it was", id)
				}
				return a.hint, a.err
			}
			probe.Reset(next) // a turn that runs, a CLI slow to start: look again, less and less often
			next = min(2*next, 30*time.Second)
		}
	}
}

// sessionQueued reports whether session id waits for a slot, with the
// daemon's word on its place in the queue (its last "queued" status
// change) when it finds it among the session's latest events.
func sessionQueued(ctx context.Context, dc *daemonClient, id string) (queued bool, detail string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	res, err := dc.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if err != nil || res.Msg.GetSession().GetStatus() != v1.SessionStatus_SESSION_STATUS_QUEUED {
		return false, ""
	}
	last := res.Msg.GetSession().GetLastSeq()
	return true, lastQueuedDetail(ctx, dc, id, max(0, last-16), last)
}
