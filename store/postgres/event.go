package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/internal/chunk"
	"github.com/claudectl/claudectl/store/internal/groupcommit"
)

// Append stores ev at the end of its session's log and returns its seq
// (also set in ev.Seq) once its transaction has committed: a seq is
// returned if and only if the event is stored. The contract is the SQLite
// store's (see [store.Store]): ev.Time defaults to now, a line over the
// payload limit is stored truncated, ctx withdraws the event only while
// it is still queued. Errors: [store.ErrNotFound], [store.ErrInvalid],
// [store.ErrClosed], [store.ErrWriteFailed].
func (db *DB) Append(ctx context.Context, ev *store.Event) (int64, error) {
	if err := db.AppendBatch(ctx, ev); err != nil {
		return 0, err
	}
	return ev.Seq, nil
}

// AppendBatch stores evs in order, all or none, in one transaction, with
// Append's contract for each. A failure of this call's events fails it
// alone, not the other calls committed with it.
func (db *DB) AppendBatch(ctx context.Context, evs ...*store.Event) error {
	if len(evs) == 0 {
		return nil
	}
	if err := db.prepareAll(evs); err != nil {
		return err
	}
	if err := db.app.submit(ctx, &request{evs: evs}); err != nil {
		if errors.Is(err, store.ErrClosed) || errors.Is(err, ctx.Err()) {
			return fmt.Errorf("postgres: append: %w", err)
		}
		return err
	}
	return nil
}

// AppendAsync queues evs like AppendBatch and returns; done is called
// exactly once, on the writer goroutine, in queueing order, with nil once
// they are committed (each with its Seq) or the error. done must not block
// or append. ctx covers the queueing only.
func (db *DB) AppendAsync(ctx context.Context, done func(error), evs ...*store.Event) error {
	if err := db.prepareAll(evs); err != nil {
		return err
	}
	if err := db.app.enqueue(ctx, &request{evs: evs, Base: groupcommit.Base{Notify: done}}); err != nil {
		return fmt.Errorf("postgres: append: %w", err)
	}
	return nil
}

// AppendUpdateAsync is AppendAsync for one event that also applies upd to
// its session in the same transaction.
func (db *DB) AppendUpdateAsync(ctx context.Context, done func(error), ev *store.Event, upd store.SessionUpdate) error {
	if err := validUpdate(upd); err != nil {
		return fmt.Errorf("postgres: append: %w", err)
	}
	if err := db.prepareAll([]*store.Event{ev}); err != nil {
		return err
	}
	r := &request{evs: []*store.Event{ev}, Base: groupcommit.Base{Notify: done},
		then: func(ctx context.Context, tx pgx.Tx, _ int64) ([]*store.Event, error) {
			return nil, applyUpdate(ctx, tx, ev.SessionID, upd, ev.Time)
		}}
	if err := db.app.enqueue(ctx, r); err != nil {
		return fmt.Errorf("postgres: append: %w", err)
	}
	return nil
}

// applyUpdate applies upd, made at t, to session id within a transaction.
func applyUpdate(ctx context.Context, tx pgx.Tx, id string, upd store.SessionUpdate, t time.Time) error {
	q, args := updateSQL(upd, t, id)
	tag, err := tx.Exec(ctx, q, args...)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	return err
}

// AppendResultAsync is AppendAsync for a result line that also enters it
// in the usage ledger (addUsage) and stores what follow says after it
// (see [store.ResultFollow]; nil for nothing), in the same transaction:
// follow's events, then follow.Update in a statement of its own. done
// gets the ledger record and the session after the turn (before
// follow.Update), or the error.
func (db *DB) AppendResultAsync(ctx context.Context, done func(*store.UsageRecord, *store.Session, error), ev *store.Event, in store.UsageInput, follow *store.ResultFollow) error {
	if follow != nil && follow.Update != nil {
		if err := validUpdate(*follow.Update); err != nil {
			return fmt.Errorf("postgres: append: %w", err)
		}
	}
	if err := db.prepareAll([]*store.Event{ev}); err != nil {
		return err
	}
	var (
		rec *store.UsageRecord
		s   *store.Session
	)
	r := &request{evs: []*store.Event{ev}, follows: follow != nil && follow.Events != nil,
		then: func(ctx context.Context, tx pgx.Tx, seq int64) (_ []*store.Event, err error) {
			in.EventSeq = seq
			if rec, s, err = addUsage(ctx, tx, in); err != nil || follow == nil {
				return nil, err
			}
			more, err := follow.Make(ev, rec, s, db.prepare)
			if err == nil && follow.Update != nil {
				err = applyUpdate(ctx, tx, ev.SessionID, *follow.Update, time.Now())
			}
			return more, err
		}}
	r.Notify = func(err error) {
		if err != nil {
			rec, s = nil, nil
		}
		done(rec, s, err)
	}
	if err := db.app.enqueue(ctx, r); err != nil {
		return fmt.Errorf("postgres: append: %w", err)
	}
	return nil
}

