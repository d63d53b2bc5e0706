package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/claudectl/claudectl/store/sqlite"
)

// BackupCommand is "claudectl backup FILE": a consistent copy of a running
// daemon's SQLite store.
type BackupCommand struct{ Env *Env }

// Name implements Command.
func (*BackupCommand) Name() string { return "backup" }

// Summary implements Command.
func (*BackupCommand) Summary() string {
	return "copy a running daemon's SQLite store to a file, without stopping it"
}

const backupUsage = `Usage: claudectl backup [flags] FILE

Copies the daemon's SQLite store to FILE while it runs: the daemon writes a
consistent snapshot (SQLite's VACUUM INTO: every event committed up to one
instant, none after, the sessions' logs gap-free) beside its database and
sends it; claudectl checks it (integrity, schema) and only then puts it at
FILE, private to this user (mode 0600: it holds every transcript).
Sessions stream on meanwhile. claudectl restore FILE --data-dir DIR puts
it back. The daemon's token file is not in the copy.

A PostgreSQL store is backed up with pg_dump (docs/operations.md).
` + clientFlagsHelp

// Run implements Command.
func (c *BackupCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var force bool
	fs := newFlagSet("backup")
	cf.register(fs)
	fs.BoolVar(&force, "force", false, "replace FILE if it exists")
	pos, help, err := parseClient(env, backupUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("backup takes one argument, the FILE to write (claudectl backup claudectl-backup.db)")
	}
	dest := pos[0]
	if fi, err := os.Stat(dest); err == nil {
		if fi.IsDir() {
			return usagef("%s is a directory: name the file to write, such as %s", dest, filepath.Join(dest, "claudectl-backup.db"))
		}
		if !force {
			return exitWith(ExitFailure, "%s exists: name another file, or give --force to replace it", dest)
		}
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	res, err := dc.adminCall(ctx, "GET", "backup", nil, "backing up the store")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	partial := dest + ".partial"
	os.Remove(partial)
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return exitWith(ExitFailure, "writing the backup: %v", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(partial)
		}
	}()
	n, err := io.Copy(f, res.Body)
	if err != nil {
		return exitWith(ExitFailure, "backing up the store: the copy was cut off after %s: %v", humanBytes(n), err)
	}
	if want, perr := strconv.ParseInt(res.Header.Get("Content-Length"), 10, 64); perr == nil && want != n {
		return exitWith(ExitFailure, "backing up the store: the copy was cut off after %s of %s", humanBytes(n), humanBytes(want))
	}
	if err := f.Sync(); err != nil {
		return exitWith(ExitFailure, "writing the backup: %v", err)
	}
	if err := f.Close(); err != nil {
		return exitWith(ExitFailure, "writing the backup: %v", err)
	}
	info, err := sqlite.Check(ctx, partial)
	if err != nil {
		return exitWith(ExitFailure, "the copy the daemon sent is not usable: %v", err)
	}
	if err := os.Rename(partial, dest); err != nil {
		return exitWith(ExitFailure, "writing the backup: %v", err)
	}
	ok = true
	fmt.Fprintf(env.Stdout, "Backed up the daemon's store to %s: %s, %d %s, %d events (schema version %d).\n",
		dest, humanBytes(n), info.Sessions, plural(int(info.Sessions), "session", "sessions"), info.Events, info.SchemaVersion)
	fmt.Fprintf(env.Stdout, "Restore it with: claudectl restore %s --data-dir DIR\n", dest)
	return nil
}
