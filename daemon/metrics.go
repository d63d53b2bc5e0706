package daemon

import (
	"strings"
	"sync"
	"time"

	"github.com/claudectl/claudectl/store"
)

// Stats is what the daemon counts and holds at one instant, for its
// metrics (internal/serve exposes them to Prometheus). Read when scraped:
// nothing is counted on the sessions' paths beyond the two counters of
// outcomes (decisions, cost), each a map update under a mutex at a
// decision or a turn's end.
type Stats struct {
	// CLIProcesses counts the sessions with a live CLI; Queued those
	// waiting for a slot (Options.MaxRunning).
	CLIProcesses, Queued int
	// Subscribers counts the subscriptions following sessions.
	Subscribers int
	// Pending counts the permission requests this daemon holds waiting for
	// a person; OldestPending is when the oldest was asked (zero: none).
	Pending       int
	OldestPending time.Time
	// Decisions counts the decisions audited since the daemon started, by
	// outcome and by who decided.
	Decisions map[DecisionKind]int64
	// CostUSD sums the turns' cost since the daemon started, by model (at
	// most MaxCostModels of them; the rest under OtherModel).
	CostUSD map[string]float64
	// CLIVersions counts the live sessions by their CLI's version.
	CLIVersions map[string]int
}

// A DecisionKind is what the decisions are counted by: Outcome is the
// audit's behavior ("allow", "deny", "withdrawn") and Decider
// DeciderKind of who decided.
type DecisionKind struct {
	Outcome, Decider string
}

// The deciders the decisions are counted under (DeciderKind).
const (
	DeciderPerson  = "person"  // a client answered ("client:alice")
	DeciderRule    = "rule"    // a permission rule
	DeciderTimeout = "timeout" // nobody answered in time
	DeciderCLI     = "cli"     // the CLI took the request back, or the daemon did
)

// DeciderKind maps a decision's By ("client:alice", "rule", "timeout",
// "cli", …) to one of a few kinds, so that a metric's labels stay bounded
// whoever answers.
func DeciderKind(by string) string {
	switch {
	case strings.HasPrefix(by, "client:"):
		return DeciderPerson
	case by == "rule":
		return DeciderRule
	case by == "timeout":
		return DeciderTimeout
	}
	return DeciderCLI
}

// MaxCostModels bounds the models Stats.CostUSD names: a model's name is
// whatever a session asked for, so past this many the rest are summed
// under OtherModel.
const MaxCostModels = 32

// OtherModel is the model the cost of the models past MaxCostModels is
// counted under.
const OtherModel = "other"

// counters are the daemon's outcome counters (Stats).
type counters struct {
	mu        sync.Mutex
	decisions map[DecisionKind]int64 // guarded by mu
	cost      map[string]float64     // guarded by mu
}

func (c *counters) decided(behavior, by string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.decisions == nil {
		c.decisions = map[DecisionKind]int64{}
	}
	c.decisions[DecisionKind{Outcome: behavior, Decider: DeciderKind(by)}]++
}

// turn adds a ledger record's cost, by model (the record's total under
// "" when it names no model).
func (c *counters) turn(rec *store.UsageRecord) {
	if rec == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cost == nil {
		c.cost = map[string]float64{}
	}
	add := func(model string, usd float64) {
		if _, ok := c.cost[model]; !ok && len(c.cost) >= MaxCostModels {
			model = OtherModel
		}
		c.cost[model] += usd
	}
	if len(rec.Models) == 0 {
		if rec.CostUSD != 0 {
			add("", rec.CostUSD)
		}
		return
	}
	for name, m := range rec.Models {
		add(name, m.CostUSD)
	}
}

// Stats returns what the daemon counts and holds now.
func (d *Daemon) Stats() Stats {
	s := Stats{CLIProcesses: d.Running(), Queued: d.Queued()}
	d.mu.Lock()
	for _, h := range d.hubs {
		s.Subscribers += h.subs
	}
	d.mu.Unlock()
	ps := d.broker.Pending("")
	s.Pending = len(ps)
	if len(ps) > 0 {
		s.OldestPending = ps[0].Created // oldest first
	}
	d.counts.mu.Lock()
	s.Decisions = make(map[DecisionKind]int64, len(d.counts.decisions))
	for k, v := range d.counts.decisions {
		s.Decisions[k] = v
	}
	s.CostUSD = make(map[string]float64, len(d.counts.cost))
	for k, v := range d.counts.cost {
		s.CostUSD[k] = v
	}
	d.counts.mu.Unlock()
	s.CLIVersions = map[string]int{}
	for _, v := range d.Compatibility().Versions {
		if v.LiveSessions > 0 && plainVersion(v.Version) && (len(s.CLIVersions) < maxVersions || s.CLIVersions[v.Version] > 0) {
			s.CLIVersions[v.Version] += v.LiveSessions
		}
	}
	return s
}

// maxVersions bounds the CLI versions Stats names: a remote worker's CLI
// says what it likes in its system/init.
const maxVersions = 16

// plainVersion reports whether v looks like a version ("2.1.330",
// "2.1.0-beta.1"): a metric's label takes it as it is.
func plainVersion(v string) bool {
	if v == "" || len(v) > 40 {
		return false
	}
	for _, r := range v {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '-' || r == '+') {
			return false
		}
	}
	return true
}