func (db *DB) prepareAll(evs []*store.Event) error {
	if err := db.check(); err != nil {
		return fmt.Errorf("postgres: append: %w", err)
	}
	now := time.Now()
	for _, ev := range evs {
		if err := db.prepare(ev, now); err != nil {
			return err
		}
	}
	return nil
}

// prepare validates ev and applies the defaults and the payload limit on
// the caller's goroutine.
func (db *DB) prepare(ev *store.Event, now time.Time) error {
	if err := store.PrepareEvent(ev, now, db.maxPayload); err != nil {
		return fmt.Errorf("postgres: append: %w", err)
	}
	if text("session id", ev.SessionID) != nil {
		return fmt.Errorf("postgres: append: session %q: %w", ev.SessionID, store.ErrNotFound)
	}
	return nil
}

// Replay paging: a page is read whole and its rows closed before any event
// is yielded, so a slow consumer never holds a connection.
// A page is also what a consumer that stops reading holds beside the event
// it is given (a subscriber whose client stalled, until the API ends its
// stream): about 256 KiB, or one event larger than that alone; with 4 MiB
// pages, 200 stalled subscribers of a session of 2 MB messages held 12 MB
// each.
const (
	pageEvents = 512
	pageBytes  = 256 << 10
)

// Events returns the events of session id after seq after, in order,
// ending with the last event stored when it was called. The replay is
// gap-free or fails up front with [store.ErrUnavailable]; an unknown
// session yields [store.ErrNotFound]. See the SQLite store's Events for
// the whole contract.
func (db *DB) Events(ctx context.Context, id string, after int64) iter.Seq2[store.Event, error] {
	return func(yield func(store.Event, error) bool) {
		fail := func(err error) {
			yield(store.Event{}, fmt.Errorf("postgres: events of %q: %w", id, db.health.ReadError(ctx, err)))
		}
		if err := db.check(); err != nil {
			fail(err)
			return
		}
		if text("id", id) != nil {
			fail(store.ErrNotFound)
			return
		}
		// One round trip for the session, its last seq and the first page:
		// a follower reads a session's new events at every wake-up.
		// Small to start with: a client catching up reads a few; a
		// replay grows it to pageEvents.
		page := make([]store.Event, 0, 16)
		pk, last, pruned, page, err := db.firstPage(ctx, id, after, page)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			fail(store.ErrNotFound)
			return
		case err != nil:
			fail(err)
			return
		case after < 0 || after > last:
			fail(fmt.Errorf("%w: after seq %d, the log ends at %d", store.ErrUnavailable, after, last))
			return
		case after < pruned:
			fail(&store.PrunedError{After: after, Through: pruned})
			return
		case after < last && (len(page) == 0 || page[0].Seq > after+1):
			at := last + 1
			if len(page) > 0 {
				at = page[0].Seq
			}
			fail(fmt.Errorf("%w: the log resumes at %d, not %d", store.ErrUnavailable, at, after+1))
			return
		}
		next := after + 1
		for next <= last {
			if next > after+1 {
				page, err = db.eventPage(ctx, id, pk, next, last, page[:0])
				if err != nil {
					fail(err)
					return
				}
			}
			if len(page) == 0 {
				fail(fmt.Errorf("%w: event %d is missing", store.ErrUnavailable, next))
				return
			}
			for _, ev := range page {
				if ev.Seq != next {
					fail(fmt.Errorf("%w: event %d is missing", store.ErrUnavailable, next))
					return
				}
				next++
				if !yield(ev, nil) {
					return
				}
			}
		}
	}
}

