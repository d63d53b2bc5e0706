package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/claudectl/claudectl/internal/serve"
)

// PruneCommand is "claudectl prune": the daemon applies its retention now.
type PruneCommand struct{ Env *Env }

// Name implements Command.
func (*PruneCommand) Name() string { return "prune" }

// Summary implements Command.
func (*PruneCommand) Summary() string {
	return "remove the events of sessions ended long ago and old audit entries (store.retention)"
}

const pruneUsage = `Usage: claudectl prune [flags]

Asks the daemon to apply its retention now, as it does every hour: the
events of the sessions that ended (closed or failed) longer ago than
store.retention's closed_sessions are removed, and the audit trail's
entries (permission decisions, clients' actions) older than its audit. The
sessions stay listed with their usage, and the audit trail keeps what was
decided and done in them until its own retention; claudectl attach shows
what is left of their events, saying how many were removed. On SQLite the
file gives the space back as it goes (incremental vacuum). It needs a
token of the admin role. With --dry-run it lists what it would remove
and removes nothing; without, it lists what it removed: the same list, when
nothing ended in between.

--closed-sessions and --audit override the settings' durations for this
run (30d, 12h, 90d12h; at least 1h).
` + clientFlagsHelp

// Run implements Command.
func (c *PruneCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var req serve.PruneRequest
	var asJSON bool
	fs := newFlagSet("prune")
	cf.register(fs)
	fs.BoolVar(&req.DryRun, "dry-run", false, "list what would be removed; remove nothing")
	fs.StringVar(&req.ClosedSessions, "closed-sessions", "", "remove the events of sessions ended longer ago than `DURATION` (default store.retention.closed_sessions)")
	fs.StringVar(&req.Audit, "audit", "", "remove the audit entries older than `DURATION` (default store.retention.audit)")
	fs.BoolVar(&asJSON, "json", false, "print the report as a JSON object")
	pos, help, err := parseClient(env, pruneUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: prune takes no arguments", pos[0])
	}
	for _, f := range []struct{ flag, v string }{{"closed-sessions", req.ClosedSessions}, {"audit", req.Audit}} {
		if f.v == "" {
			continue
		}
		if d, err := serve.ParseDays(f.v); err != nil || d < serve.MinRetention {
			return badValue(f.flag, f.v, "must be a duration of at least 1h such as 30d, 12h or 90d12h")
		}
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	res, err := dc.adminCall(ctx, "POST", "prune", req, "pruning")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return exitWith(ExitFailure, "pruning: reading the daemon's report: %v", err)
	}
	if asJSON {
		_, err := env.Stdout.Write(raw)
		return err
	}
	var rep serve.PruneReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		return exitWith(ExitFailure, "pruning: the daemon's report does not parse: %v", err)
	}
	printPrune(env.Stdout, &rep)
	return nil
}

// printPrune prints a PruneReport: one line per session, then the totals.
func printPrune(w io.Writer, rep *serve.PruneReport) {
	verb, did := "Would remove", "would be reclaimed"
	if !rep.DryRun {
		verb, did = "Removed", "reclaimed"
	}
	if rep.ClosedSessions != "" {
		if len(rep.Sessions) > 0 {
			fmt.Fprintf(w, "%-26s  %-6s  %-19s  %-15s  %s\n", "SESSION", "STATUS", "ENDED", "EVENTS", "SIZE")
		}
		for _, s := range rep.Sessions {
			fmt.Fprintf(w, "%-26s  %-6s  %-19s  %-15s  %s\n", s.ID, s.Status, s.EndedAt.Local().Format("2006-01-02 15:04:05"),
				fmt.Sprintf("%d (%d-%d)", s.Events, s.FirstSeq, s.LastSeq), humanBytes(s.Bytes))
		}
		fmt.Fprintf(w, "%s the events of %d %s ended over %s ago (before %s): %d events, %s.\n", verb, len(rep.Sessions),
			plural(len(rep.Sessions), "session", "sessions"), rep.ClosedSessions, rep.Before.Local().Format("2006-01-02 15:04"),
			rep.Events, humanBytes(rep.Bytes))
	} else {
		fmt.Fprintln(w, "Events: kept (store.retention.closed_sessions is not set).")
	}
	if rep.Audit != "" {
		fmt.Fprintf(w, "%s %d audit %s older than %s.\n", verb, rep.AuditEntries, plural(int(rep.AuditEntries), "entry", "entries"), rep.Audit)
	} else {
		fmt.Fprintln(w, "Audit trail: kept (store.retention.audit is not set).")
	}
	if !rep.DryRun && rep.ReclaimedBytes > 0 {
		fmt.Fprintf(w, "The store's file shrank by %s (%s).\n", humanBytes(rep.ReclaimedBytes), did)
	}
	if rep.Note != "" {
		fmt.Fprintf(w, "Note: %s.\n", strings.TrimSuffix(rep.Note, "."))
	}
}

// humanBytes says n bytes as "12 KiB", "3.4 MiB".
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
