package daemon_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// startStreaming starts a daemon whose in-process CLIs stream deltas text
// deltas per turn, with a ring of ring events (0: the default).
func startStreaming(t *testing.T, deltas, ring int) *daemontest.Daemon {
	t.Helper()
	cli := &daemontest.InProcessCLI{Script: func(int) [][]byte { return benchTurn(deltas) }}
	return daemontest.Start(t, &daemontest.Options{Transport: cli, SubscriberBuffer: ring})
}

// idleStreamingSession creates a session with partial messages on td and
// waits until it is idle: the session and its last seq.
func idleStreamingSession(t *testing.T, td *daemontest.Daemon) (*store.Session, int64) {
	t.Helper()
	s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir(), IncludePartialMessages: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	return s, waitStatus(t, td.D, td.Ctx, s.ID, store.StatusIdle).LastSeq
}

// contiguous checks that seqs are from+1, from+2, …
func contiguous(t *testing.T, who string, from int64, seqs []int64) {
	t.Helper()
	for i, seq := range seqs {
		if seq != from+int64(i)+1 {
			t.Fatalf("%s: event %d has seq %d, want %d", who, i, seq, from+int64(i)+1)
		}
	}
}

// TestBlockedSubscribersDoNotDelayOtherSessions: thousands of subscribers
// of session A that stopped reading cost the store's writer nothing, so a
// turn of session B, logged while A streams, takes about as long as
// without them; A's own turn is not held back either.
func TestBlockedSubscribersDoNotDelayOtherSessions(t *testing.T) {
	subs := 3000
	if raceEnabled {
		subs = 1000
	}
	td := startStreaming(t, 1000, 0)
	d, ctx := td.D, td.Ctx
	dir := t.TempDir()
	create := func() string {
		s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir, IncludePartialMessages: true}, "")
		if err != nil {
			t.Fatal(err)
		}
		waitStatus(t, d, ctx, s.ID, store.StatusIdle)
		return s.ID
	}
	a, b := create(), create()
	var turnsA, turnsB int64
	// round runs a turn of A and, while A streams, one of B; it returns
	// how long each took.
	round := func() (tA, tB time.Duration) {
		start := time.Now()
		if err := d.Send(ctx, a, "go"); err != nil {
			t.Fatal(err)
		}
		turnsA++
		startB := time.Now()
		if err := d.Send(ctx, b, "go"); err != nil {
			t.Fatal(err)
		}
		turnsB++
		waitTurns(t, d, ctx, b, turnsB)
		tB = time.Since(startB)
		waitTurns(t, d, ctx, a, turnsA)
		return time.Since(start), tB
	}
	round() // warm up
	baseA, baseB := round()

	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	started := make(chan struct{}, subs)
	for range subs {
		wg.Go(func() {
			for _, err := range d.Subscribe(sctx, a, 0) {
				if err != nil {
					return
				}
				started <- struct{}{}
				<-sctx.Done() // blocked: reads nothing more
				return
			}
		})
	}
	for range subs {
		<-started
	}
	withA, withB := round()
	t.Logf("while A streams, B's turn took %v, A's %v; with %d blocked subscribers on A, %v and %v", baseB, baseA, subs, withB, withA)
	// The bounds are generous (the machine may be busy); publishing to
	// each subscriber on the writer's path took A's turn from about 1 s
	// to 43 s here.
	if bound := 10*baseB + 3*time.Second; withB > bound {
		t.Errorf("B's turn took %v with %d blocked subscribers on A, more than %v (10×%v + 3s)", withB, subs, bound, baseB)
	}
	if bound := 10*baseA + 3*time.Second; withA > bound {
		t.Errorf("A's turn took %v with %d blocked subscribers, more than %v (10×%v + 3s)", withA, subs, bound, baseA)
	}
}

