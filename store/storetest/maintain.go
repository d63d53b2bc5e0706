package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/claudectl/claudectl/store"
)

// retention checks store.Maintainer: the counts, and that PruneEvents
// removes exactly the events its dry run listed, of the ended sessions
// only, keeping their rows and last seqs.
func retention(t *testing.T, s store.Store) {
	m, ok := s.(store.Maintainer)
	if !ok {
		t.Skipf("%T is not a store.Maintainer", s)
	}
	ctx := context.Background()
	mk := func(n int, st store.SessionStatus) *store.Session {
		ss := newSession(t, s)
		for i := range n {
			if _, err := s.Append(ctx, ev(ss.ID, i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.UpdateSession(ctx, ss.ID, store.SessionUpdate{Status: &st}); err != nil {
			t.Fatal(err)
		}
		return ss
	}
	closed, failed, idle, empty := mk(5, store.StatusClosed), mk(3, store.StatusFailed), mk(4, store.StatusIdle), mk(0, store.StatusClosed)
	_ = empty
	for i := range 2 {
		if err := s.AddDecision(ctx, &store.Decision{SessionID: closed.ID, RequestID: fmt.Sprint("req-", i),
			ToolName: "Bash", Behavior: "allow", By: "rule"}); err != nil {
			t.Fatal(err)
		}
	}
	counts, err := m.CountSessions(ctx)
	want := map[store.SessionStatus]int64{store.StatusClosed: 2, store.StatusFailed: 1, store.StatusIdle: 1}
	if err != nil || !cmp.Equal(counts, want) {
		t.Errorf("CountSessions = %v, %v; want %v", counts, err, want)
	}

	if got, err := m.PruneEvents(ctx, time.Now().Add(-time.Hour), false); err != nil || len(got) != 0 {
		t.Errorf("PruneEvents of sessions ended an hour ago = %+v, %v; want none", got, err)
	}
	later := time.Now().Add(time.Hour) // every ended session ended before it
	listed, err := m.PruneEvents(ctx, later, true)
	if err != nil {
		t.Fatal(err)
	}
	ignoreTimes := cmpopts.IgnoreFields(store.PrunedSession{}, "EndedAt", "Bytes")
	wantList := []store.PrunedSession{
		{ID: closed.ID, Status: store.StatusClosed, FirstSeq: 1, LastSeq: 5, Events: 5},
		{ID: failed.ID, Status: store.StatusFailed, FirstSeq: 1, LastSeq: 3, Events: 3},
	}
	if diff := cmp.Diff(wantList, listed, ignoreTimes); diff != "" {
		t.Errorf("PruneEvents dry run (-want +got):\n%s", diff)
	}
	for _, p := range listed {
		if p.Bytes <= 0 || p.EndedAt.IsZero() {
			t.Errorf("listed %+v: want its bytes and end", p)
		}
	}
	if evs, err := collect(s, closed.ID, 0); err != nil || len(evs) != 5 {
		t.Fatalf("after a dry run: %d events, %v; want all 5", len(evs), err)
	}
	pruned, err := m.PruneEvents(ctx, later, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(listed, pruned); diff != "" {
		t.Errorf("PruneEvents removed other than its dry run listed (-listed +removed):\n%s", diff)
	}
	for _, ss := range []*store.Session{closed, failed} {
		_, err := collect(s, ss.ID, 0)
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "retention") {
			t.Errorf("a replay of pruned session %s: %v; want ErrUnavailable saying retention removed them", ss.ID, err)
		}
		got, err := s.Session(ctx, ss.ID)
		if err != nil || got.LastSeq != listed[0].LastSeq && got.ID == closed.ID {
			t.Errorf("the pruned session's row: %+v, %v; want it kept with its last seq", got, err)
		}
		if evs, err := collect(s, ss.ID, got.LastSeq); err != nil || len(evs) != 0 {
			t.Errorf("a replay from its last seq: %d, %v; want none and no error", len(evs), err)
		}
	}
	if got, _ := s.Session(ctx, closed.ID); got.LastSeq != 5 {
		t.Errorf("LastSeq of the pruned session %d, want 5", got.LastSeq)
	}
	if evs, err := collect(s, idle.ID, 0); err != nil || len(evs) != 4 {
		t.Errorf("the idle session's events: %d, %v; want all 4", len(evs), err)
	}
	if again, err := m.PruneEvents(ctx, later, false); err != nil || len(again) != 0 {
		t.Errorf("PruneEvents again = %+v, %v; want none", again, err)
	}

	if err := s.AddAudit(ctx, &store.AuditEntry{User: "alice", Token: "laptop", Action: "Decide"}); err != nil {
		t.Fatal(err)
	}
	if n, err := m.PruneAudit(ctx, later, true); err != nil || n != 3 {
		t.Errorf("PruneAudit dry run = %d, %v; want 3 (2 decisions, 1 action)", n, err)
	}
	if n, err := m.PruneAudit(ctx, time.Now().Add(-time.Hour), false); err != nil || n != 0 {
		t.Errorf("PruneAudit of an hour ago = %d, %v; want 0", n, err)
	}
	if n, err := m.PruneAudit(ctx, later, false); err != nil || n != 3 {
		t.Errorf("PruneAudit = %d, %v; want 3", n, err)
	}
	if ds, err := s.Decisions(ctx, store.DecisionFilter{}); err != nil || len(ds) != 0 {
		t.Errorf("Decisions after pruning: %d, %v; want none", len(ds), err)
	}
	if es, err := s.Audit(ctx, store.AuditFilter{}); err != nil || len(es) != 0 {
		t.Errorf("Audit after pruning: %d, %v; want none", len(es), err)
	}
	if _, err := m.Reclaim(ctx); err != nil {
		t.Errorf("Reclaim: %v", err)
	}
}
