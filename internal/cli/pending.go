package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// PendingCommand is "claudectl pending": the permission requests waiting
// for a decision.
type PendingCommand struct{ Env *Env }

// Name implements Command.
func (*PendingCommand) Name() string { return "pending" }

// Summary implements Command.
func (*PendingCommand) Summary() string { return "list the permission requests waiting for a decision" }

const pendingUsage = `Usage: claudectl pending [flags]

Lists the permission requests the daemon's sessions wait on: the request's
id, its session, the tool, what it would do (one line) and how long it has
waited. Answer one with claudectl approve or claudectl deny and its id, or
a unique prefix of it; claudectl attach SESSION_ID shows it in full. A
request a route of the daemon's (permissions.routes) sends to chosen
people says so below the list: who is asked and, under a two-person rule,
how many have allowed ("1 of 2 allowed"). Below
the list, what claudectl approve --always would do besides allowing a
request: the rules the daemon would store, exactly. A
question Claude asks (the AskUserQuestion tool) is answered in claudectl
attach SESSION_ID, or refused with claudectl deny. Below them, the
sessions a spend cap holds (claudectl budget raise or allow releases them).
` + clientFlagsHelp

// pendingJSON is one request in pending --json.
type pendingJSON struct {
	RequestID string          `json:"request_id"`
	SessionID string          `json:"session_id"`
	Tool      string          `json:"tool"`
	Summary   string          `json:"summary,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Since     *time.Time      `json:"since,omitempty"` // when it was asked, if the session's log says
	// Always is what approve --always would do besides allowing it: the
	// rules the daemon would store, the changes to the CLI process.
	Always []string `json:"always,omitempty"`
	// Route is the routing rule that says who is asked (permissions.routes):
	// who may decide, how many must allow, who allowed so far.
	Route *routeJSON `json:"route,omitempty"`
}

// routeJSON is a request's routing in pending --json.
type routeJSON struct {
	Name       string   `json:"name"`
	Asked      []string `json:"asked,omitempty"`
	Needed     int      `json:"approvals_needed,omitempty"`
	ApprovedBy []string `json:"approved_by,omitempty"`
	Escalated  bool     `json:"escalated,omitempty"`
}

// routeOf is r's routing for pending, nil without a route.
func routeOf(r *v1.PermissionRequest) *routeJSON {
	rt := r.GetRouting()
	if rt == nil {
		return nil
	}
	return &routeJSON{Name: rt.Route, Asked: rt.Asked, Needed: int(rt.ApprovalsNeeded), ApprovedBy: rt.ApprovedBy, Escalated: rt.Escalated}
}

// routeText says a request's routing in a line: "route pushes: asks
// group:ops, 1 of 2 allowed (alice)".
func routeText(rt *routeJSON) string {
	s := "route " + rt.Name
	if len(rt.Asked) > 0 {
		s += ": asks " + strings.Join(rt.Asked, ", ")
	}
	if rt.Escalated {
		s += " (escalated)"
	}
	if rt.Needed > 1 {
		s += fmt.Sprintf(", %d of %d allowed", len(rt.ApprovedBy), rt.Needed)
		if len(rt.ApprovedBy) > 0 {
			s += " (" + strings.Join(rt.ApprovedBy, ", ") + ")"
		}
	}
	return s
}

// Run implements Command.
func (c *PendingCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var asJSON bool
	var session string
	fs := newFlagSet("pending")
	fs.BoolVar(&asJSON, "json", false, "print the requests as a JSON array")
	fs.StringVar(&session, "session", "", "only the requests of the session `ID`")
	cf.register(fs)
	pos, help, err := parseClient(env, pendingUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: pending takes no arguments (--session ID picks a session)", pos[0])
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	res, err := dc.perms.ListPending(ctx, connect.NewRequest(&v1.ListPendingRequest{SessionId: session}))
	if err != nil {
		if connect.CodeOf(err) == connect.CodeNotFound && session != "" {
			return noSession(session)
		}
		return dc.explain(err, "listing the pending requests")
	}
	reqs := res.Msg.Requests
	if len(reqs) == 0 && session != "" {
		// The daemon lists nothing for a session it does not know.
		if _, err := dc.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: session})); connect.CodeOf(err) == connect.CodeNotFound {
			return noSession(session)
		}
	}
	since := askedAt(ctx, dc, reqs)
	list := make([]pendingJSON, 0, len(reqs))
	for _, r := range reqs {
		p := pendingJSON{RequestID: r.RequestId, SessionID: r.SessionId, Tool: r.ToolName,
			Summary: toolSummary(r.ToolName, r.Input), Input: jsonOrString(r.Input), Always: describeAlways(r), Route: routeOf(r)}
		if t, ok := since[r.RequestId]; ok {
			p.Since = &t
		}
		list = append(list, p)
	}
	if asJSON {
		return writeJSON(env.Stdout, list)
	}
	holds := res.Msg.BudgetHolds
	defer printHolds(env.Stdout, holds) // the sessions a spend cap holds wait for an approver too
	if len(list) == 0 && len(holds) > 0 {
		return nil
	}
	if len(list) == 0 {
		if session != "" {
			fmt.Fprintf(env.Stdout, "No pending requests in session %s.\n", session)
		} else {
			fmt.Fprintln(env.Stdout, "No pending requests.")
		}
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REQUEST\tSESSION\tTOOL\tAGE\tSUMMARY")
	for _, p := range list {
		age := "-"
		if p.Since != nil {
			age = elapsedText(now.Sub(*p.Since))
		}
		summary := strings.ReplaceAll(p.Summary, "\t", " ")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.RequestID, p.SessionID, p.Tool, age, orDash(summary))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Who is asked, and how many allows a two-person rule still needs.
	for _, p := range list {
		if p.Route != nil {
			fmt.Fprintf(env.Stdout, "\n%s: %s\n", p.RequestID, routeText(p.Route))
		}
	}
	// What approve --always would store, before anyone agrees to it.
	for _, p := range list {
		if len(p.Always) > 0 {
			fmt.Fprintf(env.Stdout, "\napprove --always %s would also:\n", p.RequestID)
			for _, a := range p.Always {
				fmt.Fprintf(env.Stdout, "  - %s\n", a)
			}
		}
	}
	return nil
}

// askedAt finds when each request was asked, from its event in its
// session's log (the API does not say). Requests it cannot find within a
// few seconds are left out.
func askedAt(ctx context.Context, dc *daemonClient, reqs []*v1.PermissionRequest) map[string]time.Time {
	want := map[string][]string{} // session: request ids
	for _, r := range reqs {
		want[r.SessionId] = append(want[r.SessionId], r.RequestId)
	}
	found := map[string]time.Time{}
	for sid, ids := range want {
		sres, err := dc.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: sid}))
		if err != nil {
			continue
		}
		last := sres.Msg.Session.LastSeq
		if last == 0 {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		stream, err := dc.sessions.Subscribe(sctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: sid}))
		if err != nil {
			cancel()
			continue
		}
		left := len(ids)
		for left > 0 && stream.Receive() {
			ev := stream.Msg().GetEvent()
			if pr := ev.GetPermissionRequest(); pr != nil && slices.Contains(ids, pr.RequestId) {
				if _, dup := found[pr.RequestId]; !dup {
					left--
				}
				found[pr.RequestId] = ev.GetTime().AsTime()
			}
			if ev.GetSeq() >= last {
				break // the history is read: what follows is new
			}
		}
		stream.Close()
		cancel()
	}
	return found
}

// noSession is the error for a session id the daemon does not know.
func noSession(id string) error {
	return exitWith(ExitFailure, "no session %s (claudectl sessions lists them)", id)
}

// resolveRequest returns the pending request whose id is id or, failing
// that, starts with id; several are a usage error (exit 2) listing them.
// With none, or when the daemon cannot list its requests, it returns a
// request with id alone (RequestId), for Decide to say what is wrong.
func resolveRequest(ctx context.Context, dc *daemonClient, id string) (*v1.PermissionRequest, error) {
	res, err := dc.perms.ListPending(ctx, connect.NewRequest(&v1.ListPendingRequest{}))
	if err != nil {
		return &v1.PermissionRequest{RequestId: id}, nil // Decide says what is wrong
	}
	var matches []*v1.PermissionRequest
	for _, r := range res.Msg.Requests {
		if r.RequestId == id {
			return r, nil
		}
		if strings.HasPrefix(r.RequestId, id) {
			matches = append(matches, r)
		}
	}
	switch len(matches) {
	case 0:
		return &v1.PermissionRequest{RequestId: id}, nil // Decide says whether it was decided already, and by whom
	case 1:
		return matches[0], nil
	}
	var b strings.Builder
	for _, r := range matches {
		fmt.Fprintf(&b, "\n  %s  %s in session %s", r.RequestId, r.ToolName, r.SessionId)
		if s := toolSummary(r.ToolName, r.Input); s != "" {
			fmt.Fprintf(&b, ": %s", s)
		}
	}
	return nil, exitWith(ExitUsage, "%q is the start of %d pending requests; give more of the id:%s", id, len(matches), b.String())
}

// noRequest is the error for a request that is not pending.
func noRequest(id string) error {
	return exitWith(ExitFailure, "no pending request %s (claudectl pending lists them)", id)
}
