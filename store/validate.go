package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/claudectl/claudectl/internal/jsonl"
)

// The checks and defaults every engine applies before it writes a record,
// declared once. Errors wrap ErrInvalid and name the field.

// PrepareEvent validates ev for an append and applies the defaults: Time
// now when zero, Raw {} when nil, OriginalSize at least len(Raw), and Raw
// truncated (as jsonl.Truncate does, keeping it valid JSON) past
// maxPayload bytes when maxPayload > 0. It runs on the caller's goroutine,
// so truncation costs the writer nothing.
func PrepareEvent(ev *Event, now time.Time, maxPayload int) error {
	switch {
	case ev.SessionID == "":
		return fmt.Errorf("%w: event without session", ErrInvalid)
	case ev.Type == "":
		return fmt.Errorf("%w: event without type", ErrInvalid)
	case !ev.Direction.Valid():
		return fmt.Errorf("%w: direction %v", ErrInvalid, ev.Direction)
	}
	if ev.Time.IsZero() {
		ev.Time = now
	}
	if ev.Raw == nil {
		ev.Raw = []byte{}
	}
	if n := int64(len(ev.Raw)); ev.OriginalSize < n {
		ev.OriginalSize = n
	}
	if maxPayload > 0 && len(ev.Raw) > maxPayload {
		ev.Raw, _ = jsonl.Truncate(ev.Raw, maxPayload)
	}
	return nil
}

// LimitPayload returns b truncated to maxPayload bytes (when > 0), or nil
// for nil: a decision's input in the audit trail.
func LimitPayload(b json.RawMessage, maxPayload int) []byte {
	if b == nil {
		return nil
	}
	if maxPayload > 0 && len(b) > maxPayload {
		b, _ = jsonl.Truncate(b, maxPayload)
	}
	return b
}

// SessionOptionsJSON returns the launch options as stored: {} for none,
// an error for options that are not JSON.
func SessionOptionsJSON(o json.RawMessage) (string, error) {
	if len(o) == 0 {
		return "{}", nil
	}
	if !json.Valid(o) {
		return "", fmt.Errorf("%w: options are not valid JSON", ErrInvalid)
	}
	return string(o), nil
}

// ValidateSession checks a session to create.
func ValidateSession(s *Session) error {
	if s.Cwd == "" {
		return fmt.Errorf("%w: session without cwd", ErrInvalid)
	}
	if !s.Status.Valid() {
		return fmt.Errorf("%w: session status %q", ErrInvalid, s.Status)
	}
	_, err := SessionOptionsJSON(s.Options)
	return err
}

// ValidateUpdate checks a session update.
func ValidateUpdate(upd SessionUpdate) error {
	if upd.Status != nil && !upd.Status.Valid() {
		return fmt.Errorf("%w: session status %q", ErrInvalid, *upd.Status)
	}
	if upd.Options != nil {
		if _, err := SessionOptionsJSON(upd.Options); err != nil {
			return err
		}
	}
	if upd.BudgetUSD != nil && *upd.BudgetUSD < 0 {
		return fmt.Errorf("%w: negative budget", ErrInvalid)
	}
	return nil
}

// ValidateRule checks a rule to store.
func ValidateRule(r *Rule) error {
	switch {
	case r.Spec == "":
		return fmt.Errorf("%w: rule without spec", ErrInvalid)
	case r.Behavior != "allow" && r.Behavior != "deny" && r.Behavior != "ask":
		return fmt.Errorf("%w: rule behavior %q", ErrInvalid, r.Behavior)
	case r.ProjectDir != "" && r.SessionID != "":
		return fmt.Errorf("%w: a rule is scoped to a project or a session, not both", ErrInvalid)
	}
	return nil
}

// PrepareDecision checks a decision for the audit trail and sets its
// times when zero (DecidedAt now, RequestedAt DecidedAt).
func PrepareDecision(d *Decision) error {
	switch {
	case d.SessionID == "" || d.RequestID == "" || d.ToolName == "" || d.By == "":
		return fmt.Errorf("%w: a decision needs a session, a request id, a tool and who decided", ErrInvalid)
	case d.Behavior != "allow" && d.Behavior != "deny" && d.Behavior != "withdrawn":
		return fmt.Errorf("%w: decision behavior %q", ErrInvalid, d.Behavior)
	}
	if d.DecidedAt.IsZero() {
		d.DecidedAt = time.Now()
	}
	if d.RequestedAt.IsZero() {
		d.RequestedAt = d.DecidedAt
	}
	return nil
}

// ValidateBudgetRaise checks a raise to store and sets At when zero.
func ValidateBudgetRaise(r *BudgetRaise) error {
	switch {
	case r.Cap != CapSession && r.Cap != CapDirectory && r.Cap != CapDaemon:
		return fmt.Errorf("%w: budget cap %q", ErrInvalid, r.Cap)
	case r.LimitUSD <= 0 || r.LimitUSD != r.LimitUSD || r.LimitUSD > 1e12:
		return fmt.Errorf("%w: budget limit %v", ErrInvalid, r.LimitUSD)
	case (r.Cap == CapSession) != (r.Day == ""):
		return fmt.Errorf("%w: a session's raise has no day, a daily cap's has one", ErrInvalid)
	case (r.Cap == CapDaemon) != (r.Scope == ""):
		return fmt.Errorf("%w: the daemon's cap has no scope, the others have one", ErrInvalid)
	}
	if r.At.IsZero() {
		r.At = time.Now()
	}
	return nil
}
