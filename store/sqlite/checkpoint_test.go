package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

// TestWALStartsOverUnderSteadyWrites writes steadily, as sessions
// streaming together do (eight writers, each a line per millisecond), and
// checks that the WAL stays near the size it is made to start over at.
// Before the checkpointer held the writer off for a pass, every checkpoint
// was outrun by a commit and the WAL grew for as long as the writes went
// on (in the daemon's benchmark, 27 MB a second).
func TestWALStartsOverUnderSteadyWrites(t *testing.T) {
	const restart = 1 << 20
	defer sqlite.SetWALRestart(restart)()
	db, path := mustOpen(t, nil)
	ctx := context.Background()
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = mustSession(t, db).ID
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written int64
	var mu sync.Mutex
	for _, id := range ids {
		wg.Go(func() {
			for n := int64(0); ; n++ {
				select {
				case <-stop:
					mu.Lock()
					written += n
					mu.Unlock()
					return
				default:
				}
				if _, err := db.Append(ctx, &store.Event{SessionID: id, Direction: store.FromCLI, Type: "stream_event", Raw: benchLine}); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	var largest int64
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(path + "-wal"); err == nil {
			largest = max(largest, fi.Size())
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// Read once the checkpointer has ended: read while it runs, a pass
	// under way could count its lead-in and not yet itself.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	passes, held, leadIns := db.Checkpoints()
	t.Logf("%d events appended; WAL at most %d bytes, %d at the end; %d checkpoints, %d holding the writer off", written, largest, fi.Size(), passes, held)
	if held == 0 {
		t.Errorf("the writer was never held off for a checkpoint (%d passes)", passes)
	}
	// Each pass that holds the writer off comes right after one that does
	// not, so that it has only what was written meanwhile to copy and sync.
	if leadIns != held {
		t.Errorf("%d passes held the writer off, %d came right after one that did not; want every one", held, leadIns)
	}
	// The WAL grows past restart while the checkpointer catches up (here
	// to 20 MB; 120 MB in 3 s when nothing made it start over); it must not
	// keep growing.
	const bound = 48 << 20
	if largest > bound {
		t.Errorf("the WAL grew to %d bytes under steady writes; want at most %d (it starts over past %d)", largest, bound, restart)
	}
	if written < 1000 {
		t.Errorf("only %d events appended in 3 s: the writer was held off too long", written)
	}
}

// TestWALIsPreallocated checks that the WAL has its space when the database
// opens, where the file system can give it.
func TestWALIsPreallocated(t *testing.T) {
	_, path := mustOpen(t, nil)
	if !canPreallocate(t, filepath.Dir(path)) {
		t.Skip("the store does not preallocate on the file system of the temporary directory (in memory, too full, or without fallocate)")
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if got := allocated(fi); got < sqlite.WALBytes {
		t.Errorf("the WAL has %d bytes allocated (its size %d); want at least %d", got, fi.Size(), sqlite.WALBytes)
	}
}
