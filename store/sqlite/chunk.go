package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/internal/chunk"
)

// A session's log is stored in chunks (package store/internal/chunk: one
// row of event_chunks holds the events first_seq..last_seq of one session,
// in order). The writer makes one chunk per session per commit (split at
// chunk.MaxBytes), so a commit of a thousand events of twenty sessions
// inserts twenty rows and twenty index entries instead of a thousand of
// each: the per-row cost of SQLite (and of binding eight values a row)
// is what bounded the daemon's throughput. Replays decode the chunks; a
// read from the middle of a chunk skips its first events.

// insertChunkSQL stores one chunk.
const insertChunkSQL = `INSERT INTO event_chunks (session, first_seq, last_seq, events) VALUES (?, ?, ?, ?)`

type chunkWriter = chunk.Writer

const maxChunkBytes = chunk.MaxBytes

var decodeChunk = chunk.Decode

// convertEvents is migration 4's Go step: it moves the events of the
// row-per-event table of version 3 into chunks, a run of consecutive seqs
// of one session per chunk, and drops the old table.
func convertEvents(ctx context.Context, tx *sql.Tx) error {
	insert, err := tx.PrepareContext(ctx, insertChunkSQL)
	if err != nil {
		return err
	}
	defer insert.Close()
	c := chunkWriter{PK: -1, First: 1}
	flush := func() error {
		if c.Empty() {
			return nil
		}
		_, err := insert.ExecContext(ctx, c.PK, c.First, c.Last, c.Buf)
		return err
	}
	// Keyset pages, so that no cursor is open while chunks are inserted.
	var pk, seq int64 = -1, 0
	for {
		rows, err := tx.QueryContext(ctx, `SELECT session, seq, time, direction, type, subtype, raw, original_size
			FROM events WHERE (session, seq) > (?, ?) ORDER BY session, seq LIMIT 4096`, pk, seq)
		if err != nil {
			return fmt.Errorf("reading the events to convert: %w", err)
		}
		type row struct {
			pk, seq, time int64
			ev            store.Event
		}
		var page []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.pk, &r.seq, &r.time, &r.ev.Direction, &r.ev.Type, &r.ev.Subtype, &r.ev.Raw, &r.ev.OriginalSize); err != nil {
				rows.Close()
				return err
			}
			r.ev.Time = fromNanos(r.time)
			page = append(page, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			if r.pk != c.PK || r.seq != c.Last+1 || len(c.Buf) >= maxChunkBytes {
				if err := flush(); err != nil {
					return err
				}
				c.Reset(r.pk, r.seq)
			}
			c.Add(&r.ev, r.seq)
		}
		last := page[len(page)-1]
		pk, seq = last.pk, last.seq
	}
	if err := flush(); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `DROP TABLE events`)
	return err
}
