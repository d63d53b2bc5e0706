package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// When the checkpointer copies the WAL back into the database file: once
// the writer has had nothing to do for checkpointQuiet, at least
// checkpointGap after the last checkpoint began; or checkpointMaxGap after
// the first commit it has not copied, whichever comes first.
const (
	checkpointGap    = 100 * time.Millisecond
	checkpointMaxGap = 250 * time.Millisecond
	checkpointQuiet  = 2 * time.Millisecond
)

// walBytes is the journal_size_limit the WAL is cut back to when it
// starts over, and the space allocated to it when the database is opened
// (preallocate).
const walBytes = 64 << 20

// walSizes.restart is the size past which the checkpointer makes the WAL
// start over, well before it outgrows its allocation. A variable for the
// tests.
var walSizes = struct{ restart int64 }{40 << 20}

// Once the WAL is past walSizes.restart, passes come one after the other:
// each waits catchUpWait at most for a quiet moment, and after catchUpTries
// of them the writer is held off whether or not one came.
const (
	catchUpWait  = 30 * time.Millisecond
	catchUpTries = 3
)

// A checkpointer copies the WAL back into the database file on a
// connection of its own, so that the fsyncs a checkpoint ends with never
// stall the event writer: with SQLite's automatic checkpoints (run by the
// committing connection) a slow disk held every session's lines back for
// tens of milliseconds. PASSIVE checkpoints neither wait for nor block the
// writer or the readers.
//
// That alone does not bound the WAL. It starts over from its beginning
// only when the writer begins a transaction with every frame copied back,
// and under steady writes the writer has always appended frames since the
// pass began: in the daemon's lockstep benchmark the WAL grew by 27 MB a
// second for as long as the sessions streamed (and each growth of the file
// was a block allocation that could stall a commit behind the pass's
// writeback; see preallocate). So passes start when the writer has been
// quiet for a moment (between two bursts of lines), and once the WAL is
// past walSizes.restart, the next pass holds the writer off between two
// commits (gate): no commit can outrun it, and the writer's next
// transaction starts the WAL over. That pass follows right after one that
// leaves the writer free, so it copies back only what was written during
// that one, and the two start at the writer's next quiet moment, so that
// in the gap between two bursts of lines nobody waits for them; a writer
// that is never quiet waits for one pass once per walSizes.restart of
// WAL. A reader still in the old frames can keep the
// WAL from starting over; the next pass tries again.
type checkpointer struct {
	c          *sql.DB       // one connection
	restartAt  int64         // walSizes.restart in frames
	gate       sync.Mutex    // held by the writer while it commits; by a pass no commit may outrun
	written    chan struct{} // capacity 1: a commit since the last checkpoint began
	quiet      chan struct{} // capacity 1: the writer has nothing queued
	writerIdle atomic.Bool   // the writer waits for requests
	commits    atomic.Int64  // commits so far
	stop, done chan struct{}
	passes     atomic.Int64 // checkpoints run, catch-ups included (tests)
	held       atomic.Int64 // passes with the writer held off (tests)
	leadIns    atomic.Int64 // passes with the writer free right before a held one (tests)
}

func newCheckpointer(c *sql.DB, pageSize int64) *checkpointer {
	pageSize = max(pageSize, 512)
	cp := &checkpointer{c: c, restartAt: walSizes.restart / pageSize,
		written: make(chan struct{}, 1), quiet: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go cp.run()
	return cp
}

// commit runs the writer's commit fn and tells the checkpointer of it. A
// pass holding the writer off holds it until done.
func (cp *checkpointer) commit(fn func()) {
	// Busy from the start: a long commit is no quiet moment.
	cp.writerIdle.Store(false)
	cp.commits.Add(1)
	cp.gate.Lock()
	defer cp.gate.Unlock()
	fn()
	signal(cp.written)
}

// idle tells the checkpointer that the writer has nothing queued. It
// never blocks.
func (cp *checkpointer) idle() {
	cp.writerIdle.Store(true)
	signal(cp.quiet)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (cp *checkpointer) run() {
	defer close(cp.done)
	var (
		last   time.Time // when the last pass began
		frames int64     // in the WAL at the last pass, as far as it is known
		tries  int       // passes since the WAL was found past walSizes.restart
	)
	for {
		select {
		case <-cp.stop:
			return
		case <-cp.written:
		}
		due := frames > cp.restartAt
		wait := checkpointMaxGap
		if due {
			wait = catchUpWait
		} else if !cp.sleep(time.Until(last.Add(checkpointGap))) {
			return
		}
		quiet, ok := cp.waitQuiet(time.Now().Add(wait))
		if !ok {
			return
		}
		last = time.Now()
		// Once the WAL does not start over by itself, hold the writer off
		// for a pass (catch up) at its next quiet moment; without one, when
		// the WAL is far past its size or passes that do not hold it off
		// have not caught up.
		held := due && (quiet || frames > 2*cp.restartAt || tries >= catchUpTries)
		if held {
			// A pass with the writer free first, so that the one holding
			// it off has only what was committed meanwhile to copy and
			// sync: the fsync of the pages a pass copied is most of its
			// time (16 ms for 900 pages on the benchmark machine's disk),
			// and a held pass that started from the last one took 15–25 ms
			// in the lockstep benchmark, every session's lines waiting.
			cp.pass()
			cp.leadIns.Add(1)
			cp.gate.Lock()
		}
		n, ok := cp.pass()
		if held {
			cp.gate.Unlock()
			cp.held.Add(1)
		}
		switch {
		case !ok: // best effort: tried again after the next commit
		case held: // the writer's next commit starts the WAL over
			frames, tries = 0, 0
		case n > cp.restartAt:
			frames, tries = n, tries+1
		default:
			frames, tries = n, 0
		}
	}
}

// pass runs a PASSIVE checkpoint and returns the frames the WAL held. Best
// effort: a failed checkpoint is tried again after the next commit.
func (cp *checkpointer) pass() (frames int64, ok bool) {
	var busy, copied int64
	err := cp.c.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
	cp.passes.Add(1)
	if err != nil {
		return 0, false
	}
	return frames, true
}

// waitQuiet waits until the writer has been quiet for checkpointQuiet
// (quiet) or until deadline; ok is false if the checkpointer was stopped
// meanwhile.
func (cp *checkpointer) waitQuiet(deadline time.Time) (quiet, ok bool) {
	for !cp.quietFor(checkpointQuiet) {
		wait := time.Until(deadline)
		if wait <= 0 {
			return false, true
		}
		t := time.NewTimer(wait)
		select {
		case <-cp.stop:
			t.Stop()
			return false, false
		case <-cp.quiet:
		case <-t.C:
		}
		t.Stop()
	}
	return true, true
}

// quietFor reports whether the writer is idle and stays so for d.
func (cp *checkpointer) quietFor(d time.Duration) bool {
	if !cp.writerIdle.Load() {
		return false
	}
	n := cp.commits.Load()
	return cp.sleep(d) && cp.writerIdle.Load() && cp.commits.Load() == n
}

// sleep waits d; false if the checkpointer was stopped meanwhile.
func (cp *checkpointer) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-cp.stop:
		return false
	case <-t.C:
		return true
	}
}

// close stops the checkpointer and closes its connection.
func (cp *checkpointer) close() error {
	close(cp.stop)
	<-cp.done
	return cp.c.Close()
}
