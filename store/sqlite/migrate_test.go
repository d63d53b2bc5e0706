package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

// Migration 3 rebuilds the sessions table (new statuses): a database of
// version 2 keeps its sessions, their events, usage and rules, and the
// foreign keys still hold (deleting a session deletes its events, now in
// chunks).
func TestMigrationRebuildsSessions(t *testing.T) {
	ctx := context.Background()
	path, raw := atVersion(t, 2) // then what an older claudectl wrote
	for _, q := range []string{
		`INSERT INTO sessions (pk, id, cwd, status, created_at, updated_at) VALUES (1, 's1', '/src', 'idle', 1, 1)`,
		`INSERT INTO events (session, seq, time, direction, type, raw, original_size) VALUES (1, 1, 5, 1, 'user', CAST('{"type":"user"}' AS BLOB), 15)`,
		`INSERT INTO events (session, seq, time, direction, type, raw, original_size) VALUES (1, 2, 6, 1, 'result', CAST('{"type":"result"}' AS BLOB), 17)`,
		`INSERT INTO rules (spec, behavior, session_id, created_at) VALUES ('Bash(ls)', 'allow', 's1', 1)`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	raw.Close()
	s := &store.Session{ID: "s1"}

	db, err := sqlite.Open(ctx, path, nil)
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
	raw, err = sql.Open("sqlite", path+busyWait)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var n int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM event_chunks`).Scan(&n); err != nil || n != 0 {
		t.Errorf("events left after deleting their session: %d, %v", n, err)
	}
}

// Migration 4 moves the events of version 3 (a row each) into chunks: every
// event comes back as it was (seq, time, direction, type, subtype, line,
// original size), two sessions' interleaved rows included, lines large
// enough to split chunks, and a hole in a log is still refused; the logs
// then go on from their last seq.
func TestMigrationChunksEvents(t *testing.T) {
	ctx := context.Background()
	path, raw := atVersion(t, 3)
	for i, id := range []string{"a", "b", "holey"} {
		if _, err := raw.Exec(`INSERT INTO sessions (pk, id, cwd, status, created_at, updated_at) VALUES (?, ?, '/src', 'idle', 1, 1)`, i+1, id); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]store.Event{}
	insert := func(pk int64, id string, seq int64, ev store.Event) {
		t.Helper()
		if _, err := raw.Exec(`INSERT INTO events (session, seq, time, direction, type, subtype, raw, original_size) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			pk, seq, ev.Time.UnixNano(), int64(ev.Direction), ev.Type, ev.Subtype, ev.Raw, ev.OriginalSize); err != nil {
			t.Fatal(err)
		}
		ev.SessionID, ev.Seq = id, seq
		want[id] = append(want[id], ev)
	}
	base := time.Unix(1700000000, 0).UTC()
	big := strings.Repeat("x", sqlite.MaxChunkBytes/3)
	var seqA, seqB int64
	for i := range 1500 {
		line := fmt.Sprintf(`{"type":"stream_event","i":%d}`, i)
		if i%97 == 0 {
			line = fmt.Sprintf(`{"type":"user","big":%q}`, big)
		}
		ev := store.Event{Time: base.Add(time.Duration(i) * time.Millisecond), Direction: store.Direction(1 + i%3),
			Type: []string{"stream_event", "text_delta", "status", "system"}[i%4], Subtype: []string{"", "init", "weird-subtype"}[i%3],
			Raw: []byte(line), OriginalSize: int64(len(line) + i%2*1000)}
		if i%3 == 0 {
			seqB++
			insert(2, "b", seqB, ev)
		} else {
			seqA++
			insert(1, "a", seqA, ev)
		}
	}
	for _, seq := range []int64{1, 2, 3, 6, 7, 8} {
		insert(3, "holey", seq, store.Event{Time: base.Add(-time.Duration(seq) * time.Second), Direction: store.FromCLI, Type: "x", Raw: []byte(`{}`), OriginalSize: 2})
	}
	raw.Close()

	db, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, id := range []string{"a", "b"} {
		got, err := collect(t, db, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want[id]) {
			t.Fatalf("session %s: %d events after the migration, want %d", id, len(got), len(want[id]))
		}
		for i, g := range got {
			w := want[id][i]
			if g.Seq != w.Seq || !g.Time.Equal(w.Time) || g.Direction != w.Direction || g.Type != w.Type ||
				g.Subtype != w.Subtype || !bytes.Equal(g.Raw, w.Raw) || g.OriginalSize != w.OriginalSize {
				t.Fatalf("session %s event %d:\n got %+v\nwant %+v", id, i, g, w)
			}
		}
		// From the middle of a chunk.
		mid := int64(len(want[id]) / 2)
		if got, err := collect(t, db, id, mid); err != nil || len(got) != len(want[id])-int(mid) || got[0].Seq != mid+1 {
			t.Errorf("session %s after %d: %d events, %v", id, mid, len(got), err)
		}
	}
	if got, err := collect(t, db, "holey", 0); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("the log with a hole: %d events, %v; want ErrUnavailable", len(got), err)
	}
	if got, err := collect(t, db, "holey", 5); err != nil || len(got) != 3 || got[0].Seq != 6 {
		t.Errorf("the log with a hole, after the hole: %d events, %v", len(got), err)
	}
	seq, err := db.Append(ctx, &store.Event{SessionID: "a", Direction: store.FromCLI, Type: "x", Raw: []byte(`{}`)})
	if err != nil || seq != seqA+1 {
		t.Errorf("the next append to a: seq %d, %v; want %d", seq, err, seqA+1)
	}
	if s, err := db.Session(ctx, "b"); err != nil || s.LastSeq != seqB {
		t.Errorf("session b: %+v, %v; want last seq %d", s, err, seqB)
	}
}

