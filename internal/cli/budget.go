package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// BudgetCommand is "claudectl budget [raise SESSION_ID USD | allow
// SESSION_ID]": the spend against the daemon's caps, and what releases a
// session held at one.
type BudgetCommand struct{ Env *Env }

// Name implements Command.
func (*BudgetCommand) Name() string { return "budget" }

// Summary implements Command.
func (*BudgetCommand) Summary() string {
	return "show spend against the daemon's caps; release a session held at one"
}

const budgetUsage = `Usage: claudectl budget [flags]
       claudectl budget raise [flags] SESSION_ID USD
       claudectl budget allow [flags] SESSION_ID

Shows the spend against every cap of the daemon (budgets.session_usd,
budgets.directory_usd_per_day, budgets.daemon_usd_per_day in its
settings): the daemon's and each directory's since the day began, each
live or held session's, and the sessions a cap holds. A held session ran
its turn to the end; no other starts, and the prompts sent to it wait.

raise sets the cap that holds SESSION_ID to USD dollars (a daily cap for
today, and so for every session under it); allow lets SESSION_ID run one
more turn over its cap. Its waiting prompts then run. SESSION_ID may be a
unique start of the id.

  --json   print the caps and the holds as JSON (the bare command)
` + clientFlagsHelp

// Run implements Command.
func (c *BudgetCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	if len(args) > 0 && (args[0] == "raise" || args[0] == "allow") {
		return c.release(ctx, env, args[0], args[1:])
	}
	var cf clientFlags
	var asJSON bool
	fs := newFlagSet("budget")
	fs.BoolVar(&asJSON, "json", false, "print the caps and holds as JSON")
	cf.register(fs)
	pos, help, err := parseClient(env, budgetUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: budget shows the caps; budget raise SESSION_ID USD or budget allow SESSION_ID releases a session", pos[0])
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	res, err := dc.budget.GetBudget(ctx, connect.NewRequest(&v1.GetBudgetRequest{}))
	if err != nil {
		return dc.explain(err, "reading the budgets")
	}
	if asJSON {
		return writeJSON(env.Stdout, res.Msg)
	}
	b := res.Msg
	if len(b.Caps) == 0 && len(b.Holds) == 0 {
		fmt.Fprintln(env.Stdout, "The daemon has no spend caps (budgets.* in its settings.json).")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CAP\tSCOPE\tSPENT\tLIMIT")
	for _, c := range b.Caps {
		scope := c.Scope
		if c.Cap == "daemon" {
			scope = "all sessions"
		}
		if c.Cap != "session" {
			scope += " (today)"
		}
		limit := "-"
		if c.LimitUsd > 0 {
			limit = dollars(c.LimitUsd)
			if c.Raised {
				limit += " (raised)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Cap, scope, dollars(c.SpentUsd), limit)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printHolds(env.Stdout, b.Holds)
	return nil
}

// printHolds lists the sessions held at a cap, with what releases each.
func printHolds(w io.Writer, holds []*v1.BudgetHold) {
	if len(holds) == 0 {
		return
	}
	fmt.Fprintln(w, "\nHeld at a spend cap:")
	now := time.Now()
	for _, h := range holds {
		kept := ""
		switch n := h.QueuedPrompts; n {
		case 0:
		case 1:
			kept = ", 1 prompt waiting"
		default:
			kept = fmt.Sprintf(", %d prompts waiting", n)
		}
		age := ""
		if h.Since != nil {
			age = ", " + elapsedText(now.Sub(h.Since.AsTime()))
		}
		fmt.Fprintf(w, "  %s  %s (%s cap%s%s)\n", h.SessionId, h.Detail, h.GetCap().GetCap(), kept, age)
		fmt.Fprintf(w, "    claudectl budget raise %s USD   raises it; claudectl budget allow %s   one more turn\n", h.SessionId, h.SessionId)
	}
}

// dollars writes an amount of dollars: "$5.00", "$0.0123".
func dollars(v float64) string {
	if v != 0 && v < 0.01 && v > -0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// release is budget raise and budget allow.
func (c *BudgetCommand) release(ctx context.Context, env *Env, verb string, args []string) error {
	var cf clientFlags
	fs := newFlagSet("budget " + verb)
	cf.register(fs)
	pos, help, err := parseClient(env, budgetUsage, fs, args)
	if help || err != nil {
		return err
	}
	want := 2
	if verb == "allow" {
		want = 1
	}
	switch {
	case len(pos) < want && verb == "raise":
		return usagef("budget raise needs SESSION_ID and USD, the new cap in dollars: claudectl budget raise SESSION_ID 10")
	case len(pos) < want:
		return usagef("budget allow needs the SESSION_ID of a held session (claudectl budget lists them)")
	case len(pos) > want:
		return usagef("unexpected argument %q", pos[want])
	}
	req := &v1.RaiseBudgetRequest{OneTurn: verb == "allow", Client: clientName("budget")}
	if verb == "raise" {
		usd, err := strconv.ParseFloat(strings.TrimPrefix(pos[1], "$"), 64)
		if err != nil || usd <= 0 {
			return usagef("invalid USD %q: the new cap, a number of dollars above 0, such as 10 or 2.50", pos[1])
		}
		req.LimitUsd = usd
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	if req.SessionId, err = resolveSession(ctx, dc, pos[0]); err != nil {
		return err
	}
	res, err := dc.budget.RaiseBudget(ctx, connect.NewRequest(req))
	if err != nil {
		if connect.CodeOf(err) == connect.CodeNotFound {
			return noSession(req.SessionId)
		}
		return dc.explain(err, "releasing session "+req.SessionId)
	}
	cp := res.Msg.GetCap()
	what := "one more turn for session " + req.SessionId
	if verb == "raise" {
		scope := cp.Scope
		if cp.Cap == "daemon" {
			scope = "the daemon"
		}
		what = fmt.Sprintf("the %s cap of %s raised to %s", cp.Cap, scope, dollars(cp.LimitUsd))
		if cp.Cap != "session" {
			what += " for today"
		}
	}
	fmt.Fprintf(env.Stdout, "Released: %s; %s.\n", what, releasedText(res.Msg.Released))
	return nil
}

func releasedText(ids []string) string {
	switch len(ids) {
	case 0:
		return "no session is waiting any more"
	case 1:
		return "session " + ids[0] + " goes on"
	default:
		return "sessions " + strings.Join(ids, ", ") + " go on"
	}
}
