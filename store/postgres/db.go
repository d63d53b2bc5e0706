// Package postgres implements the daemon's [store] on PostgreSQL, through
// github.com/jackc/pgx/v5: the engine for a team whose sessions outgrow one
// machine's SQLite file. It keeps every contract of [store.Store], which
// the conformance suite (store/storetest) checks on both engines.
//
//	db, err := postgres.Open(ctx, "postgres://claudectl@db.internal/claudectl", nil)
//	if err != nil {
//		return err
//	}
//	defer db.Close()
//
// # Writing events
//
// As in the SQLite store, one goroutine writes events: it takes whatever
// has queued since its last commit, from every session, and stores it in
// one transaction (group commit), so that a hundred streaming sessions cost
// one round of statements, not a hundred. A batch adds each session's count
// to sessions.last_seq and numbers the session's events from the old value,
// in the transaction that inserts them: the row lock this takes orders
// every writer of that session, so the numbering has no gap and never
// repeats, even with a second writer on the same database. A request fails
// alone when its own events fail (an unknown session, a ledger error): the
// batch is then written again with a savepoint around each request.
//
// # Durability and failures
//
// A commit returns when PostgreSQL has made it durable as the server is
// configured (synchronous_commit): an acknowledged event survives the daemon
// being killed, and, with the server's defaults, the server crashing too.
// An error that the server or the link to it caused (it cannot be reached,
// it is shutting down or starting up, its disk is full, it is read-only)
// wraps [store.ErrWriteFailed], says why in plain words and names the
// server; [DB.WriteHealth] reports the latest one until a write succeeds.
// A write never waits for the server longer than [Options.WriteTimeout]:
// a server that stops answering fails the batch instead of hanging the
// daemon. Once the server is back, the next write succeeds.
package postgres

import (
	"cmp"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/claudectl/claudectl/internal/jsonl"
	"github.com/claudectl/claudectl/store"
)

// Options configures Open. A nil *Options is the same as a zero one.
type Options struct {
	// MaxPayloadBytes is daemon.max_payload_bytes: an event line (or a
	// decision's input) longer than this is stored truncated, as
	// jsonl.Truncate does it. Zero means 10 MiB; negative means no limit.
	MaxPayloadBytes int
	// MaxBatch caps the events committed in one transaction. Zero means
	// 2048.
	MaxBatch int
	// MaxConns is the size of the connection pool (the writer and the
	// listener take one each, and the liveness lock one outside the pool; subscribers following other daemons'
	// sessions read through the rest). Zero means 16.
	MaxConns int
	// WriteTimeout bounds each write transaction and each call's wait for
	// the server. Zero means 30s.
	WriteTimeout time.Duration
	// RetryFor is how long the event writer writes a batch again when the
	// server went away before the commit (a restart, a blink of the
	// link), its callers waiting, before it fails the batch: a restart
	// shorter than this loses nothing. Zero means 15s; negative never
	// retries.
	RetryFor time.Duration
	// Logger receives what the store does on its own (reconnecting its
	// listener); nil means slog.Default().
	Logger *slog.Logger
	// Owner names this store's daemon in the leases it acquires (see
	// [DB.Acquire]); it must differ between the daemons sharing a
	// database. Empty means a random name per Open.
	Owner string
	// MaxRules is how many permission rules the store holds at most
	// (CreateRule refuses one more). Zero means store.MaxRules.
	MaxRules int
	// MaxTokens and MaxUsers are how many live tokens and users the store
	// holds at most. Zero means store.MaxTokens and store.MaxUsers.
	MaxTokens int
	MaxUsers  int
}

