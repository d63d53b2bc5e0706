package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/internal/testdisk"
	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
	"github.com/claudectl/claudectl/store/sqlite/sqlitetest"
)

// bigEvent is an event of s with a 4 KiB payload: a page of its own.
func bigEvent(s *store.Session) *store.Event {
	return &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "assistant",
		Raw: []byte(`{"text":"` + strings.Repeat("x", 4096) + `"}`)}
}

// appendUntilFailure appends big events to s until one fails, and returns
// how many were acknowledged before and the error.
func appendUntilFailure(t *testing.T, db *sqlite.DB, s *store.Session) (int64, error) {
	t.Helper()
	var acked int64
	for range 100000 {
		seq, err := db.Append(context.Background(), bigEvent(s))
		if err != nil {
			return acked, err
		}
		if seq != acked+1 {
			t.Fatalf("seq %d after %d", seq, acked)
		}
		acked = seq
	}
	t.Fatal("the store never failed")
	return 0, nil
}

// checkWriteFailure checks err and the DB's WriteHealth during a failure.
func checkWriteFailure(t *testing.T, db *sqlite.DB, err error, dir string, start time.Time) {
	t.Helper()
	if !errors.Is(err, store.ErrWriteFailed) {
		t.Fatalf("append on a full disk: %v, want an error wrapping ErrWriteFailed", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "disk full") && !strings.Contains(msg, "I/O error") {
		t.Errorf("the error does not say why in plain words: %s", msg)
	}
	if abs, _ := filepath.Abs(dir); !strings.Contains(msg, abs) {
		t.Errorf("the error does not name the data dir %s: %s", abs, msg)
	}
	t.Log(msg)
	h := db.WriteHealth()
	if !errors.Is(h.Err, store.ErrWriteFailed) || h.Since.Before(start) || !h.LastOK.Before(h.Since) {
		t.Errorf("WriteHealth while failing: %+v", h)
	}
}

// checkRecovered appends after the failure and checks the log and the health.
func checkRecovered(t *testing.T, db *sqlite.DB, s *store.Session, acked int64) {
	t.Helper()
	failedSince := db.WriteHealth().Since
	seq, err := db.Append(context.Background(), bigEvent(s))
	if err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
	if seq != acked+1 {
		t.Errorf("seq after recovery %d, want %d", seq, acked+1)
	}
	if h := db.WriteHealth(); h.Err != nil || !h.Since.IsZero() || h.LastOK.Before(failedSince) {
		t.Errorf("WriteHealth after recovery: %+v", h)
	}
	evs, err := collect(t, db, s.ID, 0)
	if err != nil || int64(len(evs)) != acked+1 {
		t.Errorf("replay after recovery: %d events, %v; want %d", len(evs), err, acked+1)
	}
}

// checkIntegrity reopens the database at path and runs integrity_check.
func checkIntegrity(t *testing.T, path string, s *store.Session, events int64) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("reopening after a full disk: %v", err)
	}
	evs, err := collect(t, db, s.ID, 0)
	if err != nil || int64(len(evs)) != events {
		t.Errorf("replay after reopening: %d events, %v; want %d", len(evs), err, events)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path+busyWait)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var res string
	if err := raw.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Errorf("integrity_check: %q, %v", res, err)
	}
}

// TestFullDatabaseFailsAndRecovers fills the database (max_page_count,
// as sqlitetest.Fill sets it): appends fail with ErrWriteFailed saying
// "disk full", WriteHealth reports it, and once there is room the next
// append succeeds with the next seq.
func TestFullDatabaseFailsAndRecovers(t *testing.T) {
	db, path := mustOpen(t, nil)
	s := mustSession(t, db)
	for range 10 {
		if _, err := db.Append(context.Background(), bigEvent(s)); err != nil {
			t.Fatal(err)
		}
	}
	if h := db.WriteHealth(); h.Err != nil || h.LastOK.IsZero() {
		t.Fatalf("WriteHealth of a healthy store: %+v", h)
	}
	start := time.Now()
	if err := sqlitetest.Fill(db, true); err != nil {
		t.Fatal(err)
	}
	acked, err := appendUntilFailure(t, db, s)
	acked += 10
	checkWriteFailure(t, db, err, filepath.Dir(path), start)
	if !strings.Contains(err.Error(), "disk full") {
		t.Errorf("a full database is not called full: %v", err)
	}
	// The other writes say so too, and reads go on.
	var derr error
	for i := 0; derr == nil && i < 10000; i++ {
		derr = db.AddDecision(context.Background(), &store.Decision{SessionID: s.ID, RequestID: fmt.Sprint(i),
			ToolName: "Bash", By: "test", Behavior: "allow", Input: []byte(`"` + strings.Repeat("y", 4096) + `"`)})
	}
	if !errors.Is(derr, store.ErrWriteFailed) || !strings.HasPrefix(derr.Error(), "sqlite: AddDecision") {
		t.Errorf("AddDecision on a full database: %v, want an error wrapping ErrWriteFailed", derr)
	}
	if _, err := db.Session(context.Background(), s.ID); err != nil {
		t.Errorf("reading while full: %v", err)
	}
	if err := sqlitetest.Fill(db, false); err != nil {
		t.Fatal(err)
	}
	checkRecovered(t, db, s, acked)
	db.Close()
	checkIntegrity(t, path, s, acked+1)
}

// TestFullDiskFailsAndRecovers puts the database on a 2 MiB tmpfs with a
// filler file and appends until the disk is full: the append fails with
// ErrWriteFailed, WriteHealth says so, reads go on; removing the filler
// lets the next append succeed, and the file reopens with integrity_check
// ok and every acknowledged event.
func TestFullDiskFailsAndRecovers(t *testing.T) {
	dir := testdisk.Small(t, "2m")
	if dir == "" {
		return
	}
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 512<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "claudectl.db")
	db, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := mustSession(t, db)
	start := time.Now()
	acked, err := appendUntilFailure(t, db, s)
	checkWriteFailure(t, db, err, dir, start)
	// It stays full: a second append fails the same way.
	if _, err := db.Append(context.Background(), bigEvent(s)); !errors.Is(err, store.ErrWriteFailed) {
		t.Errorf("the next append on a full disk: %v", err)
	}
	if _, err := collect(t, db, s.ID, 0); err != nil {
		t.Errorf("replay on a full disk: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	checkRecovered(t, db, s, acked)
	if err := db.Close(); err != nil {
		t.Errorf("Close after a full disk: %v", err)
	}
	checkIntegrity(t, path, s, acked+1)
}
