package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/claudectl/claudectl/store"
)

const sessionColumns = `id, claude_session_id, cwd, model, permission_mode, status, options, budget_usd, process,
	turns, cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, created_at, updated_at,
	error, worker, parent_id, relay_worker, relay_session, relay_received, relay_sent, relay_since, relay_secret_hash,
	worktree_path, worktree_branch, worktree_base_branch, worktree_base_commit, worktree_repo, worktree_discarded, title, first_prompt,
	` + queuedSQL + `, ` + lastSeqSQL

// queuedSQL counts the prompts the session of a row of sessions keeps.
const queuedSQL = `(SELECT COUNT(*) FROM queued_prompts WHERE session_id = sessions.id)`

// lastSeqSQL is the seq of the last event of the session of a row of
// sessions, 0 for none: that of its last chunk, or of the last event
// retention removed (maintain.go).
const lastSeqSQL = `MAX(sessions.pruned_seq, COALESCE((SELECT MAX(last_seq) FROM event_chunks WHERE session = sessions.pk), 0))`

type scanner interface{ Scan(dest ...any) error }

func scanSession(row scanner) (*store.Session, error) {
	var (
		s                store.Session
		options          string
		created, updated int64
	)
	err := row.Scan(&s.ID, &s.ClaudeSessionID, &s.Cwd, &s.Model, &s.PermissionMode, &s.Status, &options,
		&s.BudgetUSD, &s.Process, &s.Totals.Turns, &s.Totals.CostUSD, &s.Totals.InputTokens,
		&s.Totals.OutputTokens, &s.Totals.CacheReadTokens, &s.Totals.CacheWriteTokens, &created, &updated,
		&s.Error, &s.Worker, &s.ParentID, &s.Relay.Worker, &s.Relay.Session, &s.Relay.Received, &s.Relay.Sent, &s.Relay.Since, &s.Relay.SecretHash,
		&s.Worktree.Path, &s.Worktree.Branch, &s.Worktree.BaseBranch, &s.Worktree.BaseCommit, &s.Worktree.Repo, &s.Worktree.Discarded,
		&s.Title, &s.FirstPrompt, &s.QueuedPrompts, &s.LastSeq)
	if err != nil {
		return nil, err
	}
	s.Options = json.RawMessage(options)
	s.CreatedAt, s.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &s, nil
}

