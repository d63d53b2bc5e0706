package store

import "time"

// A QueuedPrompt is a prompt sent to a session that a spend cap holds
// (StatusBudget): kept, in order, until an approver releases the session.
type QueuedPrompt struct {
	SessionID string
	// Seq numbers the session's queued prompts 1, 2, 3, …; assigned by the
	// store.
	Seq       int64
	Text      string
	CreatedAt time.Time
}

// Spend is what the usage ledger holds since a time: in all, and by the
// directory (Session.Cwd) of the sessions that spent it.
type Spend struct {
	TotalUSD float64
	ByDir    map[string]float64
}

// The spend caps (the daemon's budgets.* settings) a raise applies to.
const (
	CapSession   = "session"
	CapDirectory = "directory"
	CapDaemon    = "daemon"
)

// A BudgetRaise is a spend cap an approver raised.
type BudgetRaise struct {
	Cap   string // CapSession, CapDirectory or CapDaemon
	Scope string // the session's id, the directory, or "" for the daemon
	// Day is the local day ("2006-01-02") a daily cap's raise holds for;
	// "" for a session's, which holds for its life.
	Day      string
	LimitUSD float64
	By       string // who raised it ("client:alice")
	At       time.Time
}
