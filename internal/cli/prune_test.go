package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/apiserver"

	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/internal/serve"
	"github.com/claudectl/claudectl/store"
)

// stageEnded stores a session with n events that ended (closed) ago,
// in the daemon's store: its end is set in the file, as no client can.
func stageEnded(t *testing.T, db store.Store, file string, n int, st store.SessionStatus, ago time.Duration) *store.Session {
	t.Helper()
	ctx := context.Background()
	s := &store.Session{Cwd: t.TempDir(), Status: store.StatusIdle}
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := db.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "assistant",
			Raw: fmt.Appendf(nil, `{"type":"assistant","i":%d}`, i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.UpdateSession(ctx, s.ID, store.SessionUpdate{Status: &st}); err != nil {
		t.Fatal(err)
	}
	if ago > 0 {
		raw, err := sql.Open("sqlite", file+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if _, err := raw.Exec(`UPDATE sessions SET updated_at = ? WHERE id = ?`, time.Now().Add(-ago).UnixNano(), s.ID); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestPruneRemovesWhatItListed: claudectl prune --dry-run lists the
// sessions ended longer ago than the retention, with their events, and
// removes nothing; claudectl prune then removes exactly those events (the
// same list): the sessions stay with their last seq, their replay says
// retention removed the events, and the other sessions keep theirs.
func TestPruneRemovesWhatItListed(t *testing.T) {
	dataDir := t.TempDir()
	td := daemontest.Start(t, &daemontest.Options{DataDir: dataDir})
	url, _ := td.Serve()
	db, file := td.DB(), filepath.Join(dataDir, "claudectl.db")
	old := stageEnded(t, db, file, 7, store.StatusClosed, 40*24*time.Hour)
	oldFailed := stageEnded(t, db, file, 3, store.StatusFailed, 31*24*time.Hour)
	recent := stageEnded(t, db, file, 5, store.StatusClosed, 2*24*time.Hour)
	live := stageEnded(t, db, file, 4, store.StatusIdle, 90*24*time.Hour) // idle, however old: kept
	inv := invocation{getenv: map[string]string{"CLAUDECTL_TOKEN": td.Token()}}
	args := []string{"--server", url, "--closed-sessions", "30d"}

	o := claudectl(t, inv, append([]string{"prune", "--dry-run", "--json"}, args...)...)
	if o.code != 0 {
		t.Fatalf("prune --dry-run: exit %d: %s", o.code, o.stderr)
	}
	var listed serve.PruneReport
	if err := json.Unmarshal([]byte(o.stdout), &listed); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range listed.Sessions {
		ids = append(ids, s.ID)
	}
	if want := []string{old.ID, oldFailed.ID}; !cmp.Equal(ids, want) || listed.Events != 10 || !listed.DryRun {
		t.Fatalf("dry run listed %v (%d events), want %v (10 events)", ids, listed.Events, want)
	}
	for _, s := range []*store.Session{old, oldFailed, recent, live} {
		if evs := replay(t, db, s.ID); len(evs) == 0 {
			t.Fatalf("the dry run removed the events of %s", s.ID)
		}
	}
	o = claudectl(t, inv, append([]string{"prune", "--dry-run"}, args...)...)
	if o.code != 0 || !strings.Contains(o.stdout, "Would remove the events of 2 sessions ended over 30d ago") ||
		!strings.Contains(o.stdout, old.ID) {
		t.Errorf("prune --dry-run's report:\n%s", o.stdout)
	}

	o = claudectl(t, inv, append([]string{"prune", "--json"}, args...)...)
	if o.code != 0 {
		t.Fatalf("prune: exit %d: %s", o.code, o.stderr)
	}
	var removed serve.PruneReport
	if err := json.Unmarshal([]byte(o.stdout), &removed); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(listed.Sessions, removed.Sessions); diff != "" || removed.Events != listed.Events || removed.DryRun {
		t.Errorf("prune removed other than its dry run listed (-listed +removed):\n%s", diff)
	}
	for _, s := range []*store.Session{old, oldFailed} {
		_, err := collectEvents(db, s.ID, 0)
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "retention") {
			t.Errorf("replay of pruned %s: %v, want ErrUnavailable naming retention", s.ID, err)
		}
		got, err := db.Session(context.Background(), s.ID)
		if err != nil || got.LastSeq == 0 {
			t.Errorf("pruned session %s: %+v, %v; want its row and last seq kept", s.ID, got, err)
		}
	}
	for s, n := range map[*store.Session]int{recent: 5, live: 4} {
		if evs := replay(t, db, s.ID); len(evs) != n {
			t.Errorf("session %s kept %d events, want %d", s.ID, len(evs), n)
		}
	}
	// attach shows what is left, saying what retention removed.
	o = claudectl(t, inv, "attach", "--server", url, old.ID)
	if o.code != 0 || !strings.Contains(o.stderr, "7 earlier events of this session are gone: removed by retention") {
		t.Errorf("attach to a pruned session: exit %d: %s", o.code, o.stderr)
	}
	o = claudectl(t, inv, append([]string{"prune"}, args...)...)
	if o.code != 0 || !strings.Contains(o.stdout, "Removed the events of 0 sessions") {
		t.Errorf("a second prune:\n%s%s", o.stdout, o.stderr)
	}
	// Pruning is an admin's, and audited.
	entries, err := db.Audit(context.Background(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	pruned := 0
	for _, e := range entries {
		if e.Action == "Prune" && e.Outcome == "ok" && e.User == apiserver.BootstrapName {
			pruned++
		}
	}
	if pruned < 3 {
		t.Errorf("the audit trail has %d Prune entries by the daemon's owner, want 3 or more: %+v", pruned, entries)
	}
	_, httpc := td.Serve()
	res, err := claudectlv1connect.NewAuthServiceClient(httpc, url).CreateToken(context.Background(),
		connect.NewRequest(&v1.CreateTokenRequest{Name: "ops-viewer", Role: "viewer", User: "ops"}))
	if err != nil {
		t.Fatal(err)
	}
	o = claudectl(t, invocation{getenv: map[string]string{"CLAUDECTL_TOKEN": res.Msg.Secret}}, append([]string{"prune", "--dry-run"}, args...)...)
	if o.code != 1 || !strings.Contains(o.stderr, "Prune needs a token of the admin role") {
		t.Errorf("prune with a viewer's token: exit %d: %s", o.code, o.stderr)
	}
	// Without a retention, neither set nor given, prune says so.
	o = claudectl(t, inv, "prune", "--server", url)
	if o.code != 1 || !strings.Contains(o.stderr, "store.retention is not set") {
		t.Errorf("prune without a retention: exit %d: %s", o.code, o.stderr)
	}
	o = claudectl(t, inv, "prune", "--server", url, "--closed-sessions", "30m")
	if o.code != 2 || !strings.Contains(o.stderr, "at least 1h") {
		t.Errorf("prune --closed-sessions 30m: exit %d: %s", o.code, o.stderr)
	}
}

func collectEvents(db store.Store, id string, after int64) ([]store.Event, error) {
	var out []store.Event
	for ev, err := range db.Events(context.Background(), id, after) {
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
	return out, nil
}

func replay(t *testing.T, db store.Store, id string) []store.Event {
	t.Helper()
	evs, err := collectEvents(db, id, 0)
	if err != nil {
		t.Fatalf("replay of %s: %v", id, err)
	}
	return evs
}
