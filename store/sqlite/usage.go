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

// AddUsage enters the result line in.Result in the usage ledger as the
// session's next turn and adds it to the session's totals, in one
// transaction. It returns the record and the session as it is after the
// turn; Session.BudgetExceeded tells whether the budget is now spent.
//
// The turn's cost and tokens are the difference between in.Result's
// cumulative counters and those of the last result recorded for the same
// session and process generation (see [store.TurnUsage]); the first result
// of a generation counts from zero. Errors: [store.ErrNotFound] for an
// unknown session, [store.ErrInvalid] for a nil Result.
func (db *DB) AddUsage(ctx context.Context, in store.UsageInput) (_ *store.UsageRecord, _ *store.Session, err error) {
	defer wrap(&err, "sqlite: AddUsage %q", in.SessionID)
	defer db.health.Track(ctx, &err)
	if err := db.check(); err != nil {
		return nil, nil, err
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	rec, _, err := addUsage(ctx, tx, in)
	if err != nil {
		return nil, nil, err
	}
	s, err := scanSession(tx.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, in.SessionID))
	if err != nil {
		return nil, nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, err
	}
	return rec, s, nil
}

// The usage ledger's statements (prepared once by the event writer).
const (
	qUsagePrev = `SELECT cumulative FROM usage WHERE session_id = ? AND process = ?
		ORDER BY turn DESC LIMIT 1`
	qUsageTotals = `UPDATE sessions SET turns = turns + 1, cost_usd = cost_usd + ?,
		input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, cache_read_tokens = cache_read_tokens + ?,
		cache_write_tokens = cache_write_tokens + ?, updated_at = ? WHERE id = ?
		RETURNING turns, cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, budget_usd`
	qUsageInsert = `INSERT INTO usage (session_id, turn, process, event_seq, time, subtype, is_error,
		duration_ms, cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, models, cumulative)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

var usageStatements = []string{qUsagePrev, qUsageTotals, qUsageInsert}

// addUsage enters in in the ledger within a transaction, in three
// statements (the turn's end of every session runs them in the event
// writer): the process's last cumulative counters, the session's totals
// (which number the turn), the record. It returns the record and what a
// turn's end reads of the session after it: its ID, BudgetUSD and Totals
// (returning every column made the UPDATE the ledger's costliest
// statement).
func addUsage(ctx context.Context, tx dbtx, in store.UsageInput) (*store.UsageRecord, *store.Session, error) {
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
	var prev store.Cumulative
	var prevJSON string
	err = tx.QueryRowContext(ctx, qUsagePrev, in.SessionID, in.Process).Scan(&prevJSON)
	switch {
	case errors.Is(err, sql.ErrNoRows): // the process's first turn (or no such session: below)
	case err != nil:
		return nil, nil, err
	default:
		if json.Unmarshal([]byte(prevJSON), &prev) != nil {
			// Unreadable (not written by this store): count the turn from
			// zero rather than fail the transaction it shares.
			prev = store.Cumulative{}
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
	err = tx.QueryRowContext(ctx, qUsageTotals,
		rec.CostUSD, rec.InputTokens, rec.OutputTokens, rec.CacheReadTokens, rec.CacheWriteTokens,
		time.Now().UnixNano(), in.SessionID).Scan(&t.Turns, &t.CostUSD, &t.InputTokens, &t.OutputTokens,
		&t.CacheReadTokens, &t.CacheWriteTokens, &s.BudgetUSD)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, store.ErrNotFound
	} else if err != nil {
		return nil, nil, err
	}
	rec.Turn = t.Turns
	_, err = tx.ExecContext(ctx, qUsageInsert,
		rec.SessionID, rec.Turn, rec.Process, rec.EventSeq, rec.Time.UnixNano(), rec.Subtype, rec.IsError,
		rec.DurationMS, rec.CostUSD, rec.InputTokens, rec.OutputTokens, rec.CacheReadTokens, rec.CacheWriteTokens,
		string(models), string(cumulative))
	if err != nil {
		return nil, nil, err
	}
	return rec, s, nil
}

// Usage returns the ledger of session id, oldest turn first. An unknown
// session has an empty ledger.
func (db *DB) Usage(ctx context.Context, id string) (_ []*store.UsageRecord, err error) {
	defer wrap(&err, "sqlite: Usage %q", id)
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