// A DB is an open claudectl database on a PostgreSQL server. It is safe
// for concurrent use.
type DB struct {
	pool       *pgxpool.Pool
	app        *appender
	maxPayload int
	maxRules   int
	maxTokens  int
	maxUsers   int
	timeout    time.Duration
	retryFor   time.Duration // see Options.RetryFor
	health     *store.HealthTracker
	server     string // host:port/database, named in errors and logs
	owner      string

	leaseMu sync.Mutex
	fences  map[string]int64 // guarded by leaseMu: the leases this DB holds
	ttls    map[string]int64 // guarded by leaseMu: their lease times, in nanoseconds

	listen   listener // LISTEN for other daemons' events (WatchEvents)
	liveLock liveness // this daemon's liveness lock (liveness.go)
	ix       *indexer // the search indexer (search.go)
	logger   *slog.Logger

	closed    atomic.Bool
	closeOnce sync.Once
}

// DB is a [store.Store], shared by several daemons ([store.Leaser],
// [store.Watcher]).
var (
	_ store.Store        = (*DB)(nil)
	_ store.Leaser       = (*DB)(nil)
	_ store.Watcher      = (*DB)(nil)
	_ store.Commander    = (*DB)(nil)
	_ store.PendingBoard = (*DB)(nil)
	_ store.Tailer       = (*DB)(nil)
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order, numbered 1, 2, 3, …
// without gaps.
func migrations() []migration {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	var ms []migration
	for i, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		num, _, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil || v != i+1 {
			panic(fmt.Sprintf("postgres: migration %s: want number %04d", base, i+1))
		}
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			panic(err)
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	return ms
}

// SchemaVersion is the schema version this binary writes.
func SchemaVersion() int { return len(migrations()) }

// migrationLock is the advisory lock key that serialises migrations of
// daemons starting together on one database ("claudectl" in ASCII).
const migrationLock = 0x636c617564656374

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string), brings its schema up to date and starts the event
// writer. ctx covers the opening only.
//
// Migrations run in one transaction under an advisory lock, so daemons
// started together migrate once. A database whose schema is newer than
// this binary knows is refused with an error wrapping
// [store.ErrSchemaTooNew].
func Open(ctx context.Context, url string, opts *Options) (_ *DB, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message quotes the URL, password included: say it in ours.
		return nil, fmt.Errorf("postgres: %w: the store URL is not a PostgreSQL URL (postgres://USER@HOST:PORT/DB): %s",
			store.ErrInvalid, redactErr(err, url))
	}
	server := serverName(cfg.ConnConfig)
	h := &store.HealthTracker{Classify: classifier(server, cfg.ConnConfig.User)}
	defer wrap(&err, "postgres: Open %s", server)
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
	if o.MaxConns <= 0 {
		o.MaxConns = 16
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.RetryFor == 0 {
		o.RetryFor = 15 * time.Second
	}
	cfg.MaxConns = int32(o.MaxConns)
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "claudectl"
	// Every statement in UTC and with a bound: a lock held by a stuck
	// client fails a call instead of hanging it.
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = strconv.FormatInt(o.WriteTimeout.Milliseconds(), 10)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, pool, SchemaVersion()); err != nil {
		pool.Close()
		return nil, err
	}
	if o.Owner == "" {
		o.Owner = rand.Text()
	} else if err := text("owner", o.Owner); err != nil {
		pool.Close()
		return nil, err
	}
	db := &DB{pool: pool, maxPayload: o.MaxPayloadBytes, maxRules: cmp.Or(o.MaxRules, store.MaxRules),
		maxTokens: cmp.Or(o.MaxTokens, store.MaxTokens), maxUsers: cmp.Or(o.MaxUsers, store.MaxUsers), timeout: o.WriteTimeout, retryFor: o.RetryFor, health: h, server: server, owner: o.Owner,
		fences: make(map[string]int64), ttls: make(map[string]int64), logger: cmp.Or(o.Logger, slog.Default())}
	db.app = newAppender(db, o.MaxBatch)
	db.ix = newIndexer(db)
	return db, nil
}

