package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/claudectl/claudectl/store"
)

// DB is a [store.Maintainer].
var _ store.Maintainer = (*DB)(nil)

// pruneChunks is how many chunks one statement of PruneEvents deletes:
// batched deletes keep each transaction (and the WAL it writes, and the
// locks it holds) short whatever a session's log holds.
const pruneChunks = 512

// CountSessions implements [store.Maintainer]: every session of the
// store, whichever daemon runs it.
func (db *DB) CountSessions(ctx context.Context) (_ map[store.SessionStatus]int64, err error) {
	defer wrap(&err, "postgres: CountSessions")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT status, COUNT(*) FROM sessions GROUP BY status`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[store.SessionStatus]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[store.SessionStatus(st)] = n
	}
	return out, rows.Err()
}

// prunableSQL lists the ended sessions whose last update is before $1
// that hold events (those up to pruned_seq a pruning cut short included),
// with what they hold; $2 selects one session ("" for all).
const prunableSQL = `SELECT s.id, s.status, s.updated_at, s.pk, MIN(c.first_seq), MAX(c.last_seq),
	SUM(c.last_seq - c.first_seq + 1)::bigint, SUM(octet_length(c.events))::bigint
	FROM sessions s JOIN event_chunks c ON c.session = s.pk
	WHERE s.status IN ('closed', 'failed') AND s.updated_at < $1 AND ($2 = '' OR s.id = $2)
	GROUP BY s.pk ORDER BY s.updated_at, s.id`

type prunable struct {
	store.PrunedSession
	pk int64
}

func scanPrunable(rows pgx.Rows) ([]prunable, error) {
	defer rows.Close()
	var out []prunable
	for rows.Next() {
		var p prunable
		var ended int64
		var status string
		if err := rows.Scan(&p.ID, &status, &ended, &p.pk, &p.FirstSeq, &p.LastSeq, &p.Events, &p.Bytes); err != nil {
			return nil, err
		}
		p.Status = store.SessionStatus(status)
		p.EndedAt = time.Unix(0, ended).UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}

// PruneEvents implements [store.Maintainer]. Each session is pruned in
// its own transactions: the first locks its row, records the last seq
// removed (replays then say the events were removed) and deletes the
// first chunks; the next ones delete the rest, pruneChunks at a time.
func (db *DB) PruneEvents(ctx context.Context, before time.Time, dryRun bool) (_ []store.PrunedSession, err error) {
	defer wrap(&err, "postgres: PruneEvents")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	list, err := func() ([]prunable, error) {
		ctx, cancel := db.ctx(ctx)
		defer cancel()
		rows, err := db.pool.Query(ctx, prunableSQL, before.UnixNano(), "")
		if err != nil {
			return nil, err
		}
		return scanPrunable(rows)
	}()
	if err != nil {
		return nil, err
	}
	out := make([]store.PrunedSession, 0, len(list))
	for _, p := range list {
		if dryRun {
			out = append(out, p.PrunedSession)
			continue
		}
		done, ok, err := db.pruneSession(ctx, p.ID, before)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, done)
		}
	}
	return out, nil
}

const deleteChunksSQL = `DELETE FROM event_chunks WHERE session = $1 AND last_seq IN
	(SELECT last_seq FROM event_chunks WHERE session = $1 AND last_seq <= $2 ORDER BY last_seq LIMIT $3)`

func (db *DB) pruneSession(ctx context.Context, id string, before time.Time) (store.PrunedSession, bool, error) {
	var p prunable
	err := func() error {
		ctx, cancel := db.ctx(ctx)
		defer cancel()
		tx, err := db.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		// Lock the row, then read again: what it removes is what it says.
		var pk int64
		err = tx.QueryRow(ctx, `SELECT pk FROM sessions WHERE id = $1 AND status IN ('closed', 'failed') AND updated_at < $2
			FOR UPDATE`, id, before.UnixNano()).Scan(&pk)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, prunableSQL, before.UnixNano(), id)
		if err != nil {
			return err
		}
		list, err := scanPrunable(rows)
		if err != nil || len(list) == 0 {
			return err
		}
		p = list[0]
		if _, err := tx.Exec(ctx, `UPDATE sessions SET pruned_seq = GREATEST(pruned_seq, $1) WHERE pk = $2`, p.LastSeq, p.pk); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, deleteChunksSQL, p.pk, p.LastSeq, pruneChunks); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}()
	if err != nil || p.ID == "" {
		return store.PrunedSession{}, false, err
	}
	for {
		n, err := db.execCount(ctx, deleteChunksSQL, p.pk, p.LastSeq, pruneChunks)
		if err != nil {
			return p.PrunedSession, true, err
		}
		if n == 0 {
			return p.PrunedSession, true, nil
		}
	}
}

// execCount runs q and returns the rows it affected.
func (db *DB) execCount(ctx context.Context, q string, args ...any) (int64, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tag, err := db.pool.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

// auditTables are the audit trail's tables and their time columns:
// the permission decisions and the clients' actions.
var auditTables = [][2]string{{"decisions", "decided_at"}, {"audit", "at"}}

// PruneAudit implements [store.Maintainer], a few thousand entries per
// statement.
func (db *DB) PruneAudit(ctx context.Context, before time.Time, dryRun bool) (_ int64, err error) {
	defer wrap(&err, "postgres: PruneAudit")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return 0, err
	}
	var total int64
	for _, t := range auditTables {
		if dryRun {
			var n int64
			err := func() error {
				ctx, cancel := db.ctx(ctx)
				defer cancel()
				return db.pool.QueryRow(ctx, `SELECT COUNT(*) FROM `+t[0]+` WHERE `+t[1]+` < $1`, before.UnixNano()).Scan(&n)
			}()
			if err != nil {
				return total, err
			}
			total += n
			continue
		}
		for {
			n, err := db.execCount(ctx, `DELETE FROM `+t[0]+` WHERE id IN
				(SELECT id FROM `+t[0]+` WHERE `+t[1]+` < $1 LIMIT 4096)`, before.UnixNano())
			if err != nil {
				return total, err
			}
			total += n
			if n == 0 {
				break
			}
		}
	}
	return total, nil
}

// Reclaim implements [store.Maintainer]: PostgreSQL's autovacuum makes
// the space of deleted rows reusable on its own, and only VACUUM FULL,
// which locks the tables, would give it back to the system.
func (db *DB) Reclaim(ctx context.Context) (store.ReclaimReport, error) {
	if err := db.check(); err != nil {
		return store.ReclaimReport{}, err
	}
	return store.ReclaimReport{}, nil
}
