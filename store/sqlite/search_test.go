package sqlite_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/internal/chunk"
	"github.com/claudectl/claudectl/store/sqlite"
)

// Migration 9 indexes the logs already stored: right after the upgrade a
// search finds a closed session's tool output and the session has its
// title and first prompt, before the background indexer has run; deleting
// the session leaves the FTS index consistent with its content.
func TestMigrationIndexesLogs(t *testing.T) {
	ctx := context.Background()
	path, raw := atVersion(t, 11)
	var c chunk.Writer
	c.Reset(1, 1)
	now := time.Now()
	for i, ev := range []store.Event{
		{Direction: store.ToCLI, Type: "user", Raw: []byte(`{"type":"user","message":{"role":"user","content":"Find the flaky test"}}`)},
		{Direction: store.FromCLI, Type: "system", Subtype: "session_title_changed", Raw: []byte(`{"type":"system","subtype":"session_title_changed","title":"Flaky test hunt"}`)},
		{Direction: store.FromCLI, Type: "user", Raw: []byte(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"TestQuokkaRace failed twice"}]}]}}`)},
	} {
		ev.Time = now
		ev.OriginalSize = int64(len(ev.Raw))
		c.Add(&ev, int64(i+1))
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO sessions (pk, id, cwd, status, created_at, updated_at) VALUES (1, 's1', '/src', 'closed', 1, 1)`, nil},
		{`INSERT INTO event_chunks (session, first_seq, last_seq, events) VALUES (1, ?, ?, ?)`, []any{c.First, c.Last, c.Buf}},
	} {
		if _, err := raw.Exec(q.sql, q.args...); err != nil {
			t.Fatal(q.sql, err)
		}
	}
	raw.Close()
	db, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	hits, err := db.Search(ctx, store.SearchQuery{Text: "TestQuokkaRace failed"})
	if err != nil || len(hits) != 1 || hits[0].SessionID != "s1" || hits[0].Seq != 3 || hits[0].Kind != store.SearchKindToolOutput {
		t.Fatalf("Search right after the migration: %+v, %v", hits, err)
	}
	s, err := db.Session(ctx, "s1")
	if err != nil || s.Title != "Flaky test hunt" || s.FirstPrompt != "Find the flaky test" {
		t.Fatalf("the session after the migration: %+v, %v", s, err)
	}
	if err := db.DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	check, err := sql.Open("sqlite", path+busyWait)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	var docs int
	if err := check.QueryRow(`SELECT count(*) FROM search_docs`).Scan(&docs); err != nil || docs != 0 {
		t.Errorf("search_docs after the session's deletion: %d rows, %v", docs, err)
	}
	// FTS5's own check that its index holds exactly the content's words.
	if _, err := check.Exec(`INSERT INTO search_fts (search_fts) VALUES ('integrity-check')`); err != nil {
		t.Errorf("the index after the deletion: %v", err)
	}
	var hit int
	if err := check.QueryRow(`SELECT count(*) FROM search_fts WHERE search_fts MATCH 'testquokkarace'`).Scan(&hit); err != nil || hit != 0 {
		t.Errorf("the index still finds the deleted session's words: %d, %v", hit, err)
	}
}
