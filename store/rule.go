package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// MaxRules is how many permission rules a store holds at most unless its
// options say otherwise; CreateRule refuses one more with a *LimitError. Every permission request is matched
// against the rules and a daemon loads them all when it starts, so a
// client that adds rules in a loop meets a limit instead of slowing every
// decision (20,000 rules: 3 ms a request).
const MaxRules = 10_000

// A LimitError is returned by a write that would take the store past one
// of its limits (MaxRules).
type LimitError struct {
	What string // what there would be too many of: "rules"
	Max  int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("there are %d %s already, the most the store keeps: remove some first", e.Max, e.What)
}

// A Rule is a stored permission rule. The store keeps the rule's text as
// written; package permission parses and evaluates it.
type Rule struct {
	// ID is assigned by the store.
	ID int64
	// Spec is the rule in Claude Code's own form: "Bash",
	// "Bash(git status:*)", "Edit(src/**)", "mcp__github". Required.
	Spec string
	// Behavior is "allow", "deny" or "ask". Required.
	Behavior string
	// ProjectDir limits the rule to sessions in that directory (or below
	// it); empty for a rule that is global or tied to a session.
	ProjectDir string
	// SessionID limits the rule to one session; it is deleted with the
	// session. Empty for a global or project rule.
	SessionID string
	// CreatedBy says who made the rule ("client:alice",
	// "suggestion:client:alice", "config").
	CreatedBy string
	// CreatedAt is set by the store.
	CreatedAt time.Time
}

// Scope returns "global", "project" or "session".
func (r *Rule) Scope() string {
	switch {
	case r.SessionID != "":
		return "session"
	case r.ProjectDir != "":
		return "project"
	}
	return "global"
}

// A Decision is one entry of the permission audit trail: how a tool-use
// request was settled, by whom or by which rule, and when.
type Decision struct {
	// ID is assigned by the store.
	ID        int64
	SessionID string
	// RequestID is the CLI's request_id.
	RequestID string
	ToolName  string
	// Input is the tool input as requested (truncated like events when
	// over the payload limit).
	Input json.RawMessage
	// Behavior is "allow", "deny", or "withdrawn" when the CLI took the
	// request back before anyone answered.
	Behavior string
	// By names who decided: "rule", "client:<name>", "timeout", "cli".
	By string
	// RuleID is the rule that decided, 0 for none. It is not a foreign
	// key: the trail outlives the rule.
	RuleID int64
	// RuleSpec is the rule's text at the time, empty for none.
	RuleSpec string
	// Message is the deny message or the reason given.
	Message string
	// UpdatedInput is the input the tool ran with when a decision changed
	// it (the answers of an AskUserQuestion), else nil.
	UpdatedInput json.RawMessage
	// RequestedAt is when the CLI asked; DecidedAt when it was settled
	// (zero means now).
	RequestedAt time.Time
	DecidedAt   time.Time
	// Route names the routing rule that said who was asked (notify.routes),
	// empty when none applied.
	Route string
	// ApprovedBy lists who allowed it when a route needed more than one
	// person (the two-person rule), in the order they did.
	ApprovedBy []string
}

// DecisionFilter selects audit entries, newest first.
type DecisionFilter struct {
	// SessionID limits the list to one session; empty means all.
	SessionID string
	// BeforeID pages backwards: only entries with a smaller ID. Zero
	// means from the newest.
	BeforeID int64
	// Limit caps the number returned; zero means 100.
	Limit int
}
