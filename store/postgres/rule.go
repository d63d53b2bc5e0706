package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/claudectl/claudectl/store"
)

// CreateRule stores r and sets r.ID and r.CreatedAt; a rule that exists
// already (same spec, behavior and scope) gets the existing rule's ID.
// Errors as the SQLite store's: [store.ErrInvalid], [store.ErrNotFound]
// for a session rule of an unknown session.
func (db *DB) CreateRule(ctx context.Context, r *store.Rule) (err error) {
	defer wrap(&err, "postgres: CreateRule %q", r.Spec)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidateRule(r); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"spec", r.Spec}, {"project dir", r.ProjectDir},
		{"session id", r.SessionID}, {"created by", r.CreatedBy}} {
		if err := text(f.name, f.v); err != nil {
			return err
		}
	}
	var sessionID *string
	if r.SessionID != "" {
		sessionID = &r.SessionID
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	var created int64
	err = tx.QueryRow(ctx, `SELECT id, created_at FROM rules WHERE spec = $1 AND behavior = $2
		AND project_dir = $3 AND COALESCE(session_id, '') = $4`, r.Spec, r.Behavior, r.ProjectDir, r.SessionID).
		Scan(&r.ID, &created)
	switch {
	case err == nil:
		r.CreatedAt = fromNanos(created)
		return nil
	case !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	// Two daemons adding rules at once may each find room for one more:
	// the limit is a bound against a runaway client, not an exact count.
	var n int
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM rules`).Scan(&n); err != nil {
		return err
	}
	if n >= db.maxRules {
		return &store.LimitError{What: "rules", Max: db.maxRules}
	}
	created = time.Now().UnixNano()
	// ON CONFLICT: another daemon stored the same rule meanwhile.
	err = tx.QueryRow(ctx, `INSERT INTO rules (spec, behavior, project_dir, session_id, created_by, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (spec, behavior, project_dir, COALESCE(session_id, '')) DO UPDATE SET spec = EXCLUDED.spec
		RETURNING id, created_at`, r.Spec, r.Behavior, r.ProjectDir, sessionID, r.CreatedBy, created).
		Scan(&r.ID, &created)
	if err != nil {
		if pgCode(err) == "23503" { // the session's foreign key
			return fmt.Errorf("session %q: %w", r.SessionID, store.ErrNotFound)
		}
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, rulesChannel); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	r.CreatedAt = fromNanos(created)
	return nil
}

// Rules returns every stored rule in the order they were created.
func (db *DB) Rules(ctx context.Context) (_ []*store.Rule, err error) {
	defer wrap(&err, "postgres: Rules")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT id, spec, behavior, project_dir, COALESCE(session_id, ''),
		created_by, created_at FROM rules ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var rs []*store.Rule
	for rows.Next() {
		var r store.Rule
		var t int64
		if err := rows.Scan(&r.ID, &r.Spec, &r.Behavior, &r.ProjectDir, &r.SessionID, &r.CreatedBy, &t); err != nil {
			return nil, err
		}
		r.CreatedAt = fromNanos(t)
		rs = append(rs, &r)
	}
	return rs, rows.Err()
}

// DeleteRule removes rule id. Errors: [store.ErrNotFound].
func (db *DB) DeleteRule(ctx context.Context, id int64) (err error) {
	defer wrap(&err, "postgres: DeleteRule %d", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	// The notification goes with the deletion's transaction.
	var n int64
	err = db.pool.QueryRow(ctx, `WITH d AS (DELETE FROM rules WHERE id = $1 RETURNING id)
		SELECT count(*) FROM d, (SELECT pg_notify($2, '')) AS n`, id, rulesChannel).Scan(&n)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// AddDecision appends d to the audit trail and sets d.ID (and the times
// when zero). Inputs over the payload limit are stored truncated. Errors:
// [store.ErrInvalid] as the SQLite store's.
func (db *DB) AddDecision(ctx context.Context, d *store.Decision) (err error) {
	defer wrap(&err, "postgres: AddDecision %q", d.RequestID)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.PrepareDecision(d); err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	// The audit trail keeps what it is given: text made storable rather
	// than a decision lost.
	return db.pool.QueryRow(ctx, `INSERT INTO decisions (session_id, request_id, tool_name, input, behavior,
		decided_by, rule_id, rule_spec, message, updated_input, requested_at, decided_at, route, approved_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id`,
		cleanText(d.SessionID), cleanText(d.RequestID), cleanText(d.ToolName), db.limit(d.Input), d.Behavior,
		cleanText(d.By), d.RuleID, cleanText(d.RuleSpec), cleanText(d.Message), db.limit(d.UpdatedInput),
		d.RequestedAt.UnixNano(), d.DecidedAt.UnixNano(), cleanText(d.Route), cleanList(d.ApprovedBy)).Scan(&d.ID)
}

// limit returns b truncated to the payload limit, or nil for NULL.
func (db *DB) limit(b json.RawMessage) []byte { return store.LimitPayload(b, db.maxPayload) }

// Decisions returns audit entries, newest first, as f selects them.
func (db *DB) Decisions(ctx context.Context, f store.DecisionFilter) (_ []*store.Decision, err error) {
	defer wrap(&err, "postgres: Decisions")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	before := f.BeforeID
	if before <= 0 {
		before = 1<<63 - 1
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT id, session_id, request_id, tool_name, input, behavior, decided_by,
		rule_id, rule_spec, message, updated_input, requested_at, decided_at, route, approved_by
		FROM decisions WHERE ($1 = '' OR session_id = $1) AND id < $2 ORDER BY id DESC LIMIT $3`,
		cleanText(f.SessionID), before, f.Limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ds []*store.Decision
	for rows.Next() {
		var d store.Decision
		var in, upd []byte
		var req, dec int64
		if err := rows.Scan(&d.ID, &d.SessionID, &d.RequestID, &d.ToolName, &in, &d.Behavior, &d.By, &d.RuleID,
			&d.RuleSpec, &d.Message, &upd, &req, &dec, &d.Route, &d.ApprovedBy); err != nil {
			return nil, err
		}
		if len(d.ApprovedBy) == 0 {
			d.ApprovedBy = nil
		}
		if in != nil {
			d.Input = in
		}
		if upd != nil {
			d.UpdatedInput = upd
		}
		d.RequestedAt, d.DecidedAt = fromNanos(req), fromNanos(dec)
		ds = append(ds, &d)
	}
	return ds, rows.Err()
}
