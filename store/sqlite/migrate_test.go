package sqlite_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

// Migration 3 rebuilds the sessions table (new statuses): a database of
// version 2 keeps its sessions, their events, usage and rules, and the
// foreign keys still hold (deleting a session deletes its events).
func TestMigrationRebuildsSessions(t *testing.T) {
	ctx := context.Background()
	db, path := mustOpen(t, nil)
	s := mustSession(t, db)
	if err := db.AppendBatch(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "user", Raw: []byte(`{"type":"user"}`)},
		&store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "result", Raw: []byte(`{"type":"result"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateRule(ctx, &store.Rule{Spec: "Bash(ls)", Behavior: "allow", SessionID: s.ID}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// Back to version 2, as an older claudectl left it.
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`DELETE FROM schema_migrations WHERE version >= 3`); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	db, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := migrationVersions(t, path); len(got) != sqlite.SchemaVersion() {
		t.Fatalf("versions after reopening: %v", got)
	}
	evs, err := collect(t, db, s.ID, 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("events after the migration: %d, %v", len(evs), err)
	}
	st := store.StatusSuspended
	if _, err := db.UpdateSession(ctx, s.ID, store.SessionUpdate{Status: &st}); err != nil {
		t.Fatalf("a new status after the migration: %v", err)
	}
	if err := db.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	rules, err := db.Rules(ctx)
	if err != nil || len(rules) != 0 {
		t.Errorf("the session's rule outlived it: %+v, %v", rules, err)
	}
	raw, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var n int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM events`).Scan(&n); err != nil || n != 0 {
		t.Errorf("events left after deleting their session: %d, %v", n, err)
	}
}
