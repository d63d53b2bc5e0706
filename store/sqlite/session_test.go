package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/claudectl/claudectl/store"
)

func ptr[T any](v T) *T { return &v }

func TestSessionCRUD(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	s := &store.Session{Cwd: "/src/app", Model: "opus", PermissionMode: "default", Status: store.StatusStarting,
		Options: json.RawMessage(`{"max_turns":3}`)}
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s.ID == "" || s.CreatedAt.IsZero() {
		t.Fatalf("CreateSession left ID %q CreatedAt %v", s.ID, s.CreatedAt)
	}
	got, err := db.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("Session (-created +read):\n%s", diff)
	}

	upd, err := db.UpdateSession(ctx, s.ID, store.SessionUpdate{
		ClaudeSessionID: ptr("c1d2"), Status: ptr(store.StatusRunning), BudgetUSD: ptr(2.5),
	})
	if err != nil {
		t.Fatal(err)
	}
	if upd.ClaudeSessionID != "c1d2" || upd.Status != store.StatusRunning || upd.BudgetUSD != 2.5 || upd.Model != "opus" {
		t.Errorf("UpdateSession: %+v", upd)
	}
	if !upd.UpdatedAt.After(s.UpdatedAt) && !upd.UpdatedAt.Equal(s.UpdatedAt) {
		t.Errorf("UpdatedAt went back: %v < %v", upd.UpdatedAt, s.UpdatedAt)
	}

	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"create without cwd", db.CreateSession(ctx, &store.Session{Status: store.StatusIdle}), store.ErrInvalid},
		{"create with bad status", db.CreateSession(ctx, &store.Session{Cwd: "/", Status: "zombie"}), store.ErrInvalid},
		{"create with bad options", db.CreateSession(ctx, &store.Session{Cwd: "/", Status: store.StatusIdle, Options: json.RawMessage(`{`)}), store.ErrInvalid},
		{"create with a taken id", db.CreateSession(ctx, &store.Session{ID: s.ID, Cwd: "/", Status: store.StatusIdle}), store.ErrInvalid},
		{"update unknown", func() error {
			_, err := db.UpdateSession(ctx, "nope", store.SessionUpdate{Model: ptr("x")})
			return err
		}(), store.ErrNotFound},
		{"update bad status", func() error {
			_, err := db.UpdateSession(ctx, s.ID, store.SessionUpdate{Status: ptr(store.SessionStatus("x"))})
			return err
		}(), store.ErrInvalid},
		{"get unknown", func() error { _, err := db.Session(ctx, "nope"); return err }(), store.ErrNotFound},
		{"delete unknown", db.DeleteSession(ctx, "nope"), store.ErrNotFound},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, tt.err, tt.want)
		}
	}

	// Deleting a session takes its events and session rules with it, and a
	// later append to it fails.
	appendN(t, db, s.ID, 3)
	if err := db.CreateRule(ctx, &store.Rule{Spec: "Bash", Behavior: "allow", SessionID: s.ID}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Append to a deleted session: %v, want ErrNotFound", err)
	}
	if rs, err := db.Rules(ctx); err != nil || len(rs) != 0 {
		t.Errorf("rules after DeleteSession: %v (err %v)", rs, err)
	}
	// A new session under the same id starts a new log.
	if err := db.CreateSession(ctx, &store.Session{ID: s.ID, Cwd: "/", Status: store.StatusIdle}); err != nil {
		t.Fatal(err)
	}
	if seq, err := db.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x"}); err != nil || seq != 1 {
		t.Errorf("Append to a re-created session: seq %d, err %v; want 1", seq, err)
	}
}

