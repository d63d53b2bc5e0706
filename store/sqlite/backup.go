package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/claudectl/claudectl/store"
)

// Backup writes a consistent copy of the database to dest, a file that
// must not exist yet, while the database serves: SQLite's VACUUM INTO
// reads one snapshot (a read transaction, which under WAL neither waits
// for the writer nor holds it up) and writes it compacted, with every
// committed event up to that instant and none after. The copy is a
// database Open takes as it is; its mode is 0600.
func (db *DB) Backup(ctx context.Context, dest string) (err error) {
	defer wrap(&err, "sqlite: Backup to %s", dest)
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if strings.ContainsRune(dest, 0) {
		return fmt.Errorf("%w: the path holds a NUL", store.ErrInvalid)
	}
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("%w: %s exists", store.ErrInvalid, dest)
	}
	// The copy holds every transcript: private from its first byte.
	f, err := os.OpenFile(dest, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	// A connection of its own: the readers are query_only, which refuses
	// VACUUM INTO, and the writer's would hold every append for the
	// copy's length. This one only reads the database.
	c, err := sql.Open("sqlite", db.path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `VACUUM INTO ?`, dest); err != nil {
		os.Remove(dest)
		return err
	}
	return syncFile(dest)
}

// countSQL counts the sessions and the events their logs hold.
const countSQL = `SELECT (SELECT COUNT(*) FROM sessions),
	(SELECT COALESCE(SUM(last_seq - first_seq + 1), 0) FROM event_chunks)`

// Check opens the database file at path read-only and checks it as
// Restore does (SQLite's integrity check, a claudectl schema this binary
// knows), and says what it holds: claudectl backup checks its copy so.
func Check(ctx context.Context, path string) (_ *Restored, err error) {
	defer wrap(&err, "sqlite: Check %s", path)
	if strings.ContainsAny(path, "?#\x00") {
		return nil, fmt.Errorf("%w: the path holds '?', '#' or NUL", store.ErrInvalid)
	}
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: not a file", store.ErrInvalid)
	}
	c, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetMaxOpenConns(1)
	out := &Restored{}
	var check string
	if err := c.QueryRowContext(ctx, `PRAGMA integrity_check(1)`).Scan(&check); err != nil {
		return nil, fmt.Errorf("not a SQLite database: %w", err)
	}
	if check != "ok" {
		return nil, fmt.Errorf("the copy is damaged: %s", check)
	}
	if err := c.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&out.SchemaVersion); err != nil {
		return nil, errors.New("not a claudectl database: it has no schema_migrations table")
	}
	if out.SchemaVersion > SchemaVersion() {
		return nil, fmt.Errorf("%w: the copy is at version %d, this binary knows up to %d; use a newer claudectl",
			store.ErrSchemaTooNew, out.SchemaVersion, SchemaVersion())
	}
	if out.SchemaVersion >= 4 { // the event chunks
		if err := c.QueryRowContext(ctx, countSQL).Scan(&out.Sessions, &out.Events); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// A Restored is what Restore put in place (or Check found).
type Restored struct {
	// SchemaVersion is the copy's schema version before Restore brought
	// it up to this binary's (SchemaVersion).
	SchemaVersion int
	// Sessions counts the sessions, Events the events their logs hold.
	Sessions int64
	Events   int64
}

// Restore puts the backup at src (a file Backup wrote, or any claudectl
// database) in place as dest, which must not exist: it checks the copy
// (SQLite's integrity check, a claudectl schema this binary knows),
// rewrites it with incremental vacuum on (so that retention can shrink
// it later, whatever version made it), brings its schema up to date, and
// only then renames it to dest. On failure dest is not created. ctx
// covers the whole work; nothing else may use dest meanwhile.
func Restore(ctx context.Context, src, dest string) (_ *Restored, err error) {
	defer wrap(&err, "sqlite: Restore %s", src)
	if _, err := os.Lstat(dest); err == nil {
		return nil, fmt.Errorf("%w: %s exists", store.ErrInvalid, dest)
	}
	tmp := dest + ".restoring"
	os.Remove(tmp)
	defer func() {
		if err != nil {
			os.Remove(tmp)
			os.Remove(tmp + "-wal")
			os.Remove(tmp + "-shm")
		}
	}()
	if err := copyFile(src, tmp); err != nil {
		return nil, err
	}
	out := &Restored{}
	if err := func() error {
		c, err := sql.Open("sqlite", tmp+"?_pragma=busy_timeout(5000)")
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetMaxOpenConns(1)
		var check string
		if err := c.QueryRowContext(ctx, `PRAGMA integrity_check(1)`).Scan(&check); err != nil {
			return fmt.Errorf("not a SQLite database: %w", err)
		}
		if check != "ok" {
			return fmt.Errorf("the copy is damaged: %s", check)
		}
		if err := c.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&out.SchemaVersion); err != nil {
			return errors.New("not a claudectl database: it has no schema_migrations table")
		}
		if out.SchemaVersion > SchemaVersion() {
			return fmt.Errorf("%w: the copy is at version %d, this binary knows up to %d; restore it with a newer claudectl",
				store.ErrSchemaTooNew, out.SchemaVersion, SchemaVersion())
		}
		// Incremental vacuum for a copy of an older file (a file's
		// auto_vacuum changes only with a VACUUM): the daemon is not
		// running on it, so the rewrite costs nobody a wait.
		var mode int
		if err := c.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
			return err
		}
		if mode != 2 {
			if _, err := c.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`); err != nil {
				return err
			}
			if _, err := c.ExecContext(ctx, `VACUUM`); err != nil {
				return err
			}
		}
		return nil
	}(); err != nil {
		return nil, err
	}
	db, err := Open(ctx, tmp, nil) // migrates an older copy
	if err != nil {
		return nil, err
	}
	err = db.r.QueryRowContext(ctx, countSQL).Scan(&out.Sessions, &out.Events)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	for _, sfx := range []string{"-wal", "-shm"} { // Close checkpointed the WAL
		os.Remove(tmp + sfx)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return nil, err
	}
	return out, syncDir(filepath.Dir(dest))
}

// copyFile copies src to dest (created 0600) and syncs it.
func copyFile(src, dest string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dest, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// syncFile makes path's contents durable.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
