package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/internal/groupcommit"
)

// Append stores ev at the end of its session's log and returns its
// sequence number, which it also sets in ev.Seq. It returns once the
// transaction holding ev has committed: a seq is returned if and only if
// the event is stored, and the daemon may fan the event out from then on.
//
// Append fills in ev.Time when zero, and replaces ev.Raw by its truncated
// form (keeping ev.OriginalSize) when it is over the payload limit; the
// caller must not change ev.Raw until Append returns.
//
// If ctx ends while the event is still queued, it is withdrawn and ctx's
// error returned; once the writer has taken it, Append waits for its
// transaction to end (one commit). Errors: [store.ErrNotFound] for an
// unknown session, [store.ErrInvalid] for a missing type or bad direction,
// [store.ErrClosed] after Close, [store.ErrWriteFailed] when the disk or
// the file refuses the write (see [DB.WriteHealth]). Safe for concurrent use; concurrent
// Appends to one session are numbered in the order they were queued.
func (db *DB) Append(ctx context.Context, ev *store.Event) (int64, error) {
	if err := db.AppendBatch(ctx, ev); err != nil {
		return 0, err
	}
	return ev.Seq, nil
}

// AppendBatch stores evs in one go, in order, with Append's contract for
// each: they are committed in the same transaction, all or none, and each
// gets its Seq. The events may belong to different sessions; if one names an
// unknown session, none is stored. A failure of this call's events fails it
// alone, not the other calls committed in the same transaction. Appending a session's events in batches
// is how a reader that has several lines at hand keeps up with a fast CLI.
func (db *DB) AppendBatch(ctx context.Context, evs ...*store.Event) error {
	if len(evs) == 0 {
		return nil
	}
	if err := db.prepareAll(evs); err != nil {
		return err
	}
	if err := db.app.submit(ctx, &appendRequest{evs: evs}); err != nil {
		if errors.Is(err, store.ErrClosed) || errors.Is(err, ctx.Err()) {
			return fmt.Errorf("sqlite: append: %w", err)
		}
		return err
	}
	return nil
}

// AppendAsync queues evs like AppendBatch but returns as soon as they are
// queued; done is called later with the outcome: nil once they are
// committed (each with its Seq set), or the error. It lets a session's
// reader keep reading while earlier lines commit, which is what a fast CLI
// needs: the writer then commits many events of each session at once.
//
// done is called exactly once if AppendAsync returns nil, on the writer
// goroutine, one call at a time, in the order the calls were queued (so a
// session's come in seq order). It must not block and must not append to
// this DB: the writer waits for it. A non-blocking fan-out to subscribers
// is the intended use. ctx covers the queueing only:
// when the writer is behind and the queue is full, AppendAsync waits, and
// fails with ctx's error (not calling done) if ctx ends first. The caller
// must not touch evs until done is called.
func (db *DB) AppendAsync(ctx context.Context, done func(error), evs ...*store.Event) error {
	if err := db.prepareAll(evs); err != nil {
		return err
	}
	if err := db.app.enqueue(ctx, &appendRequest{evs: evs, Base: groupcommit.Base{Notify: done}}); err != nil {
		return fmt.Errorf("sqlite: append: %w", err)
	}
	return nil
}

// AppendUpdateAsync is AppendAsync for one event that also applies upd to
// the event's session in the same transaction: a status change (or the
// CLI's session id, or an error) then shares a group commit with every
// other append rather than taking a transaction of its own. Errors as
// AppendAsync's and UpdateSession's.
func (db *DB) AppendUpdateAsync(ctx context.Context, done func(error), ev *store.Event, upd store.SessionUpdate) error {
	if err := store.ValidateUpdate(upd); err != nil {
		return fmt.Errorf("sqlite: append: %w", err)
	}
	if err := db.prepareAll([]*store.Event{ev}); err != nil {
		return err
	}
	r := &appendRequest{evs: []*store.Event{ev}, Base: groupcommit.Base{Notify: done},
		then: func(ctx context.Context, tx cachedTx, _ int64) ([]*store.Event, error) {
			return nil, applyUpdate(ctx, tx, ev.SessionID, upd, ev.Time)
		}}
	if err := db.app.enqueue(ctx, r); err != nil {
		return fmt.Errorf("sqlite: append: %w", err)
	}
	return nil
}

// applyUpdate applies upd, made at t, to session id within a transaction.
func applyUpdate(ctx context.Context, tx cachedTx, id string, upd store.SessionUpdate, t time.Time) error {
	q, args := updateSQL(upd, t, id)
	res, err := tx.Exec(ctx, q, args...)
	if err == nil {
		if n, _ := res.RowsAffected(); n == 0 {
			err = store.ErrNotFound
		}
	}
	return err
}

// AppendResultAsync is AppendAsync for a result line (ev) that also
// enters it in the usage ledger (addUsage), in the same transaction
// (in.EventSeq is ev's seq), and stores what follow says after it (see
// [store.ResultFollow]; nil for nothing): a turn's end in one commit. done
// gets the ledger record and the session's ID, BudgetUSD and Totals after
// the turn (its other fields are left zero), or the error.
func (db *DB) AppendResultAsync(ctx context.Context, done func(*store.UsageRecord, *store.Session, error), ev *store.Event, in store.UsageInput, follow *store.ResultFollow) error {
	var upd *store.SessionUpdate // folded into the ledger's UPDATE
	if follow != nil && follow.Update != nil {
		if err := store.ValidateUpdate(*follow.Update); err != nil {
			return fmt.Errorf("sqlite: append: %w", err)
		}
		upd = follow.Update
	}
	if err := db.prepareAll([]*store.Event{ev}); err != nil {
		return err
	}
	var (
		rec *store.UsageRecord
		s   *store.Session
	)
	r := &appendRequest{evs: []*store.Event{ev},
		then: func(ctx context.Context, tx cachedTx, seq int64) (_ []*store.Event, err error) {
			in.EventSeq = seq
			if rec, s, err = addUsage(ctx, tx, in, upd); err != nil || follow == nil {
				return nil, err
			}
			return follow.Make(ev, rec, s, db.prepare)
		}}
	r.Notify = func(err error) {
		if err != nil {
			rec, s = nil, nil
		}
		done(rec, s, err)
	}
	if err := db.app.enqueue(ctx, r); err != nil {
		return fmt.Errorf("sqlite: append: %w", err)
	}
	return nil
}

