package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// checkpointInterval is how often the checkpointer copies the WAL back
// into the database while there are writes.
const checkpointInterval = 500 * time.Millisecond

// A checkpointer copies the WAL back into the database file on a
// connection of its own, so that the fsync a checkpoint ends with never
// stalls the event writer: with SQLite's automatic checkpoints (run by the
// committing connection) a slow disk held every session's lines back for
// tens of milliseconds. PASSIVE checkpoints neither wait for nor block the
// writer or the readers.
type checkpointer struct {
	c    *sql.DB // one connection
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newCheckpointer(c *sql.DB) *checkpointer {
	cp := &checkpointer{c: c, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go cp.run()
	return cp
}

// wrote tells the checkpointer that a commit happened. It never blocks.
func (cp *checkpointer) wrote() {
	select {
	case cp.kick <- struct{}{}:
	default:
	}
}

func (cp *checkpointer) run() {
	defer close(cp.done)
	for {
		select {
		case <-cp.stop:
			return
		case <-cp.kick:
		}
		cp.c.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`) // best effort; the next one retries
		select {
		case <-cp.stop:
			return
		case <-time.After(checkpointInterval):
		}
	}
}

// close stops the checkpointer and closes its connection.
func (cp *checkpointer) close() error {
	close(cp.stop)
	<-cp.done
	return cp.c.Close()
}
