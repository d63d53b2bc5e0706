package daemon_test

import (
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// TestSetMaxRunningStartsQueued: raising sessions.max_running while the
// daemon runs (a reload) starts the session waiting for a slot at once,
// while the first one's turn still runs; nothing was suspended for it.
func TestSetMaxRunningStartsQueued(t *testing.T) {
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("slow ", 200))}, ChunkSize: 5, DeltaDelay: 20 * time.Millisecond}
	td := daemontest.Start(t, &daemontest.Options{MaxRunning: 1}, slow, claudetest.Reply(claudetest.Text("B's turn.")))
	d, ctx := td.D, td.Ctx
	a, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "go slowly")
	if err != nil {
		t.Fatal(err)
	}
	bc := make(chan error, 1)
	go func() {
		_, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "B here")
		bc <- err
	}()
	for d.Queued() == 0 {
		select {
		case err := <-bc:
			t.Fatalf("B started while A's turn ran (max_running 1): %v", err)
		case <-ctx.Done():
			t.Fatal("B never queued")
		case <-time.After(10 * time.Millisecond):
		}
	}
	d.SetMaxRunning(2)
	if err := <-bc; err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Session(ctx, a.ID); got.Status != store.StatusRunning {
		t.Errorf("A is %s once B started, want still running (not suspended for B)", got.Status)
	}
	if d.MaxRunning() != 2 || d.Queued() != 0 || d.Running() != 2 {
		t.Errorf("MaxRunning %d, Queued %d, Running %d; want 2, 0, 2", d.MaxRunning(), d.Queued(), d.Running())
	}
}

// TestSubscribePrunedSession: a subscription to a session whose events
// retention removed gets one gap event in their place, at the last removed
// seq, then what the log holds after it (on either store engine).
func TestSubscribePrunedSession(t *testing.T) {
	td := daemontest.Start(t, nil)
	d, ctx, db := td.D, td.Ctx, td.DB()
	s := &store.Session{Cwd: t.TempDir(), Status: store.StatusIdle}
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := db.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "assistant", Raw: []byte(`{"type":"assistant"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	closed := store.StatusClosed
	if _, err := db.UpdateSession(ctx, s.ID, store.SessionUpdate{Status: &closed}); err != nil {
		t.Fatal(err)
	}
	m, ok := db.(store.Maintainer)
	if !ok {
		t.Fatalf("%T is not a store.Maintainer", db)
	}
	if ps, err := m.PruneEvents(ctx, time.Now().Add(time.Hour), false); err != nil || len(ps) != 1 {
		t.Fatalf("PruneEvents = %+v, %v", ps, err)
	}
	var got []daemon.Event
	for ev, err := range d.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if len(got) != 1 {
		t.Fatalf("Subscribe yielded %d events, want the gap alone", len(got))
	}
	g, ok := got[0].Body.(*daemon.Gap)
	if !ok || got[0].Seq != 5 || g.Lost != 5 || !g.From.IsZero() || !strings.Contains(g.Reason, "retention") {
		t.Errorf("the gap: seq %d, %+v", got[0].Seq, got[0].Body)
	}
	for ev, err := range d.Subscribe(ctx, s.ID, 5) {
		t.Errorf("Subscribe after the removed events: %+v, %v; want nothing", ev, err)
	}
}
