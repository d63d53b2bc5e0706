package postgres

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/claudectl/claudectl/store"
)

// querier is a pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const sessionColumns = `id, claude_session_id, cwd, model, permission_mode, status, options, budget_usd, process,
	turns, cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, created_at, updated_at,
	error, worker, parent_id, last_seq, owner, lease_until, relay_worker, relay_session, relay_received,
	relay_sent, relay_since, relay_secret_hash, worktree_path, worktree_branch, worktree_base_branch,
	worktree_base_commit, worktree_repo, worktree_discarded,
	(SELECT COUNT(*) FROM queued_prompts WHERE session_id = sessions.id),
	COALESCE((SELECT title FROM search_progress p WHERE p.session = sessions.pk), ''),
	COALESCE((SELECT first_prompt FROM search_progress p WHERE p.session = sessions.pk), '')`

func scanSession(row pgx.Row) (*store.Session, error) {
	var (
		s                store.Session
		options          string
		created, updated int64
		leaseUntil       int64
	)
	err := row.Scan(&s.ID, &s.ClaudeSessionID, &s.Cwd, &s.Model, &s.PermissionMode, &s.Status, &options,
		&s.BudgetUSD, &s.Process, &s.Totals.Turns, &s.Totals.CostUSD, &s.Totals.InputTokens,
		&s.Totals.OutputTokens, &s.Totals.CacheReadTokens, &s.Totals.CacheWriteTokens, &created, &updated,
		&s.Error, &s.Worker, &s.ParentID, &s.LastSeq, &s.Owner, &leaseUntil,
		&s.Relay.Worker, &s.Relay.Session, &s.Relay.Received, &s.Relay.Sent, &s.Relay.Since, &s.Relay.SecretHash,
		&s.Worktree.Path, &s.Worktree.Branch, &s.Worktree.BaseBranch, &s.Worktree.BaseCommit, &s.Worktree.Repo, &s.Worktree.Discarded,
		&s.QueuedPrompts, &s.Title, &s.FirstPrompt)
	if err != nil {
		return nil, err
	}
	s.Options = json.RawMessage(options)
	s.CreatedAt, s.UpdatedAt = fromNanos(created), fromNanos(updated)
	if s.Owner != "" && leaseUntil > 0 {
		s.LeaseUntil = fromNanos(leaseUntil)
	}
	return &s, nil
}

func validOptions(o json.RawMessage) (string, error) {
	s, err := store.SessionOptionsJSON(o)
	if err != nil {
		return "", err
	}
	return s, text("options", s)
}

// CreateSession stores a new session, as the SQLite store does: it assigns
// s.ID when empty, sets the times, and nil Options to {}. Errors:
// [store.ErrInvalid] for a missing Cwd, a bad Status, options that are not
// JSON, text PostgreSQL cannot hold (NUL bytes, invalid UTF-8), or an ID in
// use.
func (db *DB) CreateSession(ctx context.Context, s *store.Session) (err error) {
	defer wrap(&err, "postgres: CreateSession")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidateSession(s); err != nil {
		return err
	}
	options, err := validOptions(s.Options)
	if err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"id", s.ID}, {"claude session id", s.ClaudeSessionID},
		{"cwd", s.Cwd}, {"model", s.Model}, {"permission mode", s.PermissionMode}, {"error", s.Error},
		{"worker", s.Worker}, {"parent id", s.ParentID}, {"worktree path", s.Worktree.Path},
		{"worktree branch", s.Worktree.Branch}, {"worktree base branch", s.Worktree.BaseBranch},
		{"worktree base commit", s.Worktree.BaseCommit}, {"worktree repository", s.Worktree.Repo}} {
		if err := text(f.name, f.v); err != nil {
			return err
		}
	}
	if s.ID == "" {
		s.ID = rand.Text()
	}
	now := time.Now().UnixNano()
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	_, err = db.pool.Exec(ctx, `INSERT INTO sessions
		(id, claude_session_id, cwd, model, permission_mode, status, options, budget_usd, created_at, updated_at,
		error, worker, parent_id, worktree_path, worktree_branch, worktree_base_branch, worktree_base_commit,
		worktree_repo, worktree_discarded)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`,
		s.ID, s.ClaudeSessionID, s.Cwd, s.Model, s.PermissionMode, string(s.Status), options, s.BudgetUSD,
		now, now, s.Error, s.Worker, s.ParentID, s.Worktree.Path, s.Worktree.Branch, s.Worktree.BaseBranch,
		s.Worktree.BaseCommit, s.Worktree.Repo, s.Worktree.Discarded)
	if err != nil {
		if pgCode(err) == "23505" {
			return fmt.Errorf("%w: session %q exists", store.ErrInvalid, s.ID)
		}
		return err
	}
	s.CreatedAt, s.UpdatedAt = fromNanos(now), fromNanos(now)
	s.Options = json.RawMessage(options)
	s.Totals, s.Process, s.LastSeq, s.QueuedPrompts = store.Totals{}, 0, 0, 0
	return nil
}

// pgCode is the SQLSTATE of a server error, "" for any other error.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// Session returns the session with the given id, or an error wrapping
// [store.ErrNotFound].
func (db *DB) Session(ctx context.Context, id string) (_ *store.Session, err error) {
	defer wrap(&err, "postgres: Session %q", id)
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	if text("id", id) != nil {
		return nil, store.ErrNotFound
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	s, err := scanSession(db.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return s, err
}

// Sessions returns the sessions f selects, newest first.
func (db *DB) Sessions(ctx context.Context, f store.SessionFilter) (_ []*store.Session, err error) {
	defer wrap(&err, "postgres: Sessions")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	if text("cwd", f.Cwd) != nil || text("status", string(f.Status)) != nil || text("claude session id", f.ClaudeSessionID) != nil {
		return nil, nil // nothing stored holds it
	}
	var (
		where []string
		args  []any
	)
	if f.Status != "" {
		args = append(args, string(f.Status))
		where = append(where, "status = $"+strconv.Itoa(len(args)))
	}
	if f.Cwd != "" {
		args = append(args, f.Cwd)
		where = append(where, "cwd = $"+strconv.Itoa(len(args)))
	}
	if f.ClaudeSessionID != "" {
		args = append(args, f.ClaudeSessionID)
		where = append(where, "claude_session_id = $"+strconv.Itoa(len(args)))
	}
	q := `SELECT ` + sessionColumns + ` FROM sessions`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at DESC, id"
	if f.Limit > 0 {
		args = append(args, f.Limit)
		q += " LIMIT $" + strconv.Itoa(len(args))
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ss []*store.Session
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		ss = append(ss, s)
	}
	return ss, rows.Err()
}

// UpdateSession applies upd to session id and returns the session as
// updated. Errors: [store.ErrNotFound], [store.ErrInvalid] for a bad
// status, options that are not JSON, a negative budget or text PostgreSQL
// cannot hold.
func (db *DB) UpdateSession(ctx context.Context, id string, upd store.SessionUpdate) (_ *store.Session, err error) {
	defer wrap(&err, "postgres: UpdateSession %q", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	if err := validUpdate(upd); err != nil {
		return nil, err
	}
	if text("id", id) != nil {
		return nil, store.ErrNotFound
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	q, args := updateSQL(upd, time.Now(), id)
	if f := db.fence(id); f != 0 {
		q, args = fenced(q, args, f, db.owner)
	}
	s, err := scanSession(db.pool.QueryRow(ctx, q+` RETURNING `+sessionColumns, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notWritable(ctx, db.pool, []string{id})
	}
	return s, err
}

// validUpdate checks upd before it goes to the database.
func validUpdate(upd store.SessionUpdate) error {
	if err := store.ValidateUpdate(upd); err != nil {
		return err
	}
	if upd.Options != nil {
		if _, err := validOptions(upd.Options); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"claude session id", upd.ClaudeSessionID}, {"model", upd.Model}, {"permission mode", upd.PermissionMode},
		{"error", upd.Error}, {"worker", upd.Worker}} {
		if f.v != nil {
			if err := text(f.name, *f.v); err != nil {
				return err
			}
		}
	}
	if r := upd.Relay; r != nil {
		if err := text("relay worker", r.Worker); err != nil {
			return err
		}
		if err := text("relay session", r.Session); err != nil {
			return err
		}
		if err := text("relay secret hash", r.SecretHash); err != nil {
			return err
		}
	}
	if w := upd.Worktree; w != nil {
		for _, f := range []struct{ name, v string }{{"worktree path", w.Path}, {"worktree branch", w.Branch},
			{"worktree base branch", w.BaseBranch}, {"worktree base commit", w.BaseCommit}, {"worktree repository", w.Repo}} {
			if err := text(f.name, f.v); err != nil {
				return err
			}
		}
	}
	return nil
}

// updateSQL returns the UPDATE statement of a validated upd (without a
// RETURNING clause) and its arguments.
func updateSQL(upd store.SessionUpdate, now time.Time, id string) (string, []any) {
	set := []string{"updated_at = $1"}
	args := []any{now.UnixNano()}
	add := func(col string, v any) {
		args = append(args, v)
		set = append(set, col+" = $"+strconv.Itoa(len(args)))
	}
	if upd.ClaudeSessionID != nil {
		add("claude_session_id", *upd.ClaudeSessionID)
	}
	if upd.Model != nil {
		add("model", *upd.Model)
	}
	if upd.PermissionMode != nil {
		add("permission_mode", *upd.PermissionMode)
	}
	if upd.Status != nil {
		add("status", string(*upd.Status))
	}
	if upd.Options != nil {
		o, _ := validOptions(upd.Options)
		add("options", o)
	}
	if upd.Error != nil {
		add("error", *upd.Error)
	}
	if upd.Worker != nil {
		add("worker", *upd.Worker)
	}
	if upd.BudgetUSD != nil {
		add("budget_usd", *upd.BudgetUSD)
	}
	if r := upd.Relay; r != nil {
		add("relay_worker", r.Worker)
		add("relay_session", r.Session)
		add("relay_received", r.Received)
		add("relay_sent", r.Sent)
		add("relay_since", r.Since)
		add("relay_secret_hash", r.SecretHash)
	}
	if w := upd.Worktree; w != nil {
		add("worktree_path", w.Path)
		add("worktree_branch", w.Branch)
		add("worktree_base_branch", w.BaseBranch)
		add("worktree_base_commit", w.BaseCommit)
		add("worktree_repo", w.Repo)
		add("worktree_discarded", w.Discarded)
	}
	args = append(args, id)
	return `UPDATE sessions SET ` + strings.Join(set, ", ") + ` WHERE id = $` + strconv.Itoa(len(args)), args
}

// fenced adds to an UPDATE of one session (its WHERE clause last) the
// check that this DB still holds the session's lease.
func fenced(q string, args []any, fence int64, owner string) (string, []any) {
	n := len(args)
	return q + ` AND fence = $` + strconv.Itoa(n+1) + ` AND owner = $` + strconv.Itoa(n+2), append(args, fence, owner)
}

// DeleteSession removes session id with its events, usage records and
// session rules; its audit entries stay. It runs in the event writer's
// queue, after the appends already queued. Errors: [store.ErrNotFound].
func (db *DB) DeleteSession(ctx context.Context, id string) (err error) {
	defer wrap(&err, "postgres: DeleteSession %q", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if text("id", id) != nil {
		return store.ErrNotFound
	}
	return db.app.submit(ctx, &request{deleteSession: id})
}

// MarkRunningInterrupted sets every session that is starting, running or
// queued to interrupted and returns their ids: their CLIs died with the
// previous daemon. Sessions whose lease another daemon holds are left
// alone: they run there.
func (db *DB) MarkRunningInterrupted(ctx context.Context) (_ []string, err error) {
	defer wrap(&err, "postgres: MarkRunningInterrupted")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	// Only sessions no other daemon runs: unowned, ours (a daemon of the
	// same name before a restart), or whose owner's lease has expired.
	rows, err := db.pool.Query(ctx, `UPDATE sessions SET status = 'interrupted', updated_at = $1,
		owner = '', lease_until = 0
		WHERE status IN ('starting', 'running', 'queued')
		AND (owner = '' OR owner = $2 OR lease_until < (extract(epoch from clock_timestamp()) * 1e9)::bigint)
		RETURNING id`, time.Now().UnixNano(), db.owner)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// NewProcess records that a new CLI process is starting for session id
// and returns its generation (1 for the first). Errors: [store.ErrNotFound].
func (db *DB) NewProcess(ctx context.Context, id string) (_ int64, err error) {
	defer wrap(&err, "postgres: NewProcess %q", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return 0, err
	}
	if text("id", id) != nil {
		return 0, store.ErrNotFound
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var gen int64
	q, args := `UPDATE sessions SET process = process + 1, updated_at = $1 WHERE id = $2`, []any{time.Now().UnixNano(), id}
	if f := db.fence(id); f != 0 {
		q, args = fenced(q, args, f, db.owner)
	}
	err = db.pool.QueryRow(ctx, q+` RETURNING process`, args...).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, notWritable(ctx, db.pool, []string{id})
	}
	return gen, err
}
