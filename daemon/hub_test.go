package daemon

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/claudectl/claudectl/store"
)

// startPump runs h's pump until the test ends, and waits for it to end
// then: a pump left running reads crowdRest, which a later test sets (the
// race detector caught one that outlived its test).
func startPump(t *testing.T, h *hub) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() { h.pump(quit); close(done) }()
	t.Cleanup(func() { close(quit); <-done })
}

func hubEvent(seq int64, size int) Event {
	return Event{Event: store.Event{Seq: seq, Type: "stream_event", Raw: bytes.Repeat([]byte("x"), size)}}
}

// TestHubRingBounds: the ring keeps at most maxCount events and about
// ringBytes of lines, always the newest, in seq order; without subscribers
// it keeps nothing.
func TestHubRingBounds(t *testing.T) {
	h := newHub("s", 8)
	h.publish(hubEvent(1, 10))
	if h.count != 0 || h.ring != nil {
		t.Fatalf("a hub without subscribers kept %d events", h.count)
	}
	h.ring = []Event{} // what acquireHub does for the first subscriber
	for seq := int64(1); seq <= 100; seq++ {
		h.publish(hubEvent(seq, 10))
	}
	if h.count != 8 || h.at(0).Seq != 93 || h.at(7).Seq != 100 {
		t.Fatalf("ring of 8 after 100 events: %d events, %d..%d", h.count, h.at(0).Seq, h.at(h.count-1).Seq)
	}
	evs, behind, _ := h.since(95, nil, 100)
	if behind || len(evs) != 5 || evs[0].Seq != 96 {
		t.Errorf("since 95: %d events from %v, behind %v", len(evs), evs, behind)
	}
	if _, behind, _ := h.since(91, nil, 100); !behind {
		t.Error("since 91: not behind a ring that starts at 93")
	}
	if evs, behind, _ := h.since(92, nil, 3); behind || len(evs) != 3 || evs[2].Seq != 95 {
		t.Errorf("since 92, limit 3: %d events, behind %v", len(evs), behind)
	}
	if evs, _, _ := h.since(100, nil, 100); len(evs) != 0 {
		t.Errorf("since the last: %d events", len(evs))
	}

	big := newHub("s", 1<<20)
	big.ring = []Event{}
	for seq := int64(1); seq <= 50; seq++ {
		big.publish(hubEvent(seq, 100<<10))
	}
	if big.bytes > ringBytes || big.count < 1 || big.at(big.count-1).Seq != 50 {
		t.Errorf("ring of 100 KiB lines: %d events, %d bytes (bound %d)", big.count, big.bytes, ringBytes)
	}
	big.publish(hubEvent(51, 2*ringBytes)) // larger than the bound: kept alone
	if big.count != 1 || big.at(0).Seq != 51 {
		t.Errorf("after a line larger than the bound: %d events", big.count)
	}
}

// TestHubWakesWaitersForLaterEvents: every event published after a
// subscriber joined puts a token in its waiter (directly or through the
// pump), so a subscriber that yielded what since gave and waits on it
// misses nothing; one that left gets none; the end wakes them all, and
// after it nothing is published, so the last look holds the last events.
func TestHubWakesWaitersForLaterEvents(t *testing.T) {
	// token reports whether w has a token within d, taking it.
	token := func(w *waiter, d time.Duration) bool {
		select {
		case <-w.c:
			return true
		case <-time.After(d):
			return false
		}
	}
	woken := func(w *waiter) bool { return token(w, 30*time.Second) }
	idle := func(w *waiter) bool { return !token(w, 20*time.Millisecond) }
	for _, subs := range []int{1, directWake + 1} { // woken by publish, by the pump
		h := newHub("s", 100)
		h.ring = []Event{}
		startPump(t, h)
		ws := make([]*waiter, subs+1)
		for i := range ws {
			ws[i] = h.join()
		}
		gone := ws[0] // the last joined takes its place
		h.leave(gone)
		ws = ws[1:]
		h.publish(hubEvent(1, 10))
		for i, w := range ws {
			if !woken(w) {
				t.Fatalf("%d subscribers: waiter %d not woken by the first event", subs, i)
			}
		}
		evs, _, ended := h.since(0, nil, 100)
		if len(evs) != 1 || ended {
			t.Fatalf("%d subscribers: since 0 gave %d events, ended %v", subs, len(evs), ended)
		}
		h.publish(hubEvent(2, 10))
		h.publish(hubEvent(2, 10)) // published already: no wake
		for i, w := range ws {
			if !woken(w) {
				t.Errorf("%d subscribers: waiter %d not woken by an event published after since", subs, i)
			}
			if !idle(w) {
				t.Errorf("%d subscribers: waiter %d woken twice for one new event", subs, i)
			}
		}
		if !idle(gone) {
			t.Errorf("%d subscribers: a waiter that left was woken", subs)
		}
		h.publish(hubEvent(3, 10))
		for _, w := range ws {
			woken(w)
		}
		h.end()
		for i, w := range ws {
			if !woken(w) {
				t.Errorf("%d subscribers: waiter %d not woken by the end", subs, i)
			}
		}
		h.publish(hubEvent(4, 10)) // after the end: dropped
		evs, _, ended = h.since(1, nil, 100)
		if !ended || len(evs) != 2 || evs[1].Seq != 3 {
			t.Errorf("%d subscribers: after the end since 1 gave %d events, ended %v; want 2..3, ended", subs, len(evs), ended)
		}
	}
}

