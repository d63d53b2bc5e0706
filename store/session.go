package store

import (
	"encoding/json"
	"time"
)

// SessionStatus is where a session is in its life.
type SessionStatus string

// The session statuses. A session moves starting → running ⇄ idle and ends
// closed or failed; interrupted marks one whose CLI process died with the
// daemon, suspended one whose CLI the daemon closed (idle too long, the
// daemon stopping, the store failing), both of which a later prompt
// resumes (claude --resume); queued one that waits for a slot to start
// its CLI; budget one that a spend cap holds (no turn starts; its prompts
// wait in QueuedPrompts until an approver releases it).
const (
	StatusStarting    SessionStatus = "starting"    // the CLI process is being started
	StatusRunning     SessionStatus = "running"     // a turn is in progress
	StatusIdle        SessionStatus = "idle"        // the CLI waits for a prompt
	StatusInterrupted SessionStatus = "interrupted" // the daemon stopped under it; resumable
	StatusClosed      SessionStatus = "closed"      // ended on request
	StatusFailed      SessionStatus = "failed"      // ended by an error
	StatusSuspended   SessionStatus = "suspended"   // its CLI was closed; resumable
	StatusQueued      SessionStatus = "queued"      // waits for a slot to start its CLI
	StatusBudget      SessionStatus = "budget"      // a spend cap holds it; its prompts wait

	// StatusWaiting is reported, never stored: a running session with a
	// permission request waiting for a person. The store keeps it as
	// running (the request dies with the daemon's process).
	StatusWaiting SessionStatus = "waiting"
)

// Valid reports whether s is one of the statuses above.
func (s SessionStatus) Valid() bool {
	switch s {
	case StatusStarting, StatusRunning, StatusIdle, StatusInterrupted, StatusClosed, StatusFailed,
		StatusSuspended, StatusQueued, StatusBudget:
		return true
	}
	return false
}

// Resumable reports whether a session in status s has no CLI and its next
// prompt resumes it: idle (left so by a killed daemon), interrupted or
// suspended.
func (s SessionStatus) Resumable() bool {
	return s == StatusIdle || s == StatusInterrupted || s == StatusSuspended
}

// A Session is one conversation hosted by the daemon, across any number of
// CLI processes (each resume starts a new one).
type Session struct {
	// ID is the daemon's id for the session. CreateSession assigns one
	// when it is empty.
	ID string
	// ClaudeSessionID is the CLI's own session id (from system/init), used
	// with --resume. Empty until the CLI has reported it.
	ClaudeSessionID string
	// Cwd is the project directory the CLI runs in. Required.
	Cwd            string
	Model          string
	PermissionMode string
	// Status is required.
	Status SessionStatus
	// Options holds the launch options as JSON, for a resume to reuse.
	// Nil is stored as {}.
	Options json.RawMessage
	// BudgetUSD is the spending limit for the session; zero means none.
	BudgetUSD float64
	// Totals sums the usage ledger. Maintained by the store (AppendResultAsync);
	// ignored on create and update.
	Totals Totals
	// Process counts the CLI processes started for the session (see
	// NewProcess); 0 before the first. Maintained by the store.
	Process int64
	// LastSeq is the sequence number of the session's last event, 0 when
	// it has none. Read-only: filled in when a session is read.
	LastSeq int64
	// Error is why the session last failed or was stopped (with the CLI's
	// stderr tail); empty otherwise.
	Error string
	// Worker is the remote worker the CLI runs on; empty means this host.
	Worker string
	// Relay is the link to the session's CLI on a remote worker, kept
	// while that CLI runs so that another daemon (or this one, restarted)
	// can take the link over without restarting the CLI; zero for a local
	// session.
	Relay Relay
	// ParentID is the session this one was forked from; empty if none.
	ParentID string
	// Worktree is the git worktree the session's CLI runs in; zero for
	// none.
	Worktree Worktree
	// QueuedPrompts counts the prompts the session keeps while a spend
	// cap holds it (see QueuePrompt). Read-only.
	QueuedPrompts int64
	// Title is the title Claude Code gave the session (its last
	// system/session_title_changed: --name, a rename), and FirstPrompt the
	// first prompt sent to it (its first line, clipped), which stands for
	// a title until it has one. Read-only: the store's search indexer sets
	// them from the log, a moment after the events are stored.
	Title       string
	FirstPrompt string
	// Owner is the daemon holding the session's lease and LeaseUntil when
	// that lease expires unless renewed, in a store shared by several
	// daemons (store.Leaser); empty otherwise. Read-only.
	Owner      string
	LeaseUntil time.Time
	// CreatedAt and UpdatedAt are set by the store.
	CreatedAt time.Time
	UpdatedAt time.Time
}

// BudgetExceeded reports whether the session has a budget and its total
// cost has reached it.
func (s *Session) BudgetExceeded() bool {
	return s.BudgetUSD > 0 && s.Totals.CostUSD >= s.BudgetUSD
}

// Totals is a session's usage summed over every turn in the ledger.
type Totals struct {
	Turns            int64
	CostUSD          float64
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
}

// SessionUpdate lists the fields of a session to change; nil fields are
// left as they are.
type SessionUpdate struct {
	ClaudeSessionID *string
	Model           *string
	PermissionMode  *string
	Status          *SessionStatus
	Options         json.RawMessage
	BudgetUSD       *float64
	Error           *string
	Worker          *string
	// Relay replaces the whole relay state (its count moves with the
	// events appended: Event.RelayFrame).
	Relay *Relay
	// Worktree replaces the whole worktree state.
	Worktree *Worktree
}

// Worktree is the git worktree a session's CLI runs in: a branch of its
// own, checked out apart from the repository's working tree.
type Worktree struct {
	Path   string // the worktree's directory; "" for none
	Branch string // the session's branch
	// BaseBranch is the branch it started from ("" when the repository's
	// HEAD was detached) and BaseCommit the commit: what its changes are
	// shown against and merged into.
	BaseBranch string
	BaseCommit string
	Repo       string // the repository's top level
	// Discarded is set once the worktree and its branch are removed.
	Discarded bool
}

// Relay is the state of the link to a session's CLI on a remote worker
// that must outlive the daemon holding it.
type Relay struct {
	Worker  string // the worker's name
	Session string // the relay session's id (the worker's hello names it)
	// Received counts the worker's frames whose effects are stored: a new
	// holder asks the worker to send again the frames after it.
	Received int64
	// Sent counts the lines written to the CLI over the relay whose
	// events are stored, and Since is the session's last seq when the
	// relay started: those lines are the ToCLI events after it, in
	// order. A new holder writes again the ones the worker did not get.
	Sent  int64
	Since int64
	// SecretHash is the SHA-256 (hex) of the relay session's secret
	// (claude's RelaySecretHash): a worker coming back must present the
	// secret for a new holder to take the session over. The secret itself
	// is never stored.
	SecretHash string
}

// SessionFilter selects sessions; zero fields match everything.
type SessionFilter struct {
	Status SessionStatus
	Cwd    string
	// ClaudeSessionID selects the sessions whose CLI conversation it is
	// (the daemon checks that a CLI's system/init names no conversation of
	// another session).
	ClaudeSessionID string
	// Limit caps the number returned; zero means no limit.
	Limit int
}
