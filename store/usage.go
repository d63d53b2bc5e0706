package store

import (
	"fmt"
	"time"
)

// A UsageRecord is one turn in the usage ledger: what the turn that ended
// with a result line cost.
//
// The CLI reports total_cost_usd and modelUsage cumulatively for its
// process, so a record holds the difference from the previous result of the
// same process (see [TurnUsage]); a new process (a resume) starts again
// from zero.
type UsageRecord struct {
	SessionID string
	// Turn numbers the session's records 1, 2, 3, …; assigned by the store.
	Turn int64
	// Process is the generation of the CLI process that reported the turn
	// (see Session.Process).
	Process int64
	// EventSeq is the seq of the result event, 0 if not given.
	EventSeq int64
	Time     time.Time
	// Subtype and IsError are the result's own.
	Subtype    string
	IsError    bool
	DurationMS int64

	CostUSD          float64
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	// Models is the turn's usage per model; models the turn did not use
	// are left out.
	Models map[string]ModelUsage
}

// A ResultFollow is what AppendResultAsync stores with a result line
// besides its ledger entry, in the same transaction: a turn's end in one
// commit rather than one for the result and another for the status.
type ResultFollow struct {
	// Events, if not nil, makes events of the result's session to store
	// right after it, from its ledger record and the session after the
	// turn (a usage report, a status event; as done gets it, see
	// Store.AppendResultAsync). It runs in the store's
	// transaction, so it must not block; it may run more than once (a
	// batch is written again when one of its requests fails) and must make
	// fresh events each time: those of its last call are the ones stored,
	// each with its Seq, once done is called without an error. The store
	// applies its defaults and limits to them as Append does; an error
	// fails the request.
	Events func(rec *UsageRecord, s *Session) ([]*Event, error)
	// Update, if not nil, is applied to the session with the ledger's
	// totals, in the same transaction (a status change); the engine
	// applies it (Make does not).
	Update *SessionUpdate
}

