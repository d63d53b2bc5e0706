package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

// TestMain runs the durability test's writer instead of the tests when
// the environment asks for it (see TestKillLosesNoAcknowledgedEvent).
func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		if err := runChild(path); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// mustOpen opens a database in a fresh temporary directory, closed when
// the test ends.
func mustOpen(tb testing.TB, opts *sqlite.Options) (*sqlite.DB, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "test.db")
	db, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db, path
}

func mustSession(tb testing.TB, db *sqlite.DB) *store.Session {
	tb.Helper()
	s := &store.Session{Cwd: "/src/app", Status: store.StatusRunning}
	if err := db.CreateSession(context.Background(), s); err != nil {
		tb.Fatal(err)
	}
	return s
}

// collect replays a session's events from after.
func collect(tb testing.TB, db *sqlite.DB, id string, after int64) ([]store.Event, error) {
	tb.Helper()
	var evs []store.Event
	for ev, err := range db.Events(context.Background(), id, after) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}
