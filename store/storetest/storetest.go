// Package storetest is the conformance suite of [store.Store]: what the
// daemon relies on, engine-neutral, for every implementation to run
// against itself:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return openMyStore(t) })
//	}
//
// Engine-specific behaviour (a full disk, the file layout) stays in the
// engine's own tests.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/claudectl/claudectl/store"
)

// Run runs the suite; open returns a new, empty store, which Run closes.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	for _, tc := range []struct {
		name string
		f    func(*testing.T, store.Store)
	}{
		{"Sessions", sessions},
		{"AppendAndReplay", appendAndReplay},
		{"AsyncOrderAndUpdates", asyncOrderAndUpdates},
		{"UsageLedger", usageLedger},
		{"RulesAndDecisions", rulesAndDecisions},
		{"Close", closeStore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			tc.f(t, s)
		})
	}
}

func newSession(t *testing.T, s store.Store) *store.Session {
	t.Helper()
	ss := &store.Session{Cwd: "/src/app", Status: store.StatusStarting}
	if err := s.CreateSession(context.Background(), ss); err != nil {
		t.Fatal(err)
	}
	if ss.ID == "" {
		t.Fatal("CreateSession set no id")
	}
	return ss
}

func ev(id string, i int) *store.Event {
	return &store.Event{SessionID: id, Direction: store.FromCLI, Type: "stream_event", Raw: fmt.Appendf(nil, `{"i":%d}`, i)}
}

func collect(s store.Store, id string, after int64) ([]store.Event, error) {
	var out []store.Event
	for e, err := range s.Events(context.Background(), id, after) {
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

func sessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newSession(t, s)
	got, err := s.Session(ctx, a.ID)
	if err != nil || got.Cwd != "/src/app" || got.Status != store.StatusStarting || got.LastSeq != 0 {
		t.Fatalf("Session = %+v, %v", got, err)
	}
	st, model := store.StatusIdle, "opus"
	up, err := s.UpdateSession(ctx, a.ID, store.SessionUpdate{Status: &st, Model: &model})
	if err != nil || up.Status != st || up.Model != model {
		t.Fatalf("UpdateSession = %+v, %v", up, err)
	}
	if _, err := s.Session(ctx, "no-such"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown session: %v, want ErrNotFound", err)
	}
	if _, err := s.UpdateSession(ctx, "no-such", store.SessionUpdate{Status: &st}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("updating an unknown session: %v, want ErrNotFound", err)
	}
	b := newSession(t, s)
	running := store.StatusRunning
	if _, err := s.UpdateSession(ctx, b.ID, store.SessionUpdate{Status: &running}); err != nil {
		t.Fatal(err)
	}
	all, err := s.Sessions(ctx, store.SessionFilter{})
	if err != nil || len(all) != 2 {
		t.Fatalf("Sessions = %d, %v", len(all), err)
	}
	ids, err := s.MarkRunningInterrupted(ctx)
	if err != nil || len(ids) != 1 || ids[0] != b.ID {
		t.Fatalf("MarkRunningInterrupted = %v, %v; want [%s]", ids, err, b.ID)
	}
	if got, _ := s.Session(ctx, b.ID); got.Status != store.StatusInterrupted {
		t.Errorf("after MarkRunningInterrupted: %s", got.Status)
	}
	if err := s.DeleteSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a deleted session: %v", err)
	}
}

func appendAndReplay(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newSession(t, s)
	for i := range 3 {
		seq, err := s.Append(ctx, ev(a.ID, i))
		if err != nil || seq != int64(i+1) {
			t.Fatalf("Append %d: seq %d, %v", i, seq, err)
		}
	}
	batch := []*store.Event{ev(a.ID, 3), ev(a.ID, 4)}
	if err := s.AppendBatch(ctx, batch...); err != nil || batch[0].Seq != 4 || batch[1].Seq != 5 {
		t.Fatalf("AppendBatch: seqs %d %d, %v", batch[0].Seq, batch[1].Seq, err)
	}
	evs, err := collect(s, a.ID, 0)
	if err != nil || len(evs) != 5 {
		t.Fatalf("Events: %d, %v", len(evs), err)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) || string(e.Raw) != fmt.Sprintf(`{"i":%d}`, i) || e.Type != "stream_event" || e.Direction != store.FromCLI || e.Time.IsZero() {
			t.Errorf("event %d = %+v", i, e)
		}
	}
	if evs, err := collect(s, a.ID, 3); err != nil || len(evs) != 2 || evs[0].Seq != 4 {
		t.Errorf("Events after 3: %d, %v", len(evs), err)
	}
	if evs, err := collect(s, a.ID, 5); err != nil || len(evs) != 0 {
		t.Errorf("Events after the last: %d, %v", len(evs), err)
	}
	if _, err := collect(s, a.ID, 9); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Events after the end: %v, want ErrUnavailable", err)
	}
	if _, err := collect(s, "no-such", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Events of an unknown session: %v, want ErrNotFound", err)
	}
	if _, err := s.Append(ctx, ev("no-such", 0)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Append to an unknown session: %v, want ErrNotFound", err)
	}
	if _, err := s.Append(ctx, &store.Event{SessionID: a.ID, Direction: store.FromCLI}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Append without a type: %v, want ErrInvalid", err)
	}
	if got, _ := s.Session(ctx, a.ID); got.LastSeq != 5 {
		t.Errorf("LastSeq %d, want 5", got.LastSeq)
	}
}