// Migration 6 rebuilds the rules table so that an id is never given again:
// a database of version 5 keeps its rules (and their session's cascade),
// and the next rule's id follows every id the rules and the audit trail
// used, a removed rule's included.
func TestMigrationRuleIDsNotReused(t *testing.T) {
	ctx := context.Background()
	path, raw := atVersion(t, 5)
	for _, q := range []string{
		`INSERT INTO sessions (pk, id, cwd, status, created_at, updated_at) VALUES (1, 's1', '/src', 'idle', 1, 1)`,
		`INSERT INTO rules (id, spec, behavior, created_at) VALUES (1, 'Read', 'allow', 1)`,
		`INSERT INTO rules (id, spec, behavior, session_id, created_at) VALUES (2, 'Bash(ls)', 'allow', 's1', 1)`,
		// Rule 7 allowed something, then was removed: only the trail names it.
		`INSERT INTO decisions (session_id, request_id, tool_name, behavior, decided_by, rule_id, rule_spec, requested_at, decided_at)
			VALUES ('s1', 'r1', 'Bash', 'allow', 'rule', 7, 'Bash', 1, 1)`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	raw.Close()
	db, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rules, err := db.Rules(ctx)
	if err != nil || len(rules) != 2 {
		t.Fatalf("rules after the migration: %+v, %v", rules, err)
	}
	r := &store.Rule{Spec: "Edit", Behavior: "deny"}
	if err := db.CreateRule(ctx, r); err != nil {
		t.Fatal(err)
	}
	if r.ID <= 7 {
		t.Errorf("the first rule after the migration has id %d; the trail names rule 7", r.ID)
	}
	if err := db.DeleteRule(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	again := &store.Rule{Spec: "Write", Behavior: "deny"}
	if err := db.CreateRule(ctx, again); err != nil {
		t.Fatal(err)
	}
	if again.ID <= r.ID {
		t.Errorf("a rule added after removing rule %d got id %d", r.ID, again.ID)
	}
	if err := db.DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if rules, err := db.Rules(ctx); err != nil || len(rules) != 2 {
		t.Errorf("after deleting the session, its rule should be gone: %+v, %v", rules, err)
	}
}

// atVersion creates a database of schema version version in a temporary
// directory and opens it raw, for the test to write what an older
// claudectl wrote; the test closes raw before opening path with the store.
func atVersion(t *testing.T, version int) (path string, raw *sql.DB) {
	t.Helper()
	path = filepath.Join(t.TempDir(), fmt.Sprintf("v%d.db", version))
	if err := sqlite.CreateAtVersion(context.Background(), path, version); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path+busyWait)
	if err != nil {
		t.Fatal(err)
	}
	return path, raw
}
