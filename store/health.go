package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// WriteHealth is the state of a store's writes, for a health report: a
// store whose disk is full keeps serving reads, and says so here rather
// than only in the errors of the writes that fail.
type WriteHealth struct {
	// Err is the latest write failure (an error wrapping ErrWriteFailed)
	// if no write has succeeded since; nil when the store is healthy.
	Err error
	// Since is when the current run of failures began; zero when healthy.
	Since time.Time
	// LastOK is when a write last succeeded; zero if none has yet.
	LastOK time.Time
}

// OK reports whether the latest write succeeded (or none failed yet).
func (h WriteHealth) OK() bool { return h.Err == nil }

// A HealthTracker keeps a store's WriteHealth: every write reports its
// outcome to it once (a mutex and a clock read). Classify turns an error
// the disk, the file or the server caused into one wrapping op
// (ErrWriteFailed for a write, ErrReadFailed for a read), with the reason
// in plain words, and returns nil for an error of the record itself (or
// one already classified). What it returns is shown to clients and
// logged: it names where the store is and never the database's user or
// password (a driver's own text may name them). The zero value is ready
// once Classify is set; it is safe for concurrent use. Both engines use
// it.
type HealthTracker struct {
	Classify func(op, err error) error

	mu     sync.Mutex
	err    error
	since  time.Time
	lastOK time.Time
}

// OK records a successful write.
func (h *HealthTracker) OK() {
	now := time.Now()
	h.mu.Lock()
	h.err, h.since, h.lastOK = nil, time.Time{}, now
	h.mu.Unlock()
}

// Failed records a write failure (an error wrapping ErrWriteFailed).
func (h *HealthTracker) Failed(err error) {
	now := time.Now()
	h.mu.Lock()
	if h.err == nil {
		h.since = now
	}
	h.err = err
	h.mu.Unlock()
}

// Get returns the health.
func (h *HealthTracker) Get() WriteHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	return WriteHealth{Err: h.err, Since: h.since, LastOK: h.lastOK}
}

// Track is deferred by a write method, before its error is wrapped with
// the call's context: it records the outcome and turns a failure of the
// storage into an error wrapping ErrWriteFailed. Errors of the record
// itself, and the end of the caller's ctx, leave the health as it was.
func (h *HealthTracker) Track(ctx context.Context, errp *error) {
	switch err := *errp; {
	case err == nil:
		h.OK()
	case ctx.Err() != nil:
		*errp = h.cut(ctx, err)
	case errors.Is(err, ErrWriteFailed):
		h.Failed(err)
	default:
		if werr := h.Classify(ErrWriteFailed, err); werr != nil {
			*errp = werr
			h.Failed(werr)
		}
	}
}

// TrackRead is deferred by a read method, before its error is wrapped with
// the call's context: it turns a failure of the storage into an error
// wrapping ErrReadFailed (ReadError). A read leaves the write health as it
// was: a server that cannot be reached is seen there by the next write.
func (h *HealthTracker) TrackRead(ctx context.Context, errp *error) {
	*errp = h.ReadError(ctx, *errp)
}

// ReadError returns err, a read's failure, as an error wrapping
// ErrReadFailed when the storage caused it; otherwise (an error of what
// was asked, the end of the caller's ctx, nil) err itself.
func (h *HealthTracker) ReadError(ctx context.Context, err error) error {
	switch {
	case err == nil || errors.Is(err, ErrReadFailed) || errors.Is(err, ErrWriteFailed):
		return err
	case ctx.Err() != nil:
		return h.cut(ctx, err)
	}
	if rerr := h.Classify(ErrReadFailed, err); rerr != nil {
		return rerr
	}
	return err
}

// cut returns err, the failure of a call whose ctx ended, as the end of
// ctx when the storage seems to have failed: the ctx is the cause (a
// cancelled dial, a query cut short), and the driver's words for it may
// name the database's user.
func (h *HealthTracker) cut(ctx context.Context, err error) error {
	if h.Classify(ErrReadFailed, err) != nil {
		return fmt.Errorf("%w (the store's call was cut short)", context.Cause(ctx))
	}
	return err
}