// migrate applies the migrations the database lacks up to version to.
func migrate(ctx context.Context, pool *pgxpool.Pool, to int) error {
	ms := migrations()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text    NOT NULL,
		applied_at bigint  NOT NULL)`); err != nil {
		return err
	}
	var cur int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return err
	}
	if cur > len(ms) {
		return fmt.Errorf("%w: the database is at version %d, this binary knows up to %d; use a newer claudectl",
			store.ErrSchemaTooNew, cur, len(ms))
	}
	for _, m := range ms[cur:max(cur, to)] {
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
			m.version, m.name, time.Now().UnixNano()); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// Close stops taking appends, commits the ones already queued, waits for
// them and closes the connections. Idempotent; calls after it fail with an
// error wrapping [store.ErrClosed].
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.closed.Store(true)
		db.ix.close()
		db.app.close()
		db.listen.stop()
		db.liveLock.stop()
		db.pool.Close()
	})
	return nil
}

// WriteHealth reports whether writes are succeeding: Err is the latest
// failure the server or the link caused (wrapping [store.ErrWriteFailed])
// if no write has succeeded since.
func (db *DB) WriteHealth() store.WriteHealth { return db.health.Get() }

// Server names the server the store writes to (host:port/database, no
// credentials), for logs and Health.
func (db *DB) Server() string { return db.server }

// log reports a failure the store handles itself (reading the server),
// in the classifier's words when the server or the link caused it: the
// driver's own text names the database user.
func (db *DB) log(msg string, err error) {
	db.logger.Warn(msg, "store", "postgres "+db.server, "err", db.health.ReadError(context.Background(), err))
}

func (db *DB) check() error {
	if db.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// ctx bounds a call by the write timeout.
func (db *DB) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, db.timeout)
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

// text checks a string bound for a text column: PostgreSQL refuses NUL
// bytes and invalid UTF-8 there (SQLite takes them), so they are refused
// up front as invalid, naming the field, rather than failing a batch.
func text(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: %s holds a NUL byte", store.ErrInvalid, field)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", store.ErrInvalid, field)
	}
	return nil
}

// cleanText makes s storable in a text column, for values the store must
// keep whatever they hold (an event's type): NULs dropped, invalid UTF-8
// replaced.
func cleanText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// serverName is host:port/database of a configuration.
func serverName(c *pgx.ConnConfig) string {
	host := c.Host
	if strings.HasPrefix(host, "/") {
		host = "socket " + host
	} else {
		host = net.JoinHostPort(host, strconv.Itoa(int(c.Port)))
	}
	return host + "/" + c.Database
}

// redactErr returns err's message without the URL's password.
func redactErr(err error, url string) string {
	msg := err.Error()
	if i := strings.Index(url, "://"); i >= 0 {
		rest := url[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if c := strings.Index(rest[:at], ":"); c >= 0 {
				if pw := rest[c+1 : at]; pw != "" {
					msg = strings.ReplaceAll(msg, pw, "xxxxx")
				}
			}
		}
	}
	return msg
}

// classifier returns the store.HealthTracker classifier of the server
// named server, reached as user: err wrapped in op (store.ErrWriteFailed
// or store.ErrReadFailed), with the reason in plain words and the server,
// when the server or the link to it caused it; otherwise nil.
func classifier(server, user string) func(op, err error) error {
	return func(op, err error) error {
		if err == nil || errors.Is(err, store.ErrWriteFailed) || errors.Is(err, store.ErrReadFailed) {
			return nil
		}
		why := storageFailure(err)
		if why == "" {
			return nil
		}
		return &serverError{op: op, why: scrubUser(why, user), server: server, err: err}
	}
}

// A serverError is a failure of the server or of the link to it, in words
// that name the server (host:port/database) and nothing of the login:
// clients are shown it and the log keeps it, and the driver's own text
// names the database user ("failed to connect to `user=… database=…`"),
// as the server's can ("password authentication failed for user …").
// The driver's error stays reachable with errors.As.
type serverError struct {
	op     error // store.ErrWriteFailed or store.ErrReadFailed
	why    string
	server string
	err    error
}

func (e *serverError) Error() string {
	return fmt.Sprintf("%v: %s (PostgreSQL at %s)", e.op, e.why, e.server)
}

func (e *serverError) Unwrap() []error { return []error{e.op, e.err} }

// scrubUser removes the database user's name from msg, a server's words
// that may quote it (`too many connections for role "claudectl"`).
func scrubUser(msg, user string) string {
	if user == "" {
		return msg
	}
	return strings.ReplaceAll(msg, `"`+user+`"`, `(the store's user)`)
}

