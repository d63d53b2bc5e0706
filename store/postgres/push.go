package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/claudectl/claudectl/store"
)

var _ store.Notifications = (*DB)(nil)

// cleanList is l with each element made storable, never nil.
func cleanList(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = cleanText(s)
	}
	return out
}

// PutPushSubscription stores p, replacing the subscription of its
// endpoint. Errors: [store.ErrInvalid], *store.LimitError (two daemons
// subscribing devices at once may each find room for one more: the limit
// is a bound against a runaway client, not an exact count).
func (db *DB) PutPushSubscription(ctx context.Context, p *store.PushSubscription) (err error) {
	defer wrap(&err, "postgres: PutPushSubscription")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidatePushSubscription(p); err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	var id, created int64
	var owner string
	err = tx.QueryRow(ctx, `SELECT id, user_name, created_at FROM push_subscriptions WHERE endpoint = $1 FOR UPDATE`,
		p.Endpoint).Scan(&id, &owner, &created)
	switch {
	case err == nil:
		if owner != p.User {
			// Another person's device now: what its notifications
			// carried for the last owner is void.
			if _, err := tx.Exec(ctx, `DELETE FROM push_capabilities WHERE subscription_id = $1`, id); err != nil {
				return err
			}
			if err := pushLimits(ctx, tx, p.User); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE push_subscriptions SET user_name = $1, token_name = $2, p256dh = $3, auth = $4,
			kinds = $5, device = $6 WHERE id = $7`, p.User, p.Token, p.P256DH, p.Auth, list(p.Kinds), p.Device, id); err != nil {
			return err
		}
	case errors.Is(err, pgx.ErrNoRows):
		if err := pushLimits(ctx, tx, p.User); err != nil {
			return err
		}
		created = time.Now().UnixNano()
		// A device subscribing through two daemons at once: the second
		// insert updates the first's row.
		if err := tx.QueryRow(ctx, `INSERT INTO push_subscriptions (user_name, token_name, endpoint, p256dh, auth,
			kinds, device, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (endpoint) DO UPDATE SET user_name = EXCLUDED.user_name, token_name = EXCLUDED.token_name,
			p256dh = EXCLUDED.p256dh, auth = EXCLUDED.auth, kinds = EXCLUDED.kinds, device = EXCLUDED.device
			RETURNING id, created_at`,
			p.User, p.Token, p.Endpoint, p.P256DH, p.Auth, list(p.Kinds), p.Device, created).Scan(&id, &created); err != nil {
			return err
		}
	default:
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	p.ID, p.CreatedAt = id, fromNanos(created)
	return nil
}

func pushLimits(ctx context.Context, tx pgx.Tx, user string) error {
	var all, mine int
	if err := tx.QueryRow(ctx, `SELECT COUNT(*), COUNT(*) FILTER (WHERE user_name = $1) FROM push_subscriptions`, user).
		Scan(&all, &mine); err != nil {
		return err
	}
	if all >= store.MaxPushSubscriptions {
		return &store.LimitError{What: "push subscriptions", Max: store.MaxPushSubscriptions}
	}
	if mine >= store.MaxPushSubscriptionsPerUser {
		return &store.LimitError{What: "push subscriptions of user " + user, Max: store.MaxPushSubscriptionsPerUser}
	}
	return nil
}

// PushSubscriptions returns every subscription, oldest first.
func (db *DB) PushSubscriptions(ctx context.Context) (_ []*store.PushSubscription, err error) {
	defer wrap(&err, "postgres: PushSubscriptions")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT id, user_name, token_name, endpoint, p256dh, auth, kinds, device,
		created_at, last_push_at FROM push_subscriptions ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.PushSubscription
	for rows.Next() {
		var p store.PushSubscription
		var created, pushed int64
		if err := rows.Scan(&p.ID, &p.User, &p.Token, &p.Endpoint, &p.P256DH, &p.Auth, &p.Kinds, &p.Device,
			&created, &pushed); err != nil {
			return nil, err
		}
		p.CreatedAt, p.LastPushAt = fromNanos(created), optTime(pushed)
		out = append(out, &p)
	}
	return out, rows.Err()
}

// SetPushKinds changes the kinds of subscription id.
func (db *DB) SetPushKinds(ctx context.Context, id int64, kinds []string) (err error) {
	defer wrap(&err, "postgres: SetPushKinds %d", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidatePushKinds(kinds); err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tag, err := db.pool.Exec(ctx, `UPDATE push_subscriptions SET kinds = $1 WHERE id = $2`, list(kinds), id)
	if err == nil && tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return err
}

// DeletePushSubscription removes subscription id and its capabilities.
func (db *DB) DeletePushSubscription(ctx context.Context, id int64) (err error) {
	defer wrap(&err, "postgres: DeletePushSubscription %d", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tag, err := db.pool.Exec(ctx, `DELETE FROM push_subscriptions WHERE id = $1`, id)
	if err == nil && tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return err
}

// RecordPush notes when subscription id was last pushed to.
func (db *DB) RecordPush(ctx context.Context, id int64, at time.Time) (err error) {
	defer wrap(&err, "postgres: RecordPush %d", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	_, err = db.pool.Exec(ctx, `UPDATE push_subscriptions SET last_push_at = GREATEST(last_push_at, $1) WHERE id = $2`,
		at.UnixNano(), id)
	return err
}

// AddPushCapability stores c and forgets the expired capabilities.
func (db *DB) AddPushCapability(ctx context.Context, c *store.PushCapability) (err error) {
	defer wrap(&err, "postgres: AddPushCapability")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if len(c.Hash) != 32 || c.RequestID == "" || c.SubscriptionID == 0 || c.ExpiresAt.IsZero() {
		return fmt.Errorf("%w: a push capability needs its hash, request, subscription and expiry", store.ErrInvalid)
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	batch := &pgx.Batch{}
	batch.Queue(`DELETE FROM push_capabilities WHERE expires_at < $1`, time.Now().UnixNano())
	batch.Queue(`INSERT INTO push_capabilities (hash, request_id, session_id, subscription_id, expires_at)
		VALUES ($1, $2, $3, $4, $5)`, c.Hash, cleanText(c.RequestID), cleanText(c.SessionID), c.SubscriptionID, c.ExpiresAt.UnixNano())
	return db.pool.SendBatch(ctx, batch).Close()
}

// UsePushCapability marks a capability used, once: the UPDATE's condition
// decides between two daemons using it at the same moment.
func (db *DB) UsePushCapability(ctx context.Context, hash []byte, now time.Time) (_ *store.PushCapability, err error) {
	defer wrap(&err, "postgres: UsePushCapability")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var c store.PushCapability
	var exp, used int64
	err = db.pool.QueryRow(ctx, `UPDATE push_capabilities SET used_at = $2 WHERE hash = $1 AND used_at = 0 AND expires_at > $2
		RETURNING hash, request_id, session_id, subscription_id, expires_at, used_at`, hash, now.UnixNano()).
		Scan(&c.Hash, &c.RequestID, &c.SessionID, &c.SubscriptionID, &exp, &used)
	if err == nil {
		c.ExpiresAt, c.UsedAt = fromNanos(exp), fromNanos(used)
		return &c, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	// Unknown, expired or used: which one?
	err = db.pool.QueryRow(ctx, `SELECT hash, request_id, session_id, subscription_id, expires_at, used_at
		FROM push_capabilities WHERE hash = $1`, hash).Scan(&c.Hash, &c.RequestID, &c.SessionID, &c.SubscriptionID, &exp, &used)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	c.ExpiresAt, c.UsedAt = fromNanos(exp), optTime(used)
	if used != 0 {
		return &c, fmt.Errorf("%w at %s", store.ErrUsed, c.UsedAt.Format(time.RFC3339))
	}
	return nil, store.ErrNotFound // expired
}

// VAPIDKey returns the daemons' VAPID key, storing newKey if there is none
// (the first daemon to store one wins; the others read it).
func (db *DB) VAPIDKey(ctx context.Context, newKey []byte) (_ []byte, err error) {
	defer wrap(&err, "postgres: VAPIDKey")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	if len(newKey) > 0 {
		if _, err := db.pool.Exec(ctx, `INSERT INTO notify_keys (name, key) VALUES ('vapid', $1) ON CONFLICT (name) DO NOTHING`,
			newKey); err != nil {
			return nil, err
		}
	}
	var key []byte
	err = db.pool.QueryRow(ctx, `SELECT key FROM notify_keys WHERE name = 'vapid'`).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return key, err
}

// AddDelivery appends d to the delivery log, which keeps MaxDeliveries.
func (db *DB) AddDelivery(ctx context.Context, d *store.Delivery) (err error) {
	defer wrap(&err, "postgres: AddDelivery")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.PrepareDelivery(d); err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	if err := db.pool.QueryRow(ctx, `INSERT INTO deliveries (at, target, event, session_id, request_id, status, attempts,
		http_status, error, latency_ns) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
		d.At.UnixNano(), cleanText(d.Target), cleanText(d.Event), cleanText(d.SessionID), cleanText(d.RequestID), d.Status,
		d.Attempts, d.HTTPStatus, cleanText(d.Error), int64(d.Latency)).Scan(&d.ID); err != nil {
		return err
	}
	if d.ID%100 == 0 { // the oldest go, now and then
		if _, err := db.pool.Exec(ctx, `DELETE FROM deliveries WHERE id <= $1`, d.ID-store.MaxDeliveries); err != nil {
			return err
		}
	}
	return nil
}

// Deliveries returns the deliveries f selects, newest first.
func (db *DB) Deliveries(ctx context.Context, f store.DeliveryFilter) (_ []*store.Delivery, err error) {
	defer wrap(&err, "postgres: Deliveries")
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
	rows, err := db.pool.Query(ctx, `SELECT id, at, target, event, session_id, request_id, status, attempts, http_status,
		error, latency_ns FROM deliveries WHERE ($1 = '' OR target = $1) AND id < $2 ORDER BY id DESC LIMIT $3`,
		cleanText(f.Target), before, f.Limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Delivery
	for rows.Next() {
		var d store.Delivery
		var at, lat int64
		if err := rows.Scan(&d.ID, &at, &d.Target, &d.Event, &d.SessionID, &d.RequestID, &d.Status, &d.Attempts,
			&d.HTTPStatus, &d.Error, &lat); err != nil {
			return nil, err
		}
		d.At, d.Latency = fromNanos(at), time.Duration(lat)
		out = append(out, &d)
	}
	return out, rows.Err()
}
