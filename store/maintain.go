package store

import (
	"context"
	"fmt"
	"time"
)

// A Maintainer is a store that the operator's tasks run on: the counts the
// daemon's metrics read when scraped, and retention (store.retention,
// claudectl prune). Both engines implement it. Its methods are safe to
// call while the daemon writes.
type Maintainer interface {
	// CountSessions returns how many sessions are in each status (the
	// statuses without one are left out).
	CountSessions(ctx context.Context) (map[SessionStatus]int64, error)
	// PruneEvents removes the events of the sessions that ended (closed or
	// failed) before before and still hold events, and returns them: what
	// each held, with the seqs removed. The sessions' rows stay, with
	// their LastSeq; a replay of them (Events) fails with an error
	// wrapping [ErrUnavailable] that says retention removed the events.
	// With dryRun it removes nothing and returns what it would remove.
	PruneEvents(ctx context.Context, before time.Time, dryRun bool) ([]PrunedSession, error)
	// PruneAudit removes the audit trail's entries made before before —
	// permission decisions (Decisions) and clients' actions (Audit) — and
	// returns how many there were; with dryRun it only counts them.
	PruneAudit(ctx context.Context, before time.Time, dryRun bool) (int64, error)
	// Reclaim returns the space the removals freed to the system where the
	// engine can do so while serving (SQLite's incremental vacuum, in
	// short steps between the writer's commits) and returns how many bytes
	// the file shrank by; Note says why it cannot when it cannot (a SQLite
	// file made before incremental vacuum: its free pages are reused, the
	// file does not shrink). PostgreSQL's autovacuum reclaims on its own:
	// Reclaim does nothing there.
	Reclaim(ctx context.Context) (ReclaimReport, error)
}

// A PrunedSession is one session whose events PruneEvents removed (or
// would remove).
type PrunedSession struct {
	ID     string
	Status SessionStatus
	// EndedAt is when the session ended (its last update).
	EndedAt time.Time
	// FirstSeq and LastSeq are the seqs of the first and last events
	// removed; Events counts them and Bytes is their stored size.
	FirstSeq, LastSeq int64
	Events, Bytes     int64
}

// A ReclaimReport is what Reclaim did.
type ReclaimReport struct {
	// Bytes is how much smaller the store's file became.
	Bytes int64
	// Note says why nothing could be reclaimed, when that is so.
	Note string
}

// Ended reports whether a session in status s has ended for good (closed
// or failed): what retention prunes.
func (s SessionStatus) Ended() bool { return s == StatusClosed || s == StatusFailed }

// A PrunedError is the error of a replay from seq After of a session
// whose events up to seq Through retention removed. It wraps
// [ErrUnavailable]; the events after Through can be read.
type PrunedError struct {
	After, Through int64
}

func (e *PrunedError) Error() string {
	return fmt.Sprintf("%v: events %d to %d of this session were removed by retention (store.retention.closed_sessions); "+
		"its events after %d can be read", ErrUnavailable, e.After+1, e.Through, e.Through)
}

// Unwrap makes errors.Is(err, ErrUnavailable) true.
func (e *PrunedError) Unwrap() error { return ErrUnavailable }
