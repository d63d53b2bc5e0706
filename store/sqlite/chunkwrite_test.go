package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"

	"github.com/claudectl/claudectl/store"
)

// TestCommitMakesAChunkPerSession queues, while the writer is held, 300
// single-event requests of three sessions, interleaved: written in one
// batch, they become one chunk per session (not a row per event), and
// replay in order with their seqs.
func TestCommitMakesAChunkPerSession(t *testing.T) {
	db, path := mustOpen(t, nil)
	ctx := context.Background()
	ss := []*store.Session{mustSession(t, db), mustSession(t, db), mustSession(t, db)}
	held, release, heldDone, err := db.HoldWriter(&store.Event{SessionID: ss[0].ID, Direction: store.FromCLI, Type: "x", Raw: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	<-held
	var wg sync.WaitGroup
	for i := range 300 {
		s := ss[i%3]
		wg.Add(1)
		ev := &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "stream_event", Raw: fmt.Appendf(nil, `{"i":%d}`, i)}
		if err := db.AppendAsync(ctx, func(err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		}, ev); err != nil {
			t.Fatal(err)
		}
	}
	release()
	if err := <-heldDone; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	raw, err := sql.Open("sqlite", path+busyWait)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var chunks int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM event_chunks`).Scan(&chunks); err != nil {
		t.Fatal(err)
	}
	// The held event's chunk, then one per session.
	if chunks != 4 {
		t.Errorf("%d chunks for one held event and one batch of three sessions, want 4", chunks)
	}
	for k, s := range ss {
		evs, err := collect(t, db, s.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		first := 0
		if k == 0 {
			first = 1 // the held event
		}
		if len(evs) != 100+first {
			t.Fatalf("session %d: %d events", k, len(evs))
		}
		for j, ev := range evs[first:] {
			if want := fmt.Sprintf(`{"i":%d}`, 3*j+k); string(ev.Raw) != want || ev.Seq != int64(first+j+1) {
				t.Fatalf("session %d event %d: seq %d %s, want seq %d %s", k, j, ev.Seq, ev.Raw, first+j+1, want)
			}
		}
	}
}
