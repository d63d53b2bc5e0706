package daemon

import (
	"slices"
	"testing"

	"github.com/claudectl/claudectl/store"
)

// TestSessionFeedFrames: a watcher reading the frames after the last one
// it saw gets their sessions merged (the last read of each), a snapshot
// frame in between makes the change a snapshot, and a watcher whose next
// frame is gone is told it is behind.
func TestSessionFeedFrames(t *testing.T) {
	var f sessionFeed
	f.init()
	sess := func(id string, turns int64) *store.Session {
		s := &store.Session{ID: id}
		s.Totals.Turns = turns
		return s
	}
	names := func(ch SessionsChange) []string {
		var out []string
		for _, s := range ch.Sessions {
			out = append(out, s.ID+":"+string(rune('0'+s.Totals.Turns)))
		}
		return out
	}
	if ch, last, behind, _ := f.after(0); behind || last != 0 || len(ch.Sessions) != 0 {
		t.Fatalf("empty feed: %+v, last %d, behind %v", ch, last, behind)
	}
	f.publish(sessionFrame{sessions: []*store.Session{sess("a", 1), sess("b", 1)}})
	f.publish(sessionFrame{sessions: []*store.Session{sess("a", 2), sess("c", 1)}})
	ch, last, behind, _ := f.after(0)
	if want := []string{"a:2", "b:1", "c:1"}; behind || last != 2 || ch.Snapshot || !slices.Equal(names(ch), want) {
		t.Fatalf("after 0: %v (snapshot %v), last %d, behind %v; want %v", names(ch), ch.Snapshot, last, behind, want)
	}
	_, _, _, wait := f.after(2)
	f.publish(sessionFrame{snapshot: true, sessions: []*store.Session{sess("b", 3)}})
	select {
	case <-wait:
	default:
		t.Fatal("a watcher waiting after frame 2 was not woken by frame 3")
	}
	f.publish(sessionFrame{sessions: []*store.Session{sess("d", 1)}})
	ch, last, _, _ = f.after(1)
	if want := []string{"b:3", "d:1"}; last != 4 || !ch.Snapshot || !slices.Equal(names(ch), want) {
		t.Fatalf("after 1, across a snapshot frame: %v (snapshot %v), last %d; want the snapshot %v", names(ch), ch.Snapshot, last, want)
	}
	for range feedFrames {
		f.publish(sessionFrame{sessions: []*store.Session{sess("e", 1)}})
	}
	if _, _, behind, _ := f.after(3); !behind { // frames 5… are kept
		t.Error("a watcher whose next frame is gone is not behind")
	}
	if ch, _, behind, _ := f.after(4); behind || !slices.Equal(names(ch), []string{"e:1"}) {
		t.Errorf("a watcher whose next frame is the oldest kept: %v, behind %v", names(ch), behind)
	}
}
