package store

import (
	"context"
	"errors"
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
// the disk, the file or the server caused into one wrapping ErrWriteFailed
// (with the reason in plain words), and returns nil for an error of the
// record itself. The zero value is ready once Classify is set; it is safe
// for concurrent use. Both engines use it.
type HealthTracker struct {
	Classify func(error) error

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
	case errors.Is(err, ErrWriteFailed):
		h.Failed(err)
	default:
		if werr := h.Classify(err); werr != nil {
			*errp = werr
			h.Failed(werr)
		}
	}
}
