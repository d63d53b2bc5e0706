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