func (db *DB) prepareAll(evs []*store.Event) error {
	if err := db.check(); err != nil {
		return fmt.Errorf("sqlite: append: %w", err)
	}
	now := time.Now()
	for _, ev := range evs {
		if err := db.prepare(ev, now); err != nil {
			return err
		}
	}
	return nil
}

// prepare validates ev and applies the defaults and the payload limit. It
// runs on the caller's goroutine, so truncation costs the writer nothing.
func (db *DB) prepare(ev *store.Event, now time.Time) error {
	if err := store.PrepareEvent(ev, now, db.maxPayload); err != nil {
		return fmt.Errorf("sqlite: append: %w", err)
	}
	return nil
}

// Replay paging: a page is read whole and its rows closed before any event
// is yielded, so a slow consumer never holds a read transaction (which
// would keep the WAL from being checkpointed).
// A page is also what a consumer that stops reading holds beside the event
// it is given (a subscriber whose client stalled, until the API ends its
// stream): about 256 KiB, or one event larger than that alone; with 4 MiB
// pages, 200 stalled subscribers of a session of 2 MB messages held 12 MB
// each.
const (
	pageEvents = 512
	pageBytes  = 256 << 10
)

// Events returns the events of session id that follow seq after, in order,
// ending with the last event stored when Events was called; pass 0 for the
// whole log. A client that reconnects passes the last seq it has seen.
//
// The replay is gap-free or fails: if the log does not hold every event
// after after (after is beyond its end, or earlier events were removed),
// the first pair carries an error wrapping [store.ErrUnavailable] and no
// event is yielded; an unknown session yields [store.ErrNotFound]. Other
// errors (I/O, ctx) end the sequence with one error pair, after the events
// already yielded. Events are read in pages, never a whole log at once;
// each page is read in its own short transaction. The events yielded are
// the caller's to keep.
//
// To go from replay to live without a hole or a duplicate, subscribe to
// live events first, replay, then skip live events whose Seq the replay
// already covered.
func (db *DB) Events(ctx context.Context, id string, after int64) iter.Seq2[store.Event, error] {
	return func(yield func(store.Event, error) bool) {
		fail := func(err error) {
			yield(store.Event{}, fmt.Errorf("sqlite: events of %q: %w", id, db.health.ReadError(ctx, err)))
		}
		if err := db.check(); err != nil {
			fail(err)
			return
		}
		var last, first sql.NullInt64
		var pk, pruned int64
		// first: where the chunk holding the event after after begins.
		err := db.reads.logBounds.QueryRowContext(ctx, id, after).Scan(&pk, &last, &pruned, &first)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			fail(store.ErrNotFound)
			return
		case err != nil:
			fail(err)
			return
		case after < 0 || after > last.Int64:
			fail(fmt.Errorf("%w: after seq %d, the log ends at %d", store.ErrUnavailable, after, last.Int64))
			return
		case after < pruned:
			fail(&store.PrunedError{After: after, Through: pruned})
			return
		case after < last.Int64 && first.Int64 > after+1:
			fail(fmt.Errorf("%w: the log resumes at %d, not %d", store.ErrUnavailable, first.Int64, after+1))
			return
		}
		end := last.Int64
		next := after + 1
		page := make([]store.Event, 0, min(pageEvents, end-next+1)) // a client catching up reads a few
		for next <= end {
			page, err = db.eventPage(ctx, id, pk, next, end, page[:0])
			if err != nil {
				fail(err)
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
			if len(page) == 0 {
				fail(fmt.Errorf("%w: event %d is missing", store.ErrUnavailable, next))
				return
			}
		}
	}
}

// eventPage appends to page the events of id from seq from to seq to, up to
// pageEvents of them or about pageBytes of payload.
func (db *DB) eventPage(ctx context.Context, id string, pk, from, to int64, page []store.Event) ([]store.Event, error) {
	rows, err := db.reads.eventPage.QueryContext(ctx, pk, from, to, pageEvents)
	if err != nil {
		return page, err
	}
	defer rows.Close()
	size := 0
	full := func() bool { return len(page) >= pageEvents || size >= pageBytes }
	for !full() && rows.Next() {
		var first int64
		var data sql.RawBytes // the driver's, until the next row
		if err := rows.Scan(&first, &data); err != nil {
			return page, err
		}
		start, n := len(page), 0
		err := decodeChunk(id, first, data, from, func(ev store.Event) bool {
			if ev.Seq > to {
				return false
			}
			page = append(page, ev)
			n += len(ev.Raw)
			size += len(ev.Raw)
			return !full()
		})
		if err != nil {
			return page, err
		}
		// Keep the lines the page holds, not the chunk: a client that
		// catches up from inside a chunk reads one event of it, not its
		// 128 KiB.
		buf := make([]byte, 0, n)
		for i := range page[start:] {
			ev := &page[start+i]
			at := len(buf)
			buf = append(buf, ev.Raw...)
			ev.Raw = buf[at:len(buf):len(buf)]
		}
	}
	return page, rows.Err()
}
