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

// optNanos is t in nanoseconds, 0 for the zero time (never, not yet).
func optNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// optTime is the inverse of optNanos.
func optTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return fromNanos(n)
}

func jsonList(l []string) string {
	if l == nil {
		l = []string{}
	}
	b, _ := json.Marshal(l)
	return string(b)
}

// PutUser stores u, or updates the user of that name. Errors:
// [store.ErrInvalid], *store.LimitError past the store's MaxUsers.
func (db *DB) PutUser(ctx context.Context, u *store.User) (err error) {
	defer wrap(&err, "sqlite: PutUser %q", u.Name)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidateUser(u); err != nil {
		return err
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := putUser(ctx, tx, u, db.maxUsers, true); err != nil {
		return err
	}
	return tx.Commit()
}

// putUser inserts u unless a user of its name exists, which it updates
// when update is set; u.CreatedAt is set either way.
func putUser(ctx context.Context, tx *sql.Tx, u *store.User, maxUsers int, update bool) error {
	var created int64
	err := tx.QueryRowContext(ctx, `SELECT created_at FROM users WHERE name = ?`, u.Name).Scan(&created)
	switch {
	case err == nil:
		u.CreatedAt = fromNanos(created)
		if !update {
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE users SET subject = ?, email = ?, groups = ? WHERE name = ?`,
			u.Subject, u.Email, jsonList(u.Groups), u.Name)
		return err
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM users`).Scan(&n); err != nil {
		return err
	}
	if n >= maxUsers {
		return &store.LimitError{What: "users", Max: maxUsers}
	}
	created = time.Now().UnixNano()
	if _, err := tx.ExecContext(ctx, `INSERT INTO users (name, subject, email, groups, created_at) VALUES (?, ?, ?, ?, ?)`,
		u.Name, u.Subject, u.Email, jsonList(u.Groups), created); err != nil {
		return err
	}
	u.CreatedAt = fromNanos(created)
	return nil
}

// Users returns every user, by name.
func (db *DB) Users(ctx context.Context) (_ []*store.User, err error) {
	defer wrap(&err, "sqlite: Users")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	rows, err := db.r.QueryContext(ctx, `SELECT name, subject, email, groups, created_at FROM users ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var us []*store.User
	for rows.Next() {
		var u store.User
		var groups string
		var t int64
		if err := rows.Scan(&u.Name, &u.Subject, &u.Email, &groups, &t); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(groups), &u.Groups); err != nil {
			return nil, fmt.Errorf("user %q's groups: %w", u.Name, err)
		}
		u.CreatedAt = fromNanos(t)
		us = append(us, &u)
	}
	return us, rows.Err()
}

// CreateToken stores t and its user (when new). Errors: [store.ErrInvalid],
// [store.ErrExists] for the name of a live token, *store.LimitError past
// the store's MaxTokens live tokens or MaxUsers users.
func (db *DB) CreateToken(ctx context.Context, t *store.Token) (err error) {
	defer wrap(&err, "sqlite: CreateToken %q", t.Name)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidateToken(t); err != nil {
		return err
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now := time.Now().UnixNano()
	// Tokens expired a while ago go: each sign-in makes one.
	if _, err := tx.ExecContext(ctx, `DELETE FROM tokens WHERE expires_at <> 0 AND expires_at < ?`,
		now-int64(store.ExpiredKept)); err != nil {
		return err
	}
	var n, same int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FILTER (WHERE expires_at = 0 OR expires_at > ?2),
		COUNT(*) FILTER (WHERE name = ?1) FROM tokens WHERE revoked_at = 0`, t.Name, now).Scan(&n, &same); err != nil {
		return err
	}
	if same > 0 {
		return fmt.Errorf("%w: a token called %q", store.ErrExists, t.Name)
	}
	if n >= db.maxTokens {
		return &store.LimitError{What: "tokens", Max: db.maxTokens}
	}
	if err := putUser(ctx, tx, &store.User{Name: t.User}, db.maxUsers, false); err != nil {
		return err
	}
	created := time.Now().UnixNano()
	if err := tx.QueryRowContext(ctx, `INSERT INTO tokens (name, user_name, role, dirs, session_id, hash, expires_at,
		created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		t.Name, t.User, t.Role, jsonList(t.Dirs), t.SessionID, t.Hash, optNanos(t.ExpiresAt), t.CreatedBy, created).
		Scan(&t.ID); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		t.ID = 0
		return err
	}
	t.CreatedAt = fromNanos(created)
	return nil
}

const tokenColumns = `id, name, user_name, role, dirs, session_id, hash, expires_at, created_by, created_at,
	last_used_at, revoked_at, revoked_by`

func scanToken(sc interface{ Scan(...any) error }) (*store.Token, error) {
	var t store.Token
	var dirs string
	var exp, created, used, revoked int64
	if err := sc.Scan(&t.ID, &t.Name, &t.User, &t.Role, &dirs, &t.SessionID, &t.Hash, &exp, &t.CreatedBy, &created,
		&used, &revoked, &t.RevokedBy); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(dirs), &t.Dirs); err != nil {
		return nil, fmt.Errorf("token %q's dirs: %w", t.Name, err)
	}
	if len(t.Dirs) == 0 {
		t.Dirs = nil
	}
	t.ExpiresAt, t.CreatedAt, t.LastUsedAt, t.RevokedAt = optTime(exp), fromNanos(created), optTime(used), optTime(revoked)
	return &t, nil
}

// Tokens returns every token, revoked ones included, oldest first.
func (db *DB) Tokens(ctx context.Context) (_ []*store.Token, err error) {
	defer wrap(&err, "sqlite: Tokens")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	rows, err := db.r.QueryContext(ctx, `SELECT `+tokenColumns+` FROM tokens ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ts []*store.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, rows.Err()
}

// RevokeToken revokes the live token called name; revoked tokens past
// the store's MaxTokens go, the oldest first. Errors: [store.ErrNotFound].
func (db *DB) RevokeToken(ctx context.Context, name, by string) (_ *store.Token, err error) {
	defer wrap(&err, "sqlite: RevokeToken %q", name)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	t, err := scanToken(tx.QueryRowContext(ctx, `UPDATE tokens SET revoked_at = ?, revoked_by = ?
		WHERE name = ? AND revoked_at = 0 RETURNING `+tokenColumns, time.Now().UnixNano(), by, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("no token called %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM tokens WHERE id IN (SELECT id FROM tokens WHERE revoked_at <> 0
		ORDER BY revoked_at DESC LIMIT -1 OFFSET ?)`, db.maxTokens); err != nil {
		return nil, err
	}
	return t, tx.Commit()
}

// TouchTokens records when tokens were last used.
func (db *DB) TouchTokens(ctx context.Context, used map[int64]time.Time) (err error) {
	defer wrap(&err, "sqlite: TouchTokens")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if len(used) == 0 {
		return nil
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for id, at := range used {
		if _, err := tx.ExecContext(ctx, `UPDATE tokens SET last_used_at = max(last_used_at, ?) WHERE id = ?`,
			at.UnixNano(), id); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// AddAudit appends e to the audit trail.
func (db *DB) AddAudit(ctx context.Context, e *store.AuditEntry) (err error) {
	defer wrap(&err, "sqlite: AddAudit %q", e.Action)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.PrepareAudit(e); err != nil {
		return err
	}
	return db.w.QueryRowContext(ctx, `INSERT INTO audit (at, user_name, token_name, client_kind, client_hint, remote,
		action, session_id, detail, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		e.At.UnixNano(), e.User, e.Token, e.ClientKind, e.ClientHint, e.Remote, e.Action, e.SessionID, e.Detail, e.Outcome).
		Scan(&e.ID)
}

// Audit returns the entries f selects, newest first.
func (db *DB) Audit(ctx context.Context, f store.AuditFilter) (_ []*store.AuditEntry, err error) {
	defer wrap(&err, "sqlite: Audit")
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
	rows, err := db.r.QueryContext(ctx, `SELECT id, at, user_name, token_name, client_kind, client_hint, remote, action,
		session_id, detail, outcome FROM audit
		WHERE id < ?1 AND at >= ?2 AND (?3 = '' OR user_name = ?3) AND (?4 = '' OR session_id = ?4)
		ORDER BY id DESC LIMIT ?5`, before, optNanos(f.Since), f.User, f.SessionID, f.Limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var es []*store.AuditEntry
	for rows.Next() {
		var e store.AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.User, &e.Token, &e.ClientKind, &e.ClientHint, &e.Remote, &e.Action,
			&e.SessionID, &e.Detail, &e.Outcome); err != nil {
			return nil, err
		}
		e.At = fromNanos(at)
		es = append(es, &e)
	}
	return es, rows.Err()
}
