package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

// TestBackupRestore: a backup taken while the database serves restores
// to a database with the same sessions and events; Restore refuses a
// destination that exists and a file that is not a claudectl database.
func TestBackupRestore(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	s := mustSession(t, db)
	for i := range 50 {
		if _, err := db.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "assistant", Raw: []byte(`{"i":1}`)}); err != nil {
			t.Fatal(err, i)
		}
	}
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.db")
	if err := db.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	if err := db.Backup(ctx, backup); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a backup over an existing file: %v, want ErrInvalid", err)
	}
	dest := filepath.Join(dir, "data", "claudectl.db")
	if err := mkdir(filepath.Dir(dest)); err != nil {
		t.Fatal(err)
	}
	got, err := sqlite.Restore(ctx, backup, dest)
	if err != nil || got.Sessions != 1 || got.Events != 50 || got.SchemaVersion != sqlite.SchemaVersion() {
		t.Fatalf("Restore = %+v, %v", got, err)
	}
	if _, err := sqlite.Restore(ctx, backup, dest); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Restore over an existing file: %v, want ErrInvalid", err)
	}
	if _, err := sqlite.Restore(ctx, filepath.Join(dir, "data"), filepath.Join(dir, "other.db")); err == nil {
		t.Errorf("Restore of a directory: no error")
	}
	r, err := sqlite.Open(ctx, dest, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	evs, err := collect(t, r, s.ID, 0)
	if err != nil || len(evs) != 50 || evs[49].Seq != 50 {
		t.Fatalf("restored events: %d, %v", len(evs), err)
	}
}

func mkdir(dir string) error { return os.MkdirAll(dir, 0o700) }

// TestCheck: Check finds a copy's schema and counts, and refuses what is
// not a claudectl database.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	db, path := mustOpen(t, nil)
	s := mustSession(t, db)
	for range 3 {
		if _, err := db.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "assistant", Raw: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	backup := filepath.Join(t.TempDir(), "b.db")
	if err := db.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	got, err := sqlite.Check(ctx, backup)
	if err != nil || got.Sessions != 1 || got.Events != 3 || got.SchemaVersion != sqlite.SchemaVersion() {
		t.Fatalf("Check = %+v, %v", got, err)
	}
	junk := filepath.Join(t.TempDir(), "junk.db")
	os.WriteFile(junk, []byte("not a database, not at all, not one bit of one"), 0o600)
	if _, err := sqlite.Check(ctx, junk); err == nil {
		t.Errorf("Check of junk: no error")
	}
	_ = path
}
