package store

import (
	"context"
	"iter"
)

// Store is what the daemon keeps its records in. [github.com/claudectl/claudectl/store/sqlite]
// implements it; the daemon and the API use nothing else of an engine, so
// another implementation (a server database shared by several daemons)
// can stand in. Every method is safe for concurrent use. Errors wrap the
// sentinels of this package: [ErrNotFound], [ErrInvalid], [ErrClosed],
// [ErrUnavailable], [ErrWriteFailed].
type Store interface {
	// CreateSession stores s, setting its ID (when empty), its pk and its
	// times.
	CreateSession(ctx context.Context, s *Session) error
	// Session returns a session with LastSeq, the seq of its last event.
	Session(ctx context.Context, id string) (*Session, error)
	// Sessions returns the sessions f selects, newest first.
	Sessions(ctx context.Context, f SessionFilter) ([]*Session, error)
	// UpdateSession applies upd and returns the session as it is after.
	UpdateSession(ctx context.Context, id string, upd SessionUpdate) (*Session, error)
	// DeleteSession removes a session with its events, usage and rules.
	DeleteSession(ctx context.Context, id string) error
	// MarkRunningInterrupted marks the sessions stored as running (their
	// CLIs died with the last daemon) interrupted and returns their ids.
	MarkRunningInterrupted(ctx context.Context) ([]string, error)
	// NewProcess starts a new CLI process generation of a session (for the
	// usage ledger) and returns its number.
	NewProcess(ctx context.Context, id string) (int64, error)

	// Append stores ev at the end of its session's log and returns its
	// seq (also set in ev.Seq), once it is durable: a seq is returned if
	// and only if the event is stored. Seqs are gap-free per session, from
	// 1, in the order appends were queued.
	Append(ctx context.Context, ev *Event) (int64, error)
	// AppendBatch stores evs in order, all or none, with Append's contract
	// for each.
	AppendBatch(ctx context.Context, evs ...*Event) error
	// AppendAsync queues evs and returns; done is called exactly once,
	// in queueing order, with nil once they are durable (each with its
	// Seq) or the error. done must not block or append. ctx covers the
	// queueing only.
	AppendAsync(ctx context.Context, done func(error), evs ...*Event) error
	// AppendUpdateAsync is AppendAsync for one event that also applies upd
	// to its session, durable together.
	AppendUpdateAsync(ctx context.Context, done func(error), ev *Event, upd SessionUpdate) error
	// AppendResultAsync is AppendAsync for a result line that also enters
	// it in the usage ledger (AddUsage), durable together.
	AppendResultAsync(ctx context.Context, done func(*UsageRecord, *Session, error), ev *Event, in UsageInput) error
	// Events yields the events of session id after seq after, gap-free or
	// failing up front with ErrUnavailable, ending with the last event
	// stored when it was called.
	Events(ctx context.Context, id string, after int64) iter.Seq2[Event, error]

	// AddUsage enters a result in the usage ledger and returns the record
	// and the session after it.
	AddUsage(ctx context.Context, in UsageInput) (*UsageRecord, *Session, error)
	// Usage returns the ledger of a session, oldest turn first.
	Usage(ctx context.Context, id string) ([]*UsageRecord, error)

	// CreateRule stores a permission rule, setting its ID.
	CreateRule(ctx context.Context, r *Rule) error
	// Rules returns every stored rule.
	Rules(ctx context.Context) ([]*Rule, error)
	// DeleteRule removes a rule.
	DeleteRule(ctx context.Context, id int64) error
	// AddDecision records a permission decision in the audit trail.
	AddDecision(ctx context.Context, d *Decision) error
	// Decisions returns the decisions f selects, newest first.
	Decisions(ctx context.Context, f DecisionFilter) ([]*Decision, error)

	// WriteHealth reports the latest write failure caused by the storage
	// itself (not by a record), until a write succeeds.
	WriteHealth() WriteHealth
	// Close waits for queued appends, stops taking new ones and releases
	// the store. Idempotent.
	Close() error
}
