// Package activity sums the usage ledger per day for the page's plots
// (the Activity RPC): spend by directory and by model, turns and tokens,
// and the sessions started by the status they have now.
package activity

import (
	"cmp"
	"slices"
	"time"

	"github.com/claudectl/claudectl/store"
)

// The bounds of a summary.
const (
	DefaultDays = 30
	MaxDays     = 366
	// MaxSeries is how many directories or models get a series of their
	// own; the others are summed as "other".
	MaxSeries = 8
	// MaxRecords is how many ledger entries a summary reads at most.
	MaxRecords = 200_000
)

// Other names the series that sums the directories or models past
// MaxSeries.
const Other = "other"

// A Series is one value per day.
type Series struct {
	Name   string
	Values []float64
}

// A Summary is what the Activity RPC answers.
type Summary struct {
	Days             []string // YYYY-MM-DD, oldest first
	CostByCwd        []Series // most spent first, Other last
	CostByModel      []Series
	Turns            Series
	Tokens           []Series // input, output, cache read, cache write
	SessionsByStatus []Series // sessions started each day, by their status now
	Truncated        bool
}

// Options says which days to sum: Days days up to and including the day of
// Now, in Zone.
type Options struct {
	Days int
	Now  time.Time
	Zone *time.Location
}

// Start returns the first instant of the range o describes.
func (o Options) Start() time.Time {
	now := o.Now.In(o.Zone)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, o.Zone)
	return today.AddDate(0, 0, -(o.Days - 1))
}

// Summarize sums recs (the ledger entries since o.Start()) per day; the
// sessions give each entry its directory (and its model when the entry
// names none), and are counted by the day they started. truncated says
// recs were cut short.
func Summarize(recs []*store.UsageRecord, sessions []*store.Session, o Options, truncated bool) *Summary {
	start := o.Start()
	days := make([]string, o.Days)
	for i := range days {
		days[i] = start.AddDate(0, 0, i).Format(time.DateOnly)
	}
	day := func(t time.Time) int {
		t = t.In(o.Zone)
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, o.Zone)
		// Whole days between two local midnights, whatever the DST.
		i := int((d.Sub(start) + 12*time.Hour) / (24 * time.Hour))
		if i < 0 || i >= o.Days {
			return -1
		}
		return i
	}
	byID := make(map[string]*store.Session, len(sessions))
	for _, s := range sessions {
		byID[s.ID] = s
	}
	cwd := map[string][]float64{}
	model := map[string][]float64{}
	add := func(m map[string][]float64, k string, i int, v float64) {
		if m[k] == nil {
			m[k] = make([]float64, o.Days)
		}
		m[k][i] += v
	}
	sum := &Summary{Days: days, Truncated: truncated, Turns: Series{Name: "turns", Values: make([]float64, o.Days)}}
	tokens := make([][]float64, 4)
	for i := range tokens {
		tokens[i] = make([]float64, o.Days)
	}
	for _, r := range recs {
		i := day(r.Time)
		if i < 0 {
			continue
		}
		dir, fallback := "(a deleted session)", ""
		if s := byID[r.SessionID]; s != nil {
			dir, fallback = s.Cwd, s.Model
		}
		add(cwd, dir, i, r.CostUSD)
		if len(r.Models) == 0 {
			add(model, cmp.Or(fallback, "default"), i, r.CostUSD)
		}
		for m, u := range r.Models {
			add(model, m, i, u.CostUSD)
		}
		sum.Turns.Values[i]++
		tokens[0][i] += float64(r.InputTokens)
		tokens[1][i] += float64(r.OutputTokens)
		tokens[2][i] += float64(r.CacheReadTokens)
		tokens[3][i] += float64(r.CacheWriteTokens)
	}
	sum.CostByCwd, sum.CostByModel = top(cwd, o.Days), top(model, o.Days)
	for i, n := range []string{"input", "output", "cache read", "cache write"} {
		sum.Tokens = append(sum.Tokens, Series{Name: n, Values: tokens[i]})
	}
	status := map[string][]float64{}
	for _, s := range sessions {
		if i := day(s.CreatedAt); i >= 0 {
			add(status, string(s.Status), i, 1)
		}
	}
	for _, st := range []store.SessionStatus{store.StatusRunning, store.StatusWaiting, store.StatusIdle, store.StatusQueued,
		store.StatusStarting, store.StatusSuspended, store.StatusInterrupted, store.StatusClosed, store.StatusFailed} {
		if v := status[string(st)]; v != nil {
			sum.SessionsByStatus = append(sum.SessionsByStatus, Series{Name: string(st), Values: v})
		}
	}
	return sum
}

// top returns m's series, the largest total first, those past MaxSeries
// summed as Other.
func top(m map[string][]float64, days int) []Series {
	var all []Series
	for k, v := range m {
		all = append(all, Series{Name: k, Values: v})
	}
	total := func(s Series) (t float64) {
		for _, v := range s.Values {
			t += v
		}
		return t
	}
	slices.SortFunc(all, func(a, b Series) int {
		return cmp.Or(cmp.Compare(total(b), total(a)), cmp.Compare(a.Name, b.Name))
	})
	if len(all) <= MaxSeries {
		return all
	}
	other := Series{Name: Other, Values: make([]float64, days)}
	for _, s := range all[MaxSeries-1:] {
		for i, v := range s.Values {
			other.Values[i] += v
		}
	}
	return append(all[:MaxSeries-1], other)
}