// CreateSession stores a new session. It assigns s.ID when empty (a random
// 26-character id), sets s.CreatedAt and s.UpdatedAt, and nil Options to
// {}; Totals, Process and LastSeq start at zero.
// Errors: [store.ErrInvalid] for a missing Cwd, a bad Status or options that
// are not JSON, or an ID already in use.
func (db *DB) CreateSession(ctx context.Context, s *store.Session) (err error) {
	defer wrap(&err, "sqlite: CreateSession")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidateSession(s); err != nil {
		return err
	}
	options, _ := store.SessionOptionsJSON(s.Options)
	if s.ID == "" {
		s.ID = rand.Text()
	}
	now := time.Now()
	_, err = db.w.ExecContext(ctx, `INSERT INTO sessions
		(id, claude_session_id, cwd, model, permission_mode, status, options, budget_usd, created_at, updated_at,
		error, worker, parent_id, worktree_path, worktree_branch, worktree_base_branch, worktree_base_commit,
		worktree_repo, worktree_discarded)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.ClaudeSessionID, s.Cwd, s.Model, s.PermissionMode, s.Status, options, s.BudgetUSD,
		now.UnixNano(), now.UnixNano(), s.Error, s.Worker, s.ParentID, s.Worktree.Path, s.Worktree.Branch,
		s.Worktree.BaseBranch, s.Worktree.BaseCommit, s.Worktree.Repo, s.Worktree.Discarded)
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE constraint failed") {
			return fmt.Errorf("%w: session %q exists", store.ErrInvalid, s.ID)
		}
		return err
	}
	s.CreatedAt, s.UpdatedAt = fromNanos(now.UnixNano()), fromNanos(now.UnixNano())
	s.Options = json.RawMessage(options)
	s.Totals, s.Process, s.LastSeq, s.QueuedPrompts = store.Totals{}, 0, 0, 0
	return nil
}

// Session returns the session with the given id, or an error wrapping
// [store.ErrNotFound].
func (db *DB) Session(ctx context.Context, id string) (_ *store.Session, err error) {
	defer wrap(&err, "sqlite: Session %q", id)
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	s, err := scanSession(db.reads.session.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return s, err
}

// Sessions returns the sessions f selects, newest first.
func (db *DB) Sessions(ctx context.Context, f store.SessionFilter) (_ []*store.Session, err error) {
	defer wrap(&err, "sqlite: Sessions")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	var (
		where []string
		args  []any
	)
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, f.Status)
	}
	if f.Cwd != "" {
		where, args = append(where, "cwd = ?"), append(args, f.Cwd)
	}
	if f.ClaudeSessionID != "" {
		where, args = append(where, "claude_session_id = ?"), append(args, f.ClaudeSessionID)
	}
	q := `SELECT ` + sessionColumns + ` FROM sessions`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at DESC, id"
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := db.r.QueryContext(ctx, q, args...)
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
// updated. Errors: [store.ErrNotFound], [store.ErrInvalid] for a bad status,
// options that are not JSON or a negative budget.
func (db *DB) UpdateSession(ctx context.Context, id string, upd store.SessionUpdate) (_ *store.Session, err error) {
	defer wrap(&err, "sqlite: UpdateSession %q", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	if err := store.ValidateUpdate(upd); err != nil {
		return nil, err
	}
	return updateSession(ctx, db.w, id, upd)
}

// updateSession applies a validated upd through q.
func updateSession(ctx context.Context, q *sql.DB, id string, upd store.SessionUpdate) (*store.Session, error) {
	query, args := updateSQL(upd, time.Now(), id)
	s, err := scanSession(q.QueryRowContext(ctx, query+` RETURNING `+sessionColumns, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return s, err
}

// updateSQL returns the UPDATE statement of a validated upd (without a
// RETURNING clause) and its arguments. The text depends only on which
// fields are set, so that it can be prepared once.
func updateSQL(upd store.SessionUpdate, now time.Time, id string) (string, []any) {
	set, args := updateSets(upd, []string{"updated_at = ?"}, []any{now.UnixNano()})
	return `UPDATE sessions SET ` + strings.Join(set, ", ") + ` WHERE id = ?`, append(args, id)
}

// updateSets appends to set and args the assignments of upd's fields, in
// an order that depends only on which are set.
func updateSets(upd store.SessionUpdate, set []string, args []any) ([]string, []any) {
	add := func(col string, v any) { set, args = append(set, col+" = ?"), append(args, v) }
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
		add("status", *upd.Status)
	}
	if upd.Options != nil {
		o, _ := store.SessionOptionsJSON(upd.Options)
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
	return set, args
}

// DeleteSession removes session id with its events, usage records and
// session rules; its audit entries stay. It runs in the event writer's
// queue, after the appends already queued. Errors: [store.ErrNotFound].
func (db *DB) DeleteSession(ctx context.Context, id string) (err error) {
	defer wrap(&err, "sqlite: DeleteSession %q", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	return db.app.submit(ctx, &appendRequest{deleteSession: id})
}

// MarkRunningInterrupted sets every session that is starting, running or
// queued to interrupted and returns their ids. The daemon calls it once at start,
// before serving: those sessions' CLI processes died with the previous
// daemon and are resumed (claude --resume) on the next prompt. Idle
// sessions stay idle: nothing of theirs was lost.
func (db *DB) MarkRunningInterrupted(ctx context.Context) (_ []string, err error) {
	defer wrap(&err, "sqlite: MarkRunningInterrupted")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	rows, err := db.w.QueryContext(ctx, `UPDATE sessions SET status = 'interrupted', updated_at = ?
		WHERE status IN ('starting', 'running', 'queued') RETURNING id`, time.Now().UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// NewProcess records that a new CLI process is starting for session id
// and returns its generation (1 for the first). Results of that process are
// entered in the ledger with this number; the CLI's cumulative counters
// start again at each generation. Errors: [store.ErrNotFound].
func (db *DB) NewProcess(ctx context.Context, id string) (_ int64, err error) {
	defer wrap(&err, "sqlite: NewProcess %q", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return 0, err
	}
	var gen int64
	err = db.w.QueryRowContext(ctx, `UPDATE sessions SET process = process + 1, updated_at = ?
		WHERE id = ? RETURNING process`, time.Now().UnixNano(), id).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, store.ErrNotFound
	}
	return gen, err
}