func TestSessionsFilter(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	mk := func(cwd string, st store.SessionStatus) string {
		s := &store.Session{Cwd: cwd, Status: st}
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	a := mk("/a", store.StatusIdle)
	b := mk("/a", store.StatusRunning)
	c := mk("/b", store.StatusRunning)
	ids := func(f store.SessionFilter) []string {
		ss, err := db.Sessions(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range ss {
			out = append(out, s.ID)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(v ...string) []string { slices.Sort(v); return v }
	for _, tt := range []struct {
		f    store.SessionFilter
		want []string
	}{
		{store.SessionFilter{}, sorted(a, b, c)},
		{store.SessionFilter{Cwd: "/a"}, sorted(a, b)},
		{store.SessionFilter{Status: store.StatusRunning}, sorted(b, c)},
		{store.SessionFilter{Cwd: "/a", Status: store.StatusRunning}, []string{b}},
	} {
		if diff := cmp.Diff(tt.want, ids(tt.f), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Sessions(%+v) (-want +got):\n%s", tt.f, diff)
		}
	}
	if got := ids(store.SessionFilter{Limit: 2}); len(got) != 2 {
		t.Errorf("Limit 2: %d sessions", len(got))
	}
}

func TestMarkRunningInterrupted(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	statuses := []store.SessionStatus{store.StatusStarting, store.StatusRunning, store.StatusIdle,
		store.StatusInterrupted, store.StatusClosed, store.StatusFailed}
	byID := map[string]store.SessionStatus{}
	for _, st := range statuses {
		s := &store.Session{Cwd: "/", Status: st}
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		byID[s.ID] = st
	}
	ids, err := db.MarkRunningInterrupted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 {
		t.Errorf("MarkRunningInterrupted returned %v, want the starting and the running session", ids)
	}
	for id, before := range byID {
		s, err := db.Session(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := before
		if before == store.StatusStarting || before == store.StatusRunning {
			want = store.StatusInterrupted
		}
		if s.Status != want {
			t.Errorf("session %s: %s became %s, want %s", id, before, s.Status, want)
		}
	}
	if ids, err := db.MarkRunningInterrupted(ctx); err != nil || len(ids) != 0 {
		t.Errorf("second call: %v, %v; want none", ids, err)
	}
}

func TestAppendUpdateAsync(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	s := &store.Session{Cwd: "/src/app", Status: store.StatusStarting, Worker: "remote", ParentID: "p1"}
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	appendStatus := func(st store.SessionStatus, errText *string) (int64, error) {
		ev := &store.Event{SessionID: s.ID, Direction: store.FromDaemon, Type: "status", Raw: []byte(`{"type":"status"}`)}
		done := make(chan error, 1)
		if err := db.AppendUpdateAsync(ctx, func(err error) { done <- err }, ev,
			store.SessionUpdate{Status: &st, Error: errText}); err != nil {
			return 0, err
		}
		return ev.Seq, <-done
	}
	if seq, err := appendStatus(store.StatusFailed, ptr("exit 3\nboom")); err != nil || seq != 1 {
		t.Fatalf("AppendUpdateAsync: seq %d, %v", seq, err)
	}
	got, _ := db.Session(ctx, s.ID)
	if got.Status != store.StatusFailed || got.Error != "exit 3\nboom" || got.LastSeq != 1 || got.Worker != "remote" || got.ParentID != "p1" {
		t.Errorf("after a failed status: %+v", got)
	}
	if _, err := appendStatus(store.StatusIdle, nil); err != nil { // nil leaves the error
		t.Fatal(err)
	}
	got, _ = db.Session(ctx, s.ID)
	if got.Status != store.StatusIdle || got.Error != "exit 3\nboom" || got.LastSeq != 2 {
		t.Errorf("after idle: %+v", got)
	}
	if _, err := appendStatus(store.StatusWaiting, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a status the store does not keep: %v", err)
	}
}

// TestAppendUpdateMidBatch queues an update between many events so that
// they share commits: every event is stored, numbered in order.
func TestAppendUpdateMidBatch(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	s := &store.Session{Cwd: "/src/app", Status: store.StatusRunning}
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	const n = 200
	errs := make(chan error, n)
	evs := make([]*store.Event, n)
	for i := range n {
		evs[i] = &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "stream_event", Raw: []byte(`{"type":"stream_event"}`)}
		done := func(err error) { errs <- err }
		var err error
		if i%37 == 5 {
			err = db.AppendUpdateAsync(ctx, done, evs[i], store.SessionUpdate{Status: ptr(store.StatusIdle)})
		} else {
			err = db.AppendAsync(ctx, done, evs[i])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
	}
	got, _ := db.Session(ctx, s.ID)
	if got.LastSeq != n || got.Status != store.StatusIdle {
		t.Errorf("session after the batch: last seq %d, status %s", got.LastSeq, got.Status)
	}
}
