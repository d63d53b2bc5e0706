package sqlite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/claudectl/claudectl/store"
)

// SpendSince sums the ledger's cost of the turns recorded at t or later,
// in all and by session directory.
func (db *DB) SpendSince(ctx context.Context, t time.Time) (_ *store.Spend, err error) {
	defer wrap(&err, "sqlite: SpendSince")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	rows, err := db.r.QueryContext(ctx, `SELECT s.cwd, SUM(u.cost_usd) FROM usage u JOIN sessions s ON s.id = u.session_id
		WHERE u.time >= ? GROUP BY s.cwd`, t.UnixNano())
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
// returns its seq. Errors: [store.ErrNotFound] for an unknown session.
func (db *DB) QueuePrompt(ctx context.Context, id, text string) (_ int64, err error) {
	defer wrap(&err, "sqlite: QueuePrompt %q", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return 0, err
	}
	var seq int64
	err = db.w.QueryRowContext(ctx, `INSERT INTO queued_prompts (session_id, seq, text, created_at)
		SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ? FROM queued_prompts WHERE session_id = ? RETURNING seq`,
		id, text, time.Now().UnixNano(), id).Scan(&seq)
	if err != nil && strings.Contains(err.Error(), "FOREIGN KEY constraint failed") {
		return 0, store.ErrNotFound
	}
	return seq, err
}

// QueuedPrompts returns the prompts session id keeps, oldest first.
func (db *DB) QueuedPrompts(ctx context.Context, id string) (_ []*store.QueuedPrompt, err error) {
	defer wrap(&err, "sqlite: QueuedPrompts %q", id)
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	rows, err := db.r.QueryContext(ctx, `SELECT seq, text, created_at FROM queued_prompts WHERE session_id = ? ORDER BY seq`, id)
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
	defer wrap(&err, "sqlite: DropQueuedPrompt %q %d", id, seq)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	_, err = db.w.ExecContext(ctx, `DELETE FROM queued_prompts WHERE session_id = ? AND seq = ?`, id, seq)
	return err
}

// RaiseBudget stores r, replacing the raise of the same cap, scope and
// day. Errors: [store.ErrInvalid] for a bad cap or limit.
func (db *DB) RaiseBudget(ctx context.Context, r *store.BudgetRaise) (err error) {
	defer wrap(&err, "sqlite: RaiseBudget")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidateBudgetRaise(r); err != nil {
		return err
	}
	_, err = db.w.ExecContext(ctx, `INSERT INTO budget_raises (cap, scope, day, limit_usd, raised_by, raised_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (cap, scope, day) DO UPDATE SET limit_usd = excluded.limit_usd,
		raised_by = excluded.raised_by, raised_at = excluded.raised_at`,
		r.Cap, r.Scope, r.Day, r.LimitUSD, r.By, r.At.UnixNano())
	return err
}

// BudgetRaises returns the raises of day and those of sessions.
func (db *DB) BudgetRaises(ctx context.Context, day string) (_ []*store.BudgetRaise, err error) {
	defer wrap(&err, "sqlite: BudgetRaises %q", day)
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	if day == "" {
		return nil, fmt.Errorf("%w: BudgetRaises needs a day", store.ErrInvalid)
	}
	rows, err := db.r.QueryContext(ctx, `SELECT cap, scope, day, limit_usd, raised_by, raised_at FROM budget_raises
		WHERE day = ? OR day = '' ORDER BY cap, scope`, day)
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