// TestSubscriberCatchesUpFromStore: with a ring of 4 events, subscribers
// that stall during turns of 300 deltas read what the ring lost from the
// store and go on live: every seq exactly once, in order, and never an
// error. A subscriber that keeps reading gets the same.
func TestSubscriberCatchesUpFromStore(t *testing.T) {
	td := startStreaming(t, 300, 4)
	d, ctx := td.D, td.Ctx
	s, start := idleStreamingSession(t, td)
	const turns = 3
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	release := make(chan struct{})
	var wg sync.WaitGroup
	read := func(stall bool, last *atomic.Int64) []int64 {
		var seqs []int64
		for ev, err := range d.Subscribe(sctx, s.ID, start) {
			if err != nil {
				if sctx.Err() == nil {
					t.Errorf("subscriber (stalling %v) after %d events: %v", stall, len(seqs), err)
				}
				return seqs
			}
			seqs = append(seqs, ev.Seq)
			last.Store(ev.Seq)
			if stall && len(seqs) == 1 {
				<-release // stalls for all the turns
			}
			if stall && len(seqs)%100 == 0 {
				time.Sleep(5 * time.Millisecond)
			}
		}
		return seqs
	}
	var slow, fast []int64
	var slowLast, fastLast atomic.Int64
	wg.Go(func() { slow = read(true, &slowLast) })
	wg.Go(func() { fast = read(false, &fastLast) })
	for n := range int64(turns) {
		if err := d.Send(ctx, s.ID, "go"); err != nil {
			t.Fatal(err)
		}
		waitTurns(t, d, ctx, s.ID, n+1)
	}
	end := waitTurns(t, d, ctx, s.ID, turns).LastSeq
	close(release)
	for slowLast.Load() < end || fastLast.Load() < end {
		if ctx.Err() != nil {
			t.Fatalf("the subscribers got to seqs %d and %d, not to the log's end %d", slowLast.Load(), fastLast.Load(), end)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if want := int(end - start); len(slow) != want || len(fast) != want {
		t.Fatalf("got %d (stalling) and %d (reading) events, want %d each", len(slow), len(fast), want)
	}
	contiguous(t, "stalling subscriber", start, slow)
	contiguous(t, "reading subscriber", start, fast)
}

// TestSubscriptionOutlivesTheCLI: a session whose CLI ends without ending
// the session (interrupted, as by a shutdown or an idle suspension) keeps
// its subscribers, and the events of its next CLI (the resume the next
// prompt starts) reach them; a subscriber that comes while the session has
// no CLI follows it too. Closing the session ends every subscription after
// its last event; a subscription to the closed session ends after the
// stored events.
func TestSubscriptionOutlivesTheCLI(t *testing.T) {
	td := startStreaming(t, 20, 0)
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "first")
	if err != nil {
		t.Fatal(err)
	}
	waitTurns(t, d, ctx, s.ID, 1)
	type result struct {
		evs []daemon.Event
		err error
	}
	follow := func(after int64, out chan<- result) {
		var r result
		for ev, err := range d.Subscribe(ctx, s.ID, after) {
			if err != nil {
				r.err = err
				break
			}
			r.evs = append(r.evs, ev)
		}
		out <- r
	}
	before := make(chan result, 1)
	go follow(0, before)

	daemon.InterruptForTest(d, s.ID)
	got := waitStatus(t, d, ctx, s.ID, store.StatusSuspended)
	if d.Running() != 0 {
		t.Fatalf("%d CLIs still run", d.Running())
	}
	during := make(chan result, 1)
	go follow(got.LastSeq, during)
	time.Sleep(100 * time.Millisecond) // both wait for the next CLI
	select {
	case r := <-before:
		t.Fatalf("the subscription ended with the CLI (%d events, err %v)", len(r.evs), r.err)
	case r := <-during:
		t.Fatalf("a subscription to an interrupted session ended (%d events, err %v)", len(r.evs), r.err)
	default:
	}

	if err := d.Send(ctx, s.ID, "second"); err != nil { // resumes it
		t.Fatal(err)
	}
	waitTurns(t, d, ctx, s.ID, 2)
	if err := d.CloseSession(ctx, s.ID, "test"); err != nil {
		t.Fatal(err)
	}
	final, err := d.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for _, c := range []struct {
		name  string
		after int64
		ch    chan result
	}{{"subscribed before the interruption", 0, before}, {"subscribed while interrupted", got.LastSeq, during}} {
		var r result
		select {
		case r = <-c.ch:
		case <-timeout:
			t.Fatalf("%s: the subscription did not end with the closed session", c.name)
		}
		if r.err != nil {
			t.Fatalf("%s: %v", c.name, r.err)
		}
		seqs := make([]int64, len(r.evs))
		for i, ev := range r.evs {
			seqs[i] = ev.Seq
		}
		contiguous(t, c.name, c.after, seqs)
		if n := len(r.evs); n == 0 || r.evs[n-1].Seq != final.LastSeq {
			t.Fatalf("%s: %d events, the last %v; want up to seq %d", c.name, n, seqs[max(0, n-3):], final.LastSeq)
		}
		last, ok := r.evs[len(r.evs)-1].Body.(*daemon.StatusChange)
		if !ok || last.Status != store.StatusClosed {
			t.Errorf("%s: the last event is %s %s, want the closed status", c.name, r.evs[len(r.evs)-1].Type, r.evs[len(r.evs)-1].Raw)
		}
		var results int
		for _, ev := range r.evs {
			if ev.Type == "result" {
				results++
			}
		}
		want := 1 // the second CLI's
		if c.after == 0 {
			want = 2 // and the first's, replayed
		}
		if results != want {
			t.Errorf("%s: %d results, want %d", c.name, results, want)
		}
	}

	// The closed session: the stored events, then the end.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n := 0
	for _, err := range d.Subscribe(sctx, s.ID, 0) {
		if err != nil {
			t.Fatalf("subscribing to the closed session: %v", err)
		}
		n++
	}
	if int64(n) != final.LastSeq {
		t.Errorf("the closed session's subscription gave %d events, want %d", n, final.LastSeq)
	}
	if h := daemon.HubsForTest(d); h != 0 {
		t.Errorf("%d hubs left with no session running and no subscriber", h)
	}
}

// TestCloseEndsSubscriptions: Daemon.Close ends the subscriptions of
// sessions with a CLI and of those without (interrupted), with no error,
// and a Subscribe after Close gives the stored events only.
func TestCloseEndsSubscriptions(t *testing.T) {
	td := startStreaming(t, 5, 0)
	d, ctx := td.D, td.Ctx
	dir := t.TempDir()
	running, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir}, "hi")
	if err != nil {
		t.Fatal(err)
	}
	waitTurns(t, d, ctx, running.ID, 1)
	idle, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir}, "hi")
	if err != nil {
		t.Fatal(err)
	}
	waitTurns(t, d, ctx, idle.ID, 1)
	daemon.InterruptForTest(d, idle.ID)
	ended := make(chan error, 2)
	for _, id := range []string{running.ID, idle.ID} {
		go func() {
			var err error
			for _, e := range d.Subscribe(ctx, id, 0) {
				if e != nil {
					err = e
				}
			}
			ended <- err
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-ended:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("subscription ended by Close with %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a subscription outlived Close")
		}
	}
	n := 0
	for _, err := range d.Subscribe(ctx, idle.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Error("no stored events after Close")
	}
}

