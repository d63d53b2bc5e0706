package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/claudectl/claudectl/store"
)

// CreateRule stores r and sets r.ID and r.CreatedAt. Storing a rule that
// exists already (same spec, behavior and scope) is not an error: r gets
// the existing rule's ID and CreatedAt, so an "always allow" clicked twice
// leaves one rule. The spec is stored as given; parse it (package
// permission) before storing. Errors: [store.ErrInvalid] for an empty
// spec, a bad behavior, or a rule scoped to both a project and a session;
// [store.ErrNotFound] for a session rule whose session does not exist.
func (db *DB) CreateRule(ctx context.Context, r *store.Rule) (err error) {
	defer wrap(&err, "sqlite: CreateRule %q", r.Spec)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidateRule(r); err != nil {
		return err
	}
	sessionID := sql.NullString{String: r.SessionID, Valid: r.SessionID != ""}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var created int64
	err = tx.QueryRowContext(ctx, `SELECT id, created_at FROM rules WHERE spec = ? AND behavior = ?
		AND project_dir = ? AND COALESCE(session_id, '') = ?`, r.Spec, r.Behavior, r.ProjectDir, r.SessionID).
		Scan(&r.ID, &created)
	switch {
	case err == nil:
		r.CreatedAt = fromNanos(created)
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	if sessionID.Valid {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, r.SessionID).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("session %q: %w", r.SessionID, store.ErrNotFound)
		} else if err != nil {
			return err
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM rules`).Scan(&n); err != nil {
		return err
	}
	if n >= db.maxRules {
		return &store.LimitError{What: "rules", Max: db.maxRules}
	}
	created = time.Now().UnixNano()
	err = tx.QueryRowContext(ctx, `INSERT INTO rules (spec, behavior, project_dir, session_id, created_by, created_at)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, r.Spec, r.Behavior, r.ProjectDir, sessionID, r.CreatedBy, created).
		Scan(&r.ID)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	r.CreatedAt = fromNanos(created)
	return nil
}

// Rules returns every stored rule, global, project and session ones, in
// the order they were created. The daemon loads them into its permission
// engine at start and keeps the engine in step with CreateRule and
// DeleteRule after that.
func (db *DB) Rules(ctx context.Context) (_ []*store.Rule, err error) {
	defer wrap(&err, "sqlite: Rules")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	rows, err := db.r.QueryContext(ctx, `SELECT id, spec, behavior, project_dir, COALESCE(session_id, ''),
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
	defer wrap(&err, "sqlite: DeleteRule %d", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	res, err := db.w.ExecContext(ctx, `DELETE FROM rules WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// AddDecision appends d to the audit trail and sets d.ID (and d.DecidedAt,
// then d.RequestedAt, when zero, to now). Inputs over the payload limit are stored truncated. Errors:
// [store.ErrInvalid] for a missing session, request id, tool or decider,
// or a behavior other than allow, deny or withdrawn.
func (db *DB) AddDecision(ctx context.Context, d *store.Decision) (err error) {
	defer wrap(&err, "sqlite: AddDecision %q", d.RequestID)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.PrepareDecision(d); err != nil {
		return err
	}
	return db.w.QueryRowContext(ctx, `INSERT INTO decisions (session_id, request_id, tool_name, input, behavior,
		decided_by, rule_id, rule_spec, message, updated_input, requested_at, decided_at, route, approved_by)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		d.SessionID, d.RequestID, d.ToolName, db.limit(d.Input), d.Behavior, d.By, d.RuleID, d.RuleSpec,
		d.Message, db.limit(d.UpdatedInput), d.RequestedAt.UnixNano(), d.DecidedAt.UnixNano(), d.Route,
		jsonList(d.ApprovedBy)).Scan(&d.ID)
}

// limit returns b truncated to the payload limit, or nil for NULL.
func (db *DB) limit(b json.RawMessage) []byte { return store.LimitPayload(b, db.maxPayload) }

// Decisions returns audit entries, newest first, as f selects them.
func (db *DB) Decisions(ctx context.Context, f store.DecisionFilter) (_ []*store.Decision, err error) {
	defer wrap(&err, "sqlite: Decisions")
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
	rows, err := db.r.QueryContext(ctx, `SELECT id, session_id, request_id, tool_name, input, behavior, decided_by,
		rule_id, rule_spec, message, updated_input, requested_at, decided_at, route, approved_by
		FROM decisions WHERE (?1 = '' OR session_id = ?1) AND id < ?2 ORDER BY id DESC LIMIT ?3`,
		f.SessionID, before, f.Limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ds []*store.Decision
	for rows.Next() {
		var d store.Decision
		var in, upd []byte
		var req, dec int64
		var approved string
		if err := rows.Scan(&d.ID, &d.SessionID, &d.RequestID, &d.ToolName, &in, &d.Behavior, &d.By, &d.RuleID,
			&d.RuleSpec, &d.Message, &upd, &req, &dec, &d.Route, &approved); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(approved), &d.ApprovedBy); err != nil {
			return nil, fmt.Errorf("decision %d's approvals: %w", d.ID, err)
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