// storageFailure says in plain words why err is a failure of the server or
// of the link to it, or returns "" when it is the record's. The words
// never hold the driver's text (which names the user); a server's message
// is kept where it is the only detail, scrubbed by the classifier.
func storageFailure(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100":
			return "the database server's disk is full"
		case pe.Code == "53200":
			return "the database server is out of memory"
		case pe.Code == "53300":
			return "the database server has too many connections"
		case strings.HasPrefix(pe.Code, "53"):
			return "the database server is out of resources (" + pe.Message + ")"
		case strings.HasPrefix(pe.Code, "08"):
			return "the connection to the database server failed (" + pe.Message + ")"
		case strings.HasPrefix(pe.Code, "28"):
			// invalid_authorization_specification, invalid_password
			return "the database server refused the login (check the user and password of store.url, or PGPASSFILE)"
		case pe.Code == "3D000":
			return "the database does not exist on the server"
		case pe.Code == "57P01", pe.Code == "57P02":
			return "the database server is shutting down"
		case pe.Code == "57P03":
			return "the database server is starting up or in recovery"
		case pe.Code == "25006":
			return "the database is read-only (a standby?)"
		case pe.Code == "55P03":
			return "a lock on the database was held too long"
		case pe.Code == "57014":
			return "the database server did not answer in time"
		case pe.Code == "42501":
			return "permission denied on the database (" + pe.Message + ")"
		case strings.HasPrefix(pe.Code, "58"), strings.HasPrefix(pe.Code, "XX"):
			return "the database server failed (" + pe.Message + ")"
		}
		return ""
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	switch {
	case errors.As(err, &ce):
		return "cannot connect to the database server" + netReason(err)
	case errors.Is(err, context.DeadlineExceeded):
		return "the database server did not answer in time"
	case errors.As(err, &ne), pgconn.SafeToRetry(err), pgconn.Timeout(err):
		return "the connection to the database server failed" + netReason(err)
	case errors.Is(err, net.ErrClosed), strings.Contains(err.Error(), "conn closed"),
		strings.Contains(err.Error(), "unexpected EOF"), strings.Contains(err.Error(), "broken pipe"),
		strings.Contains(err.Error(), "connection reset"):
		return "the connection to the database server was lost"
	}
	return ""
}

// netReason is the system's word on a failed connection, " (connection
// refused)", or "" when err holds none: what an operator needs of the
// driver's text, which the message leaves out.
func netReason(err error) string {
	var dns *net.DNSError
	var errno syscall.Errno
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return " (no such host)"
	case errors.As(err, &dns):
		return " (the host name could not be resolved)"
	case errors.As(err, &errno):
		return " (" + errno.Error() + ")"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return " (timed out)"
	}
	return ""
}

// CheckURL says what is wrong with a store URL, without repeating its
// password; nil when Open can use it.
func CheckURL(url string) error {
	if _, err := pgxpool.ParseConfig(url); err != nil {
		return fmt.Errorf("not a PostgreSQL URL (postgres://USER@HOST:PORT/DATABASE): %s", redactErr(err, url))
	}
	return nil
}

// WriterStats implements [store.StatsReporter]: what this daemon's event
// writer committed since Open.
func (db *DB) WriterStats() store.WriterSnapshot { return db.app.stats.Snapshot() }
