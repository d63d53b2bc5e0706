package store

import (
	"errors"
	"time"
)

// ErrWriteFailed means the store could not write because of the disk or
// the database file (full, read-only, failing): nothing of the call was
// stored. The message says why in plain words; a later write may succeed
// once the cause is gone.
var ErrWriteFailed = errors.New("the store cannot write")

// WriteHealth is whether the store's writes succeed.
type WriteHealth struct {
	// Err is the latest write failure when no write has succeeded since;
	// nil when the store writes.
	Err error
	// Since is when the failures began (zero when healthy).
	Since time.Time
	// LastOK is when a write last succeeded.
	LastOK time.Time
}
