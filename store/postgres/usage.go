package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/claudectl/claudectl/store"
)

// addUsage enters in in the ledger within a transaction (the turn's share
// computed as [store.TurnUsage] says). The session's row is locked first,
// so two results of one session are entered one after the other. Errors:
// [store.ErrNotFound] for an unknown session.
func addUsage(ctx context.Context, tx pgx.Tx, in store.UsageInput) (*store.UsageRecord, *store.Session, error) {
	res := in.Result
	rec := &store.UsageRecord{
		SessionID:  in.SessionID,
		Process:    in.Process,
		EventSeq:   in.EventSeq,
		Time:       fromNanos(nanos(in.Time)),
		Subtype:    cleanText(res.Subtype),
		IsError:    res.IsError,
		DurationMS: res.DurationMS,
	}
	cumulative, err := json.Marshal(res.Cumulative)
	if err != nil {
		return nil, nil, err
	}
	var turns int64
	err = tx.QueryRow(ctx, `SELECT turns FROM sessions WHERE id = $1 FOR UPDATE`, in.SessionID).Scan(&turns)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, store.ErrNotFound
	} else if err != nil {
		return nil, nil, err
	}
	prev, found, err := readCumulative(ctx, tx, `SELECT cumulative FROM usage WHERE session_id = $1 AND process = $2
		ORDER BY turn DESC LIMIT 1`, in.SessionID, in.Process)
	if err != nil {
		return nil, nil, err
	}
	if !found && in.Continues != "" {
		base, _, err := readCumulative(ctx, tx, `SELECT cumulative FROM usage WHERE session_id = $1
			ORDER BY turn DESC LIMIT 1`, in.Continues)
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
	rec.Turn = turns + 1
	_, err = tx.Exec(ctx, `INSERT INTO usage (session_id, turn, process, event_seq, time, subtype, is_error,
		duration_ms, cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, models, cumulative)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
		rec.SessionID, rec.Turn, rec.Process, rec.EventSeq, rec.Time.UnixNano(), rec.Subtype, rec.IsError,
		rec.DurationMS, rec.CostUSD, rec.InputTokens, rec.OutputTokens, rec.CacheReadTokens, rec.CacheWriteTokens,
		cleanText(string(models)), cleanText(string(cumulative)))
	if err != nil {
		return nil, nil, err
	}
	s, err := scanSession(tx.QueryRow(ctx, `UPDATE sessions SET turns = turns + 1, cost_usd = cost_usd + $1,
		input_tokens = input_tokens + $2, output_tokens = output_tokens + $3, cache_read_tokens = cache_read_tokens + $4,
		cache_write_tokens = cache_write_tokens + $5, updated_at = $6 WHERE id = $7 RETURNING `+sessionColumns,
		rec.CostUSD, rec.InputTokens, rec.OutputTokens, rec.CacheReadTokens, rec.CacheWriteTokens,
		time.Now().UnixNano(), in.SessionID))
	if err != nil {
		return nil, nil, err
	}
	return rec, s, nil
}

// Usage returns the ledger of session id, oldest turn first. An unknown
// session has an empty ledger.
func (db *DB) Usage(ctx context.Context, id string) (_ []*store.UsageRecord, err error) {
	defer wrap(&err, "postgres: Usage %q", id)
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	if text("id", id) != nil {
		return nil, nil
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT turn, process, event_seq, time, subtype, is_error, duration_ms,
		cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, models
		FROM usage WHERE session_id = $1 ORDER BY turn`, id)
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
		if err := decodeModels(models, r); err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}

// decodeModels sets r.Models from the models column.
func decodeModels(models string, r *store.UsageRecord) error {
	if models != "{}" {
		if err := json.Unmarshal([]byte(models), &r.Models); err != nil {
			return fmt.Errorf("session %s turn %d: models: %w", r.SessionID, r.Turn, err)
		}
	}
	return nil
}

// readCumulative reads the cumulative counters q selects; found is false
// when it selects no row (a process's first turn). Unreadable counters
// (not written by this store) count as zero rather than fail the
// transaction they share.
func readCumulative(ctx context.Context, tx pgx.Tx, q string, args ...any) (_ store.Cumulative, found bool, _ error) {
	var prev store.Cumulative
	var prevJSON string
	err := tx.QueryRow(ctx, q, args...).Scan(&prevJSON)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return prev, false, nil
	case err != nil:
		return prev, false, err
	}
	if json.Unmarshal([]byte(prevJSON), &prev) != nil {
		prev = store.Cumulative{}
	}
	return prev, true, nil
}
