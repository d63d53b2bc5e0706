package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/claudectl/claudectl/store"
)

// DB is a [store.Maintainer].
var _ store.Maintainer = (*DB)(nil)

// pruneChunks is how many chunks one transaction of PruneEvents deletes
// (about 64 MiB of events at most): the event writer waits for the write
// connection meanwhile, so a long log is removed in several short steps.
const pruneChunks = 512

// vacuumPages is how many free pages one step of Reclaim gives back (4
// MiB of 4 KiB pages), for the same reason.
const vacuumPages = 1024

// CountSessions implements [store.Maintainer].
func (db *DB) CountSessions(ctx context.Context) (_ map[store.SessionStatus]int64, err error) {
	defer wrap(&err, "sqlite: CountSessions")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	rows, err := db.r.QueryContext(ctx, `SELECT status, COUNT(*) FROM sessions GROUP BY status`)
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

// prunableSQL lists the ended sessions whose last update is before ?1
// that hold events (those up to pruned_seq a pruning cut short included),
// with what they hold; ?2 selects one session ("" for all).
const prunableSQL = `SELECT s.id, s.status, s.updated_at, s.pk, MIN(c.first_seq), MAX(c.last_seq),
	SUM(c.last_seq - c.first_seq + 1), SUM(length(c.events))
	FROM sessions s JOIN event_chunks c ON c.session = s.pk
	WHERE s.status IN ('closed', 'failed') AND s.updated_at < ?1 AND (?2 = '' OR s.id = ?2)
	GROUP BY s.pk ORDER BY s.updated_at, s.id`

type prunable struct {
	store.PrunedSession
	pk int64
}

func scanPrunable(rows *sql.Rows) ([]prunable, error) {
	defer rows.Close()
	var out []prunable
	for rows.Next() {
		var p prunable
		var ended int64
		if err := rows.Scan(&p.ID, &p.Status, &ended, &p.pk, &p.FirstSeq, &p.LastSeq, &p.Events, &p.Bytes); err != nil {
			return nil, err
		}
		p.EndedAt = fromNanos(ended)
		out = append(out, p)
	}
	return out, rows.Err()
}

// PruneEvents implements [store.Maintainer]. Each session is pruned in
// its own transactions: the first records the last seq removed (replays
// then say the events were removed) and removes the first chunks, the
// next ones the rest, pruneChunks at a time, so that the event writer is
// never held long.
func (db *DB) PruneEvents(ctx context.Context, before time.Time, dryRun bool) (_ []store.PrunedSession, err error) {
	defer wrap(&err, "sqlite: PruneEvents")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	rows, err := db.r.QueryContext(ctx, prunableSQL, before.UnixNano(), "")
	if err != nil {
		return nil, err
	}
	list, err := scanPrunable(rows)
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

// pruneSession removes the events of session id if it still ended before
// before, and returns what it removed; false when there was nothing to.
func (db *DB) pruneSession(ctx context.Context, id string, before time.Time) (store.PrunedSession, bool, error) {
	var p prunable
	err := func() error {
		tx, err := db.w.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		// Read again in the transaction: what it removes is what it says.
		rows, err := tx.QueryContext(ctx, prunableSQL, before.UnixNano(), id)
		if err != nil {
			return err
		}
		list, err := scanPrunable(rows)
		if err != nil || len(list) == 0 {
			return err
		}
		p = list[0]
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET pruned_seq = MAX(pruned_seq, ?) WHERE pk = ?`, p.LastSeq, p.pk); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, deleteChunksSQL, p.pk, p.LastSeq, pruneChunks); err != nil {
			return err
		}
		return tx.Commit()
	}()
	if err != nil || p.ID == "" {
		return store.PrunedSession{}, false, err
	}
	for {
		res, err := db.w.ExecContext(ctx, deleteChunksSQL, p.pk, p.LastSeq, pruneChunks)
		if err != nil {
			return p.PrunedSession, true, err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return p.PrunedSession, true, nil
		}
	}
}

const deleteChunksSQL = `DELETE FROM event_chunks WHERE id IN
	(SELECT id FROM event_chunks WHERE session = ?1 AND last_seq <= ?2 LIMIT ?3)`

// auditTables are the audit trail's tables and their time columns:
// the permission decisions and the clients' actions.
var auditTables = [][2]string{{"decisions", "decided_at"}, {"audit", "at"}}

// PruneAudit implements [store.Maintainer], a few thousand entries per
// transaction.
func (db *DB) PruneAudit(ctx context.Context, before time.Time, dryRun bool) (_ int64, err error) {
	defer wrap(&err, "sqlite: PruneAudit")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return 0, err
	}
	var total int64
	for _, t := range auditTables {
		if dryRun {
			var n int64
			if err := db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t[0]+` WHERE `+t[1]+` < ?`, before.UnixNano()).Scan(&n); err != nil {
				return total, err
			}
			total += n
			continue
		}
		for {
			res, err := db.w.ExecContext(ctx, `DELETE FROM `+t[0]+` WHERE id IN
				(SELECT id FROM `+t[0]+` WHERE `+t[1]+` < ? LIMIT 4096)`, before.UnixNano())
			if err != nil {
				return total, err
			}
			n, _ := res.RowsAffected()
			total += n
			if n == 0 {
				break
			}
		}
	}
	return total, nil
}

// Reclaim implements [store.Maintainer]: with incremental vacuum (every
// database this version created), it gives the free pages back vacuumPages
// at a time, each step a short transaction of its own.
func (db *DB) Reclaim(ctx context.Context) (_ store.ReclaimReport, err error) {
	defer wrap(&err, "sqlite: Reclaim")
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return store.ReclaimReport{}, err
	}
	var mode, pageSize, before int64
	if err := db.w.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return store.ReclaimReport{}, err
	}
	if mode != 2 { // INCREMENTAL
		return store.ReclaimReport{Note: "this database was created before claudectl kept SQLite files with incremental vacuum: " +
			"the space removed events held is reused for new ones, but the file does not shrink; " +
			"a backup restored with claudectl restore has it (docs/operations.md)"}, nil
	}
	pages := func() (int64, error) {
		var n int64
		err := db.w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&n)
		return n, err
	}
	if err := db.w.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		return store.ReclaimReport{}, err
	}
	if before, err = pages(); err != nil {
		return store.ReclaimReport{}, err
	}
	for {
		var free int64
		if err := db.w.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
			return store.ReclaimReport{}, err
		}
		if free == 0 {
			break
		}
		if _, err := db.w.ExecContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, vacuumPages)); err != nil {
			return store.ReclaimReport{}, err
		}
		if err := ctx.Err(); err != nil {
			return store.ReclaimReport{}, err
		}
	}
	after, err := pages()
	if err != nil {
		return store.ReclaimReport{}, err
	}
	return store.ReclaimReport{Bytes: (before - after) * pageSize}, nil
}
