package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/claudectl/claudectl/store"
)

// commandPoll is how often a daemon looks for commands, and a sender for
// a result, without a notification (one can be missed).
const commandPoll = time.Second

// SendCommand stores c for the daemon it names (or any daemon) and wakes
// it; it sets c.ID, c.Sender (this DB's owner) and c.CreatedAt.
func (db *DB) SendCommand(ctx context.Context, c *store.Command) (err error) {
	defer wrap(&err, "postgres: SendCommand %s", c.Kind)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	payload := string(c.Payload)
	if payload == "" {
		payload = "{}"
	}
	for _, f := range []struct{ name, v string }{{"owner", c.Owner}, {"session", c.Session}, {"kind", c.Kind}, {"payload", payload}} {
		if err := text(f.name, f.v); err != nil {
			return err
		}
	}
	if c.Kind == "" || !json.Valid([]byte(payload)) {
		return fmt.Errorf("%w: a command needs a kind and a JSON payload", store.ErrInvalid)
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	now := time.Now().UnixNano()
	if err := tx.QueryRow(ctx, `INSERT INTO commands (owner, session, kind, payload, sender, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, c.Owner, c.Session, c.Kind, payload, db.owner, now).Scan(&c.ID); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, commandsChannel, c.Owner); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	c.Sender, c.CreatedAt = db.owner, fromNanos(now)
	return nil
}

// WaitCommand waits until command id has its result, and returns it.
func (db *DB) WaitCommand(ctx context.Context, id int64) (json.RawMessage, error) {
	done, stop := db.watch(doneChannel + "\x00" + strconv.FormatInt(id, 10))
	defer stop()
	t := time.NewTicker(commandPoll)
	defer t.Stop()
	for {
		if err := db.check(); err != nil {
			return nil, err
		}
		qctx, cancel := db.ctx(ctx)
		var at int64
		var result string
		err := db.pool.QueryRow(qctx, `SELECT done_at, result FROM commands WHERE id = $1`, id).Scan(&at, &result)
		cancel()
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil, fmt.Errorf("postgres: command %d: %w", id, store.ErrNotFound)
		case err != nil && ctx.Err() == nil:
			return nil, fmt.Errorf("postgres: command %d: %w", id, db.health.ReadError(ctx, err))
		case err == nil && at != 0:
			return json.RawMessage(result), nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-done:
		case <-t.C:
		}
	}
}

// OpenCommands returns the unclaimed commands for this DB's daemon or for
// any daemon, oldest first.
func (db *DB) OpenCommands(ctx context.Context) (_ []*store.Command, err error) {
	defer wrap(&err, "postgres: OpenCommands")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT id, owner, session, kind, payload, sender, created_at FROM commands
		WHERE done_at = 0 AND claimed_by = '' AND owner IN ($1, '') ORDER BY id LIMIT 1000`, db.owner)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cs []*store.Command
	for rows.Next() {
		c := &store.Command{}
		var payload string
		var created int64
		if err := rows.Scan(&c.ID, &c.Owner, &c.Session, &c.Kind, &payload, &c.Sender, &created); err != nil {
			return nil, err
		}
		c.Payload, c.CreatedAt = json.RawMessage(payload), fromNanos(created)
		cs = append(cs, c)
	}
	return cs, rows.Err()
}

// WatchCommands returns a channel that receives a value when commands for
// this daemon (or any) may be waiting; it is also woken every second.
func (db *DB) WatchCommands() (<-chan struct{}, func()) {
	mine, stopMine := db.watch(commandsChannel + "\x00" + db.owner)
	out := make(chan struct{}, 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(commandPoll)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-mine:
			case <-t.C:
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, func() {
		stopMine()
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}
}

// ClaimCommand takes command id for this DB's daemon: false when another
// daemon took it first.
func (db *DB) ClaimCommand(ctx context.Context, id int64) (_ bool, err error) {
	defer wrap(&err, "postgres: ClaimCommand %d", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return false, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tag, err := db.pool.Exec(ctx, `UPDATE commands SET claimed_by = $2 WHERE id = $1 AND claimed_by = '' AND done_at = 0`, id, db.owner)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// FinishCommand stores the result of a command this daemon claimed and
// wakes its sender.
func (db *DB) FinishCommand(ctx context.Context, id int64, result json.RawMessage) (err error) {
	defer wrap(&err, "postgres: FinishCommand %d", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return err
	}
	if err := text("result", string(result)); err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	tag, err := tx.Exec(ctx, `UPDATE commands SET done_at = $2, result = $3 WHERE id = $1 AND claimed_by = $4 AND done_at = 0`,
		id, time.Now().UnixNano(), string(result), db.owner)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: command %d is not claimed by this daemon", store.ErrNotFound, id)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, doneChannel, strconv.FormatInt(id, 10)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// WithdrawCommand ends command id unclaimed, so that no daemon carries it
// out; false when a daemon claimed it first.
func (db *DB) WithdrawCommand(ctx context.Context, id int64) (_ bool, err error) {
	defer wrap(&err, "postgres: WithdrawCommand %d", id)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return false, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tag, err := db.pool.Exec(ctx, `UPDATE commands SET done_at = $2, result = '{"error":"withdrawn"}'
		WHERE id = $1 AND claimed_by = '' AND done_at = 0`, id, time.Now().UnixNano())
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}
