package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/claudectl/claudectl/store"
)

// tokensChannel carries a notification (no payload) after a token was
// created or revoked: every daemon sharing the store reloads its tokens,
// so a revocation holds on all of them within the notification's delay.
const tokensChannel = "claudectl_tokens"

// WatchTokens returns a channel that receives a value after any daemon
// writing to this database created or revoked a token, and after the
// listener reconnected, and a function that ends the watch.
func (db *DB) WatchTokens() (<-chan struct{}, func()) { return db.watch(tokensChannel + "\x00") }

func optNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func optTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return fromNanos(n)
}

func list(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// PutUser stores u, or updates the user of that name. Errors:
// [store.ErrInvalid], *store.LimitError past the store's MaxUsers.
func (db *DB) PutUser(ctx context.Context, u *store.User) (err error) {
	defer wrap(&err, "postgres: PutUser %q", u.Name)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidateUser(u); err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	if err := putUser(ctx, tx, u, db.maxUsers, true); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// putUser inserts u unless a user of its name exists, which it updates
// when update is set; u.CreatedAt is set either way. Two daemons adding
// users at once may each find room for one more: the limit is a bound
// against a runaway client, not an exact count.
func putUser(ctx context.Context, tx pgx.Tx, u *store.User, maxUsers int, update bool) error {
	var created int64
	err := tx.QueryRow(ctx, `SELECT created_at FROM users WHERE name = $1`, u.Name).Scan(&created)
	switch {
	case err == nil:
		u.CreatedAt = fromNanos(created)
		if !update {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE users SET subject = $1, email = $2, groups = $3 WHERE name = $4`,
			u.Subject, u.Email, list(u.Groups), u.Name)
		return err
	case !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM users`).Scan(&n); err != nil {
		return err
	}
	if n >= maxUsers {
		return &store.LimitError{What: "users", Max: maxUsers}
	}
	created = time.Now().UnixNano()
	err = tx.QueryRow(ctx, `INSERT INTO users (name, subject, email, groups, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING created_at`,
		u.Name, u.Subject, u.Email, list(u.Groups), created).Scan(&created)
	if err != nil {
		return err
	}
	u.CreatedAt = fromNanos(created)
	return nil
}

// Users returns every user, by name.
func (db *DB) Users(ctx context.Context) (_ []*store.User, err error) {
	defer wrap(&err, "postgres: Users")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT name, subject, email, groups, created_at FROM users ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var us []*store.User
	for rows.Next() {
		var u store.User
		var t int64
		if err := rows.Scan(&u.Name, &u.Subject, &u.Email, &u.Groups, &t); err != nil {
			return nil, err
		}
		if len(u.Groups) == 0 {
			u.Groups = nil
		}
		u.CreatedAt = fromNanos(t)
		us = append(us, &u)
	}
	return us, rows.Err()
}

// CreateToken stores t and its user (when new), and wakes the other
// daemons' token caches. Errors as the SQLite store's.
func (db *DB) CreateToken(ctx context.Context, t *store.Token) (err error) {
	defer wrap(&err, "postgres: CreateToken %q", t.Name)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidateToken(t); err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	now := time.Now().UnixNano()
	// Tokens expired a while ago go: each sign-in makes one.
	if _, err := tx.Exec(ctx, `DELETE FROM tokens WHERE expires_at <> 0 AND expires_at < $1`, now-int64(store.ExpiredKept)); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM tokens WHERE revoked_at = 0 AND (expires_at = 0 OR expires_at > $1)`, now).Scan(&n); err != nil {
		return err
	}
	if n >= db.maxTokens {
		return &store.LimitError{What: "tokens", Max: db.maxTokens}
	}
	if err := putUser(ctx, tx, &store.User{Name: t.User}, db.maxUsers, false); err != nil {
		return err
	}
	created := time.Now().UnixNano()
	err = tx.QueryRow(ctx, `INSERT INTO tokens (name, user_name, role, dirs, session_id, hash, expires_at,
		created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
		t.Name, t.User, t.Role, list(t.Dirs), t.SessionID, t.Hash, optNanos(t.ExpiresAt), t.CreatedBy, created).Scan(&t.ID)
	if err != nil {
		if pgCode(err) == "23505" { // tokens_live_name, or (never by chance) the hash
			return fmt.Errorf("%w: a token called %q", store.ErrExists, t.Name)
		}
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, tokensChannel); err != nil {
		t.ID = 0
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		t.ID = 0
		return err
	}
	t.CreatedAt = fromNanos(created)
	return nil
}

const tokenColumns = `id, name, user_name, role, dirs, session_id, hash, expires_at, created_by, created_at,
	last_used_at, revoked_at, revoked_by`

func scanToken(sc pgx.Row) (*store.Token, error) {
	var t store.Token
	var exp, created, used, revoked int64
	if err := sc.Scan(&t.ID, &t.Name, &t.User, &t.Role, &t.Dirs, &t.SessionID, &t.Hash, &exp, &t.CreatedBy, &created,
		&used, &revoked, &t.RevokedBy); err != nil {
		return nil, err
	}
	if len(t.Dirs) == 0 {
		t.Dirs = nil
	}
	t.ExpiresAt, t.CreatedAt, t.LastUsedAt, t.RevokedAt = optTime(exp), fromNanos(created), optTime(used), optTime(revoked)
	return &t, nil
}

// Tokens returns every token, revoked ones included, oldest first.
func (db *DB) Tokens(ctx context.Context) (_ []*store.Token, err error) {
	defer wrap(&err, "postgres: Tokens")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT `+tokenColumns+` FROM tokens ORDER BY id`)
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

// RevokeToken revokes the live token called name and wakes the other
// daemons' token caches; revoked tokens past the store's MaxTokens go, the
// oldest first. Errors: [store.ErrNotFound].
func (db *DB) RevokeToken(ctx context.Context, name, by string) (_ *store.Token, err error) {
	defer wrap(&err, "postgres: RevokeToken %q", name)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	if err := text("token name", name); err != nil {
		return nil, fmt.Errorf("no token called %q: %w", cleanText(name), store.ErrNotFound)
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	t, err := scanToken(tx.QueryRow(ctx, `UPDATE tokens SET revoked_at = $1, revoked_by = $2
		WHERE name = $3 AND revoked_at = 0 RETURNING `+tokenColumns, time.Now().UnixNano(), cleanText(by), name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("no token called %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM tokens WHERE id IN (SELECT id FROM tokens WHERE revoked_at <> 0
		ORDER BY revoked_at DESC OFFSET $1)`, db.maxTokens); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, tokensChannel); err != nil {
		return nil, err
	}
	return t, tx.Commit(ctx)
}

// TouchTokens records when tokens were last used, in one statement.
func (db *DB) TouchTokens(ctx context.Context, used map[int64]time.Time) (err error) {
	defer wrap(&err, "postgres: TouchTokens")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if len(used) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(used))
	ats := make([]int64, 0, len(used))
	for id, at := range used {
		ids, ats = append(ids, id), append(ats, at.UnixNano())
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	_, err = db.pool.Exec(ctx, `UPDATE tokens SET last_used_at = GREATEST(last_used_at, u.at)
		FROM unnest($1::bigint[], $2::bigint[]) AS u(id, at) WHERE tokens.id = u.id`, ids, ats)
	return err
}

// AddAudit appends e to the audit trail.
func (db *DB) AddAudit(ctx context.Context, e *store.AuditEntry) (err error) {
	defer wrap(&err, "postgres: AddAudit %q", e.Action)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.PrepareAudit(e); err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	return db.pool.QueryRow(ctx, `INSERT INTO audit (at, user_name, token_name, client_kind, client_hint, remote,
		action, session_id, detail, outcome) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
		e.At.UnixNano(), e.User, e.Token, e.ClientKind, e.ClientHint, e.Remote, e.Action, e.SessionID, e.Detail, e.Outcome).
		Scan(&e.ID)
}

// Audit returns the entries f selects, newest first.
func (db *DB) Audit(ctx context.Context, f store.AuditFilter) (_ []*store.AuditEntry, err error) {
	defer wrap(&err, "postgres: Audit")
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
	rows, err := db.pool.Query(ctx, `SELECT id, at, user_name, token_name, client_kind, client_hint, remote, action,
		session_id, detail, outcome FROM audit
		WHERE id < $1 AND at >= $2 AND ($3 = '' OR user_name = $3) AND ($4 = '' OR session_id = $4)
		ORDER BY id DESC LIMIT $5`, before, optNanos(f.Since), cleanText(f.User), cleanText(f.SessionID), f.Limit)
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
