package sqlite_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

// BenchmarkAppend measures the group-commit writer with 100 sessions, each
// on its own goroutine, appending ~300-byte stream_event lines. It reports
// events/s. The modes:
//
//   - sync/batch=N: AppendBatch of N lines, waiting for each
//     acknowledgement before the next (N=1 is one Append per line).
//   - async/window=N: AppendAsync per line with up to N lines of the
//     session in flight, as a session reader that keeps reading while
//     earlier lines commit; the acknowledgements come back in order.
//
// Run it with
//
//	go test -run '^$' -bench Append -benchtime 300000x ./store/sqlite/
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct {
		name   string
		batch  int // sync: events per AppendBatch
		window int // async: events in flight per session
		opts   sqlite.Options
	}{
		{name: "sync/batch=1", batch: 1},
		{name: "sync/batch=16", batch: 16},
		{name: "async/window=64", window: 64},
		{name: "async/window=64/fullsync", window: 64, opts: sqlite.Options{FullSync: true}},
	} {
		b.Run("sessions=100/"+c.name, func(b *testing.B) { benchAppend(b, 100, c.batch, c.window, &c.opts) })
	}
}

// benchLine is a text_delta stream_event line of about 300 bytes.
var benchLine = []byte(`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` +
	strings.Repeat("lorem ipsum ", 5) + `"}},"session_id":"8c1f4d52-0b7e-4a65-9d3c-2f6a1e9b7c40","parent_tool_use_id":null,"uuid":"b7d2e8a1-5c3f-4e9b-8a6d-1f2c3b4a5d6e"}`)

func benchAppend(b *testing.B, sessions, batch, window int, opts *sqlite.Options) {
	db, _ := mustOpen(b, opts)
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = mustSession(b, db).ID
	}
	ctx := context.Background()
	var claimed atomic.Int64
	claim := func(n int) int { // events left for this goroutine to append, at most n
		left := int64(b.N) - (claimed.Add(int64(n)) - int64(n))
		return int(max(0, min(int64(n), left)))
	}
	var wg sync.WaitGroup
	b.SetBytes(int64(len(benchLine)))
	b.ResetTimer()
	for _, id := range ids {
		wg.Go(func() {
			if window > 0 {
				appendAsync(b, db, id, window, claim)
				return
			}
			for {
				k := claim(batch)
				if k == 0 {
					return
				}
				evs := make([]*store.Event, k)
				for i := range evs {
					evs[i] = &store.Event{SessionID: id, Direction: store.FromCLI, Type: "stream_event", Raw: benchLine}
				}
				if err := db.AppendBatch(ctx, evs...); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	var total int64
	for _, id := range ids {
		s, err := db.Session(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		total += s.LastSeq
	}
	if total != int64(b.N) {
		b.Fatalf("%d events stored, want %d", total, b.N)
	}
}

// appendAsync appends one session's share with up to window events in
// flight, checking that acknowledgements come back in seq order.
func appendAsync(b *testing.B, db *sqlite.DB, id string, window int, claim func(int) int) {
	slots := make(chan struct{}, window)
	var inflight sync.WaitGroup
	var last int64
	for claim(1) == 1 {
		slots <- struct{}{}
		ev := &store.Event{SessionID: id, Direction: store.FromCLI, Type: "stream_event", Raw: benchLine}
		inflight.Add(1)
		err := db.AppendAsync(context.Background(), func(err error) {
			if err != nil {
				b.Error(err)
			} else if ev.Seq != last+1 {
				b.Errorf("acknowledged seq %d after %d", ev.Seq, last)
			}
			last = ev.Seq
			<-slots
			inflight.Done()
		}, ev)
		if err != nil {
			b.Error(err)
			return
		}
	}
	inflight.Wait()
}

// BenchmarkReplay measures Events on one session whose 2,000 events are
// interleaved with those of 99 others, as a busy daemon writes them.
func BenchmarkReplay(b *testing.B) {
	db, _ := mustOpen(b, nil)
	ctx := context.Background()
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = mustSession(b, db).ID
	}
	const perSession = 2000
	for range perSession / 10 {
		var evs []*store.Event
		for _, id := range ids {
			for range 10 {
				evs = append(evs, &store.Event{SessionID: id, Direction: store.FromCLI, Type: "stream_event", Raw: benchLine})
			}
		}
		if err := db.AppendBatch(ctx, evs...); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(perSession * int64(len(benchLine)))
	for i := 0; b.Loop(); i++ {
		n := 0
		for _, err := range db.Events(ctx, ids[i%len(ids)], 0) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != perSession {
			b.Fatalf("replayed %d events, want %d", n, perSession)
		}
	}
	b.ReportMetric(float64(b.N*perSession)/b.Elapsed().Seconds(), "events/s")
}
