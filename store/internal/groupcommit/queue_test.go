package groupcommit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type req struct {
	name  string
	key   string
	size  int
	heavy bool
	Base
}

func testKind() Kind[*req] {
	return Kind[*req]{
		Base:  func(r *req) *Base { return &r.Base },
		Size:  func(r *req) int { return r.size },
		Key:   func(r *req) string { return r.key },
		Heavy: func(r *req) bool { return r.heavy },
	}
}

func names(rs []*req) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.name)
	}
	return out
}

func TestPick(t *testing.T) {
	light := func(name, key string) *req { return &req{name: name, key: key, size: 1} }
	heavy := func(name, key string) *req { return &req{name: name, key: key, size: 1, heavy: true} }
	// capped is maxHeavy heavy requests of as many sessions: a batch's worth.
	var capped []*req
	var cappedNames []string
	for i := range maxHeavy {
		capped = append(capped, heavy(fmt.Sprint("h", i), fmt.Sprint("h", i)))
		cappedNames = append(cappedNames, fmt.Sprint("h", i))
	}
	with := func(rs []*req, more ...*req) []*req { return append(append([]*req(nil), rs...), more...) }
	withNames := func(more ...string) []string { return append(append([]string(nil), cappedNames...), more...) }
	for _, c := range []struct {
		name             string
		max              int
		lightsOnly       bool
		pending          []*req
		wantNow, wantLat []string
		wantHeld         bool
	}{
		{
			name:    "all fit",
			max:     100,
			pending: []*req{light("a1", "a"), heavy("a2", "a"), light("b1", "b")},
			wantNow: []string{"a1", "a2", "b1"},
		},
		{
			// Past maxHeavy, the heavy requests wait, and so does every
			// later request of their sessions; the others' light ones go.
			name: "heavy capped, light of other sessions go ahead",
			max:  100,
			pending: with(capped,
				heavy("e1", "e"), light("e2", "e"), light("f1", "f"), heavy("g", "g"), light("f2", "f"),
			),
			wantNow: withNames("f1", "f2"),
			wantLat: []string{"e1", "e2", "g"},
		},
		{
			name:    "full batch keeps each session's order",
			max:     2,
			pending: []*req{light("a1", "a"), light("b1", "b"), light("a2", "a"), {name: "c1", key: "c", size: 0}},
			wantNow: []string{"a1", "b1", "c1"},
			wantLat: []string{"a2"},
		},
		{
			name:    "a request larger than a batch goes alone",
			max:     2,
			pending: []*req{{name: "big", key: "a", size: 5}, light("b1", "b")},
			wantNow: []string{"big"},
			wantLat: []string{"b1"},
		},
		{
			// A request of key "" is ordered with every other: it waits
			// for those left before it, and all after it wait for it.
			name:    "empty key orders with all",
			max:     100,
			pending: with(capped, heavy("e", "e"), light("all", ""), light("f", "f")),
			wantNow: withNames(),
			wantLat: []string{"e", "all", "f"},
		},
		{
			name:    "empty key first",
			max:     100,
			pending: []*req{light("all", ""), light("f", "f")},
			wantNow: []string{"all", "f"},
		},
		{
			// Light requests alone: a heavy one waits, and so does every
			// later request of its session.
			name:       "lights only",
			max:        100,
			lightsOnly: true,
			pending:    []*req{light("a1", "a"), heavy("a2", "a"), light("b1", "b"), light("a3", "a"), heavy("c1", "c")},
			wantNow:    []string{"a1", "b1"},
			wantLat:    []string{"a2", "a3", "c1"},
			wantHeld:   true,
		},
		{
			name:       "lights only, no heavy",
			max:        100,
			lightsOnly: true,
			pending:    []*req{light("a1", "a"), light("b1", "b")},
			wantNow:    []string{"a1", "b1"},
		},
		{
			// A heavy request left out by the cap was not held for lights.
			name:       "lights only, heavy first",
			max:        100,
			lightsOnly: true,
			pending:    []*req{heavy("a1", "a"), light("a2", "a")},
			wantLat:    []string{"a1", "a2"},
			wantHeld:   true,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := New(16, c.max, testKind())
			now, later, held := q.pick(c.pending, nil, nil, map[string]bool{}, c.lightsOnly)
			if held != c.wantHeld {
				t.Errorf("held = %v, want %v", held, c.wantHeld)
			}
			if diff := cmp.Diff(c.wantNow, names(now)); diff != "" {
				t.Errorf("batch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.wantLat, names(later)); diff != "" {
				t.Errorf("left for later (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunKeepsEachSessionsOrder queues requests of many sessions, light
// and heavy, from one goroutine per session, and checks that each
// session's requests were committed once each, in the order queued, and
// that every batch respects the bounds.
func TestRunKeepsEachSessionsOrder(t *testing.T) {
	const sessions, perSession, maxBatch = 20, 300, 16
	q := New(8, maxBatch, testKind())
	var (
		mu        sync.Mutex
		committed = map[string][]int{}
		bad       []string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Run(func(batch []*req) {
			n, heavy := 0, 0
			for _, r := range batch {
				if !r.Take() {
					continue
				}
				n += r.size
				if r.heavy {
					heavy++
				}
				var i int
				fmt.Sscan(r.name, &i)
				mu.Lock()
				committed[r.key] = append(committed[r.key], i)
				mu.Unlock()
				r.Notify(nil)
			}
			if len(batch) > 1 && (n > maxBatch || heavy > maxHeavy) {
				bad = append(bad, fmt.Sprintf("batch of %d events, %d heavy", n, heavy))
			}
		}, nil)
	}()
	var wg sync.WaitGroup
	for s := range sessions {
		key := fmt.Sprintf("s%d", s)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(s), 1))
			for i := range perSession {
				r := &req{name: fmt.Sprint(i), key: key, size: 1 + rng.IntN(3), heavy: rng.IntN(4) == 0}
				r.Notify = func(error) {}
				if rng.IntN(3) == 0 { // some wait for their commit, as Submit does
					if err := q.Submit(context.Background(), r); err != nil {
						t.Error(err)
						return
					}
					continue
				}
				if err := q.Enqueue(context.Background(), r); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	q.Close()
	<-done
	if len(bad) > 0 {
		t.Errorf("batches past their bounds: %v", bad)
	}
	for s := range sessions {
		got := committed[fmt.Sprintf("s%d", s)]
		if len(got) != perSession {
			t.Fatalf("session %d: %d requests committed, want %d", s, len(got), perSession)
		}
		for i, v := range got {
			if v != i {
				t.Fatalf("session %d: request %d committed at position %d", s, v, i)
			}
		}
	}
}

// TestRunCommitsLightRequestsFirst: with light and heavy requests waiting,
// a batch takes the light ones alone; while more light ones keep coming,
// a heavy one waits for at most maxLightRounds such batches.
func TestRunCommitsLightRequestsFirst(t *testing.T) {
	q := New(64, 100, testKind())
	var batches [][]string
	enqueue := func(r *req) error {
		r.Notify = func(error) {}
		return q.Enqueue(context.Background(), r)
	}
	for _, r := range []*req{{name: "h", key: "a", size: 1, heavy: true}, {name: "l0", key: "b", size: 1}, {name: "l1", key: "c", size: 1}} {
		if err := enqueue(r); err != nil {
			t.Fatal(err)
		}
	}
	streamed := make(chan struct{}) // the callback has stopped queueing
	done := make(chan struct{})
	go func() {
		defer close(done)
		n := 2
		q.Run(func(batch []*req) {
			for _, r := range batch {
				if r.Take() {
					r.Notify(nil)
				}
			}
			batches = append(batches, names(batch))
			switch {
			case len(batches) < 2*maxLightRounds: // a steady stream of light requests
				n++
				if err := enqueue(&req{name: fmt.Sprint("l", n), key: fmt.Sprint("k", n), size: 1}); err != nil {
					t.Error(err) // not Fatal: this is Run's goroutine
				}
			case len(batches) == 2*maxLightRounds:
				close(streamed)
			}
		}, nil)
	}()
	select {
	case <-streamed:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
	}
	q.Close()
	<-done
	want := [][]string{{"l0", "l1"}}
	for i := range maxLightRounds - 1 {
		want = append(want, []string{fmt.Sprint("l", i+3)})
	}
	want = append(want, []string{"h", fmt.Sprint("l", maxLightRounds+2)})
	if len(batches) < len(want) {
		t.Fatalf("batches %v, want %v first", batches, want)
	}
	if diff := cmp.Diff(want, batches[:len(want)]); diff != "" {
		t.Errorf("first batches (-want +got):\n%s", diff)
	}
}

// TestRunHoldsNoMoreThanTheQueue: requests the writer has not committed
// stay within the queue's capacity, so a caller that outruns the writer
// waits in Enqueue (back-pressure) instead of growing the writer's memory.
func TestRunHoldsNoMoreThanTheQueue(t *testing.T) {
	const capacity, total, stallAt = 4, 60, 8
	q := New(capacity, 1, testKind())
	release := make(chan struct{})
	stalled := make(chan struct{})
	commits := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Run(func(batch []*req) {
			commits++
			if commits == stallAt { // with the writer holding what it gathered; one request a batch, so it would pile up
				close(stalled)
				<-release
			} else if commits < stallAt {
				time.Sleep(2 * time.Millisecond) // a slow writer: the channel is full at each gather
			}
			for _, r := range batch {
				if r.Take() {
					r.Notify(nil)
				}
			}
		}, nil)
	}()
	var queued atomic.Int64
	producer := make(chan struct{})
	go func() {
		defer close(producer)
		for i := range total {
			r := &req{name: fmt.Sprint(i), key: fmt.Sprint("k", i), size: 1}
			r.Notify = func(error) {}
			if err := q.Enqueue(context.Background(), r); err != nil {
				return
			}
			queued.Add(1)
		}
	}()
	<-stalled
	// The producer runs until Enqueue blocks: give it time to get there.
	for last := int64(-1); last != queued.Load(); {
		last = queued.Load()
		time.Sleep(50 * time.Millisecond)
	}
	// Committed: stallAt-1; in the stalled batch: 1; left for later: at
	// most capacity-1 (the writer gathers up to capacity); in the channel:
	// capacity.
	if n, most := queued.Load(), int64(stallAt+2*capacity-1); n > most {
		t.Errorf("%d requests queued while the writer stalled, want at most %d", n, most)
	}
	close(release)
	<-producer
	q.Close()
	<-done
	if n := queued.Load(); n != total {
		t.Fatalf("%d requests queued, want %d", n, total)
	}
}

// TestRunCallsIdleOnlyWhenDrained checks that Run tells the writer it is
// idle once everything queued is committed, and never between two batches
// while requests wait: the SQLite store's checkpointer holds the writer off
// only in such a moment.
func TestRunCallsIdleOnlyWhenDrained(t *testing.T) {
	q := New(16, 1, testKind()) // one event a batch: three requests, three batches
	var (
		mu    sync.Mutex
		calls []string
	)
	note := func(s string) {
		mu.Lock()
		calls = append(calls, s)
		mu.Unlock()
	}
	inFirst, release := make(chan struct{}), make(chan struct{})
	signal := make(chan struct{}, 2) // an idle call
	done := make(chan struct{})
	go func() {
		defer close(done)
		first := true
		q.Run(func(batch []*req) {
			if first { // hold the first batch until the others are queued
				first = false
				close(inFirst)
				<-release
			}
			for _, r := range batch {
				if r.Take() {
					note("commit " + r.name)
					r.Notify(nil)
				}
			}
		}, func() {
			note("idle")
			signal <- struct{}{}
		})
	}()
	committed := make(chan error, 3)
	enqueue := func(name string) {
		r := &req{name: name, key: name, size: 1}
		r.Notify = func(err error) { committed <- err }
		if err := q.Enqueue(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	<-signal // the writer starts with nothing queued
	enqueue("a")
	<-inFirst
	enqueue("b")
	enqueue("c")
	close(release)
	for range 3 {
		if err := <-committed; err != nil {
			t.Fatal(err)
		}
	}
	q.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	// a, b and c, each a batch of its own, with no idle between them; then
	// idle again.
	want := []string{"idle", "commit a", "commit b", "commit c", "idle"}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("writer's calls (-want +got):\n%s", diff)
	}
}
