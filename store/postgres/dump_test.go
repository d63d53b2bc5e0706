package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

// TestPgDumpRestore runs the backup docs/operations.md gives for a
// PostgreSQL store: pg_dump of a store that holds sessions, events, rules
// and the audit trail, pg_restore into a new database; a store opened on
// it has all of them, and goes on numbering each session's events after
// its last.
func TestPgDumpRestore(t *testing.T) {
	src := pgtest.New(t) // skips without PostgreSQL (fails under CI=true)
	bin, err := pgtest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dump, restore := filepath.Join(bin, "pg_dump"), filepath.Join(bin, "pg_restore")
	for _, p := range []string{dump, restore} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s is not installed beside the server (Debian's postgresql package has it): %v", p, err)
		}
	}
	ctx := context.Background()
	db := mustOpenURL(t, src)
	var ids []string
	for i := range 3 {
		s := &store.Session{Cwd: "/src/app", Status: store.StatusIdle}
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		for j := range 10 * (i + 1) {
			if _, err := db.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "assistant",
				Raw: fmt.Appendf(nil, `{"i":%d}`, j)}); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, s.ID)
	}
	if err := db.CreateRule(ctx, &store.Rule{Spec: "Bash(git status:*)", Behavior: "allow"}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddDecision(ctx, &store.Decision{SessionID: ids[0], RequestID: "r1", ToolName: "Bash", Behavior: "allow", By: "rule"}); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "claudectl.dump")
	run := func(name string, args ...string) {
		t.Helper()
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %v: %v\n%s", filepath.Base(name), args, err, out.String())
		}
	}
	run(dump, "--format=custom", "--file="+file, src) // while the store is open, as with running daemons
	dest := pgtest.New(t)
	run(restore, "--no-owner", "--dbname="+dest, file)

	r := mustOpenURL(t, dest)
	for i, id := range ids {
		var n int64
		for ev, err := range r.Events(ctx, id, 0) {
			if err != nil {
				t.Fatal(err)
			}
			if n++; ev.Seq != n || string(ev.Raw) != fmt.Sprintf(`{"i":%d}`, n-1) {
				t.Fatalf("restored session %s, event %d: %+v", id, n, ev)
			}
		}
		if n != int64(10*(i+1)) {
			t.Errorf("restored session %s has %d events, want %d", id, n, 10*(i+1))
		}
	}
	if rules, err := r.Rules(ctx); err != nil || len(rules) != 1 {
		t.Errorf("restored rules: %v, %v", rules, err)
	}
	if ds, err := r.Decisions(ctx, store.DecisionFilter{}); err != nil || len(ds) != 1 {
		t.Errorf("restored decisions: %v, %v", ds, err)
	}
	if seq, err := r.Append(ctx, &store.Event{SessionID: ids[0], Direction: store.FromDaemon, Type: "note", Raw: []byte(`{}`)}); err != nil || seq != 11 {
		t.Errorf("an append on the restored store: seq %d, %v; want 11", seq, err)
	}
	s := &store.Session{Cwd: "/src/app", Status: store.StatusIdle}
	if err := r.CreateSession(ctx, s); err != nil { // the identity sequences came back too
		t.Errorf("a new session on the restored store: %v", err)
	}
}
