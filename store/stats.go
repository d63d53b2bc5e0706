package store

import (
	"sync"
	"time"
)

// CommitBuckets are the upper bounds, in seconds, of the buckets a
// [WriterStats] counts commits in: from half a millisecond (a group commit
// of a few lines on a quiet SQLite) to seconds (an fsync on a loaded disk,
// a distant PostgreSQL server).
var CommitBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// WriterStats counts what a store's event writer committed: the engines
// call Committed once per transaction, and the daemon's metrics read a
// Snapshot when scraped. The zero value is ready; safe for concurrent use.
type WriterStats struct {
	mu      sync.Mutex
	events  uint64
	commits uint64
	buckets []uint64 // guarded by mu: commits per bucket of CommitBuckets, the last one past them all
	sum     float64  // guarded by mu: seconds
}

// Committed records a transaction that took took and stored events
// events.
func (s *WriterStats) Committed(events int, took time.Duration) {
	sec := took.Seconds()
	i := 0
	for i < len(CommitBuckets) && sec > CommitBuckets[i] {
		i++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets == nil {
		s.buckets = make([]uint64, len(CommitBuckets)+1)
	}
	s.events += uint64(max(events, 0))
	s.commits++
	s.buckets[i]++
	s.sum += sec
}

// Snapshot returns the counts so far.
func (s *WriterStats) Snapshot() WriterSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := WriterSnapshot{EventsAppended: s.events, Commits: s.commits, CommitSeconds: s.sum,
		CommitBuckets: make(map[float64]uint64, len(CommitBuckets))}
	var n uint64
	for i, le := range CommitBuckets {
		if s.buckets != nil {
			n += s.buckets[i]
		}
		snap.CommitBuckets[le] = n
	}
	return snap
}

// A WriterSnapshot is what a store's writer committed since it opened.
type WriterSnapshot struct {
	// EventsAppended counts the events stored.
	EventsAppended uint64
	// Commits counts the transactions committed; CommitSeconds is the time
	// they took in all, and CommitBuckets the commits that took at most
	// each bound of CommitBuckets (cumulative, as Prometheus' histograms).
	Commits       uint64
	CommitSeconds float64
	CommitBuckets map[float64]uint64
}

// A StatsReporter is a store that counts its writer's work. Both engines
// implement it.
type StatsReporter interface {
	WriterStats() WriterSnapshot
}
