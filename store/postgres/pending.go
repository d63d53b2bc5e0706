package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/claudectl/claudectl/store"
)

// pendingChannel carries a notification (no payload) after a pending
// request was published or removed.
const pendingChannel = "claudectl_pending"

// PutPending publishes a request this daemon holds (replacing an earlier
// copy of it) and wakes the other daemons' watchers.
func (db *DB) PutPending(ctx context.Context, p *store.PendingRequest) (err error) {
	defer wrap(&err, "postgres: PutPending %q", p.RequestID)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"request id", p.RequestID}, {"session id", p.SessionID}, {"request", string(p.Request)}} {
		if err := text(f.name, f.v); err != nil {
			return err
		}
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = time.Now()
	}
	p.Owner = db.owner
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	_, err = db.pool.Exec(ctx, `WITH up AS (
		INSERT INTO pending_requests (request_id, session, owner, request, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (request_id) DO UPDATE SET session = EXCLUDED.session, owner = EXCLUDED.owner,
			request = EXCLUDED.request, created_at = EXCLUDED.created_at
		RETURNING 1)
		SELECT pg_notify($6, '') FROM up`, p.RequestID, p.SessionID, p.Owner, string(p.Request), p.CreatedAt.UnixNano(), pendingChannel)
	return err
}

// DropPending removes a settled request and wakes the watchers.
func (db *DB) DropPending(ctx context.Context, requestID string) (err error) {
	defer wrap(&err, "postgres: DropPending %q", requestID)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if text("request id", requestID) != nil {
		return nil
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	_, err = db.pool.Exec(ctx, `WITH d AS (DELETE FROM pending_requests WHERE request_id = $1 RETURNING 1)
		SELECT pg_notify($2, '') FROM d`, requestID, pendingChannel)
	return err
}

// OthersPending returns the requests other daemons hold for session id
// ("" for every session) while they hold its lease, oldest first.
func (db *DB) OthersPending(ctx context.Context, sessionID string) (_ []*store.PendingRequest, err error) {
	defer wrap(&err, "postgres: OthersPending")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	if text("session id", sessionID) != nil {
		return nil, nil
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT p.request_id, p.session, p.owner, p.request, p.created_at
		FROM pending_requests p JOIN sessions s ON s.id = p.session
		WHERE p.owner <> $1 AND ($2 = '' OR p.session = $2)
		AND s.owner = p.owner AND s.lease_until >= (extract(epoch from clock_timestamp()) * 1e9)::bigint
		ORDER BY p.created_at, p.request_id`, db.owner, sessionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.PendingRequest
	for rows.Next() {
		p := &store.PendingRequest{}
		var req string
		var created int64
		if err := rows.Scan(&p.RequestID, &p.SessionID, &p.Owner, &req, &created); err != nil {
			return nil, err
		}
		p.Request, p.CreatedAt = json.RawMessage(req), fromNanos(created)
		out = append(out, p)
	}
	return out, rows.Err()
}

// WatchPending returns a channel that receives a value after any daemon
// published or removed a pending request (and after a reconnection).
func (db *DB) WatchPending() (<-chan struct{}, func()) { return db.watch(pendingChannel + "\x00") }
