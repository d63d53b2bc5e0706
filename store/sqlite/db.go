// Package sqlite implements the daemon's [store] on SQLite, through the pure
// Go driver modernc.org/sqlite (no cgo).
//
//	db, err := sqlite.Open(ctx, filepath.Join(stateDir, "claudectl.db"), &sqlite.Options{
//		MaxPayloadBytes: cfg.Daemon.MaxPayloadBytes,
//	})
//	if err != nil {
//		return err
//	}
//	defer db.Close()
//
// # Writing events
//
// Events are written by one goroutine per DB that commits whatever has
// queued up, from every session, in one transaction (group commit), so that
// a hundred sessions cost one commit, not a hundred. Each session's events
// are numbered 1, 2, 3, … in the order they were queued, inside the
// transaction that stores them, so the numbering has no gap and never
// repeats. [DB.Append] and [DB.AppendBatch] return once the events are
// committed: only then may the daemon show them to a client.
// [DB.AppendAsync] queues and returns at once, and reports the commit
// through a callback, in queue order: a session's reader can keep reading
// while its earlier lines commit, and the writer then commits many lines
// of each session at once. That is what sustains a fast CLI; see
// BenchmarkAppend for the figures.
//
// The events table is kept in arrival order, so a commit appends to the
// end of the file whatever the mix of sessions, and a (session, seq) index
// serves replays. Clustering the table by session instead was measured to
// write three times as many pages per commit.
//
// A request (one Append, AppendBatch or AppendAsync call, with the session
// update or ledger entry that rides with it) fails alone when its own
// events fail (an unknown session, a constraint, a ledger error): the other
// requests of the batch commit. Only an error of the transaction itself
// fails them all.
//
// # Write failures
//
// An error of any write that the disk or the database file caused (disk
// full, I/O error, read-only or unopenable file, out of memory) wraps
// [store.ErrWriteFailed] and says why in plain words and where the data
// dir is. [DB.WriteHealth] reports the latest one until a write succeeds
// again. The writer goes on taking requests after a failure: once the
// disk has room, the next one succeeds and the log goes on at the next
// seq. WAL mode keeps the file sound through a full disk (tested on a full
// tmpfs: every acknowledged event is there, integrity_check is ok).
// Package [github.com/claudectl/claudectl/store/sqlite/sqlitetest] makes a
// DB fail as if its disk were full, for tests.
//
// # Durability
//
// The database runs in WAL mode with synchronous=NORMAL. A committed
// transaction has been written to the WAL file with write(2) before Append
// returns, so it is in the kernel's page cache and survives the daemon being
// killed (kill -9, a panic, an OOM kill). What NORMAL gives up is fsync per
// commit: a power cut or kernel crash can lose the last transactions (never
// corrupt the file). [Options.FullSync] fsyncs the WAL on every commit and
// extends the guarantee to power loss, at the price of one fsync per group
// commit (which group commit makes cheap: see BenchmarkAppend). Under
// NORMAL, a power cut can leave the log ending before a seq a client has
// already seen, and the next events would reuse those numbers; a daemon
// that lets clients resume across such a crash should use FullSync or tag
// its cursors with a per-boot id.
//
// # Concurrency
//
// A DB is safe for concurrent use. All writes go through one connection, so
// they never fail with SQLITE_BUSY among themselves; reads use a separate
// pool and, thanks to WAL, neither wait for writes nor block them. One
// process should own a database file at a time: the writer caches each
// session's last seq, so a second writer's appends would fail on the
// (session, seq) unique index (never corrupt the log), and both daemons
// would treat the sessions as their own.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claudectl/claudectl/internal/jsonl"
	"github.com/claudectl/claudectl/store"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Options configures Open. A nil *Options is the same as a zero one.
type Options struct {
	// MaxPayloadBytes is daemon.max_payload_bytes: an event line (or a
	// decision's input) longer than this is stored truncated, as
	// jsonl.Truncate does it. Zero means 10 MiB; negative means no limit.
	MaxPayloadBytes int
	// FullSync makes every commit fsync the WAL (synchronous=FULL), so an
	// acknowledged event survives power loss and not only a killed
	// process. Zero (false) keeps synchronous=NORMAL.
	FullSync bool
	// MaxBatch caps the events committed in one transaction; a batch is
	// whatever queued while the previous one committed, up to this. Zero
	// means 2048.
	MaxBatch int
	// ReadConns is the size of the read pool. Zero means 4.
	ReadConns int
	// BusyTimeout is how long a statement waits for a lock held by another
	// process (a backup, the sqlite3 shell) before failing. Zero means 5s.
	BusyTimeout time.Duration
	// MaxRules is how many permission rules the store holds at most
	// (CreateRule refuses one more). Zero means store.MaxRules.
	MaxRules int
	// MaxTokens and MaxUsers are how many live tokens and users the store
	// holds at most. Zero means store.MaxTokens and store.MaxUsers.
	MaxTokens int
	MaxUsers  int
}