// firstPage reads session id's pk, last seq and pruned seq and, in the same query, the
// first page of its events after seq after. pgx.ErrNoRows: no session.
func (db *DB) firstPage(ctx context.Context, id string, after int64, page []store.Event) (pk, last, pruned int64, _ []store.Event, _ error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT s.pk, s.last_seq, s.pruned_seq, c.first_seq, c.events
		FROM sessions s LEFT JOIN LATERAL (
			SELECT first_seq, events FROM event_chunks WHERE session = s.pk AND last_seq > $2 AND first_seq <= s.last_seq
			ORDER BY last_seq LIMIT $3) c ON true
		WHERE s.id = $1`, id, after, pageEvents)
	if err != nil {
		return 0, 0, 0, page, err
	}
	defer rows.Close()
	found := false
	page, err = decodeRows(rows, id, after+1, func(first **int64, data *[]byte) []any {
		found = true
		return []any{&pk, &last, &pruned, first, data}
	}, page)
	if err != nil {
		return 0, 0, 0, page, err
	}
	if !found {
		return 0, 0, 0, page, pgx.ErrNoRows
	}
	// Events past last (committed after the session row was read) are
	// left for the next replay.
	for len(page) > 0 && page[len(page)-1].Seq > last {
		page = page[:len(page)-1]
	}
	return pk, last, pruned, page, nil
}

// decodeRows decodes the chunks of rows (each scanned into the targets
// dest returns, a NULL chunk skipped) into page, from seq from on, up to
// pageEvents events or about pageBytes of payload.
func decodeRows(rows pgx.Rows, id string, from int64, dest func(first **int64, data *[]byte) []any, page []store.Event) ([]store.Event, error) {
	size := 0
	full := func() bool { return len(page) >= pageEvents || size >= pageBytes }
	for !full() && rows.Next() {
		var first *int64
		var data []byte
		if err := rows.Scan(dest(&first, &data)...); err != nil {
			return page, err
		}
		if first == nil {
			continue
		}
		err := chunk.Decode(id, *first, data, from, func(ev store.Event) bool {
			page = append(page, ev)
			size += len(ev.Raw)
			return !full()
		})
		if err != nil {
			return page, err
		}
	}
	return page, rows.Err()
}

// eventPage appends to page the events of pk from seq from to seq to, up
// to pageEvents of them or about pageBytes of payload.
func (db *DB) eventPage(ctx context.Context, id string, pk, from, to int64, page []store.Event) ([]store.Event, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT first_seq, events FROM event_chunks
		WHERE session = $1 AND last_seq >= $2 AND first_seq <= $3 ORDER BY last_seq LIMIT $4`, pk, from, to, pageEvents)
	if err != nil {
		return page, err
	}
	defer rows.Close()
	page, err = decodeRows(rows, id, from, func(first **int64, data *[]byte) []any { return []any{first, data} }, page)
	for len(page) > 0 && page[len(page)-1].Seq > to {
		page = page[:len(page)-1]
	}
	return page, err
}

// EventsAfter returns, for each session of after, its events after the seq
// given, in order, with one query: up to about limit events in all (a
// session's may be cut short at a chunk's end; ask again from its last).
// Unknown sessions are left out.
func (db *DB) EventsAfter(ctx context.Context, after map[string]int64, limit int) (_ map[string][]store.Event, err error) {
	defer wrap(&err, "postgres: EventsAfter")
	defer db.health.TrackRead(ctx, &err)
	if err := db.check(); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(after))
	afters := make([]int64, 0, len(after))
	for id, a := range after {
		if text("id", id) == nil {
			ids, afters = append(ids, id), append(afters, a)
		}
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT s.id, c.first_seq, c.events
		FROM unnest($1::text[], $2::bigint[]) AS v(id, after)
		JOIN sessions s ON s.id = v.id
		JOIN event_chunks c ON c.session = s.pk AND c.last_seq > v.after AND c.first_seq <= s.last_seq
		ORDER BY s.id, c.last_seq LIMIT $3`, ids, afters, max(1, limit/8))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]store.Event{}
	n := 0
	for rows.Next() && n < limit {
		var id string
		var first int64
		var data []byte
		if err := rows.Scan(&id, &first, &data); err != nil {
			return nil, err
		}
		from := after[id] + 1
		if evs := out[id]; len(evs) > 0 {
			from = evs[len(evs)-1].Seq + 1
		}
		err := chunk.Decode(id, first, data, from, func(ev store.Event) bool {
			out[id] = append(out[id], ev)
			n++
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}
