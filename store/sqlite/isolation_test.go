package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/claudectl/claudectl/store"
)

// TestFailingRequestFailsAlone queues, while the writer is held, requests
// of three sessions of which one fails in its then (a CHECK constraint,
// after a write of its own that must be undone) and one names a missing
// session: each written in a batch with others (the light requests in one,
// the heavy ones in the next), the others commit with gap-free seqs and
// the failing session's log and cache stay right.
func TestFailingRequestFailsAlone(t *testing.T) {
	db, _ := mustOpen(t, nil)
	ctx := context.Background()
	a, b, c := mustSession(t, db), mustSession(t, db), mustSession(t, db)
	ev := func(s *store.Session, text string) *store.Event {
		return &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "assistant", Raw: []byte(`{"text":"` + text + `"}`)}
	}
	held, release, heldDone, err := db.HoldWriter(ev(a, "hold"))
	if err != nil {
		t.Fatal(err)
	}
	<-held
	commits := db.Commits()

	var mu sync.Mutex
	outcome := map[*store.Event]error{}
	var wg sync.WaitGroup
	queue := func(e *store.Event) {
		wg.Add(1)
		if err := db.AppendAsync(ctx, func(err error) { mu.Lock(); outcome[e] = err; mu.Unlock(); wg.Done() }, e); err != nil {
			t.Fatal(err)
		}
	}
	var good []*store.Event
	for i := range 3 {
		for _, s := range []*store.Session{a, b, c} {
			e := ev(s, fmt.Sprint(i))
			queue(e)
			good = append(good, e)
		}
	}
	bad := ev(b, "bad")
	wg.Add(1)
	if err := db.AppendExecAsync(ctx, func(err error) { mu.Lock(); outcome[bad] = err; mu.Unlock(); wg.Done() }, bad,
		`UPDATE sessions SET model = 'changed' WHERE id = ?`,
		`UPDATE sessions SET status = 'no such status' WHERE id = ?`); err != nil {
		t.Fatal(err)
	}
	missing := &store.Event{SessionID: "no-such-session", Direction: store.FromCLI, Type: "assistant"}
	queue(missing)
	// Heavy requests (with statements of their own, as the failing one),
	// so that they share its batch: light ones go first, in a batch of
	// their own (groupcommit's maxLightRounds).
	for i := 3; i < 5; i++ {
		for _, s := range []*store.Session{a, b, c} {
			e := ev(s, fmt.Sprint(i))
			wg.Add(1)
			if err := db.AppendExecAsync(ctx, func(err error) { mu.Lock(); outcome[e] = err; mu.Unlock(); wg.Done() }, e,
				`UPDATE sessions SET model = model WHERE id = ?`); err != nil {
				t.Fatal(err)
			}
			good = append(good, e)
		}
	}
	release()
	if err := <-heldDone; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if n := db.Commits() - commits; n != 2 {
		t.Errorf("the requests took %d transactions after the held one, want 2 (the light ones, then the heavy ones: the test needs the failing one among others)", n)
	}

	if err := outcome[bad]; err == nil || !strings.Contains(err.Error(), "CHECK constraint") {
		t.Errorf("the failing request: %v, want its CHECK constraint error", err)
	} else if errors.Is(err, store.ErrWriteFailed) {
		t.Errorf("a constraint error wraps ErrWriteFailed: %v", err)
	}
	if bad.Seq != 0 {
		t.Errorf("the failed event has seq %d", bad.Seq)
	}
	if err := outcome[missing]; !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the missing session's request: %v, want ErrNotFound", err)
	}
	next := map[string]int64{a.ID: 2, b.ID: 1, c.ID: 1} // a's first event is the held one
	for _, e := range good {
		if err := outcome[e]; err != nil {
			t.Fatalf("a good request failed: %v", err)
		}
		if e.Seq != next[e.SessionID] {
			t.Errorf("session %s: seq %d, want %d", e.SessionID, e.Seq, next[e.SessionID])
		}
		next[e.SessionID] = e.Seq + 1
	}
	if s, err := db.Session(ctx, b.ID); err != nil {
		t.Fatal(err)
	} else if s.Model != "" || s.Status != store.StatusRunning {
		t.Errorf("the failed request's writes stayed: model %q, status %q", s.Model, s.Status)
	}

	// The writer's cache of b's last seq is right: b's next event follows
	// the ones stored, and every log replays without a gap.
	if seq, err := db.Append(ctx, ev(b, "after")); err != nil || seq != next[b.ID] {
		t.Errorf("b's next append: seq %d, %v; want %d", seq, err, next[b.ID])
	}
	for _, s := range []*store.Session{a, b, c} {
		evs, err := collect(t, db, s.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) || strings.Contains(string(e.Raw), "bad") {
				t.Errorf("session %s: event %d is %d %s", s.ID, i, e.Seq, e.Raw)
			}
		}
	}
	if h := db.WriteHealth(); h.Err != nil || h.LastOK.IsZero() {
		t.Errorf("WriteHealth after request errors: %+v, want healthy", h)
	}
}