// TestCanceledSubscriptionEndsAlone: a subscription waiting for events of
// an idle session ends with context.Canceled as soon as its context ends,
// and the session's other subscribers (more than publish wakes itself)
// stay and get the next turn's events, every one.
func TestCanceledSubscriptionEndsAlone(t *testing.T) {
	td := startStreaming(t, 20, 0)
	d, ctx := td.D, td.Ctx
	s, start := idleStreamingSession(t, td)
	const others = 8
	type result struct {
		seqs []int64
		err  error
	}
	var seen [others + 1]atomic.Int64 // the last seq each subscriber got
	sub := func(ctx context.Context, i int, out chan<- result) {
		var r result
		for ev, err := range d.Subscribe(ctx, s.ID, start) {
			if err != nil {
				r.err = err
				break
			}
			r.seqs = append(r.seqs, ev.Seq)
			seen[i].Store(ev.Seq)
		}
		out <- r
	}
	keep, stop := context.WithCancel(ctx)
	defer stop()
	kept := make(chan result, others)
	for i := range others {
		go sub(keep, i, kept)
	}
	one, cancel := context.WithCancel(ctx)
	ended := make(chan result, 1)
	go sub(one, others, ended)
	time.Sleep(100 * time.Millisecond) // all waiting
	cancel()
	select {
	case r := <-ended:
		if !errors.Is(r.err, context.Canceled) || len(r.seqs) != 0 {
			t.Fatalf("the canceled subscription ended with %v after %d events; want context.Canceled after none", r.err, len(r.seqs))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a canceled subscription still waits for events")
	}
	select {
	case r := <-kept:
		t.Fatalf("another subscription ended with the canceled one: %v after %d events", r.err, len(r.seqs))
	default:
	}
	if err := d.Send(ctx, s.ID, "go"); err != nil {
		t.Fatal(err)
	}
	end := waitTurns(t, d, ctx, s.ID, 1).LastSeq
	deadline := time.After(20 * time.Second)
	for i := range others {
		for seen[i].Load() < end {
			select {
			case r := <-kept:
				t.Fatalf("a subscription ended before the turn's last event: %v after %d events", r.err, len(r.seqs))
			case <-deadline:
				t.Fatalf("subscriber %d got to seq %d, not to the turn's end %d", i, seen[i].Load(), end)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	stop()
	for range others {
		select {
		case r := <-kept:
			if len(r.seqs) != int(end-start) {
				t.Fatalf("a subscriber got %d of the turn's %d events", len(r.seqs), end-start)
			}
			contiguous(t, "subscriber", start, r.seqs)
		case <-deadline:
			t.Fatal("a subscription outlived its canceled context")
		}
	}
}