// A DB is an open claudectl database. See the package doc for its
// concurrency and durability contracts.
type DB struct {
	w          *sql.DB // one connection: every write
	r          *sql.DB // readers
	reads      readStmts
	app        *appender
	cp         *checkpointer
	ix         *indexer // the search indexer (search.go)
	maxPayload int
	maxRules   int
	maxTokens  int
	maxUsers   int
	health     *store.HealthTracker
	path       string // the file, for Backup's connection of its own

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// DB is a [store.Store].
var _ store.Store = (*DB)(nil)

// readStmts are the reads every client's attach and every session lookup
// make, prepared once (on each reader connection as it first runs them):
// parsing their SQL each time was most of what 2,000 clients attaching to
// a session cost.
type readStmts struct {
	session   *sql.Stmt // a session by id
	logBounds *sql.Stmt // a session's pk, last seq, pruned seq and the first seq of the chunk after a seq
	eventPage *sql.Stmt // the chunks of a range of seqs
}

func prepareReads(ctx context.Context, r *sql.DB) (readStmts, error) {
	var rs readStmts
	for _, p := range []struct {
		st **sql.Stmt
		q  string
	}{
		{&rs.session, `SELECT ` + sessionColumns + ` FROM sessions WHERE id = ?`},
		{&rs.logBounds, `SELECT pk, ` + lastSeqSQL + `, pruned_seq,
			(SELECT first_seq FROM event_chunks WHERE session = sessions.pk AND last_seq > ?2 ORDER BY last_seq LIMIT 1)
			FROM sessions WHERE id = ?1`},
		{&rs.eventPage, `SELECT first_seq, events FROM event_chunks
			WHERE session = ? AND last_seq >= ? AND first_seq <= ? ORDER BY last_seq LIMIT ?`},
	} {
		st, err := r.PrepareContext(ctx, p.q)
		if err != nil {
			rs.close()
			return readStmts{}, err
		}
		*p.st = st
	}
	return rs, nil
}

func (rs readStmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{rs.session, rs.logBounds, rs.eventPage} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
	// after, when set, runs in the migration's transaction after its SQL:
	// the part of a migration SQL cannot express.
	after func(ctx context.Context, tx *sql.Tx) error
}

// migrationSteps are the Go parts of migrations, by version.
var migrationSteps = map[int]func(ctx context.Context, tx *sql.Tx) error{
	4:  convertEvents,
	12: indexExisting,
}

// migrations returns the embedded migrations in order. Their files are
// named NNNN_what.sql and numbered 1, 2, 3, … without gaps.
func migrations() []migration {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	var ms []migration
	for i, name := range names { // fs.Glob sorts
		base := strings.TrimPrefix(name, "migrations/")
		num, _, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil || v != i+1 {
			panic(fmt.Sprintf("sqlite: migration %s: want number %04d", base, i+1))
		}
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			panic(err)
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b), after: migrationSteps[v]})
	}
	return ms
}

// SchemaVersion is the schema version this binary writes: the number of
// its migrations.
func SchemaVersion() int { return len(migrations()) }