// TestHubNext: the ring's event after a seq is found whether the ring's
// seqs are consecutive or not (events never published), with the ring
// wrapped around.
func TestHubNext(t *testing.T) {
	h := newHub("s", 5)
	h.ring = []Event{}
	for _, seq := range []int64{1, 2, 3, 5, 6, 9} { // 1 evicted: 2 3 5 6 9, wrapped
		h.publish(hubEvent(seq, 10))
	}
	if h.head == 0 {
		t.Fatal("the ring did not wrap around")
	}
	for last := int64(0); last <= 11; last++ {
		want := h.count
		for i := range h.count {
			if h.at(i).Seq > last {
				want = i
				break
			}
		}
		if got := h.next(last); got != want {
			t.Errorf("next(%d) = %d, want %d (the ring: %d..%d)", last, got, want, h.at(0).Seq, h.at(h.count-1).Seq)
		}
	}
}

// TestHubWaitersComeAndGo: subscribers joining and leaving all the time
// (each leave moves the last waiter into its place) while events are
// published and the pump wakes them: every one that waits for an event
// gets it, none is woken after it left in a way that loses another's
// wake-up, and each sees the events it looked for in order.
func TestHubWaitersComeAndGo(t *testing.T) {
	const events, subs = 3000, 24
	h := newHub("s", 1<<14)
	h.ring = []Event{}
	startPump(t, h)
	errs := make(chan error, subs)
	for i := range subs {
		go func() {
			var last int64
			for round := 0; last < events; round++ {
				w := h.join()
				want := last + int64(1+(i+round)%40) // follow this many more, then leave
				for last < min(want, events) {
					evs, _, _ := h.since(last, nil, 64)
					for _, ev := range evs {
						if ev.Seq != last+1 {
							h.leave(w)
							errs <- fmt.Errorf("subscriber %d: seq %d after %d", i, ev.Seq, last)
							return
						}
						last = ev.Seq
					}
					if len(evs) == 0 {
						select {
						case <-w.c:
						case <-time.After(30 * time.Second):
							h.leave(w)
							errs <- fmt.Errorf("subscriber %d: not woken for the event after %d", i, last)
							return
						}
					}
				}
				h.leave(w)
			}
			errs <- nil
		}()
	}
	for seq := int64(1); seq <= events; seq++ {
		h.publish(hubEvent(seq, 10))
		if seq%100 == 0 {
			time.Sleep(time.Millisecond) // let them come and go between bursts
		}
	}
	for range subs {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if len(h.waiters) != 0 {
		t.Errorf("%d waiters left after every subscriber left", len(h.waiters))
	}
}

// TestHubPacesACrowd: after waking a crowd the pump rests (crowdRest,
// made an hour here), and the events published meanwhile wait for one
// wake instead of a wake each; the rest is cut short once they fill half
// the ring, in events or in bytes, so that no subscriber falls behind the
// ring while the pump rests.
func TestHubPacesACrowd(t *testing.T) {
	const ring, subs = 64, 2 * directWake // a crowd: woken by the pump
	old := crowdRest
	t.Cleanup(func() { crowdRest = old }) // once the pump has ended (cleanups run last first)
	crowdRest.perWake, crowdRest.max = time.Hour, time.Hour
	h := newHub("s", ring)
	h.ring = []Event{}
	startPump(t, h)
	ws := make([]*waiter, subs)
	for i := range ws {
		ws[i] = h.join()
	}
	// woken takes every waiter's token, failing the test for one that has
	// none within 30 s.
	woken := func(after string) {
		t.Helper()
		for i, w := range ws {
			select {
			case <-w.c:
			case <-time.After(30 * time.Second):
				t.Fatalf("waiter %d not woken %s", i, after)
			}
		}
	}
	// resting fails the test if a waiter is woken within 50 ms.
	resting := func(waiting string) {
		t.Helper()
		select {
		case <-ws[0].c:
			t.Fatalf("the crowd woken while the pump rests, with %s waiting", waiting)
		case <-time.After(50 * time.Millisecond):
		}
		for i, w := range ws[1:] {
			if len(w.c) > 0 {
				t.Fatalf("waiter %d woken while the pump rests, with %s waiting", i+1, waiting)
			}
		}
	}
	seq := int64(1)
	h.publish(hubEvent(seq, 10))
	woken("by the first event")

	for range ring/2 - 1 {
		seq++
		h.publish(hubEvent(seq, 10))
	}
	resting(fmt.Sprintf("%d events", ring/2-1))
	seq++
	h.publish(hubEvent(seq, 10))
	woken(fmt.Sprintf("by %d events, half the ring", ring/2))
	if evs, behind, _ := h.since(1, nil, ring); behind || len(evs) != int(seq-1) || evs[len(evs)-1].Seq != seq {
		t.Fatalf("since 1 after the wake: %d events, behind %v; want 2..%d", len(evs), behind, seq)
	}

	big := ringBytes / 5
	for range 2 {
		seq++
		h.publish(hubEvent(seq, big))
	}
	resting("two fifths of the ring's bytes")
	seq++
	h.publish(hubEvent(seq, big))
	woken("by three fifths of the ring's bytes")
	if evs, behind, _ := h.since(seq-3, nil, ring); behind || len(evs) != 3 {
		t.Fatalf("since %d after the wake: %d events, behind %v; want the 3 large ones", seq-3, len(evs), behind)
	}
}
