package store

import "time"

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