// Open opens or creates the database at path, brings its schema up to date
// and starts the event writer. ctx covers the opening only.
//
// Migrations run in one transaction: after a failure the file is as it was.
// A database whose schema is newer than this binary knows is refused with
// an error wrapping [store.ErrSchemaTooNew]. path must not contain '?'.
func Open(ctx context.Context, path string, opts *Options) (_ *DB, err error) {
	defer wrap(&err, "sqlite: Open %s", path)
	var o Options
	if opts != nil {
		o = *opts
	}
	if strings.ContainsRune(path, '?') || path == "" || strings.HasPrefix(path, ":memory:") {
		return nil, fmt.Errorf("%w: path must name a file and hold no '?'", store.ErrInvalid)
	}
	dir, _ := filepath.Abs(filepath.Dir(path))
	h := &store.HealthTracker{Classify: classifier(dir)}
	defer func() {
		if werr := h.Classify(store.ErrWriteFailed, err); werr != nil {
			err = werr
		}
	}()
	if o.MaxPayloadBytes == 0 {
		o.MaxPayloadBytes = jsonl.DefaultMaxLineBytes
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 2048
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}

	q := url.Values{}
	// Incremental vacuum, set before the first table: the pages that
	// retention frees can then be given back to the system in short steps
	// while the daemon writes (Reclaim). A file made without it keeps
	// it off (only a VACUUM, which rewrites the file, could turn it on).
	q.Add("_pragma", "auto_vacuum(INCREMENTAL)")
	// WAL: readers and the writer do not block each other, and a commit
	// is one sequential append to the WAL file.
	q.Add("_pragma", "journal_mode(WAL)")
	// Wait for locks held by other processes instead of failing at once.
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.BusyTimeout.Milliseconds()))
	// Enforce the REFERENCES clauses (off by default in SQLite).
	q.Add("_pragma", "foreign_keys(1)")
	// NORMAL: no fsync per commit, yet a commit survives a killed process
	// (see the package doc); FULL adds the fsync for power loss.
	if o.FullSync {
		q.Add("_pragma", "synchronous(FULL)")
	} else {
		q.Add("_pragma", "synchronous(NORMAL)")
	}
	// No automatic checkpoints: the committing connection would run them,
	// fsync included, in the writer's path. A checkpointer on its own
	// connection copies the WAL back instead (see checkpointer).
	q.Add("_pragma", "wal_autocheckpoint(0)")
	// Cut the WAL back to walBytes when it starts over (see checkpointer).
	q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walBytes))
	rq := url.Values{"_pragma": append([]string{"query_only(1)", "cache_size(-16384)"}, q["_pragma"]...)}
	// The writer touches the tail page of every busy session's log in each
	// commit: a page cache of 16 MiB keeps them from being read back from
	// the file (the default is 2 MiB). A larger one (64 MiB) cost more than
	// it saved: every page the cache grows by is a malloc in the writer's
	// path (the pages of a full cache are reused instead), and Close spent
	// a second freeing it.
	q.Add("_pragma", "cache_size(-16384)")
	// Statement journals (a multi-row insert needs one) in memory, not in
	// temporary files.
	q.Add("_pragma", "temp_store(MEMORY)")
	q.Set("_txlock", "immediate") // take the write lock at BEGIN, not at the first write

	// undo closes, newest first, what was opened when Open fails.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	w, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { w.Close() })
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := migrate(ctx, w); err != nil {
		return nil, err
	}

	r, err := sql.Open("sqlite", path+"?"+rq.Encode())
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { r.Close() })
	r.SetMaxOpenConns(o.ReadConns)
	r.SetMaxIdleConns(o.ReadConns)
	r.SetConnMaxIdleTime(0)

	var pageSize int64
	if err := w.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		return nil, err
	}
	c, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	c.SetMaxOpenConns(1)
	c.SetMaxIdleConns(1)
	c.SetConnMaxIdleTime(0)
	preallocate(path+"-wal", walBytes)
	cp := newCheckpointer(c, pageSize)
	undo = append(undo, func() { cp.close() }) // closes c
	app, err := newAppender(w, o.MaxBatch, h, cp)
	if err != nil {
		return nil, err
	}
	undo = append(undo, app.close)
	reads, err := prepareReads(ctx, r)
	if err != nil {
		return nil, err
	}
	db := &DB{w: w, r: r, reads: reads, app: app, cp: cp, maxPayload: o.MaxPayloadBytes, maxRules: cmp.Or(o.MaxRules, store.MaxRules),
		maxTokens: cmp.Or(o.MaxTokens, store.MaxTokens), maxUsers: cmp.Or(o.MaxUsers, store.MaxUsers), health: h, path: path}
	db.ix = newIndexer(db, cp)
	return db, nil
}

// migrate applies the migrations the database lacks, in one transaction,
// with foreign keys off (a migration may rebuild a table others refer to)
// and checked before the commit.
func migrate(ctx context.Context, w *sql.DB) (err error) {
	conn, err := w.Conn(ctx) // the pragma is the connection's
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		return err
	}
	defer func() {
		if _, ferr := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA foreign_keys = ON`); ferr != nil && err == nil {
			err = ferr
		}
	}()
	return migrateTx(ctx, conn)
}

func migrateTx(ctx context.Context, conn *sql.Conn) error {
	return migrateTo(ctx, conn, SchemaVersion())
}

// migrateTo applies the migrations the database lacks up to version to.
func migrateTo(ctx context.Context, conn *sql.Conn, to int) error {
	ms := migrations()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return err
	}
	var cur int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return err
	}
	if cur > len(ms) {
		return fmt.Errorf("%w: the database is at version %d, this binary knows up to %d; use a newer claudectl",
			store.ErrSchemaTooNew, cur, len(ms))
	}
	for _, m := range ms[cur:max(cur, to)] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if m.after != nil {
			if err := m.after(ctx, tx); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, time.Now().UnixNano()); err != nil {
			return err
		}
	}
	rows, err := tx.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		return err
	}
	bad := rows.Next()
	rows.Close()
	if bad {
		return errors.New("migrations left rows whose foreign keys point nowhere; the database was not changed")
	}
	return tx.Commit()
}

// Close stops taking appends, commits the ones already queued, waits for
// them, and closes the database. It is idempotent and safe to call
// concurrently; every call returns the first call's result. Calls made
// after Close fail with an error wrapping [store.ErrClosed].
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.closed.Store(true)
		db.ix.close()
		db.app.close()
		db.closeErr = errors.Join(db.cp.close(), db.reads.close(), db.r.Close(), db.w.Close())
	})
	return db.closeErr
}

// wrap prefixes a non-nil *errp with the formatted context.
func wrap(errp *error, format string, args ...any) {
	if *errp != nil {
		*errp = fmt.Errorf(format+": %w", append(args, *errp)...)
	}
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return time.Now().UnixNano()
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// check returns an error wrapping store.ErrClosed once Close was called.
func (db *DB) check() error {
	if db.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// WriterStats implements [store.StatsReporter]: what the event writer
// committed since Open.
func (db *DB) WriterStats() store.WriterSnapshot { return db.app.stats.Snapshot() }
