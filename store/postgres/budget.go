package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/claudectl/claudectl/store"
)

// SpendSince sums the ledger's cost of the turns recorded at t or later,
// in all and by session directory.
func (db *DB) SpendSince(ctx context.Context, t time.Time) (_ *store.Spend, err error) {
	defer wrap(&err, "postgres: SpendSince")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT s.cwd, SUM(u.cost_usd) FROM usage u JOIN sessions s ON s.id = u.session_id
		WHERE u.time >= $1 GROUP BY s.cwd`, t.UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	sp := &store.Spend{ByDir: map[string]float64{}}
	for rows.Next() {
		var dir string
		var usd float64
		if err := rows.Scan(&dir, &usd); err != nil {
			return nil, err
		}
		sp.ByDir[dir] = usd
		sp.TotalUSD += usd
	}
	return sp, rows.Err()
}

// QueuePrompt keeps text for session id after the prompts it keeps and
// returns its seq. Errors: [store.ErrNotFound] for an unknown session,
// [store.ErrInvalid] for text PostgreSQL cannot hold.
func (db *DB) QueuePrompt(ctx context.Context, id, prompt string) (_ int64, err error) {
	defer wrap(&err, "postgres: QueuePrompt %q", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return 0, err
	}
	if err := text("prompt", prompt); err != nil {
		return 0, err
	}
	if text("id", id) != nil {
		return 0, store.ErrNotFound
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var seq int64
	// The session's row lock orders two prompts queued at once.
	err = db.pool.QueryRow(ctx, `WITH s AS (SELECT id FROM sessions WHERE id = $1 FOR UPDATE)
		INSERT INTO queued_prompts (session_id, seq, text, created_at)
		SELECT s.id, COALESCE((SELECT MAX(seq) FROM queued_prompts WHERE session_id = s.id), 0) + 1, $2, $3 FROM s
		RETURNING seq`, id, prompt, time.Now().UnixNano()).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, store.ErrNotFound
	}
	return seq, err
}

// QueuedPrompts returns the prompts session id keeps, oldest first.
func (db *DB) QueuedPrompts(ctx context.Context, id string) (_ []*store.QueuedPrompt, err error) {
	defer wrap(&err, "postgres: QueuedPrompts %q", id)
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	if text("id", id) != nil {
		return nil, nil
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT seq, text, created_at FROM queued_prompts WHERE session_id = $1 ORDER BY seq`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var qs []*store.QueuedPrompt
	for rows.Next() {
		q := &store.QueuedPrompt{SessionID: id}
		var created int64
		if err := rows.Scan(&q.Seq, &q.Text, &created); err != nil {
			return nil, err
		}
		q.CreatedAt = fromNanos(created)
		qs = append(qs, q)
	}
	return qs, rows.Err()
}

// DropQueuedPrompt forgets prompt seq of session id.
func (db *DB) DropQueuedPrompt(ctx context.Context, id string, seq int64) (err error) {
	defer wrap(&err, "postgres: DropQueuedPrompt %q %d", id, seq)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if text("id", id) != nil {
		return nil
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	_, err = db.pool.Exec(ctx, `DELETE FROM queued_prompts WHERE session_id = $1 AND seq = $2`, id, seq)
	return err
}

// RaiseBudget stores r, replacing the raise of the same cap, scope and
// day. Errors: [store.ErrInvalid] for a bad cap or limit.
func (db *DB) RaiseBudget(ctx context.Context, r *store.BudgetRaise) (err error) {
	defer wrap(&err, "postgres: RaiseBudget")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidateBudgetRaise(r); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"scope", r.Scope}, {"day", r.Day}, {"raised by", r.By}} {
		if err := text(f.name, f.v); err != nil {
			return err
		}
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	_, err = db.pool.Exec(ctx, `INSERT INTO budget_raises (cap, scope, day, limit_usd, raised_by, raised_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (cap, scope, day) DO UPDATE SET limit_usd = excluded.limit_usd,
		raised_by = excluded.raised_by, raised_at = excluded.raised_at`,
		r.Cap, r.Scope, r.Day, r.LimitUSD, r.By, r.At.UnixNano())
	return err
}

// BudgetRaises returns the raises of day and those of sessions.
func (db *DB) BudgetRaises(ctx context.Context, day string) (_ []*store.BudgetRaise, err error) {
	defer wrap(&err, "postgres: BudgetRaises %q", day)
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	if day == "" || text("day", day) != nil {
		return nil, fmt.Errorf("%w: BudgetRaises needs a day", store.ErrInvalid)
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT cap, scope, day, limit_usd, raised_by, raised_at FROM budget_raises
		WHERE day = $1 OR day = '' ORDER BY cap, scope`, day)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var rs []*store.BudgetRaise
	for rows.Next() {
		r := &store.BudgetRaise{}
		var at int64
		if err := rows.Scan(&r.Cap, &r.Scope, &r.Day, &r.LimitUSD, &r.By, &at); err != nil {
			return nil, err
		}
		r.At = fromNanos(at)
		rs = append(rs, r)
	}
	return rs, rows.Err()
}
