// Package storetest is the conformance suite of [store.Store]: what the
// daemon relies on, engine-neutral, for every implementation to run
// against itself:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store { return openMyStore(t, o) })
//	}
//
// Engine-specific behaviour (a full disk, the file layout) stays in the
// engine's own tests.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/claudectl/claudectl/store"
)

// Options are what a test asks of the store that Run's open makes; a
// zero field means the store's default.
type Options struct {
	MaxRules  int // the rules it holds at most (store.MaxRules)
	MaxTokens int // the live tokens it holds at most (store.MaxTokens)
}

// ruleLimitRules is the MaxRules of the store RuleLimit fills: store.MaxRules
// one at a time takes 40 s under the race detector.
const ruleLimitRules = 40

// Run runs the suite; open returns a new, empty store with the options
// given, which Run closes.
func Run(t *testing.T, open func(t *testing.T, o Options) store.Store) {
	for _, tc := range []struct {
		name string
		f    func(*testing.T, store.Store)
		o    Options
	}{
		{"Sessions", sessions, Options{}},
		{"AppendAndReplay", appendAndReplay, Options{}},
		{"AsyncOrderAndUpdates", asyncOrderAndUpdates, Options{}},
		{"RelayState", relayState, Options{}},
		{"WorktreeAndBudget", worktreeAndBudget, Options{}},
		{"UsageLedger", usageLedger, Options{}},
		{"RulesAndDecisions", rulesAndDecisions, Options{}},
		{"RuleLimit", ruleLimit, Options{MaxRules: ruleLimitRules}},
		{"ConcurrentAppendsGapFree", concurrentAppends, Options{}},
		{"FailingRequestFailsAlone", failingRequestAlone, Options{}},
		{"DeleteAfterQueuedAppends", deleteAfterQueued, Options{}},
		{"LongReplay", longReplay, Options{}},
		{"HostileText", hostileText, Options{}},
		{"Tokens", tokens, Options{}},
		{"TokenLimit", tokenLimit, Options{MaxTokens: tokenLimitTokens}},
		{"Audit", audit, Options{}},
		{"Retention", retention, Options{}},
		{"Search", search, Options{}},
		{"SearchAfterDelete", searchAfterDelete, Options{}},
		{"UsageSince", usageSince, Options{}},
		{"Notifications", notifications, Options{}},
		{"Close", closeStore, Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, tc.o)
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
	conv := "6f1c2a4e-0000-4000-8000-000000000001"
	if _, err := s.UpdateSession(ctx, b.ID, store.SessionUpdate{ClaudeSessionID: &conv}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		conv string
		want []string
	}{{conv, []string{b.ID}}, {"6f1c2a4e-0000-4000-8000-000000000002", nil}, {"\x00", nil}} {
		got, err := s.Sessions(ctx, store.SessionFilter{ClaudeSessionID: tc.conv})
		var ids []string
		for _, g := range got {
			ids = append(ids, g.ID)
		}
		if err != nil || !slices.Equal(ids, tc.want) {
			t.Errorf("Sessions of conversation %q = %v, %v; want %v", tc.conv, ids, err, tc.want)
		}
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

// relayState: the relay state of a worker session is set whole, and its
// count rises with the frames of the lines appended (never falls), in
// their transaction.
func relayState(t *testing.T, s store.Store) {
	ctx := context.Background()
	a, b := newSession(t, s), newSession(t, s)
	want := store.Relay{Worker: "gpu1", Session: "s-0123", Since: 7, SecretHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
	if _, err := s.UpdateSession(ctx, a.ID, store.SessionUpdate{Relay: &want}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, frame := range []int64{10, 20, 0, 50, 40, 3, 2} {
		e := ev(a.ID, i)
		e.RelayFrame = frame
		if i >= 5 {
			e.Direction = store.ToCLI
		}
		wg.Add(1)
		if err := s.AppendAsync(ctx, func(err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		}, e, ev(b.ID, i)); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	got, err := s.Session(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	want.Received, want.Sent = 50, 3
	if got.Relay != want || got.LastSeq != 7 {
		t.Errorf("relay %+v, last seq %d; want %+v, 7", got.Relay, got.LastSeq, want)
	}
	if got, _ := s.Session(ctx, b.ID); got.Relay != (store.Relay{}) {
		t.Errorf("a session without relay frames: %+v", got.Relay)
	}
	if _, err := s.UpdateSession(ctx, a.ID, store.SessionUpdate{Relay: &store.Relay{}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Session(ctx, a.ID); got.Relay != (store.Relay{}) {
		t.Errorf("relay after clearing: %+v", got.Relay)
	}
}

// worktreeAndBudget: a session's worktree is kept and replaced, the
// budget status stored, a held session's prompts kept in order, the
// ledger summed since a time by directory, and raised caps kept by day.
func worktreeAndBudget(t *testing.T, s store.Store) {
	ctx := context.Background()
	wt := store.Worktree{Path: "/data/worktrees/A", Branch: "claudectl/a", BaseBranch: "main",
		BaseCommit: "0123456789abcdef0123456789abcdef01234567", Repo: "/src/app"}
	a := &store.Session{Cwd: "/src/app", Status: store.StatusStarting, Worktree: wt}
	if err := s.CreateSession(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Session(ctx, a.ID); err != nil || got.Worktree != wt {
		t.Fatalf("worktree %+v, %v; want %+v", got.Worktree, err, wt)
	}
	wt.Discarded = true
	budget := store.StatusBudget
	if got, err := s.UpdateSession(ctx, a.ID, store.SessionUpdate{Worktree: &wt, Status: &budget}); err != nil ||
		got.Worktree != wt || got.Status != store.StatusBudget {
		t.Fatalf("after update: worktree %+v, status %s, %v", got.Worktree, got.Status, err)
	}

	for i, text := range []string{"first", "second", "third"} {
		if seq, err := s.QueuePrompt(ctx, a.ID, text); err != nil || seq != int64(i+1) {
			t.Fatalf("QueuePrompt %q = %d, %v; want %d", text, seq, err, i+1)
		}
	}
	if err := s.DropQueuedPrompt(ctx, a.ID, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.DropQueuedPrompt(ctx, a.ID, 9); err != nil {
		t.Errorf("dropping a prompt not kept: %v", err)
	}
	qs, err := s.QueuedPrompts(ctx, a.ID)
	if err != nil || len(qs) != 2 || qs[0].Text != "second" || qs[0].Seq != 2 || qs[1].Text != "third" || qs[0].CreatedAt.IsZero() {
		t.Fatalf("QueuedPrompts = %+v, %v", qs, err)
	}
	if got, _ := s.Session(ctx, a.ID); got.QueuedPrompts != 2 {
		t.Errorf("Session.QueuedPrompts = %d, want 2", got.QueuedPrompts)
	}
	if _, err := s.QueuePrompt(ctx, "no-such", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("queueing for an unknown session: %v, want ErrNotFound", err)
	}

	// Spend: a (/src/app) spent 1.00 yesterday and 0.25 today, b
	// (/src/other) 0.50 today.
	b := &store.Session{Cwd: "/src/other", Status: store.StatusStarting}
	if err := s.CreateSession(ctx, b); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	today := now.Add(-time.Hour)
	for _, r := range []struct {
		id   string
		cum  float64
		when time.Time
	}{{a.ID, 1.00, now.Add(-25 * time.Hour)}, {a.ID, 1.25, now}, {b.ID, 0.50, now}} {
		proc, _ := s.NewProcess(ctx, r.id)
		if proc > 1 {
			proc = 1 // one process each: cumulative counters
		}
		done := make(chan error, 1)
		res := &store.Event{SessionID: r.id, Direction: store.FromCLI, Type: "result", Raw: []byte(`{"type":"result"}`)}
		if err := s.AppendResultAsync(ctx, func(_ *store.UsageRecord, _ *store.Session, err error) { done <- err }, res,
			store.UsageInput{SessionID: r.id, Process: proc, Time: r.when, Result: store.ResultUsage{Cumulative: store.Cumulative{CostUSD: r.cum}}}, nil); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	sp, err := s.SpendSince(ctx, today)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	if !near(sp.TotalUSD, 0.75) || !near(sp.ByDir["/src/app"], 0.25) || !near(sp.ByDir["/src/other"], 0.50) || len(sp.ByDir) != 2 {
		t.Errorf("SpendSince = %+v, want 0.75: /src/app 0.25, /src/other 0.50", sp)
	}

	for _, r := range []*store.BudgetRaise{
		{Cap: store.CapDaemon, Day: "2026-01-02", LimitUSD: 10, By: "client:alice"},
		{Cap: store.CapDirectory, Scope: "/src/app", Day: "2026-01-02", LimitUSD: 5},
		{Cap: store.CapSession, Scope: a.ID, LimitUSD: 2},
		{Cap: store.CapDaemon, Day: "2026-01-03", LimitUSD: 20},
		{Cap: store.CapDaemon, Day: "2026-01-02", LimitUSD: 12, By: "client:bob"}, // replaces the first
	} {
		if err := s.RaiseBudget(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := s.BudgetRaises(ctx, "2026-01-02")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, r := range rs {
		got[r.Cap+" "+r.Scope+" "+r.Day] = r.LimitUSD
		if r.Cap == store.CapDaemon && (r.By != "client:bob" || r.At.IsZero()) {
			t.Errorf("the replaced raise: %+v", r)
		}
	}
	want := map[string]float64{"daemon  2026-01-02": 12, "directory /src/app 2026-01-02": 5, "session " + a.ID + " ": 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BudgetRaises (-want +got):\n%s", diff)
	}
	for _, bad := range []*store.BudgetRaise{{Cap: "month", Day: "x", LimitUSD: 1}, {Cap: store.CapDaemon, Day: "2026-01-02"},
		{Cap: store.CapSession, Scope: a.ID, Day: "2026-01-02", LimitUSD: 1}} {
		if err := s.RaiseBudget(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RaiseBudget(%+v) = %v, want ErrInvalid", bad, err)
		}
	}

	if err := s.DeleteSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if qs, err := s.QueuedPrompts(ctx, a.ID); err != nil || len(qs) != 0 {
		t.Errorf("a deleted session's prompts: %v, %v", qs, err)
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
	var res *store.Event
	var made []*store.Event
	idle := store.StatusIdle
	for turn, cum := range []float64{0.5, 1.25} {
		wg.Add(1)
		res = &store.Event{SessionID: a.ID, Direction: store.FromCLI, Type: "result", Subtype: "success", Raw: []byte(`{"type":"result"}`)}
		// The second turn's end stores a report made of its ledger entry
		// and a status event after the result, and the status change, in
		// the same transaction.
		var follow *store.ResultFollow
		if turn == 1 {
			follow = &store.ResultFollow{
				Events: func(r *store.UsageRecord, ss *store.Session) ([]*store.Event, error) {
					made = []*store.Event{
						{SessionID: a.ID, Direction: store.FromDaemon, Type: "usage_report", Raw: fmt.Appendf(nil, `{"turn":%d,"turns":%d}`, r.Turn, ss.Totals.Turns)},
						{SessionID: a.ID, Direction: store.FromDaemon, Type: "status", Raw: []byte(`{"status":"idle"}`)},
					}
					return made, nil
				},
				Update: &store.SessionUpdate{Status: &idle},
			}
		}
		if err := s.AppendResultAsync(ctx, func(r *store.UsageRecord, ss *store.Session, err error) {
			if err != nil {
				t.Error(err)
			}
			rec, after = r, ss
			wg.Done()
		}, res, store.UsageInput{SessionID: a.ID, Process: proc, Result: store.ResultUsage{Subtype: "success", Cumulative: store.Cumulative{CostUSD: cum}}}, follow); err != nil {
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
	if len(made) != 2 || made[0].Seq != res.Seq+1 || made[1].Seq != res.Seq+2 {
		t.Fatalf("the events following the result (seq %d): %+v", res.Seq, made)
	}
	var log []string
	for e, err := range s.Events(ctx, a.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, fmt.Sprintf("%d %s %s", e.Seq, e.Type, e.Raw))
	}
	want := []string{`1 result {"type":"result"}`, `2 result {"type":"result"}`, `3 usage_report {"turn":2,"turns":2}`, `4 status {"status":"idle"}`}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("the log after two turns (-want +got):\n%s", diff)
	}
	if got, err := s.Session(ctx, a.ID); err != nil || got.Status != store.StatusIdle {
		t.Errorf("the session after the second turn's end: %+v, %v; want it idle", got, err)
	}

	// What follows a result is of its session: anything else fails the
	// request whole, result and ledger entry included.
	b := newSession(t, s)
	done := make(chan error, 1)
	res = &store.Event{SessionID: a.ID, Direction: store.FromCLI, Type: "result", Raw: []byte(`{"type":"result"}`)}
	if err := s.AppendResultAsync(ctx, func(_ *store.UsageRecord, _ *store.Session, err error) { done <- err }, res,
		store.UsageInput{SessionID: a.ID, Process: proc, Result: store.ResultUsage{Subtype: "success", Cumulative: store.Cumulative{CostUSD: 2}}},
		&store.ResultFollow{Events: func(*store.UsageRecord, *store.Session) ([]*store.Event, error) {
			return []*store.Event{{SessionID: b.ID, Direction: store.FromDaemon, Type: "status", Raw: []byte(`{}`)}}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a result followed by an event of another session: %v; want ErrInvalid", err)
	}
	if ledger, err := s.Usage(ctx, a.ID); err != nil || len(ledger) != 2 {
		t.Errorf("the ledger after the failed turn end: %d records, %v; want 2", len(ledger), err)
	}

	// A process that may have restored its conversation's totals (a
	// resume, a fork: UsageInput.Continues) counts its first result from
	// them when it is at least them, else from zero.
	result := func(id string, proc int64, continues string, cum float64) *store.UsageRecord {
		t.Helper()
		done := make(chan error, 1)
		var rec *store.UsageRecord
		ev := &store.Event{SessionID: id, Direction: store.FromCLI, Type: "result", Raw: []byte(`{"type":"result"}`)}
		if err := s.AppendResultAsync(ctx, func(r *store.UsageRecord, _ *store.Session, err error) { rec = r; done <- err }, ev,
			store.UsageInput{SessionID: id, Process: proc, Continues: continues, Result: store.ResultUsage{Subtype: "success", Cumulative: store.Cumulative{CostUSD: cum}}},
			nil); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return rec
	}
	near := func(got, want float64) bool { return got > want-1e-9 && got < want+1e-9 }
	resumed, err := s.NewProcess(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec := result(a.ID, resumed, a.ID, 1.75); !near(rec.CostUSD, 0.5) {
		t.Errorf("a resumed process's first turn, its totals restored (1.25 → 1.75): cost %v, want 0.5", rec.CostUSD)
	}
	if rec := result(a.ID, resumed, a.ID, 2); !near(rec.CostUSD, 0.25) {
		t.Errorf("its second turn: cost %v, want 0.25", rec.CostUSD)
	}
	fork := newSession(t, s)
	forkProc, err := s.NewProcess(ctx, fork.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec := result(fork.ID, forkProc, a.ID, 2.1); !near(rec.CostUSD, 0.1) {
		t.Errorf("a fork's first turn, the forked session's totals restored (2 → 2.1): cost %v, want 0.1", rec.CostUSD)
	}
	fresh, err := s.NewProcess(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec := result(a.ID, fresh, a.ID, 0.3); !near(rec.CostUSD, 0.3) {
		t.Errorf("a resumed process that restored nothing (0.3 after 2): cost %v, want 0.3", rec.CostUSD)
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

// concurrentAppends: many goroutines appending to a few sessions with
// every kind of append; each log comes out numbered 1..n without a gap or a
// repeat, and every event is there once.
func concurrentAppends(t *testing.T, s store.Store) {
	ctx := context.Background()
	ids := []string{newSession(t, s).ID, newSession(t, s).ID, newSession(t, s).ID}
	const workers, each = 6, 60
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var async sync.WaitGroup
			for i := range each {
				id := ids[(w+i)%len(ids)]
				e := &store.Event{SessionID: id, Direction: store.FromCLI, Type: "stream_event",
					Raw: fmt.Appendf(nil, `{"w":%d,"i":%d}`, w, i)}
				var err error
				switch i % 3 {
				case 0:
					_, err = s.Append(ctx, e)
				case 1:
					err = s.AppendBatch(ctx, e, &store.Event{SessionID: id, Direction: store.ToCLI, Type: "user",
						Raw: fmt.Appendf(nil, `{"w":%d,"i":%d,"b":1}`, w, i)})
				default:
					async.Add(1)
					err = s.AppendAsync(ctx, func(err error) {
						if err != nil {
							t.Error(err)
						}
						async.Done()
					}, e)
					if err != nil {
						async.Done()
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
			async.Wait()
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	total := 0
	for _, id := range ids {
		evs, err := collect(s, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("session %s: event %d has seq %d", id, i, e.Seq)
			}
			if seen[string(e.Raw)] {
				t.Fatalf("event %s stored twice", e.Raw)
			}
			seen[string(e.Raw)] = true
		}
		if got, _ := s.Session(ctx, id); got.LastSeq != int64(len(evs)) {
			t.Errorf("session %s: LastSeq %d, %d events", id, got.LastSeq, len(evs))
		}
		total += len(evs)
	}
	if want := workers * (each + each/3); total != want {
		t.Errorf("%d events stored, want %d", total, want)
	}
}

// failingRequestAlone: a request naming an unknown session fails, all of
// it, while requests committed beside it succeed; the good log has no hole.
func failingRequestAlone(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newSession(t, s)
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		var evs []*store.Event
		if i%5 == 2 {
			evs = []*store.Event{ev(a.ID, 1000+i), ev("no-such", i)} // all or none
		} else {
			evs = []*store.Event{ev(a.ID, i)}
		}
		if err := s.AppendAsync(ctx, func(err error) { errs[i] = err; wg.Done() }, evs...); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i, err := range errs {
		if i%5 == 2 {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("request %d (an unknown session): %v, want ErrNotFound", i, err)
			}
		} else if err != nil {
			t.Errorf("request %d failed beside a failing one: %v", i, err)
		}
	}
	evs, err := collect(s, a.ID, 0)
	if err != nil || len(evs) != 16 {
		t.Fatalf("the good session: %d events, %v; want 16", len(evs), err)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) || string(e.Raw) == fmt.Sprintf(`{"i":%d}`, 1002) {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
	if h := s.WriteHealth(); h.Err != nil {
		t.Errorf("a record's failure made the store unhealthy: %v", h.Err)
	}
}

// deleteAfterQueued: DeleteSession runs after the appends already queued,
// which succeed; the session is then gone with its log.
func deleteAfterQueued(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newSession(t, s)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		if err := s.AppendAsync(ctx, func(err error) {
			if err != nil {
				t.Errorf("an append queued before the deletion: %v", err)
			}
			wg.Done()
		}, ev(a.ID, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, err := collect(s, a.ID, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the deleted session's log: %v, want ErrNotFound", err)
	}
	if err := s.DeleteSession(ctx, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
}

// longReplay: a log longer than any page replays whole and from the
// middle, and stopping early is allowed.
func longReplay(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newSession(t, s)
	const n = 1500
	batch := make([]*store.Event, 0, 100)
	for i := range n {
		batch = append(batch, ev(a.ID, i))
		if len(batch) == cap(batch) {
			if err := s.AppendBatch(ctx, batch...); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	evs, err := collect(s, a.ID, 700)
	if err != nil || len(evs) != n-700 || evs[0].Seq != 701 || evs[len(evs)-1].Seq != n {
		t.Fatalf("replay after 700: %d events, %v", len(evs), err)
	}
	for i, e := range evs {
		if string(e.Raw) != fmt.Sprintf(`{"i":%d}`, 700+i) {
			t.Fatalf("event %d: %s", e.Seq, e.Raw)
		}
	}
	count := 0
	for _, err := range s.Events(ctx, a.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if count++; count == 10 {
			break
		}
	}
}

// hostileText: text a client or a CLI may send (a NUL byte, invalid
// UTF-8) is either stored and read back or refused as invalid, never a
// failure of the store; an event's type is always kept.
func hostileText(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, cwd := range []string{"/src/\x00app", "/src/\xff\xfeapp"} {
		ss := &store.Session{Cwd: cwd, Model: cwd, Status: store.StatusStarting}
		err := s.CreateSession(ctx, ss)
		switch {
		case errors.Is(err, store.ErrInvalid):
		case err != nil:
			t.Errorf("CreateSession(cwd %q): %v, want success or ErrInvalid", cwd, err)
		default:
			got, err := s.Session(ctx, ss.ID)
			if err != nil || got.Cwd != cwd {
				t.Errorf("cwd %q read back as %+v, %v", cwd, got, err)
			}
		}
	}
	a := newSession(t, s)
	e := &store.Event{SessionID: a.ID, Direction: store.FromCLI, Type: "as\x00sistant\xff", Subtype: "\x00",
		Raw: []byte("{\"type\":\"as\\u0000sistant\"}\x00\xff")}
	if _, err := s.Append(ctx, e); err != nil {
		t.Fatalf("an event with a NUL in its type: %v", err)
	}
	evs, err := collect(s, a.ID, 0)
	if err != nil || len(evs) != 1 || string(evs[0].Raw) != string(e.Raw) || evs[0].Type == "" {
		t.Fatalf("read back: %+v, %v", evs, err)
	}
	if _, err := s.Session(ctx, "no\x00such"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a session id with a NUL: %v, want ErrNotFound", err)
	}
	if _, err := collect(s, "no\x00such", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the events of a session id with a NUL: %v, want ErrNotFound", err)
	}
	if _, err := s.Append(ctx, ev("no\x00such", 0)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an append to a session id with a NUL: %v, want ErrNotFound", err)
	}
	r := &store.Rule{Spec: "Bash(\x00)", Behavior: "allow"}
	if err := s.CreateRule(ctx, r); err != nil && !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a rule with a NUL: %v, want success or ErrInvalid", err)
	}
	d := &store.Decision{SessionID: a.ID, RequestID: "r\x00", ToolName: "Bash\xff", Behavior: "deny", By: "client:\x00",
		Message: "no\x00", Input: []byte("{\"a\":\"\x00\"}")}
	if err := s.AddDecision(ctx, d); err != nil {
		t.Errorf("a decision with a NUL (the audit trail keeps it): %v", err)
	}
	if h := s.WriteHealth(); h.Err != nil {
		t.Errorf("hostile text made the store unhealthy: %v", h.Err)
	}
}

// ruleLimit fills a store that holds ruleLimitRules rules: one more is
// refused with a *store.LimitError, an equal one is still found, and a
// deletion makes room.
func ruleLimit(t *testing.T, s store.Store) {
	ctx := context.Background()
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < ruleLimitRules; i += workers {
				if err := s.CreateRule(ctx, &store.Rule{Spec: fmt.Sprintf("Bash(make target%d:*)", i), Behavior: "allow"}); err != nil {
					errs <- fmt.Errorf("rule %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	over := &store.Rule{Spec: "Bash(make one-more:*)", Behavior: "allow"}
	err := s.CreateRule(ctx, over)
	var le *store.LimitError
	if !errors.As(err, &le) || le.Max != ruleLimitRules || le.What != "rules" {
		t.Fatalf("CreateRule past the limit: %v (%T), want a *store.LimitError for %d rules", err, err, ruleLimitRules)
	}
	if over.ID != 0 {
		t.Errorf("the refused rule got id %d", over.ID)
	}
	if rules, err := s.Rules(ctx); err != nil || len(rules) != ruleLimitRules {
		t.Fatalf("Rules: %d rules, %v; want %d", len(rules), err, ruleLimitRules)
	}
	same := &store.Rule{Spec: "Bash(make target7:*)", Behavior: "allow"}
	if err := s.CreateRule(ctx, same); err != nil || same.ID == 0 {
		t.Fatalf("CreateRule of a rule stored already, at the limit: id %d, %v; want its id", same.ID, err)
	}
	if err := s.DeleteRule(ctx, same.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRule(ctx, over); err != nil || over.ID == 0 {
		t.Fatalf("CreateRule after a deletion made room: id %d, %v", over.ID, err)
	}
}
