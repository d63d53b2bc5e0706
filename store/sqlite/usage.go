package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/claudectl/claudectl/store"
)

// The usage ledger's statements (prepared once by the event writer, with
// the usual turn's end folded into the totals' UPDATE: see ledgerTotalsSQL).
const (
	qUsagePrev = `SELECT cumulative FROM usage WHERE session_id = ? AND process = ?
		ORDER BY turn DESC LIMIT 1`
	qUsageLast   = `SELECT cumulative FROM usage WHERE session_id = ? ORDER BY turn DESC LIMIT 1`
	qUsageInsert = `INSERT INTO usage (session_id, turn, process, event_seq, time, subtype, is_error,
		duration_ms, cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, models, cumulative)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// ledgerTotalsSQL returns the statement that adds a turn to a session's
// totals, numbering it, and applies upd (validated; nil for none) to the
// session in the same UPDATE: a turn's end changes the session's row
// once, not twice (each UPDATE of the row costs ~30 µs of the writer's
// time on this engine). Its arguments are the turn's cost and four token
// counts, the time, upd's values, the session's id. The text depends only
// on which of upd's fields are set.
func ledgerTotalsSQL(rec *store.UsageRecord, upd *store.SessionUpdate, now time.Time, id string) (string, []any) {
	set := []string{"turns = turns + 1", "cost_usd = cost_usd + ?", "input_tokens = input_tokens + ?",
		"output_tokens = output_tokens + ?", "cache_read_tokens = cache_read_tokens + ?",
		"cache_write_tokens = cache_write_tokens + ?", "updated_at = ?"}
	var args []any
	if rec != nil {
		args = []any{rec.CostUSD, rec.InputTokens, rec.OutputTokens, rec.CacheReadTokens, rec.CacheWriteTokens, now.UnixNano()}
	}
	if upd != nil {
		set, args = updateSets(*upd, set, args)
	}
	return `UPDATE sessions SET ` + strings.Join(set, ", ") + ` WHERE id = ?
		RETURNING turns, cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, budget_usd`, append(args, id)
}

// usageStatements are the ledger's statements the event writer prepares:
// the totals alone and with a turn's end to idle (the daemon's).
func usageStatements() []string {
	idle := store.StatusIdle
	return []string{qUsagePrev, qUsageInsert,
		first(ledgerTotalsSQL(nil, nil, time.Time{}, "")),
		first(ledgerTotalsSQL(nil, &store.SessionUpdate{Status: &idle}, time.Time{}, ""))}
}

// addUsage enters in in the ledger in the event writer's transaction (the
// turn's end of every session runs it there), in two statements: the
// session's totals (which number the turn) with upd applied (nil: none),
// and the record. The process's last cumulative counters, which the
// turn's share is computed from, come from the writer's cache (the file
// is read for a process's first turn after the daemon starts). It
// returns the record and what a turn's end reads of the session after it:
// its ID, BudgetUSD and Totals (returning every column made the UPDATE
// the ledger's costliest statement).
//
// The turn's cost and tokens are the difference between in.Result's
// cumulative counters and those of the last result recorded for the same
// session and process generation (see [store.TurnUsage]); the first result
// of a generation counts from zero. Errors: [store.ErrNotFound] for an
// unknown session.
func addUsage(ctx context.Context, tx cachedTx, in store.UsageInput, upd *store.SessionUpdate) (*store.UsageRecord, *store.Session, error) {
	res := in.Result
	rec := &store.UsageRecord{
		SessionID:  in.SessionID,
		Process:    in.Process,
		EventSeq:   in.EventSeq,
		Time:       fromNanos(nanos(in.Time)),
		Subtype:    res.Subtype,
		IsError:    res.IsError,
		DurationMS: res.DurationMS,
	}
	cumulative, err := json.Marshal(res.Cumulative)
	if err != nil {
		return nil, nil, err
	}
	prev, found, err := tx.lastCumulative(ctx, in.SessionID, in.Process)
	if err != nil {
		return nil, nil, err
	}
	if !found && in.Continues != "" {
		base, err := tx.sessionCumulative(ctx, in.Continues)
		if err != nil {
			return nil, nil, err
		}
		if store.Continued(base, res.Cumulative) {
			prev = base
		}
	}
	store.TurnUsage(rec, prev, res)
	models := []byte("{}")
	if len(rec.Models) > 0 {
		if models, err = json.Marshal(rec.Models); err != nil {
			return nil, nil, err
		}
	}
	s := &store.Session{ID: in.SessionID}
	t := &s.Totals
	q, args := ledgerTotalsSQL(rec, upd, time.Now(), in.SessionID)
	err = tx.QueryRow(ctx, q, args...).Scan(&t.Turns, &t.CostUSD, &t.InputTokens, &t.OutputTokens,
		&t.CacheReadTokens, &t.CacheWriteTokens, &s.BudgetUSD)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, store.ErrNotFound
	} else if err != nil {
		return nil, nil, err
	}
	rec.Turn = t.Turns
	_, err = tx.Exec(ctx, qUsageInsert,
		rec.SessionID, rec.Turn, rec.Process, rec.EventSeq, rec.Time.UnixNano(), rec.Subtype, rec.IsError,
		rec.DurationMS, rec.CostUSD, rec.InputTokens, rec.OutputTokens, rec.CacheReadTokens, rec.CacheWriteTokens,
		string(models), string(cumulative))
	if err != nil {
		return nil, nil, err
	}
	tx.noteCumulative(in.SessionID, in.Process, res.Cumulative)
	return rec, s, nil
}

// Usage returns the ledger of session id, oldest turn first. An unknown
// session has an empty ledger.
func (db *DB) Usage(ctx context.Context, id string) (_ []*store.UsageRecord, err error) {
	defer wrap(&err, "sqlite: Usage %q", id)
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	rows, err := db.r.QueryContext(ctx, `SELECT turn, process, event_seq, time, subtype, is_error, duration_ms,
		cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, models
		FROM usage WHERE session_id = ? ORDER BY turn`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []*store.UsageRecord
	for rows.Next() {
		r := &store.UsageRecord{SessionID: id}
		var t int64
		var models string
		if err := rows.Scan(&r.Turn, &r.Process, &r.EventSeq, &t, &r.Subtype, &r.IsError, &r.DurationMS,
			&r.CostUSD, &r.InputTokens, &r.OutputTokens, &r.CacheReadTokens, &r.CacheWriteTokens, &models); err != nil {
			return nil, err
		}
		r.Time = fromNanos(t)
		if models != "{}" {
			if err := json.Unmarshal([]byte(models), &r.Models); err != nil {
				return nil, fmt.Errorf("turn %d: models: %w", r.Turn, err)
			}
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}

// UsageSince returns the ledger entries of every session made at or after
// since, oldest first, at most limit (0: no limit).
func (db *DB) UsageSince(ctx context.Context, since time.Time, limit int) (_ []*store.UsageRecord, err error) {
	defer wrap(&err, "sqlite: UsageSince")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := db.r.QueryContext(ctx, `SELECT session_id, turn, process, event_seq, time, subtype, is_error, duration_ms,
		cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, models
		FROM usage WHERE time >= ? ORDER BY time, session_id, turn LIMIT ?`, since.UnixNano(), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []*store.UsageRecord
	for rows.Next() {
		r := &store.UsageRecord{}
		var t int64
		var models string
		if err := rows.Scan(&r.SessionID, &r.Turn, &r.Process, &r.EventSeq, &t, &r.Subtype, &r.IsError, &r.DurationMS,
			&r.CostUSD, &r.InputTokens, &r.OutputTokens, &r.CacheReadTokens, &r.CacheWriteTokens, &models); err != nil {
			return nil, err
		}
		r.Time = fromNanos(t)
		if models != "{}" {
			if err := json.Unmarshal([]byte(models), &r.Models); err != nil {
				return nil, fmt.Errorf("session %s turn %d: models: %w", r.SessionID, r.Turn, err)
			}
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}
