package daemon_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// TestWatchSessionsAndPending follows the session list and the inbox while
// a session is created, asks for a permission, is answered by a client
// and ends its turn: the list shows the session appear, wait for a person
// and go idle; the inbox shows the request come and go with who settled
// it, and a watcher that joins later gets what is pending in its snapshot.
func TestWatchSessionsAndPending(t *testing.T) {
	td := daemontest.Start(t, nil,
		claudetest.Reply(claudetest.ToolUseID("toolu_watch", "Bash", map[string]any{"command": "touch watched", "description": "touch"})),
		claudetest.Reply(claudetest.Text("Done.")))
	d, ctx := td.D, td.Ctx
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()

	sessions := make(chan daemon.SessionsChange, 100)
	go func() {
		defer close(sessions)
		for ch, err := range d.WatchSessions(wctx) {
			if err != nil {
				return
			}
			sessions <- ch
		}
	}()
	if first := <-sessions; !first.Snapshot || len(first.Sessions) != 0 {
		t.Fatalf("first change: %+v, want an empty snapshot", first)
	}
	pending := make(chan daemon.PendingChange, 100)
	go func() {
		defer close(pending)
		for ch, err := range d.WatchPending(wctx, "") {
			if err != nil {
				return
			}
			pending <- ch
		}
	}()
	if first := <-pending; !first.Snapshot || len(first.Pending) != 0 {
		t.Fatalf("first inbox change: %+v, want an empty snapshot", first)
	}

	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "touch a file")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[store.SessionStatus]bool{}
	waitStatus := func(want store.SessionStatus) {
		t.Helper()
		timeout := time.After(60 * time.Second)
		for !seen[want] {
			select {
			case ch, ok := <-sessions:
				if !ok {
					t.Fatal("the session watch ended")
				}
				for _, ss := range ch.Sessions {
					if ss.ID != s.ID {
						t.Fatalf("a change of an unknown session %s", ss.ID)
					}
					seen[ss.Status] = true
				}
			case <-timeout:
				t.Fatalf("no %s session in the watch; saw %v", want, seen)
			}
		}
	}
	waitStatus(store.StatusWaiting)

	var req string
	select {
	case ch := <-pending:
		if ch.Snapshot || len(ch.Pending) != 1 || ch.Pending[0].SessionID != s.ID || ch.Pending[0].Request.ToolName != "Bash" {
			t.Fatalf("inbox change: %+v, want the Bash request", ch)
		}
		req = ch.Pending[0].Request.RequestID
	case <-time.After(30 * time.Second):
		t.Fatal("the request never reached the inbox")
	}
	// A watcher that joins now finds it in its snapshot.
	for ch, err := range d.WatchPending(ctx, s.ID) {
		if err != nil || !ch.Snapshot || len(ch.Pending) != 1 || ch.Pending[0].Request.RequestID != req {
			t.Fatalf("a later watcher's snapshot: %+v, %v", ch, err)
		}
		break
	}
	if _, _, err := d.Decide(ctx, daemon.Decision{RequestID: req, Allow: true, Client: "carol"}); err != nil {
		t.Fatal(err)
	}
	select {
	case ch := <-pending:
		st := ch.Settled
		if st == nil || st.RequestID != req || st.Outcome != "allowed" || st.By != "client:carol" || st.SessionID != s.ID {
			t.Fatalf("inbox change after the decision: %+v (%+v)", ch, st)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the decision never reached the inbox")
	}
	waitStatus(store.StatusIdle)
	cancel()
	for range sessions {
	}
	for range pending {
	}
}

// readCounter is a store that counts the session reads made of it.
type readCounter struct {
	store.Store
	one, all atomic.Int64 // Session, Sessions
}

func (c *readCounter) Session(ctx context.Context, id string) (*store.Session, error) {
	c.one.Add(1)
	return c.Store.Session(ctx, id)
}

func (c *readCounter) Sessions(ctx context.Context, f store.SessionFilter) ([]*store.Session, error) {
	c.all.Add(1)
	return c.Store.Sessions(ctx, f)
}

// TestWatchSessionsShareReads: session watchers share the store's reads
// (one snapshot for watchers that start together, one read per change for
// all of them), and each still sees every change: 200 watchers cost a
// turn a few reads, not 200 per change.
func TestWatchSessionsShareReads(t *testing.T) {
	const watchers = 200
	counter := &readCounter{}
	td := daemontest.Start(t, &daemontest.Options{WrapStore: func(s store.Store) store.Store { counter.Store = s; return counter }},
		claudetest.Reply(claudetest.Text("Hello.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var started, idle sync.WaitGroup
	started.Add(watchers)
	idle.Add(watchers)
	var wg sync.WaitGroup
	for range watchers {
		wg.Go(func() {
			first, sawIdle := true, false
			for ch, err := range d.WatchSessions(wctx) {
				if err != nil {
					break
				}
				if first {
					first = false
					if !ch.Snapshot || len(ch.Sessions) != 1 || ch.Sessions[0].ID != s.ID {
						t.Errorf("first change %+v, want a snapshot of the session", ch)
					}
					started.Done()
					continue
				}
				for _, ss := range ch.Sessions {
					if ss.ID == s.ID && ss.Status == store.StatusIdle && ss.Totals.Turns == 1 && !sawIdle {
						sawIdle = true
						idle.Done()
					}
				}
			}
			if first {
				started.Done()
			}
			if !sawIdle {
				idle.Done()
				t.Error("a watcher never saw the session idle after its turn")
			}
		})
	}
	started.Wait()
	all := counter.all.Load()
	one0 := counter.one.Load()
	if err := d.Send(ctx, s.ID, "hello"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { idle.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the watchers did not all see the turn end")
	}
	one := counter.one.Load() - one0
	cancel()
	wg.Wait()
	t.Logf("%d watchers: %d snapshot reads, %d session reads over the turn", watchers, all, one)
	if all > 5 {
		t.Errorf("%d snapshot reads for %d watchers that started together, want them shared", all, watchers)
	}
	if one > 40 {
		t.Errorf("%d session reads over one turn for %d watchers, want one per change for all of them", one, watchers)
	}
}