func asyncOrderAndUpdates(t *testing.T, s store.Store) {
	ctx := context.Background()
	a, b := newSession(t, s), newSession(t, s)
	const n = 200
	var mu sync.Mutex
	var order []int64
	var wg sync.WaitGroup
	for i := range n {
		e := ev([]string{a.ID, b.ID}[i%2], i)
		wg.Add(1)
		if err := s.AppendAsync(ctx, func(err error) {
			if err != nil {
				t.Error(err)
			}
			if e.SessionID == a.ID {
				mu.Lock()
				order = append(order, e.Seq)
				mu.Unlock()
			}
			wg.Done()
		}, e); err != nil {
			t.Fatal(err)
		}
	}
	st := store.StatusIdle
	wg.Add(1)
	last := &store.Event{SessionID: a.ID, Direction: store.FromDaemon, Type: "status", Raw: []byte(`{"status":"idle"}`)}
	if err := s.AppendUpdateAsync(ctx, func(err error) {
		if err != nil {
			t.Error(err)
		}
		wg.Done()
	}, last, store.SessionUpdate{Status: &st}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, seq := range order {
		if seq != int64(i+1) {
			t.Fatalf("done calls of session a out of order: %v", order)
		}
	}
	if last.Seq != n/2+1 {
		t.Errorf("the update's event: seq %d, want %d", last.Seq, n/2+1)
	}
	if got, _ := s.Session(ctx, a.ID); got.Status != store.StatusIdle || got.LastSeq != n/2+1 {
		t.Errorf("session a after the update: %s, last seq %d", got.Status, got.LastSeq)
	}
	if evs, err := collect(s, b.ID, 0); err != nil || len(evs) != n/2 {
		t.Errorf("session b: %d events, %v", len(evs), err)
	}
}

func usageLedger(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newSession(t, s)
	proc, err := s.NewProcess(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var rec *store.UsageRecord
	var after *store.Session
	for _, cum := range []float64{0.5, 1.25} {
		wg.Add(1)
		res := &store.Event{SessionID: a.ID, Direction: store.FromCLI, Type: "result", Subtype: "success", Raw: []byte(`{"type":"result"}`)}
		if err := s.AppendResultAsync(ctx, func(r *store.UsageRecord, ss *store.Session, err error) {
			if err != nil {
				t.Error(err)
			}
			rec, after = r, ss
			wg.Done()
		}, res, store.UsageInput{SessionID: a.ID, Process: proc, Result: store.ResultUsage{Subtype: "success", Cumulative: store.Cumulative{CostUSD: cum}}}); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
	if rec == nil || rec.Turn != 2 || rec.CostUSD < 0.7499 || rec.CostUSD > 0.7501 {
		t.Fatalf("the second turn's record: %+v", rec)
	}
	if after == nil || after.Totals.Turns != 2 || after.Totals.CostUSD < 1.2499 || after.Totals.CostUSD > 1.2501 {
		t.Fatalf("the session after two turns: %+v", after)
	}
	ledger, err := s.Usage(ctx, a.ID)
	if err != nil || len(ledger) != 2 || ledger[0].Turn != 1 || ledger[1].EventSeq != 2 {
		t.Fatalf("Usage = %+v, %v", ledger, err)
	}
}

func rulesAndDecisions(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newSession(t, s)
	r := &store.Rule{Spec: "Bash(git status:*)", Behavior: "allow", CreatedBy: "client:alice"}
	if err := s.CreateRule(ctx, r); err != nil || r.ID == 0 {
		t.Fatalf("CreateRule: id %d, %v", r.ID, err)
	}
	sr := &store.Rule{Spec: "Edit", Behavior: "deny", SessionID: a.ID}
	if err := s.CreateRule(ctx, sr); err != nil {
		t.Fatal(err)
	}
	rules, err := s.Rules(ctx)
	if err != nil || len(rules) != 2 {
		t.Fatalf("Rules = %+v, %v", rules, err)
	}
	if err := s.DeleteRule(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRule(ctx, r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
	for i := range 3 {
		d := &store.Decision{SessionID: a.ID, RequestID: fmt.Sprint("req-", i), ToolName: "Bash", Behavior: "allow", By: "client:bob"}
		if err := s.AddDecision(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := s.Decisions(ctx, store.DecisionFilter{SessionID: a.ID, Limit: 2})
	if err != nil || len(ds) != 2 || ds[0].RequestID != "req-2" {
		t.Fatalf("Decisions = %+v, %v; want the newest two", ds, err)
	}
	if err := s.DeleteSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if rules, _ := s.Rules(ctx); len(rules) != 0 {
		t.Errorf("the session's rule outlived it: %+v", rules)
	}
}

func closeStore(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newSession(t, s)
	if _, err := s.Append(ctx, ev(a.ID, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := s.Append(ctx, ev(a.ID, 1)); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Append after Close: %v, want ErrClosed", err)
	}
	if h := s.WriteHealth(); h.Err != nil {
		t.Errorf("WriteHealth after a clean life: %+v", h)
	}
}
