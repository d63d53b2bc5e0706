package daemon_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestEndedSessionsAreReleased creates and closes 10,000 sessions (each
// with a prompt, on in-process CLIs): once they are closed the daemon holds
// nothing of them in memory, so its heap returns to the baseline. Under
// the race detector (go test -race, ten times slower) it runs 1,000; make
// test runs it once more without, at 10,000.
func TestEndedSessionsAreReleased(t *testing.T) {
	n := 10_000
	if testing.Short() || raceEnabled {
		n = 1_000
	}
	cli := &daemontest.InProcessCLI{}
	td := daemontest.Start(t, &daemontest.Options{Transport: cli})
	d := td.D
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	dir := t.TempDir()
	cycle := func(count int) {
		t.Helper()
		var wg sync.WaitGroup
		work := make(chan int)
		for range 8 {
			wg.Go(func() {
				for range work { // on errors too, so that the feeder never blocks
					s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir}, "hello")
					if err != nil {
						t.Error(err)
						continue
					}
					if err := d.CloseSession(ctx, s.ID, "test"); err != nil {
						t.Error(err)
					}
				}
			})
		}
		for i := range count {
			work <- i
		}
		close(work)
		wg.Wait()
	}
	cycle(200) // warm up: pools, caches, prepared statements
	base := heapInUse()
	cycle(n)
	after := heapInUse()
	if t.Failed() {
		return
	}
	if running := d.Running(); running != 0 {
		t.Errorf("%d sessions still have an actor", running)
	}
	closed, err := d.Sessions(ctx, store.SessionFilter{})
	if err != nil || len(closed) != n+200 {
		t.Fatalf("%d sessions stored, %v", len(closed), err)
	}
	for _, s := range closed {
		if s.Status != store.StatusClosed {
			t.Fatalf("session %s is %s, want closed", s.ID, s.Status)
		}
	}
	// 10,000 sessions kept alive would hold megabytes (an actor and its
	// hub alone are over 1 KB each); allow 512 KB of noise. On PostgreSQL
	// the driver's pool keeps buffers per connection (pgx's preallocated
	// rows and statement cache, which a heap profile diff shows as all of
	// the growth: 0.5-1 MB whether 1,000 or 10,000 sessions were closed),
	// and it replaces connections as it likes: allow 1.5 MB there.
	allow := uint64(512 << 10)
	if daemontest.OnPostgres() {
		allow = 1536 << 10
	}
	t.Logf("heap: %d KB before, %d KB after %d sessions (%d CLIs started)", base>>10, after>>10, n, cli.Started())
	if after > base+allow {
		t.Errorf("heap grew from %d KB to %d KB over %d closed sessions", base>>10, after>>10, n)
	}
}

// TestCloseDoesNotWaitForBlockedCalls: an interrupt the CLI never answers
// does not hold up closing the session; the call ends with it.
func TestCloseDoesNotWaitForBlockedCalls(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{Transport: &daemontest.InProcessCLI{Ignore: []string{"interrupt"}}})
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "")
	if err != nil {
		t.Fatal(err)
	}
	interrupted := make(chan error, 1)
	go func() { interrupted <- d.Interrupt(ctx, s.ID, "test") }()
	time.Sleep(200 * time.Millisecond) // the interrupt is in flight
	closed := make(chan error, 1)
	go func() { closed <- d.CloseSession(ctx, s.ID, "test") }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CloseSession waited behind an interrupt the CLI never answers")
	}
	select {
	case err := <-interrupted:
		if !errors.Is(err, daemon.ErrNotRunning) {
			t.Errorf("the blocked interrupt ended with %v, want ErrNotRunning", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked interrupt did not end with the session")
	}
	if got, _ := d.Session(ctx, s.ID); got.Status != store.StatusClosed {
		t.Errorf("status %s, want closed", got.Status)
	}
}
