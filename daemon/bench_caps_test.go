package daemon_test

import (
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// BenchmarkTurnCaps measures what the caps of issue 41 add to a turn: two
// daemons, one without caps and one with spend caps (budgets.*, never
// reached) and resource limits (sessions.limits, never reached), each with
// a session; each iteration runs a turn in one and then in the other, each
// first in turn (so the machine's load, and what a turn leaves running,
// weigh on both alike), from Send to the turn's end
// (its result counted in the session's totals). It reports both and the
// difference.
func BenchmarkTurnCaps(b *testing.B) {
	plain := daemontest.Start(b, nil)
	opts := &daemontest.Options{Budgets: daemon.Budgets{SessionUSD: 1e6, DirectoryUSDPerDay: 1e6, DaemonUSDPerDay: 1e6}}
	limits := claude.ResourceLimits{MemoryMax: 8 << 30, PIDsMax: 4096}
	if claude.CheckLimits(limits) == nil {
		opts.Policy.Limits = limits
	} else {
		b.Log("resource limits cannot be applied here: spend caps only")
	}
	capped := daemontest.Start(b, opts)
	type run struct {
		td    *daemontest.Daemon
		id    string
		turns int64
		took  time.Duration
	}
	runs := []*run{{td: plain}, {td: capped}}
	for _, r := range runs {
		s, err := r.td.D.Create(r.td.Ctx, &daemon.SessionOptions{Cwd: b.TempDir()}, "warm up")
		if err != nil {
			b.Fatal(err)
		}
		r.id, r.turns = s.ID, 1
		waitTurnsB(b, r.td, r.id, 1)
	}
	b.ResetTimer()
	for i := range b.N {
		order := runs
		if i%2 == 1 { // in turn first: what a turn leaves running weighs on both alike
			order = []*run{runs[1], runs[0]}
		}
		for _, r := range order {
			t0 := time.Now()
			if err := r.td.D.Send(r.td.Ctx, r.id, "next"); err != nil {
				b.Fatal(err)
			}
			r.turns++
			waitTurnsB(b, r.td, r.id, r.turns)
			r.took += time.Since(t0)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(runs[0].took), "plain-ms/turn")
	b.ReportMetric(ms(runs[1].took), "capped-ms/turn")
	b.ReportMetric(ms(runs[1].took-runs[0].took), "extra-ms/turn")
}

// waitTurnsB waits until session id has n turns in its totals and is idle.
func waitTurnsB(b *testing.B, td *daemontest.Daemon, id string, n int64) {
	for {
		s, err := td.D.Session(td.Ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if s.Totals.Turns >= n && s.Status == "idle" {
			return
		}
		select {
		case <-td.Ctx.Done():
			b.Fatalf("session %s: %d turns, %s", id, s.Totals.Turns, s.Status)
		case <-time.After(2 * time.Millisecond):
		}
	}
}
