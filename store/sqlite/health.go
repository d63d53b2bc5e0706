package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite/internal/testhook"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// classifier returns the store.HealthTracker classifier of a database in
// dir: err wrapped in op (store.ErrWriteFailed or store.ErrReadFailed),
// with the reason in plain words and the data directory, when the disk or
// the database file caused it; otherwise nil. SQLite's own text (a result
// code's words) names nothing secret and stays at the end.
func classifier(dir string) func(op, err error) error {
	return func(op, err error) error {
		if err == nil || errors.Is(err, store.ErrWriteFailed) || errors.Is(err, store.ErrReadFailed) {
			return nil
		}
		why := storageFailure(err)
		if why == "" {
			return nil
		}
		return fmt.Errorf("%w: %s (data dir %s): %w", op, why, dir, err)
	}
}

// storageFailure says in plain words why err is a failure of the disk or
// the database file, or returns "" when it is not one.
func storageFailure(err error) string {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return ""
	}
	code := se.Code()
	switch code & 0xff { // the primary result code
	case sqlite3.SQLITE_FULL:
		return "disk full"
	case sqlite3.SQLITE_IOERR:
		if code == sqlite3.SQLITE_IOERR_NOMEM {
			return "out of memory"
		}
		return "I/O error"
	case sqlite3.SQLITE_READONLY:
		return "the database file is read-only"
	case sqlite3.SQLITE_CANTOPEN:
		return "cannot open the database file"
	case sqlite3.SQLITE_NOMEM:
		return "out of memory"
	case sqlite3.SQLITE_PERM:
		return "permission denied"
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return "the database file is corrupt"
	}
	return ""
}

// WriteHealth reports whether writes are succeeding: Err is the latest
// write failure (wrapping [store.ErrWriteFailed]) if no write has
// succeeded since, Since when those failures began, LastOK when a write
// last succeeded. It costs a mutex and is safe for concurrent use. After a
// failure the store keeps taking writes: the first that succeeds (once the
// disk has room again, say) clears Err.
func (db *DB) WriteHealth() store.WriteHealth { return db.health.Get() }

func init() {
	testhook.Fill = func(db any, on bool) error { return db.(*DB).fill(on) }
}

// fill sets max_page_count on the writer connection: to the current page
// count (on: no page can be added, as on a full disk) or back to SQLite's
// maximum. See sqlitetest.Fill.
func (db *DB) fill(on bool) error {
	if err := db.check(); err != nil {
		return err
	}
	ctx := context.Background()
	max := int64(0xfffffffe) // SQLite's default
	if on {
		if err := db.w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&max); err != nil {
			return err
		}
	}
	var got int64
	if err := db.w.QueryRowContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, max)).Scan(&got); err != nil {
		return err
	}
	if got != max {
		return fmt.Errorf("sqlite: max_page_count is %d, not %d", got, max)
	}
	return nil
}
