// Package sqlitetest helps tests of code that uses a [sqlite.DB] make the
// store fail the way a full disk makes it fail, and recover. It is for
// tests only: nothing in it belongs in a running daemon.
package sqlitetest

import (
	"github.com/claudectl/claudectl/store/sqlite"
	"github.com/claudectl/claudectl/store/sqlite/internal/testhook"
)

// Fill makes db behave as if its disk were full (on) or had room again
// (off). While it is full, every write that needs the database file to grow
// fails with an error wrapping [store.ErrWriteFailed] that says "disk full",
// and [sqlite.DB.WriteHealth] reports it; a write that fits in the pages
// the file already has may still succeed (as on a real disk, where SQLite
// reuses free pages), so a test that needs a failure should append until
// one comes. Fill(db, false) lets the next write succeed.
//
// It sets SQLite's max_page_count on db's writer connection to the file's
// current size, so it waits for a transaction in progress to end.
//
// [store.ErrWriteFailed]: https://pkg.go.dev/github.com/claudectl/claudectl/store#ErrWriteFailed
func Fill(db *sqlite.DB, on bool) error { return testhook.Fill(db, on) }
