package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/claudectl/claudectl/store/sqlite"
)

// RestoreCommand is "claudectl restore FILE --data-dir DIR": a backup put
// in place as a new daemon's store.
type RestoreCommand struct{ Env *Env }

// Name implements Command.
func (*RestoreCommand) Name() string { return "restore" }

// Summary implements Command.
func (*RestoreCommand) Summary() string {
	return "put a backup (claudectl backup) in place as the store of an empty data dir"
}

const restoreUsage = `Usage: claudectl restore FILE --data-dir DIR

Puts the backup FILE (made by claudectl backup) in place as DIR/claudectl.db,
the store of a daemon started with claudectl serve --data-dir DIR. DIR must
be empty or not exist: restore never overwrites a store. The copy is checked
(integrity, a schema this claudectl knows) and brought up to this version's
schema first; a copy of an older database is rewritten with incremental
vacuum, so that retention can shrink it. No daemon runs during the restore.

The daemon started on DIR has every session and event of the copy; it
writes a new token file (the old one was not in the backup).

Exit status: 0 restored, 1 the copy or DIR is not usable, 2 bad usage.
`

// Run implements Command.
func (c *RestoreCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var dataDir string
	fs := newFlagSet("restore")
	fs.StringVar(&dataDir, "data-dir", "", "restore into `DIR`, empty or absent (required)")
	pos, help, err := parseClient(env, restoreUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("restore takes one argument, the backup FILE (claudectl restore claudectl-backup.db --data-dir DIR)")
	}
	if dataDir == "" {
		return usagef("--data-dir is required: the empty directory the daemon will use (claudectl serve --data-dir DIR)")
	}
	src := pos[0]
	if err := emptyDataDir(dataDir); err != nil {
		return exitWith(ExitFailure, "%v", err)
	}
	dest := filepath.Join(dataDir, "claudectl.db")
	got, err := sqlite.Restore(ctx, src, dest)
	if err != nil {
		return exitWith(ExitFailure, "restoring %s: %v", src, serveWords(err))
	}
	fmt.Fprintf(env.Stdout, "Restored %s into %s: %d %s, %d events", src, dest, got.Sessions,
		plural(int(got.Sessions), "session", "sessions"), got.Events)
	if got.SchemaVersion != sqlite.SchemaVersion() {
		fmt.Fprintf(env.Stdout, " (schema version %d brought up to %d)", got.SchemaVersion, sqlite.SchemaVersion())
	}
	fmt.Fprintf(env.Stdout, ".\nStart the daemon on it with: claudectl serve --data-dir %s\n", dataDir)
	return nil
}

// emptyDataDir makes dir (private) if it is missing, and refuses one that
// holds anything but what an unused data dir may (nothing).
func emptyDataDir(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(dir, 0o700)
	case err != nil:
		return fmt.Errorf("--data-dir %s: %v", dir, describeIOError(err))
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) > 0 {
		slices.Sort(names)
		if len(names) > 3 {
			names = append(names[:3], "…")
		}
		return fmt.Errorf("--data-dir %s is not empty (it holds %v): restore into an empty directory, never over a store; "+
			"a daemon running there must be stopped, and its data dir moved aside, first", dir, names)
	}
	return os.Chmod(dir, 0o700)
}

// serveWords is err without the store's layer names ("sqlite: Restore
// FILE: ").
func serveWords(err error) string { return userMessage(err.Error()) }