// Make makes f's events for the result ev, with its ledger record and
// session, in an engine's AppendResultAsync transaction: it runs
// f.Events, checks that what they made is of ev's session, prepares each
// event with prepare (the engine's PrepareEvent, given the time), and
// returns the events to store after ev.
func (f *ResultFollow) Make(ev *Event, rec *UsageRecord, s *Session, prepare func(*Event, time.Time) error) ([]*Event, error) {
	var evs []*Event
	if f.Events != nil {
		var err error
		if evs, err = f.Events(rec, s); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	for _, m := range evs {
		if m.SessionID != ev.SessionID {
			return nil, fmt.Errorf("an event following the result of session %q is of session %q: %w", ev.SessionID, m.SessionID, ErrInvalid)
		}
		if err := prepare(m, now); err != nil {
			return nil, err
		}
	}
	return evs, nil
}

// ModelUsage is one model's share of a turn.
type ModelUsage struct {
	InputTokens       int64   `json:"input_tokens,omitempty"`
	OutputTokens      int64   `json:"output_tokens,omitempty"`
	CacheReadTokens   int64   `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens  int64   `json:"cache_write_tokens,omitempty"`
	WebSearchRequests int64   `json:"web_search_requests,omitempty"`
	CostUSD           float64 `json:"cost_usd,omitempty"`
}

func (m ModelUsage) sub(o ModelUsage) ModelUsage {
	return ModelUsage{
		InputTokens:       m.InputTokens - o.InputTokens,
		OutputTokens:      m.OutputTokens - o.OutputTokens,
		CacheReadTokens:   m.CacheReadTokens - o.CacheReadTokens,
		CacheWriteTokens:  m.CacheWriteTokens - o.CacheWriteTokens,
		WebSearchRequests: m.WebSearchRequests - o.WebSearchRequests,
		CostUSD:           m.CostUSD - o.CostUSD,
	}
}

func (m ModelUsage) negative() bool {
	return m.InputTokens < 0 || m.OutputTokens < 0 || m.CacheReadTokens < 0 ||
		m.CacheWriteTokens < 0 || m.WebSearchRequests < 0 || m.CostUSD < 0
}

// UsageInput is a result line to enter in the ledger.
type UsageInput struct {
	SessionID string
	// Process is the generation of the CLI process that wrote the result,
	// as NewProcess returned it. Results of one process are cumulative;
	// the first result of a new generation is counted from zero.
	Process int64
	// Continues, when set, is the session whose last recorded counters
	// the process may have taken up: a CLI started with --resume (the
	// session itself) or --resume --fork-session (the session forked)
	// can restore the totals its conversation's last process saved, and
	// go on counting from them. The first result of such a process counts
	// from those counters when it is at least them in every one of them
	// (see Continued), else from zero.
	Continues string
	EventSeq  int64
	// Time is when the result arrived; zero means now.
	Time   time.Time
	Result ResultUsage
}

// ResultUsage is what a result line says about spending, in the store's
// terms (the daemon reads it from the CLI's result message).
type ResultUsage struct {
	// Subtype, IsError and DurationMS are the result's own.
	Subtype    string
	IsError    bool
	DurationMS int64
	// Cumulative is total_cost_usd and modelUsage: what the process has
	// spent so far.
	Cumulative Cumulative
	// Turn is the result's own per-turn token count ("usage"), used when
	// it has no modelUsage; nil when it has none.
	Turn *ModelUsage
}

// Cumulative is what one CLI process has reported spending so far. The
// store keeps the last one per session and process to compute the next
// turn's share.
type Cumulative struct {
	CostUSD float64               `json:"cost_usd"`
	Models  map[string]ModelUsage `json:"models,omitempty"`
}

// TurnUsage fills the cost and token fields of rec with the share of the
// turn whose result is res, given prev, the cumulative counters of the
// previous result of the same process (zero for a process's first turn).
//
// The share is cur − prev, where cur = res.Cumulative. If any counter of
// cur is below prev (a model missing, a cost that went down), the CLI
// started counting again and the whole of cur is the turn's. Tokens are the
// sum over models; a result without modelUsage falls back on its per-turn
// usage field. A result with total_cost_usd of zero but model costs takes
// the sum of the model costs.
func TurnUsage(rec *UsageRecord, prev Cumulative, res ResultUsage) {
	cur := res.Cumulative
	if reset(prev, cur) {
		prev = Cumulative{}
	}
	rec.Models = nil
	rec.InputTokens, rec.OutputTokens, rec.CacheReadTokens, rec.CacheWriteTokens = 0, 0, 0, 0
	var modelCost float64
	for name, m := range cur.Models {
		d := m.sub(prev.Models[name])
		if d == (ModelUsage{}) {
			continue
		}
		if rec.Models == nil {
			rec.Models = make(map[string]ModelUsage)
		}
		rec.Models[name] = d
		rec.InputTokens += d.InputTokens
		rec.OutputTokens += d.OutputTokens
		rec.CacheReadTokens += d.CacheReadTokens
		rec.CacheWriteTokens += d.CacheWriteTokens
		modelCost += d.CostUSD
	}
	if len(cur.Models) == 0 && res.Turn != nil {
		rec.InputTokens = res.Turn.InputTokens
		rec.OutputTokens = res.Turn.OutputTokens
		rec.CacheReadTokens = res.Turn.CacheReadTokens
		rec.CacheWriteTokens = res.Turn.CacheWriteTokens
	}
	rec.CostUSD = cur.CostUSD - prev.CostUSD
	if cur.CostUSD == 0 {
		rec.CostUSD = modelCost
	}
}

// Continued reports whether cur, the first result of a process that may
// have restored base (UsageInput.Continues), goes on from base: base
// records something and cur is at least base in every counter. A CLI that
// restored nothing and spent more in its first turn than its conversation
// had before, in every counter, would be taken for one that did: its
// first turn is then counted short by base.
func Continued(base, cur Cumulative) bool {
	if base.CostUSD == 0 && len(base.Models) == 0 {
		return false
	}
	return !reset(base, cur)
}

// reset reports whether cur cannot follow prev in one process.
func reset(prev, cur Cumulative) bool {
	if cur.CostUSD < prev.CostUSD {
		return true
	}
	for name, p := range prev.Models {
		c, ok := cur.Models[name]
		if !ok || c.sub(p).negative() {
			return true
		}
	}
	return false
}
