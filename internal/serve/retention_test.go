package serve_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/internal/serve"
	"github.com/claudectl/claudectl/store"
)

// TestRetentionRunsOnItsOwn: with store.retention set, the daemon removes
// the events of a session that ended longer ago by itself, on its
// schedule, and logs what it removed; a recent one keeps its events.
func TestRetentionRunsOnItsOwn(t *testing.T) {
	dir := t.TempDir()
	var logs syncBuffer
	srv, err := serve.Start(context.Background(), &serve.Settings{CLI: claudetest.CLIPath(t), Listen: "127.0.0.1:0", DataDir: dir,
		Retention: serve.Retention{ClosedSessions: 24 * time.Hour}},
		&serve.Options{Stderr: &logs, Getenv: func(string) string { return "" }, RetentionInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	db := srv.DB()
	stage := func(ago time.Duration) *store.Session {
		s := &store.Session{Cwd: dir, Status: store.StatusIdle}
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := db.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "assistant", Raw: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		closed := store.StatusClosed
		if _, err := db.UpdateSession(ctx, s.ID, store.SessionUpdate{Status: &closed}); err != nil {
			t.Fatal(err)
		}
		raw, err := sql.Open("sqlite", filepath.Join(dir, "claudectl.db")+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if _, err := raw.Exec(`UPDATE sessions SET updated_at = ? WHERE id = ?`, time.Now().Add(-ago).UnixNano(), s.ID); err != nil {
			t.Fatal(err)
		}
		return s
	}
	old, recent := stage(48*time.Hour), stage(time.Hour)
	replayErr := func(id string) error {
		for _, err := range db.Events(ctx, id, 0) {
			if err != nil {
				return err
			}
		}
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	waitFor(t, tctx, "the retention to remove the old session's events", func() bool {
		return errors.Is(replayErr(old.ID), store.ErrUnavailable)
	})
	if err := replayErr(recent.ID); err != nil {
		t.Errorf("the recent session's events: %v", err)
	}
	waitFor(t, tctx, "the retention's log line", func() bool {
		return strings.Contains(logs.String(), `msg="retention: removed what store.retention no longer keeps" sessions=1 events=3`)
	})
}
