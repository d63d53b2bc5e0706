package daemon_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

// TestTwoDaemonsOneStore: two daemons on one PostgreSQL. A session runs
// under daemon A; a subscriber through daemon B follows it live and gets
// exactly A's log (every event once, in order); B refuses to run it
// (another daemon holds its lease) rather than start a second CLI; once A
// stops, B may resume it.
func TestTwoDaemonsOneStore(t *testing.T) {
	url := pgtest.New(t)
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text("streamed from daemon A, word by word")},
		ChunkSize: 4, DeltaDelay: 15 * time.Millisecond}
	a := daemontest.Start(t, &daemontest.Options{StoreURL: url, DaemonName: "daemon-a"}, slow, claudetest.Turn{})
	b := daemontest.Start(t, &daemontest.Options{StoreURL: url, DaemonName: "daemon-b"}, claudetest.Turn{})
	ctx := a.Ctx
	s, err := a.D.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "")
	if err != nil {
		t.Fatal(err)
	}
	subCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	type got struct {
		evs []store.Event
		err error
	}
	followed := make(chan got, 1)
	subscribed := make(chan struct{})
	go func() {
		var g got
		close(subscribed)
		for ev, err := range b.D.Subscribe(subCtx, s.ID, 0) {
			if err != nil {
				g.err = err
				break
			}
			g.evs = append(g.evs, ev.Event)
			if ev.Type == "result" {
				break
			}
		}
		followed <- g
	}()
	<-subscribed
	time.Sleep(200 * time.Millisecond) // B's subscriber waits on the store
	if err := a.D.Send(ctx, s.ID, "hello"); err != nil {
		t.Fatal(err)
	}
	g := <-followed
	if g.err != nil {
		t.Fatalf("following through B: %v", g.err)
	}
	var stored []store.Event
	for ev, err := range a.DB().Events(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, ev)
		if ev.Type == "result" {
			break
		}
	}
	if len(g.evs) != len(stored) || len(g.evs) < 5 {
		t.Fatalf("B's subscriber got %d events, A stored %d up to the result", len(g.evs), len(stored))
	}
	for i := range g.evs {
		if g.evs[i].Seq != int64(i+1) || string(g.evs[i].Raw) != string(stored[i].Raw) {
			t.Fatalf("event %d through B: seq %d %s; stored: %s", i, g.evs[i].Seq, g.evs[i].Raw, stored[i].Raw)
		}
	}

	// B does not start a second CLI for A's session.
	err = b.D.Send(ctx, s.ID, "from B")
	var oe *daemon.OwnedElsewhereError
	if !errors.As(err, &oe) || !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("Send through B to A's session: %v, want OwnedElsewhereError", err)
	}
	t.Logf("Send through B: %v", err)
	if _, err := b.D.Resume(ctx, s.ID, "from B"); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("Resume through B of A's session: %v, want ErrNotOwner", err)
	}

	// A stops (its CLI ends, the lease is released): B may take it.
	if err := a.D.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.D.Send(ctx, s.ID, "from B"); err != nil {
		t.Fatalf("Send through B after A stopped: %v", err)
	}
	evs := untilIdle(t, b.D, ctx, s.ID, int64(len(stored)))
	if len(evs) == 0 {
		t.Fatal("no events of B's turn")
	}
}
