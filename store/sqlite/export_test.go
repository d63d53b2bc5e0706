package sqlite

import (
	"context"
	"database/sql"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/internal/groupcommit"
)

// HoldWriter queues ev with a then that waits until release is called, so
// that the requests queued meanwhile are written in one batch after it.
// held is closed once the writer is waiting.
func (db *DB) HoldWriter(ev *store.Event) (held <-chan struct{}, release func(), done <-chan error, err error) {
	h, r, d := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	if err := db.prepareAll([]*store.Event{ev}); err != nil {
		return nil, nil, nil, err
	}
	first := true
	req := &appendRequest{evs: []*store.Event{ev}, Base: groupcommit.Base{Notify: func(err error) { d <- err }},
		then: func(context.Context, cachedTx, int64) ([]*store.Event, error) {
			if first {
				first = false
				close(h)
				<-r
			}
			return nil, nil
		}}
	if err := db.app.enqueue(context.Background(), req); err != nil {
		return nil, nil, nil, err
	}
	return h, func() { close(r) }, d, nil
}

// AppendExecAsync queues ev with a then that runs the statements qs (each
// with the session's id as its one argument) in the transaction, in order.
func (db *DB) AppendExecAsync(ctx context.Context, done func(error), ev *store.Event, qs ...string) error {
	if err := db.prepareAll([]*store.Event{ev}); err != nil {
		return err
	}
	return db.app.enqueue(ctx, &appendRequest{evs: []*store.Event{ev}, Base: groupcommit.Base{Notify: done},
		then: func(ctx context.Context, tx cachedTx, _ int64) ([]*store.Event, error) {
			for _, q := range qs {
				if _, err := tx.Exec(ctx, q, ev.SessionID); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}})
}

// Commits returns the number of transactions the writer has committed or
// tried to.
func (db *DB) Commits() int64 { return db.app.commits.Load() }

// CreateAtVersion creates a database at path with the migrations up to
// version only, as an older claudectl left it.
func CreateAtVersion(ctx context.Context, path string, version int) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return migrateTo(ctx, conn, version)
}

// MaxChunkBytes is the size at which the writer ends a chunk.
const MaxChunkBytes = maxChunkBytes

// WALBytes is the space the WAL is given when the database opens.
const WALBytes = walBytes

// PreallocatesIn reports whether a database opened in dir is given its
// WAL's space (if the file system supports it).
func PreallocatesIn(dir string) bool { return worthPreallocating(dir, walBytes) }

// SetWALRestart makes the databases opened afterwards start their WAL over
// past restart bytes; the returned function puts the default back. Not for
// tests that run in parallel with others.
func SetWALRestart(restart int64) (undo func()) {
	old := walSizes
	walSizes.restart = restart
	return func() { walSizes = old }
}

// Checkpoints returns how many passes db's checkpointer has run, how many
// of them held the writer off, and how many ran with the writer free right
// before one that held it off.
func (db *DB) Checkpoints() (passes, held, leadIns int64) {
	return db.cp.passes.Load(), db.cp.held.Load(), db.cp.leadIns.Load()
}
