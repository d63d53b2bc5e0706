package sqlite_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
	"github.com/claudectl/claudectl/store/storetest"
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

var benchLine = storetest.BenchLine

func benchAppend(b *testing.B, sessions, batch, window int, opts *sqlite.Options) {
	db, _ := mustOpen(b, opts)
	storetest.BenchAppend(b, db, sessions, batch, window)
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

// BenchmarkAttach measures what a client attaching to a busy session costs
// the store: the replay of the session's log after the last event the
// client saw (here the newest but one, so one event), from the middle of
// the chunk that holds it, as 2,000 clients attaching to one session do.
func BenchmarkAttach(b *testing.B) {
	db, _ := mustOpen(b, nil)
	ctx := context.Background()
	id := mustSession(b, db).ID
	for range 20 { // a chunk of twenty events per commit, as a streaming session's
		var evs []*store.Event
		for range 20 {
			evs = append(evs, &store.Event{SessionID: id, Direction: store.FromCLI, Type: "stream_event", Raw: benchLine})
		}
		if err := db.AppendBatch(ctx, evs...); err != nil {
			b.Fatal(err)
		}
	}
	s, err := db.Session(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, err := range db.Events(ctx, id, s.LastSeq-1) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 1 {
			b.Fatalf("replayed %d events, want 1", n)
		}
	}
}

// BenchmarkTurnEdge is the writer's work when 100 sessions start or end a
// turn together. status: each logs a status event with its session's
// status change (AppendUpdateAsync) and waits for it, all at once; result:
// each logs a result line with its usage ledger entry (AppendResultAsync),
// a usage report and its status event and change after it in the same
// request (store.ResultFollow), as the daemon does at a turn's end;
// result/apart: the same with the status event and change in a request
// of their own, queued once the result is stored (as the daemon did
// before). It reports the time until the last is stored (edge_ms) and the
// writer's time per session (us/session).
func BenchmarkTurnEdge(b *testing.B) {
	for _, mode := range []string{"status", "result", "result/apart"} {
		b.Run(mode, func(b *testing.B) { benchTurnEdge(b, mode != "status", mode == "result") })
	}
}

func benchTurnEdge(b *testing.B, result, follow bool) {
	const sessions = 100
	db, _ := mustOpen(b, &sqlite.Options{})
	ctx := context.Background()
	ids := make([]string, sessions)
	for i := range ids {
		s := &store.Session{Cwd: "/src/app", Status: store.StatusIdle, Options: []byte(`{"model":"claude-sonnet","allowed_tools":["Bash","Edit","Read","Write"],"include_partial_messages":true,"permission_mode":"default"}`)}
		if err := db.CreateSession(ctx, s); err != nil {
			b.Fatal(err)
		}
		ids[i] = s.ID
	}
	raw := []byte(`{"type":"status","status":"running"}`)
	resRaw := []byte(`{"type":"result","subtype":"success","is_error":false,"duration_ms":1200,"num_turns":1,"result":"done","total_cost_usd":0.0123,"usage":{"input_tokens":12,"output_tokens":340},"modelUsage":{"claude-sonnet":{"inputTokens":12,"outputTokens":340,"costUSD":0.0123}}}`)
	b.ResetTimer()
	for i := range b.N {
		st := store.StatusRunning
		if result || i%2 == 1 {
			st = store.StatusIdle
		}
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				if result {
					done := make(chan error, 1)
					ev := &store.Event{SessionID: id, Direction: store.FromCLI, Type: "result", Raw: resRaw}
					cost := 0.0123 * float64(i+1)
					in := store.UsageInput{SessionID: id, Process: 1, Result: store.ResultUsage{Subtype: "success", DurationMS: 1200,
						Cumulative: store.Cumulative{CostUSD: cost, Models: map[string]store.ModelUsage{"claude-sonnet": {InputTokens: 12 * int64(i+1), OutputTokens: 340 * int64(i+1), CostUSD: cost}}}}}
					var f *store.ResultFollow
					if follow {
						f = &store.ResultFollow{Update: &store.SessionUpdate{Status: &st},
							Events: func(rec *store.UsageRecord, s *store.Session) ([]*store.Event, error) {
								return []*store.Event{
									{SessionID: id, Direction: store.FromDaemon, Type: "usage_report", Raw: fmt.Appendf(nil, `{"turn":{"turn":%d},"totals":{"turns":%d}}`, rec.Turn, s.Totals.Turns)},
									{SessionID: id, Direction: store.FromDaemon, Type: "status", Raw: raw},
								}, nil
							}}
					}
					if err := db.AppendResultAsync(ctx, func(_ *store.UsageRecord, _ *store.Session, err error) { done <- err }, ev, in, f); err != nil {
						b.Error(err)
						return
					}
					if err := <-done; err != nil {
						b.Error(err)
						return
					}
					if follow {
						return
					}
				}
				done := make(chan error, 1)
				ev := &store.Event{SessionID: id, Direction: store.FromDaemon, Type: "status", Raw: raw}
				if err := db.AppendUpdateAsync(ctx, func(err error) { done <- err }, ev, store.SessionUpdate{Status: &st}); err != nil {
					b.Error(err)
					return
				}
				if err := <-done; err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	b.StopTimer()
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(per.Microseconds())/1e3, "edge_ms")
	b.ReportMetric(float64(per.Microseconds())/sessions, "us/session")
}
