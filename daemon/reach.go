package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/claudectl/claudectl/notify"
	"github.com/claudectl/claudectl/permission"
)

// Reaching people (package notify): the daemon tells its Notifier what a
// person may want to hear of, and the Notifier decides who hears it and
// delivers it, off the daemon's path. Requests are told from the broker's
// own notices (reach), so that every way a request comes to wait (a
// session's tool call, a skill's shell command, a terminal's hook) is
// told once, by the daemon holding it; the sessions' news is told by
// their actors (tellTurn, tellEnd).

// A Notifier is told of events; Notify must not block (package notify's
// Notifier queues them).
type Notifier interface {
	Notify(notify.Event)
}

// tell hands e to the notifier, if there is one.
func (d *Daemon) tell(e notify.Event) {
	if d.notifier != nil {
		d.notifier.Notify(e)
	}
}

// reach tells the notifier of each request the broker holds as it comes,
// and of its escalation, until the daemon closes.
func (d *Daemon) reach() {
	defer close(d.reachDone)
	escalated := map[string]bool{} // request ids told of as escalated
	known := map[string]bool{}     // request ids told of
	for d.ctx.Err() == nil {
		sub, pending := d.broker.Observe()
		for _, p := range pending {
			known[p.Request.RequestID] = true // held before: told then, or before a restart
		}
		for open := true; open; {
			select {
			case <-d.ctx.Done():
				sub.Close()
				return
			case n, ok := <-sub.C():
				if !ok {
					open = false
					break
				}
				id := n.Pending.Request.RequestID
				switch {
				case n.Resolution != nil:
					delete(known, id)
					delete(escalated, id)
				case !known[id]:
					known[id] = true
					d.tell(d.requestEvent(n.Pending, ""))
				case n.Pending.Escalated && !escalated[id]:
					escalated[id] = true
					d.tell(d.requestEvent(n.Pending, notify.EventEscalated))
				}
			}
		}
		if !errors.Is(sub.Err(), permission.ErrDropped) {
			return // the broker closed
		}
	}
}

// requestEvent is the event of pending request p: kind, or the request's
// own (a question or a permission request) when kind is "".
func (d *Daemon) requestEvent(p permission.Pending, kind string) notify.Event {
	r := p.Request
	if kind == "" {
		kind = notify.EventPermission
		if r.ToolName == "AskUserQuestion" {
			kind = notify.EventQuestion
		}
	}
	e := notify.Event{Kind: kind, At: time.Now(), SessionID: p.SessionID, RequestID: r.RequestID, Tool: r.ToolName,
		Input: r.Input, Description: r.Description, Routing: p.Routing, Escalated: p.Escalated, ExpiresAt: p.ExpiresAt}
	for _, a := range p.Approvals {
		e.Approvals = append(e.Approvals, a.By)
	}
	ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
	defer cancel()
	if s, err := d.db.Session(ctx, p.SessionID); err == nil {
		e.Cwd = s.Cwd
		_, e.Terminal = TerminalOf(s)
	}
	return e
}

// tellTurn tells of a main turn's end: finished, failed, or stopped at
// its budget (the CLI's max_budget_usd).
func (a *actor) tellTurn(isError bool, subtype, detail string) {
	e := notify.Event{Kind: notify.EventSessionFinished, SessionID: a.id, Cwd: a.opts.Cwd, Detail: firstLine(detail, 300)}
	switch {
	case isError && subtype == "error_max_budget_usd":
		e.Kind = notify.EventBudgetStop
	case isError:
		e.Kind = notify.EventSessionFailed
	}
	a.d.tell(e)
}

// tellBudget tells of a session the daemon stopped at its budget.
func (a *actor) tellBudget(reason string) {
	a.d.tell(notify.Event{Kind: notify.EventBudgetStop, SessionID: a.id, Cwd: a.opts.Cwd, Detail: reason})
}

// tellFailed tells of a session whose CLI failed.
func (a *actor) tellFailed(detail string) {
	a.d.tell(notify.Event{Kind: notify.EventSessionFailed, SessionID: a.id, Cwd: a.opts.Cwd, Detail: firstLine(detail, 300)})
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// userOf is the verified user a decision names (VerifiedBy), "" for a
// client's own name.
func userOf(client string) string {
	user, _ := strings.CutPrefix(client, verifiedMark)
	if user == client {
		return ""
	}
	return user
}

// NotAskedError is a decision by someone a request's route does not ask.
type NotAskedError struct {
	RequestID string
	Route     string
	Asked     []string
	By        string
}

func (e *NotAskedError) Error() string {
	return fmt.Sprintf("request %s goes to %s (route %s), and %s is not among them", e.RequestID,
		strings.Join(e.Asked, ", "), e.Route, e.By)
}

// ErrNotAsked is wrapped by NotAskedError (errors.Is), and by the error of
// a decision routed to another daemon that refused it so.
var ErrNotAsked = errors.New("not asked")

// Is makes errors.Is(err, ErrNotAsked) hold.
func (e *NotAskedError) Is(target error) bool { return target == ErrNotAsked }

// checkAsked refuses a decision on p by client when p's route does not
// ask them: a user named in its Ask (or EscalateTo once escalated), or
// one of its groups. A client's own name (the bootstrap token's) is
// nobody a route names.
func (d *Daemon) checkAsked(p *permission.Pending, client string) error {
	r := p.Routing
	if r == nil {
		return nil
	}
	user := userOf(client)
	var groups []string
	if user != "" && d.groups != nil {
		groups = d.groups(user)
	}
	if user != "" && r.Asks(user, groups, p.Escalated) {
		return nil
	}
	return &NotAskedError{RequestID: p.Request.RequestID, Route: r.Route, Asked: r.Asked(p.Escalated), By: clientName(client)}
}
