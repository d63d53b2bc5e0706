package storetest

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/claudectl/claudectl/store"
)

// BenchLine is a text_delta stream_event line of about 300 bytes.
var BenchLine = []byte(`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` +
	strings.Repeat("lorem ipsum ", 5) + `"}},"session_id":"8c1f4d52-0b7e-4a65-9d3c-2f6a1e9b7c40","parent_tool_use_id":null,"uuid":"b7d2e8a1-5c3f-4e9b-8a6d-1f2c3b4a5d6e"}`)

// BenchAppend measures a store's event writer with sessions sessions, each
// on its own goroutine, appending BenchLine b.N times in all, and reports
// events/s. With window > 0 each session keeps up to window AppendAsync
// lines in flight (as a session reader does), checking that the
// acknowledgements come in seq order; otherwise it appends batches of
// batch lines with AppendBatch, waiting for each. The engines' benchmarks
// call it, so their figures compare:
//
//	go test -run '^$' -bench Append -benchtime 300000x ./store/sqlite/ ./store/postgres/
func BenchAppend(b *testing.B, s store.Store, sessions, batch, window int) {
	ctx := context.Background()
	ids := make([]string, sessions)
	for i := range ids {
		ss := &store.Session{Cwd: "/src/app", Status: store.StatusRunning}
		if err := s.CreateSession(ctx, ss); err != nil {
			b.Fatal(err)
		}
		ids[i] = ss.ID
	}
	var claimed atomic.Int64
	claim := func(n int) int { // events left for this goroutine to append, at most n
		left := int64(b.N) - (claimed.Add(int64(n)) - int64(n))
		return int(max(0, min(int64(n), left)))
	}
	var wg sync.WaitGroup
	b.SetBytes(int64(len(BenchLine)))
	b.ResetTimer()
	for _, id := range ids {
		wg.Go(func() {
			if window > 0 {
				appendAsync(b, s, id, window, claim)
				return
			}
			for {
				k := claim(batch)
				if k == 0 {
					return
				}
				evs := make([]*store.Event, k)
				for i := range evs {
					evs[i] = &store.Event{SessionID: id, Direction: store.FromCLI, Type: "stream_event", Raw: BenchLine}
				}
				if err := s.AppendBatch(ctx, evs...); err != nil {
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
		ss, err := s.Session(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		total += ss.LastSeq
	}
	if total != int64(b.N) {
		b.Fatalf("%d events stored, want %d", total, b.N)
	}
}

// appendAsync appends one session's share with up to window events in
// flight, checking that acknowledgements come back in seq order.
func appendAsync(b *testing.B, s store.Store, id string, window int, claim func(int) int) {
	slots := make(chan struct{}, window)
	var inflight sync.WaitGroup
	var last int64
	for claim(1) == 1 {
		slots <- struct{}{}
		ev := &store.Event{SessionID: id, Direction: store.FromCLI, Type: "stream_event", Raw: BenchLine}
		inflight.Add(1)
		err := s.AppendAsync(context.Background(), func(err error) {
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
