package sqlite_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

// TestAppendResultAsync enters two turns of one CLI process (cumulative
// counters), then a resumed process whose counters start again, and
// checks the per-turn deltas, the session totals, the budget and that
// each entry's event_seq is its result line's seq. The daemon restarts
// (the store is reopened) between the first process's turns, so the
// second one's share is computed from the file, not the writer's cache.
func TestAppendResultAsync(t *testing.T) {
	ctx := context.Background()
	db, path := mustOpen(t, nil)
	s := mustSession(t, db)
	if _, err := db.UpdateSession(ctx, s.ID, store.SessionUpdate{BudgetUSD: ptr(0.005)}); err != nil {
		t.Fatal(err)
	}
	reopen := func() {
		t.Helper()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		var err error
		if db, err = sqlite.Open(ctx, path, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
	}
	add := func(in store.UsageInput) (*store.UsageRecord, *store.Session, error) {
		// Pad the log so that the line's seq is the one the test expects.
		for {
			s, err := db.Session(ctx, in.SessionID)
			if err != nil {
				return nil, nil, err
			}
			if s.LastSeq >= in.EventSeq-1 {
				break
			}
			if _, err := db.Append(ctx, &store.Event{SessionID: in.SessionID,
				Direction: store.FromCLI, Type: "assistant", Raw: []byte(`{"type":"assistant"}`)}); err != nil {
				return nil, nil, err
			}
		}
		ev := &store.Event{SessionID: in.SessionID, Direction: store.FromCLI, Type: "result", Raw: []byte(`{"type":"result"}`)}
		want := in.EventSeq
		in.EventSeq = 0 // filled in by the writer
		rec, sess, err := appendResult(db, ev, in, nil)
		if err == nil && (ev.Seq != want || rec.EventSeq != want) {
			t.Errorf("result seq %d, ledger event_seq %d; want %d", ev.Seq, rec.EventSeq, want)
		}
		return rec, sess, err
	}
	res := func(cost float64, in, out int64) store.ResultUsage {
		return store.ResultUsage{Subtype: "success", DurationMS: 10, Cumulative: store.Cumulative{CostUSD: cost,
			Models: map[string]store.ModelUsage{"opus": {InputTokens: in, OutputTokens: out, CostUSD: cost}}}}
	}
	gen1, err := db.NewProcess(ctx, s.ID)
	if err != nil || gen1 != 1 {
		t.Fatalf("NewProcess: %d, %v; want 1", gen1, err)
	}
	type step struct {
		process  int64
		res      store.ResultUsage
		wantCost float64
		wantIn   int64
		wantOver bool
	}
	steps := []step{
		{gen1, res(0.001, 200, 4), 0.001, 200, false},
		{gen1, res(0.0018, 410, 8), 0.0008, 210, false}, // cumulative: the delta counts
	}
	gen2, err := db.NewProcess(ctx, s.ID) // claude --resume: counters restart
	if err != nil || gen2 != 2 {
		t.Fatalf("NewProcess: %d, %v; want 2", gen2, err)
	}
	steps = append(steps,
		// Above the first process's last counters: its share is still
		// counted from zero, not from those.
		step{gen2, res(0.002, 500, 10), 0.002, 500, false},
		step{gen2, res(0.0035, 800, 14), 0.0015, 300, true}, // total 0.0053 ≥ 0.005
	)
	var total float64
	for i, st := range steps {
		rec, sess, err := add(store.UsageInput{SessionID: s.ID, Process: st.process, EventSeq: int64(10 + i), Result: st.res})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			reopen()
		}
		total += st.wantCost
		if rec.Turn != int64(i+1) || rec.InputTokens != st.wantIn || !approx(rec.CostUSD, st.wantCost) {
			t.Errorf("turn %d: record %+v; want turn %d, %d input tokens, cost %v", i+1, rec, i+1, st.wantIn, st.wantCost)
		}
		if sess.Totals.Turns != int64(i+1) || !approx(sess.Totals.CostUSD, total) || sess.BudgetExceeded() != st.wantOver {
			t.Errorf("turn %d: totals %+v exceeded %v; want cost %v exceeded %v", i+1, sess.Totals, sess.BudgetExceeded(), total, st.wantOver)
		}
	}

	recs, err := db.Usage(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.ModelUsage{
		{InputTokens: 200, OutputTokens: 4, CostUSD: 0.001},
		{InputTokens: 210, OutputTokens: 4, CostUSD: 0.0008},
		{InputTokens: 500, OutputTokens: 10, CostUSD: 0.002},
		{InputTokens: 300, OutputTokens: 4, CostUSD: 0.0015},
	}
	if len(recs) != len(want) {
		t.Fatalf("Usage: %d records, want %d", len(recs), len(want))
	}
	for i, r := range recs {
		if diff := cmp.Diff(want[i], r.Models["opus"], cmpopts.EquateApprox(0, 1e-12)); diff != "" {
			t.Errorf("turn %d per-model delta (-want +got):\n%s", i+1, diff)
		}
		if r.Process != steps[i].process || r.EventSeq != int64(10+i) || r.Subtype != "success" || r.DurationMS != 10 {
			t.Errorf("turn %d: %+v", i+1, r)
		}
	}

	if _, _, err := appendResult(db, &store.Event{SessionID: "nope", Direction: store.FromCLI, Type: "result", Raw: []byte(`{}`)},
		store.UsageInput{SessionID: "nope", Result: res(1, 1, 1)}, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a result of an unknown session: %v", err)
	}
	if _, err := db.NewProcess(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("NewProcess of an unknown session: %v", err)
	}
}

func approx(a, b float64) bool { d := a - b; return d < 1e-12 && d > -1e-12 }

// appendResult is AppendResultAsync, waited for.
func appendResult(db *sqlite.DB, ev *store.Event, in store.UsageInput, follow *store.ResultFollow) (*store.UsageRecord, *store.Session, error) {
	type out struct {
		rec  *store.UsageRecord
		sess *store.Session
		err  error
	}
	done := make(chan out, 1)
	if err := db.AppendResultAsync(context.Background(), func(r *store.UsageRecord, s *store.Session, err error) {
		done <- out{r, s, err}
	}, ev, in, follow); err != nil {
		return nil, nil, err
	}
	o := <-done
	return o.rec, o.sess, o.err
}

// TestLedgerAfterAFailedTurnEnd: a turn's end that fails (its follow-up
// events cannot be made) leaves nothing in the ledger, and the next turn
// of the same process counts from the last entry stored, not from the
// failed one's counters, whether the two share a batch or not.
func TestLedgerAfterAFailedTurnEnd(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	s := mustSession(t, db)
	cum := func(cost float64) store.ResultUsage {
		return store.ResultUsage{Subtype: "success", Cumulative: store.Cumulative{CostUSD: cost,
			Models: map[string]store.ModelUsage{"opus": {InputTokens: int64(cost * 1e6), CostUSD: cost}}}}
	}
	result := func() *store.Event {
		return &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "result", Raw: []byte(`{"type":"result"}`)}
	}
	if _, _, err := appendResult(db, result(), store.UsageInput{SessionID: s.ID, Process: 1, Result: cum(0.001)}, nil); err != nil {
		t.Fatal(err)
	}
	broken := &store.ResultFollow{Events: func(*store.UsageRecord, *store.Session) ([]*store.Event, error) {
		return nil, errors.New("no events")
	}}
	// Queued together, so that they may share a batch: the failing one
	// first, then one that must count from 0.001.
	type out struct {
		rec *store.UsageRecord
		err error
	}
	outs := make(chan out, 2)
	for i, f := range []*store.ResultFollow{broken, nil} {
		c := []float64{0.005, 0.0018}[i]
		if err := db.AppendResultAsync(ctx, func(r *store.UsageRecord, _ *store.Session, err error) { outs <- out{r, err} },
			result(), store.UsageInput{SessionID: s.ID, Process: 1, Result: cum(c)}, f); err != nil {
			t.Fatal(err)
		}
	}
	if o := <-outs; o.err == nil {
		t.Fatal("a turn's end whose events could not be made was stored")
	}
	o := <-outs
	if o.err != nil {
		t.Fatal(o.err)
	}
	if !approx(o.rec.CostUSD, 0.0008) || o.rec.Turn != 2 {
		t.Errorf("the turn after a failed one: turn %d, cost %v; want turn 2, cost 0.0008 (from the last entry stored)", o.rec.Turn, o.rec.CostUSD)
	}
	// And once more, apart.
	rec, _, err := appendResult(db, result(), store.UsageInput{SessionID: s.ID, Process: 1, Result: cum(0.009)}, broken)
	if err == nil {
		t.Fatalf("a turn's end whose events could not be made was stored: %+v", rec)
	}
	rec, sess, err := appendResult(db, result(), store.UsageInput{SessionID: s.ID, Process: 1, Result: cum(0.002)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !approx(rec.CostUSD, 0.0002) || rec.Turn != 3 || !approx(sess.Totals.CostUSD, 0.002) {
		t.Errorf("turn %d, cost %v, totals %v; want turn 3, cost 0.0002, totals 0.002", rec.Turn, rec.CostUSD, sess.Totals.CostUSD)
	}
}
