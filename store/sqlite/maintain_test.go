package sqlite_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/claudectl/claudectl/store"
)

// TestPruneReclaims: the events retention removes give their space back
// to the file system while the database stays open (incremental vacuum),
// and the writer numbers a pruned session's next event after its last.
func TestPruneReclaims(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	s := mustSession(t, db)
	line := append([]byte(`{"type":"assistant","pad":"`), append(bytes.Repeat([]byte("x"), 8000), `"}`...)...)
	for i := range 400 {
		ev := &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "assistant", Raw: line}
		if _, err := db.Append(ctx, ev); err != nil || ev.Seq != int64(i+1) {
			t.Fatalf("Append %d: %d, %v", i, ev.Seq, err)
		}
	}
	closed := store.StatusClosed
	if _, err := db.UpdateSession(ctx, s.ID, store.SessionUpdate{Status: &closed}); err != nil {
		t.Fatal(err)
	}
	pruned, err := db.PruneEvents(ctx, time.Now().Add(time.Minute), false)
	if err != nil || len(pruned) != 1 || pruned[0].Events != 400 {
		t.Fatalf("PruneEvents = %+v, %v", pruned, err)
	}
	rep, err := db.Reclaim(ctx)
	if err != nil || rep.Note != "" || rep.Bytes < 1<<20 {
		t.Fatalf("Reclaim = %+v, %v; want over 1 MiB given back", rep, err)
	}
	// Not a thing the daemon does (a closed session takes no events), but
	// the seqs never repeat whatever comes.
	ev := &store.Event{SessionID: s.ID, Direction: store.FromDaemon, Type: "note", Raw: []byte(`{}`)}
	if seq, err := db.Append(ctx, ev); err != nil || seq != 401 {
		t.Fatalf("Append after pruning: seq %d, %v; want 401", seq, err)
	}
	if evs, err := collect(t, db, s.ID, 400); err != nil || len(evs) != 1 || evs[0].Seq != 401 {
		t.Fatalf("Events after 400: %+v, %v", evs, err)
	}
}
