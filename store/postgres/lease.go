package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/claudectl/claudectl/store"
)

// Leases: several daemons on one database each own some sessions. A
// daemon acquires a session's lease before it runs the session, renews
// its leases by heartbeat, and writes the session only while it holds
// the lease: every write of a session this DB acquired checks the row's
// fencing number against the one the acquisition returned, in the
// statement that writes (the writer's UPDATE of last_seq, UpdateSession,
// NewProcess). A daemon that lost a lease (it was paused longer than the
// lease, and another daemon took the session over) has its writes refused
// with an error wrapping [store.ErrNotOwner], never interleaved with the new
// owner's. Sessions this DB never acquired are written unfenced, as by a
// single daemon.

// A LeaseHeldError says a session's lease is held by another daemon.
type LeaseHeldError struct {
	Session string
	Owner   string
	Until   time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("session %s is owned by daemon %s until %s", e.Session, e.Owner, e.Until.UTC().Format(time.RFC3339Nano))
}

func (e *LeaseHeldError) Unwrap() error { return store.ErrNotOwner }

// Owner is the name this DB acquires leases under (Options.Owner, or a
// random one per Open).
func (db *DB) Owner() string { return db.owner }

// Acquire takes session id's lease for ttl, if it is free, expired,
// already this DB's or its owner's daemon is gone (it holds no liveness
// lock: see liveness.go), and returns the new fencing number, which this DB's
// writes of the session carry from then on. Errors: *LeaseHeldError
// (wrapping [store.ErrNotOwner]) while another daemon's lease runs,
// [store.ErrNotFound].
func (db *DB) Acquire(ctx context.Context, id string, ttl time.Duration) (fence int64, err error) {
	defer wrap(&err, "postgres: Acquire %q", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return 0, err
	}
	if text("id", id) != nil {
		return 0, store.ErrNotFound
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	db.live(ctx)
	// The server's clock decides expiry, so daemons' clocks need not agree.
	// The CASE looks at pg_locks only for a lease that is not free by time.
	err = db.pool.QueryRow(ctx, `UPDATE sessions SET owner = $2, fence = fence + 1,
		lease_until = (extract(epoch from clock_timestamp()) * 1e9)::bigint + $3
		WHERE id = $1 AND CASE WHEN owner = '' OR owner = $2 OR lease_until < (extract(epoch from clock_timestamp()) * 1e9)::bigint
			THEN true ELSE `+ownerGone+` END
		RETURNING fence`, id, db.owner, ttl.Nanoseconds()).Scan(&fence)
	if errors.Is(err, pgx.ErrNoRows) {
		var owner string
		var until int64
		switch err := db.pool.QueryRow(ctx, `SELECT owner, lease_until FROM sessions WHERE id = $1`, id).Scan(&owner, &until); {
		case errors.Is(err, pgx.ErrNoRows):
			return 0, store.ErrNotFound
		case err != nil:
			return 0, err
		}
		return 0, &LeaseHeldError{Session: id, Owner: owner, Until: fromNanos(until)}
	}
	if err != nil {
		return 0, err
	}
	db.leaseMu.Lock()
	db.fences[id], db.ttls[id] = fence, ttl.Nanoseconds()
	db.leaseMu.Unlock()
	return fence, nil
}

// Renew extends every lease this DB holds by ttl and returns the sessions
// whose lease it no longer holds (another daemon took them over): their
// writes are refused from now on, and the caller must stop running them.
func (db *DB) Renew(ctx context.Context, ttl time.Duration) (lost []string, err error) {
	defer wrap(&err, "postgres: Renew")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	db.leaseMu.Lock()
	ids := make([]string, 0, len(db.fences))
	fences := make([]int64, 0, len(db.fences))
	for id, f := range db.fences {
		if f != lostLease {
			ids, fences = append(ids, id), append(fences, f)
		}
	}
	db.leaseMu.Unlock()
	if len(ids) == 0 {
		return nil, nil
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	// Rows a batch of the event writer holds locked are skipped, not
	// waited for (see appendEvents: the batch extends their leases).
	rows, err := db.pool.Query(ctx, `UPDATE sessions s
		SET lease_until = (extract(epoch from clock_timestamp()) * 1e9)::bigint + $3
		FROM unnest($1::text[], $2::bigint[]) AS v(id, fence),
			(SELECT id FROM sessions WHERE id = ANY($1) FOR UPDATE SKIP LOCKED) AS l
		WHERE s.id = v.id AND l.id = v.id AND s.fence = v.fence AND s.owner = $4 RETURNING s.id`, ids, fences, ttl.Nanoseconds(), db.owner)
	if err != nil {
		return nil, err
	}
	kept, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	held := make(map[string]bool, len(kept))
	for _, id := range kept {
		held[id] = true
	}
	// Those not renewed: skipped (locked by a batch, which extends the
	// lease), or lost (another daemon's fence now).
	var unsure []string
	var unsureFences []int64
	for i, id := range ids {
		if !held[id] {
			unsure, unsureFences = append(unsure, id), append(unsureFences, fences[i])
		}
	}
	if len(unsure) > 0 {
		rows, err := db.pool.Query(ctx, `SELECT s.id FROM sessions s JOIN unnest($1::text[], $2::bigint[]) AS v(id, fence)
			ON s.id = v.id WHERE s.fence = v.fence AND s.owner = $3`, unsure, unsureFences, db.owner)
		if err != nil {
			return nil, err
		}
		still, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		for _, id := range still {
			held[id] = true
		}
	}
	db.leaseMu.Lock()
	for i, id := range ids {
		if held[id] && db.fences[id] == fences[i] {
			db.ttls[id] = ttl.Nanoseconds()
		}
		if !held[id] && db.fences[id] == fences[i] {
			lost = append(lost, id)
			db.fences[id] = lostLease // writes stay refused until Acquire or Release
		}
	}
	db.leaseMu.Unlock()
	return lost, nil
}

// Release gives up session id's lease (the session stopped here), so that
// another daemon may take it at once. Releasing a lease not held is not an
// error.
func (db *DB) Release(ctx context.Context, id string) (err error) {
	defer wrap(&err, "postgres: Release %q", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	db.leaseMu.Lock()
	fence, ok := db.fences[id]
	delete(db.fences, id)
	delete(db.ttls, id)
	db.leaseMu.Unlock()
	if !ok || fence == lostLease {
		return nil
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	_, err = db.pool.Exec(ctx, `UPDATE sessions SET owner = '', lease_until = 0
		WHERE id = $1 AND fence = $2 AND owner = $3`, id, fence, db.owner)
	return err
}

// LeaseOf says who holds session id's lease and until when (the server's
// clock); owner is "" when nobody does: a lease whose until has passed, or
// whose owner's daemon is gone (another daemon's that holds no liveness
// lock), is free. Errors: [store.ErrNotFound].
func (db *DB) LeaseOf(ctx context.Context, id string) (owner string, until time.Time, err error) {
	defer wrap(&err, "postgres: LeaseOf %q", id)
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return "", time.Time{}, err
	}
	if text("id", id) != nil {
		return "", time.Time{}, store.ErrNotFound
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var u, now int64
	var gone bool
	err = db.pool.QueryRow(ctx, `SELECT owner, lease_until, (extract(epoch from clock_timestamp()) * 1e9)::bigint,
		CASE WHEN owner = '' OR owner = $2 OR lease_until < (extract(epoch from clock_timestamp()) * 1e9)::bigint
			THEN false ELSE `+ownerGone+` END
		FROM sessions WHERE id = $1`, id, db.owner).Scan(&owner, &u, &now, &gone)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", time.Time{}, store.ErrNotFound
	}
	if err != nil {
		return "", time.Time{}, err
	}
	if u < now || gone {
		return "", time.Time{}, nil
	}
	return owner, fromNanos(u), nil
}

// lostLease marks, in DB.fences, a lease Renew found lost: the session's
// writes are refused (no row has this fence) until it is acquired again.
const lostLease = -1

// fence returns the fencing number of session id's lease held by this DB,
// 0 when it holds none (the session is written unfenced).
func (db *DB) fence(id string) int64 {
	f, _ := db.lease(id)
	return f
}

// lease returns the fencing number and the lease time (nanoseconds) of
// session id's lease held by this DB; 0, 0 when it holds none.
func (db *DB) lease(id string) (fence, ttl int64) {
	db.leaseMu.Lock()
	defer db.leaseMu.Unlock()
	return db.fences[id], db.ttls[id]
}

// notWritable explains why the sessions of ids (at least one) were not written by a
// fenced statement: unknown, or owned by another daemon.
func notWritable(ctx context.Context, q querier, ids []string) error {
	rows, err := q.Query(ctx, `SELECT id, owner, lease_until FROM sessions WHERE id = ANY($1)`, ids)
	if err != nil {
		return err
	}
	found := map[string]*LeaseHeldError{}
	for rows.Next() {
		e := &LeaseHeldError{}
		var until int64
		if err := rows.Scan(&e.Session, &e.Owner, &until); err != nil {
			rows.Close()
			return err
		}
		e.Until = fromNanos(until)
		found[e.Session] = e
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if e, ok := found[ids[0]]; ok {
		return e
	}
	return fmt.Errorf("session %q: %w", ids[0], store.ErrNotFound)
}
