package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// AuditCommand is "claudectl audit": who did what through the API.
type AuditCommand struct{ Env *Env }

// Name implements Command.
func (*AuditCommand) Name() string { return "audit" }

// Summary implements Command.
func (*AuditCommand) Summary() string { return "show who did what through the daemon's API (admin)" }

const auditUsage = `Usage: claudectl audit [--since D] [--user U] [--session ID] [--limit N] [--json]

Shows the audit trail, newest first: each session created, prompt sent,
interrupt, close, decision, rule and token change, allowed or refused, with
the user and token the daemon verified, the client's kind (cli, page, api)
and the address it came from. --since takes a duration back from now (90m,
24h, 7d) or a date (2026-01-31, or RFC 3339). Needs an admin token.
` + clientFlagsHelp

// parseSince reads --since: a duration back from now or a date.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := parseLifetime(s); err == nil {
		if d < 0 {
			return time.Time{}, badValue("since", s, "a duration back from now (24h, 7d) or a date")
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, badValue("since", s, "a duration back from now (90m, 24h, 7d) or a date (2026-01-31, RFC 3339)")
}

// auditJSON is one entry in audit --json.
type auditJSON struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	User       string    `json:"user"`
	Token      string    `json:"token"`
	ClientKind string    `json:"client_kind"`
	ClientHint string    `json:"client_hint,omitempty"`
	Remote     string    `json:"remote"`
	Action     string    `json:"action"`
	SessionID  string    `json:"session_id,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	Outcome    string    `json:"outcome"`
}

// Run implements Command.
func (c *AuditCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var asJSON bool
	var since, user, session string
	var limit int
	fs := newFlagSet("audit")
	fs.StringVar(&since, "since", "", "only entries since `D` (24h, 7d, 2026-01-31)")
	fs.StringVar(&user, "user", "", "only the entries of `USER`")
	fs.StringVar(&session, "session", "", "only the entries of session `ID`")
	fs.IntVar(&limit, "limit", 100, "at most `N` entries (up to 1000)")
	fs.BoolVar(&asJSON, "json", false, "print the entries as a JSON array")
	cf.register(fs)
	pos, help, err := parseClient(env, auditUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: audit takes no arguments (--session ID selects a session)", pos[0])
	}
	if limit < 1 || limit > 1000 {
		return badValue("limit", fmt.Sprint(limit), "1 to 1000")
	}
	req := &v1.ListAuditRequest{User: user, SessionId: session, Limit: int32(limit)}
	if since != "" {
		t, err := parseSince(since, time.Now())
		if err != nil {
			return err
		}
		req.Since = timestamppb.New(t)
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	res, err := dc.auth.ListAudit(ctx, connect.NewRequest(req))
	if err != nil {
		return dc.explain(err, "reading the audit trail")
	}
	list := make([]auditJSON, 0, len(res.Msg.Entries))
	for _, e := range res.Msg.Entries {
		list = append(list, auditJSON{ID: e.Id, At: e.GetAt().AsTime(), User: e.User, Token: e.Token, ClientKind: e.ClientKind,
			ClientHint: e.ClientHint, Remote: e.Remote, Action: e.Action, SessionID: e.SessionId, Detail: e.Detail, Outcome: e.Outcome})
	}
	if asJSON {
		return writeJSON(env.Stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(env.Stdout, "No audit entries.")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tUSER\tTOKEN\tCLIENT\tFROM\tACTION\tSESSION\tOUTCOME\tDETAIL")
	for _, e := range list {
		client := e.ClientKind
		if e.ClientHint != "" {
			client += " (" + clipCell(e.ClientHint, 24) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.Local().Format(time.DateTime), e.User, e.Token, client,
			orDash(e.Remote), e.Action, orDash(e.SessionID), e.Outcome, clipCell(e.Detail, 80))
	}
	return tw.Flush()
}

// clipCell cuts a table cell to n runes, control characters made
// visible: what a client sent never moves the terminal's cursor.
func clipCell(s string, n int) string {
	r := []rune(s)
	for i, c := range r {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			r[i] = '?'
		}
	}
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return string(r)
}
