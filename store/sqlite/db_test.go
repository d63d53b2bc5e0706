package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

func migrationVersions(t *testing.T, path string) []int {
	t.Helper()
	raw, err := sql.Open("sqlite", path+busyWait)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rows, err := raw.Query(`SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

func TestMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")

	// Fresh: every migration applied once.
	db, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := mustSession(t, db)
	db.Close()
	want := sqlite.SchemaVersion()
	if vs := migrationVersions(t, path); len(vs) != want || vs[len(vs)-1] != want {
		t.Fatalf("after a fresh open: versions %v, want 1..%d", vs, want)
	}

	// Re-open: nothing applied again, data kept.
	db, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Session(ctx, s.ID); err != nil {
		t.Errorf("session lost on re-open: %v", err)
	}
	db.Close()
	if vs := migrationVersions(t, path); len(vs) != want {
		t.Fatalf("after a re-open: versions %v, want 1..%d", vs, want)
	}

	// A newer schema than this binary knows is refused, and left alone.
	raw, err := sql.Open("sqlite", path+busyWait)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future.sql', 0)`, want+1); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if db, err := sqlite.Open(ctx, path, nil); !errors.Is(err, store.ErrSchemaTooNew) {
		if err == nil {
			db.Close()
		}
		t.Fatalf("Open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
	if vs := migrationVersions(t, path); len(vs) != want+1 {
		t.Errorf("refused open changed the migrations: %v", vs)
	}
}

func TestOpenRejectsBadPath(t *testing.T) {
	for _, p := range []string{"", ":memory:", filepath.Join(t.TempDir(), "a?b.db")} {
		if db, err := sqlite.Open(context.Background(), p, nil); !errors.Is(err, store.ErrInvalid) {
			if err == nil {
				db.Close()
			}
			t.Errorf("Open(%q): %v, want ErrInvalid", p, err)
		}
	}
}
