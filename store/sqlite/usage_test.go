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

// TestAddUsage enters two turns of one CLI process (cumulative counters),
// then a resumed process whose counters start again, and checks the
// per-turn deltas, the session totals and the budget.
func TestAddUsage(t *testing.T) {
	testAddUsage(t, func(db *sqlite.DB, in store.UsageInput) (*store.UsageRecord, *store.Session, error) {
		return db.AddUsage(context.Background(), in)
	})
}

// TestAppendResultAsync runs the same turns through the event writer: the
// result line and its ledger entry commit together, and the entry's
// event_seq is the line's seq.
func TestAppendResultAsync(t *testing.T) {
	testAddUsage(t, func(db *sqlite.DB, in store.UsageInput) (*store.UsageRecord, *store.Session, error) {
		// Pad the log so that the line's seq is the one the test expects.
		for {
			s, err := db.Session(context.Background(), in.SessionID)
			if err != nil {
				return nil, nil, err
			}
			if s.LastSeq >= in.EventSeq-1 {
				break
			}
			if _, err := db.Append(context.Background(), &store.Event{SessionID: in.SessionID,
				Direction: store.FromCLI, Type: "assistant", Raw: []byte(`{"type":"assistant"}`)}); err != nil {
				return nil, nil, err
			}
		}
		type out struct {
			rec  *store.UsageRecord
			sess *store.Session
			err  error
		}
		done := make(chan out, 1)
		ev := &store.Event{SessionID: in.SessionID, Direction: store.FromCLI, Type: "result", Raw: []byte(`{"type":"result"}`)}
		want := in.EventSeq
		in.EventSeq = 0 // filled in by the writer
		if err := db.AppendResultAsync(context.Background(), func(r *store.UsageRecord, s *store.Session, err error) {
			done <- out{r, s, err}
		}, ev, in, nil); err != nil {
			return nil, nil, err
		}
		o := <-done
		if o.err == nil && (ev.Seq != want || o.rec.EventSeq != want) {
			t.Errorf("result seq %d, ledger event_seq %d; want %d", ev.Seq, o.rec.EventSeq, want)
		}
		return o.rec, o.sess, o.err
	})
}

func testAddUsage(t *testing.T, add func(*sqlite.DB, store.UsageInput) (*store.UsageRecord, *store.Session, error)) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	s := mustSession(t, db)
	if _, err := db.UpdateSession(ctx, s.ID, store.SessionUpdate{BudgetUSD: ptr(0.003)}); err != nil {
		t.Fatal(err)
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
		step{gen2, res(0.0005, 100, 2), 0.0005, 100, false},
		step{gen2, res(0.0015, 300, 6), 0.001, 200, true}, // total 0.0033 ≥ 0.003
	)
	var total float64
	for i, st := range steps {
		rec, sess, err := add(db, store.UsageInput{SessionID: s.ID, Process: st.process, EventSeq: int64(10 + i), Result: st.res})
		if err != nil {
			t.Fatal(err)
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
		{InputTokens: 100, OutputTokens: 2, CostUSD: 0.0005},
		{InputTokens: 200, OutputTokens: 4, CostUSD: 0.001},
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

	if _, _, err := db.AddUsage(ctx, store.UsageInput{SessionID: "nope", Result: res(1, 1, 1)}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AddUsage to an unknown session: %v", err)
	}
	if _, err := db.NewProcess(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("NewProcess of an unknown session: %v", err)
	}
}

func approx(a, b float64) bool { d := a - b; return d < 1e-12 && d > -1e-12 }
