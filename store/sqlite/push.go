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

var _ store.Notifications = (*DB)(nil)

// PutPushSubscription stores p, replacing the subscription of its
// endpoint. Errors: [store.ErrInvalid], *store.LimitError.
func (db *DB) PutPushSubscription(ctx context.Context, p *store.PushSubscription) (err error) {
	defer wrap(&err, "sqlite: PutPushSubscription")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidatePushSubscription(p); err != nil {
		return err
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var id, created int64
	var owner string
	err = tx.QueryRowContext(ctx, `SELECT id, user_name, created_at FROM push_subscriptions WHERE endpoint = ?`, p.Endpoint).
		Scan(&id, &owner, &created)
	switch {
	case err == nil:
		if owner != p.User {
			// Another person's device now: what its notifications
			// carried for the last owner is void.
			if _, err := tx.ExecContext(ctx, `DELETE FROM push_capabilities WHERE subscription_id = ?`, id); err != nil {
				return err
			}
			if err := pushLimits(ctx, tx, p.User); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE push_subscriptions SET user_name = ?, token_name = ?, p256dh = ?, auth = ?,
			kinds = ?, device = ? WHERE id = ?`, p.User, p.Token, p.P256DH, p.Auth, jsonList(p.Kinds), p.Device, id); err != nil {
			return err
		}
	case errors.Is(err, sql.ErrNoRows):
		if err := pushLimits(ctx, tx, p.User); err != nil {
			return err
		}
		created = time.Now().UnixNano()
		if err := tx.QueryRowContext(ctx, `INSERT INTO push_subscriptions (user_name, token_name, endpoint, p256dh, auth,
			kinds, device, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			p.User, p.Token, p.Endpoint, p.P256DH, p.Auth, jsonList(p.Kinds), p.Device, created).Scan(&id); err != nil {
			return err
		}
	default:
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	p.ID, p.CreatedAt = id, fromNanos(created)
	return nil
}

// pushLimits refuses one more subscription past the store's and the
// user's limits.
func pushLimits(ctx context.Context, tx *sql.Tx, user string) error {
	var all, mine int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(*) FILTER (WHERE user_name = ?) FROM push_subscriptions`, user).
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
	defer wrap(&err, "sqlite: PushSubscriptions")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	rows, err := db.r.QueryContext(ctx, `SELECT id, user_name, token_name, endpoint, p256dh, auth, kinds, device,
		created_at, last_push_at FROM push_subscriptions ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.PushSubscription
	for rows.Next() {
		var p store.PushSubscription
		var kinds string
		var created, pushed int64
		if err := rows.Scan(&p.ID, &p.User, &p.Token, &p.Endpoint, &p.P256DH, &p.Auth, &kinds, &p.Device,
			&created, &pushed); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(kinds), &p.Kinds); err != nil {
			return nil, fmt.Errorf("push subscription %d's kinds: %w", p.ID, err)
		}
		p.CreatedAt, p.LastPushAt = fromNanos(created), optTime(pushed)
		out = append(out, &p)
	}
	return out, rows.Err()
}

// SetPushKinds changes the kinds of subscription id.
func (db *DB) SetPushKinds(ctx context.Context, id int64, kinds []string) (err error) {
	defer wrap(&err, "sqlite: SetPushKinds %d", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.ValidatePushKinds(kinds); err != nil {
		return err
	}
	res, err := db.w.ExecContext(ctx, `UPDATE push_subscriptions SET kinds = ? WHERE id = ?`, jsonList(kinds), id)
	return oneRow(res, err)
}

// DeletePushSubscription removes subscription id and its capabilities.
func (db *DB) DeletePushSubscription(ctx context.Context, id int64) (err error) {
	defer wrap(&err, "sqlite: DeletePushSubscription %d", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	res, err := db.w.ExecContext(ctx, `DELETE FROM push_subscriptions WHERE id = ?`, id)
	return oneRow(res, err)
}

// RecordPush notes when subscription id was last pushed to.
func (db *DB) RecordPush(ctx context.Context, id int64, at time.Time) (err error) {
	defer wrap(&err, "sqlite: RecordPush %d", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	_, err = db.w.ExecContext(ctx, `UPDATE push_subscriptions SET last_push_at = max(last_push_at, ?) WHERE id = ?`,
		at.UnixNano(), id)
	return err
}

// oneRow is the error of an update of one row: store.ErrNotFound when it
// changed none.
func oneRow(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// AddPushCapability stores c and forgets the expired capabilities.
func (db *DB) AddPushCapability(ctx context.Context, c *store.PushCapability) (err error) {
	defer wrap(&err, "sqlite: AddPushCapability")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if len(c.Hash) != 32 || c.RequestID == "" || c.SubscriptionID == 0 || c.ExpiresAt.IsZero() {
		return fmt.Errorf("%w: a push capability needs its hash, request, subscription and expiry", store.ErrInvalid)
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM push_capabilities WHERE expires_at < ?`, time.Now().UnixNano()); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO push_capabilities (hash, request_id, session_id, subscription_id, expires_at)
		VALUES (?, ?, ?, ?, ?)`, c.Hash, c.RequestID, c.SessionID, c.SubscriptionID, c.ExpiresAt.UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

// UsePushCapability marks a capability used, once.
func (db *DB) UsePushCapability(ctx context.Context, hash []byte, now time.Time) (_ *store.PushCapability, err error) {
	defer wrap(&err, "sqlite: UsePushCapability")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var c store.PushCapability
	var exp, used int64
	err = tx.QueryRowContext(ctx, `SELECT hash, request_id, session_id, subscription_id, expires_at, used_at
		FROM push_capabilities WHERE hash = ?`, hash).Scan(&c.Hash, &c.RequestID, &c.SessionID, &c.SubscriptionID, &exp, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	c.ExpiresAt, c.UsedAt = fromNanos(exp), optTime(used)
	if used != 0 {
		return &c, fmt.Errorf("%w at %s", store.ErrUsed, c.UsedAt.Format(time.RFC3339))
	}
	if !now.Before(c.ExpiresAt) {
		return nil, store.ErrNotFound
	}
	if _, err := tx.ExecContext(ctx, `UPDATE push_capabilities SET used_at = ? WHERE hash = ?`, now.UnixNano(), hash); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	c.UsedAt = fromNanos(now.UnixNano())
	return &c, nil
}

// VAPIDKey returns the daemon's VAPID key, storing newKey if there is none.
func (db *DB) VAPIDKey(ctx context.Context, newKey []byte) (_ []byte, err error) {
	defer wrap(&err, "sqlite: VAPIDKey")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	if len(newKey) > 0 {
		if _, err := db.w.ExecContext(ctx, `INSERT INTO notify_keys (name, key) VALUES ('vapid', ?) ON CONFLICT (name) DO NOTHING`,
			newKey); err != nil {
			return nil, err
		}
	}
	var key []byte
	err = db.w.QueryRowContext(ctx, `SELECT key FROM notify_keys WHERE name = 'vapid'`).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return key, err
}

// AddDelivery appends d to the delivery log, which keeps MaxDeliveries.
func (db *DB) AddDelivery(ctx context.Context, d *store.Delivery) (err error) {
	defer wrap(&err, "sqlite: AddDelivery")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := store.PrepareDelivery(d); err != nil {
		return err
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `INSERT INTO deliveries (at, target, event, session_id, request_id, status, attempts,
		http_status, error, latency_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		d.At.UnixNano(), d.Target, d.Event, d.SessionID, d.RequestID, d.Status, d.Attempts, d.HTTPStatus, d.Error,
		int64(d.Latency)).Scan(&d.ID); err != nil {
		return err
	}
	if d.ID%100 == 0 { // the oldest go, now and then: one DELETE per hundred deliveries
		if _, err := tx.ExecContext(ctx, `DELETE FROM deliveries WHERE id <= ?`, d.ID-store.MaxDeliveries); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		d.ID = 0
		return err
	}
	return nil
}

// Deliveries returns the deliveries f selects, newest first.
func (db *DB) Deliveries(ctx context.Context, f store.DeliveryFilter) (_ []*store.Delivery, err error) {
	defer wrap(&err, "sqlite: Deliveries")
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
	rows, err := db.r.QueryContext(ctx, `SELECT id, at, target, event, session_id, request_id, status, attempts, http_status,
		error, latency_ns FROM deliveries WHERE (?1 = '' OR target = ?1) AND id < ?2 ORDER BY id DESC LIMIT ?3`,
		f.Target, before, f.Limit)
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
