package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/claudectl/claudectl/internal/jsonl"
	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

func line(session string, writer, i int) []byte {
	return fmt.Appendf(nil, `{"type":"stream_event","session_id":%q,"writer":%d,"i":%d}`, session, writer, i)
}

func TestAppendReplay(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	s := mustSession(t, db)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	in := []*store.Event{
		{SessionID: s.ID, Time: at, Direction: store.ToCLI, Type: "user", Raw: []byte(`{"type":"user"}`)},
		{SessionID: s.ID, Time: at, Direction: store.FromCLI, Type: "system", Subtype: "init", Raw: []byte(`{"type":"system","subtype":"init"}`)},
		{SessionID: s.ID, Time: at, Direction: store.FromDaemon, Type: "status", Raw: []byte(`{"status":"idle"}`), OriginalSize: 1 << 20},
	}
	for i, ev := range in {
		seq, err := db.Append(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if seq != int64(i+1) || ev.Seq != seq {
			t.Fatalf("Append #%d: seq %d (ev.Seq %d), want %d", i, seq, ev.Seq, i+1)
		}
	}
	got, err := collect(t, db, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Event{*in[0], *in[1], *in[2]}
	want[0].OriginalSize, want[1].OriginalSize = 15, 34 // defaulted to len(Raw); the third keeps its own
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replay (-want +got):\n%s", diff)
	}
	if !got[2].Truncated() || got[0].Truncated() {
		t.Errorf("Truncated: %v %v, want false true", got[0].Truncated(), got[2].Truncated())
	}
	if s2, err := db.Session(ctx, s.ID); err != nil || s2.LastSeq != 3 {
		t.Errorf("Session: LastSeq %v (err %v), want 3", s2.LastSeq, err)
	}
}

// TestAppendConcurrent appends from many goroutines to many sessions at
// once and checks that every session's log is 1..n without a gap or a
// duplicate, that each acknowledged seq holds what was appended under it,
// and that each writer's events keep their order.
func TestAppendConcurrent(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	const (
		sessions   = 12
		perSession = 4 // writers per session
		events     = 60
	)
	var ids []string
	for range sessions {
		ids = append(ids, mustSession(t, db).ID)
	}
	type ack struct {
		writer, i int
		seq       int64
	}
	acks := make([][]ack, sessions)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for si, id := range ids {
		for w := range perSession {
			wg.Go(func() {
				var mine []ack
				for i := range events {
					var err error
					var seq int64
					if i%3 == 0 { // mix single appends and batches
						a := &store.Event{SessionID: id, Direction: store.FromCLI, Type: "stream_event", Raw: line(id, w, i)}
						seq, err = db.Append(ctx, a)
					} else {
						a := &store.Event{SessionID: id, Direction: store.FromCLI, Type: "stream_event", Raw: line(id, w, i)}
						err = db.AppendBatch(ctx, a)
						seq = a.Seq
					}
					if err != nil {
						t.Error(err)
						return
					}
					mine = append(mine, ack{w, i, seq})
				}
				mu.Lock()
				acks[si] = append(acks[si], mine...)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	for si, id := range ids {
		evs, err := collect(t, db, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != perSession*events {
			t.Fatalf("session %d: %d events, want %d", si, len(evs), perSession*events)
		}
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Fatalf("session %d: event %d has seq %d", si, i, ev.Seq)
			}
		}
		lastOf := map[int]int64{}
		for _, a := range acks[si] {
			if got := evs[a.seq-1].Raw; !bytes.Equal(got, line(id, a.writer, a.i)) {
				t.Fatalf("session %d seq %d: %s, want writer %d i %d", si, a.seq, got, a.writer, a.i)
			}
			if a.seq <= lastOf[a.writer] {
				t.Fatalf("session %d writer %d: seq %d after %d", si, a.writer, a.seq, lastOf[a.writer])
			}
			lastOf[a.writer] = a.seq
		}
	}
}

func appendN(t *testing.T, db *sqlite.DB, id string, n int) {
	t.Helper()
	var evs []*store.Event
	for i := range n {
		evs = append(evs, &store.Event{SessionID: id, Direction: store.FromCLI, Type: "x", Raw: line(id, 0, i)})
	}
	if err := db.AppendBatch(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
}

func TestEventsAfter(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	s := mustSession(t, db)
	empty := mustSession(t, db)
	appendN(t, db, s.ID, 10)

	for _, tt := range []struct {
		id         string
		after      int64
		want       int // events
		wantFirst  int64
		wantErrIs  error
		wantNoData bool
	}{
		{id: s.ID, after: 0, want: 10, wantFirst: 1},
		{id: s.ID, after: 7, want: 3, wantFirst: 8},
		{id: s.ID, after: 10, want: 0},
		{id: empty.ID, after: 0, want: 0},
		{id: s.ID, after: 11, wantErrIs: store.ErrUnavailable},
		{id: s.ID, after: -1, wantErrIs: store.ErrUnavailable},
		{id: empty.ID, after: 1, wantErrIs: store.ErrUnavailable},
		{id: "nope", after: 0, wantErrIs: store.ErrNotFound},
	} {
		evs, err := collect(t, db, tt.id, tt.after)
		if tt.wantErrIs != nil {
			if !errors.Is(err, tt.wantErrIs) || len(evs) != 0 {
				t.Errorf("Events(%s, %d): %d events, err %v; want none and %v", tt.id, tt.after, len(evs), err, tt.wantErrIs)
			}
			continue
		}
		if err != nil || len(evs) != tt.want {
			t.Errorf("Events(%s, %d): %d events, err %v; want %d", tt.id, tt.after, len(evs), err, tt.want)
			continue
		}
		if tt.want > 0 && evs[0].Seq != tt.wantFirst {
			t.Errorf("Events(%s, %d): first seq %d, want %d", tt.id, tt.after, evs[0].Seq, tt.wantFirst)
		}
	}

	// Breaking out of the loop stops the replay.
	n := 0
	for _, err := range db.Events(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 2 {
			break
		}
	}
}

// TestEventsPaging replays a log longer than a page, and one whose
// payloads are bigger than a page's byte budget.
func TestEventsPaging(t *testing.T) {
	db, _ := mustOpen(t, nil)
	many := mustSession(t, db)
	appendN(t, db, many.ID, 1300)
	big := mustSession(t, db)
	payload := `{"type":"assistant","text":"` + strings.Repeat("x", 1<<20) + `"}`
	for range 9 {
		if _, err := db.Append(context.Background(), &store.Event{SessionID: big.ID, Direction: store.FromCLI,
			Type: "assistant", Raw: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		id string
		n  int
	}{{many.ID, 1300}, {big.ID, 9}} {
		evs, err := collect(t, db, c.id, 0)
		if err != nil || len(evs) != c.n {
			t.Fatalf("replay: %d events, err %v; want %d", len(evs), err, c.n)
		}
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Fatalf("event %d: seq %d", i, ev.Seq)
			}
		}
	}
}

// TestEventsEndsAtCall checks that a replay stops at the end the log had
// when Events was called, even while events keep coming.
func TestEventsEndsAtCall(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	s := mustSession(t, db)
	appendN(t, db, s.ID, 5)
	n := 0
	for _, err := range db.Events(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		appendN(t, db, s.ID, 1)
	}
	if n != 5 {
		t.Errorf("replay yielded %d events, want the 5 present at the call", n)
	}
}

// TestEventsRefusesPartial removes the start of a log (as a compaction
// would) and checks that a replay from before it fails without yielding.
func TestEventsRefusesPartial(t *testing.T) {
	db, path := mustOpen(t, nil)
	s := mustSession(t, db)
	appendN(t, db, s.ID, 3) // a commit each: a chunk each
	appendN(t, db, s.ID, 7)
	raw, err := sql.Open("sqlite", path+busyWait)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if res, err := raw.Exec(`DELETE FROM event_chunks WHERE session = (SELECT pk FROM sessions WHERE id = ?) AND last_seq <= 3`, s.ID); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("deleted %d chunks, want the first", n)
	}
	evs, err := collect(t, db, s.ID, 1)
	if !errors.Is(err, store.ErrUnavailable) || len(evs) != 0 {
		t.Errorf("Events after 1: %d events, err %v; want none and ErrUnavailable", len(evs), err)
	}
	if evs, err := collect(t, db, s.ID, 3); err != nil || len(evs) != 7 {
		t.Errorf("Events after 3: %d events, err %v; want 7", len(evs), err)
	}
}

func TestAppendTruncates(t *testing.T) {
	db, _ := mustOpen(t, &sqlite.Options{MaxPayloadBytes: 4096})
	s := mustSession(t, db)
	big := []byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"` +
		strings.Repeat("line of output\\n", 10000) + `"}]}}`)
	ev := &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "user", Raw: big}
	if _, err := db.Append(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	evs, err := collect(t, db, s.ID, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("replay: %d events, err %v", len(evs), err)
	}
	got := evs[0]
	if got.OriginalSize != int64(len(big)) || len(got.Raw) > 4096 || !got.Truncated() {
		t.Errorf("stored %d bytes of %d (OriginalSize %d); want at most 4096 of %d", len(got.Raw), len(big), got.OriginalSize, len(big))
	}
	if !json.Valid(got.Raw) || !bytes.Contains(got.Raw, []byte(jsonl.Marker(int64(len(big))))) || !bytes.Contains(got.Raw, []byte("toolu_1")) {
		t.Errorf("truncated line is not valid JSON with the marker and the ids: %.300s", got.Raw)
	}
}

func TestAppendErrors(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	s := mustSession(t, db)
	ok := func() *store.Event {
		return &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x", Raw: []byte(`{}`)}
	}
	for _, tt := range []struct {
		name string
		ev   *store.Event
		want error
	}{
		{"no session", &store.Event{Direction: store.FromCLI, Type: "x"}, store.ErrInvalid},
		{"no type", &store.Event{SessionID: s.ID, Direction: store.FromCLI}, store.ErrInvalid},
		{"bad direction", &store.Event{SessionID: s.ID, Type: "x"}, store.ErrInvalid},
		{"unknown session", &store.Event{SessionID: "nope", Direction: store.FromCLI, Type: "x"}, store.ErrNotFound},
	} {
		if _, err := db.Append(ctx, tt.ev); !errors.Is(err, tt.want) {
			t.Errorf("%s: err %v, want %v", tt.name, err, tt.want)
		}
	}
	// A batch naming an unknown session stores none of its events.
	a, b := ok(), &store.Event{SessionID: "nope", Direction: store.FromCLI, Type: "x"}
	if err := db.AppendBatch(ctx, a, b); !errors.Is(err, store.ErrNotFound) || a.Seq != 0 {
		t.Errorf("AppendBatch with an unknown session: err %v, a.Seq %d; want ErrNotFound, 0", err, a.Seq)
	}
	if seq, err := db.Append(ctx, ok()); err != nil || seq != 1 {
		t.Errorf("Append after failures: seq %d, err %v; want 1", seq, err)
	}
}

// TestAppendCancelled checks the ctx contract: an Append whose ctx ends
// returns a seq if and only if the event is stored.
func TestAppendCancelled(t *testing.T) {
	db, _ := mustOpen(t, nil)
	s := mustSession(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stored := 0
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 8 {
		wg.Go(func() {
			for range 50 {
				ev := &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x", Raw: []byte(`{}`)}
				seq, err := db.Append(ctx, ev)
				switch {
				case err == nil && seq > 0:
					mu.Lock()
					stored++
					mu.Unlock()
				case errors.Is(err, context.Canceled) && seq == 0 && ev.Seq == 0:
				default:
					t.Errorf("Append: seq %d (ev.Seq %d), err %v", seq, ev.Seq, err)
				}
			}
		})
	}
	wg.Wait()
	evs, err := collect(t, db, s.ID, 0)
	if err != nil || len(evs) != stored {
		t.Errorf("log has %d events (err %v), Append reported %d stored", len(evs), err, stored)
	}
}

// TestCloseDrains closes the store while appends are in flight: each one
// either is stored and acknowledged or fails with ErrClosed.
func TestCloseDrains(t *testing.T) {
	ctx := context.Background()
	db, path := mustOpen(t, nil)
	s := mustSession(t, db)
	var acked sync.Map
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				seq, err := db.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x", Raw: line(s.ID, w, i)})
				if errors.Is(err, store.ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				acked.Store(seq, true)
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := db.Session(ctx, s.ID); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Session after Close: %v, want ErrClosed", err)
	}

	db2, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	evs, err := collect(t, db2, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	acked.Range(func(k, _ any) bool {
		n++
		if seq := k.(int64); seq > int64(len(evs)) {
			t.Errorf("acknowledged seq %d missing; the log ends at %d", seq, len(evs))
		}
		return true
	})
	if n != len(evs) {
		t.Errorf("%d events stored, %d acknowledged", len(evs), n)
	}
}

// TestAppendAsync checks that asynchronous appends complete in the order
// they were queued, with their seqs, and that a failure reaches done.
func TestAppendAsync(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	s := mustSession(t, db)
	const n = 500
	done := make(chan int64, n+1)
	for i := range n {
		ev := &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x", Raw: line(s.ID, 0, i)}
		if err := db.AppendAsync(ctx, func(err error) {
			if err != nil {
				t.Error(err)
			}
			done <- ev.Seq
		}, ev); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if seq := <-done; seq != int64(i+1) {
			t.Fatalf("completion %d has seq %d", i, seq)
		}
	}
	errc := make(chan error, 1)
	if err := db.AppendAsync(ctx, func(err error) { errc <- err },
		&store.Event{SessionID: "nope", Direction: store.FromCLI, Type: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, store.ErrNotFound) {
		t.Errorf("done got %v, want ErrNotFound", err)
	}
	if err := db.AppendAsync(ctx, func(error) { t.Error("done called for an invalid event") },
		&store.Event{SessionID: s.ID}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("AppendAsync of an invalid event: %v", err)
	}
	db.Close()
	if err := db.AppendAsync(ctx, func(error) { t.Error("done called after Close") },
		&store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x"}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("AppendAsync after Close: %v", err)
	}
}

// TestWriterYieldsAfterCommit: what a commit wakes runs before the writer
// writes its next batch (appender.run), even when batches are queued back
// to back on one processor. A goroutine woken by the first batch's
// outcome notes how many batches were stored by the time it ran; without
// the yield, the writer kept the processor for every queued batch first.
func TestWriterYieldsAfterCommit(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, &sqlite.Options{MaxBatch: 1}) // a batch per event
	s := mustSession(t, db)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const n = 50
	var stored atomic.Int64
	woken := make(chan struct{})
	seen := make(chan int64, 1)
	go func() {
		select {
		case <-woken:
			seen <- stored.Load()
		case <-t.Context().Done(): // the test failed before the first commit
		}
	}()
	done := make(chan error, n)
	// With one processor, this goroutine queues every event before the
	// writer runs: it does not block on the way.
	for i := range n {
		ev := &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x", Raw: line(s.ID, 0, i)}
		if err := db.AppendAsync(ctx, func(err error) {
			if stored.Add(1) == 1 {
				close(woken)
			}
			done <- err
		}, ev); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// 1 when the woken goroutine ran at the writer's first yield; 2 when
	// the scheduler's periodic look at its global queue resumed the writer
	// first.
	if got := <-seen; got > 2 {
		t.Errorf("the goroutine woken by the first commit ran after %d of %d commits, want it to run before the writer's next batch", got, n)
	}
}

// busyWait is what the tests' own connections to a store's file add to
// its path: a store's writer and its search indexer write in the
// background, and a connection with no busy timeout fails at once with
// SQLITE_BUSY when one of them holds the lock (as TestEventsRefusesPartial
// did on a busy machine).
const busyWait = "?_pragma=busy_timeout(30000)"
