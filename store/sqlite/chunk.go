package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/claudectl/claudectl/store"
)

// A session's log is stored in chunks: one row of event_chunks holds the
// events first_seq..last_seq of one session, in order, encoded as below.
// The writer makes one chunk per session per commit (split at
// maxChunkBytes), so a commit of a thousand events of twenty sessions
// inserts twenty rows and twenty index entries instead of a thousand of
// each: the per-row cost of SQLite (and of binding eight values a row)
// is what bounded the daemon's throughput. Replays decode the chunks; a
// read from the middle of a chunk skips its first events.
//
// Encoding: one format byte (chunkFormat), then per event
//
//	time       zigzag varint: nanoseconds since the previous event's time
//	           (since 0 for the first)
//	direction  one byte
//	type       uvarint length, bytes
//	subtype    uvarint length, bytes
//	size       uvarint: the original size
//	raw        uvarint length, bytes
//
// Seqs are not stored: the i-th event of a chunk has seq first_seq+i.
const chunkFormat = 1

// maxChunkBytes ends a chunk once its encoding reaches it (a single larger
// event makes a chunk of its own), so that a replay starting inside a
// chunk decodes little it does not need, and a chunk is never more than
// one payload limit or so over it.
const maxChunkBytes = 128 << 10

// insertChunkSQL stores one chunk.
const insertChunkSQL = `INSERT INTO event_chunks (session, first_seq, last_seq, events) VALUES (?, ?, ?, ?)`

// A chunkWriter builds the chunk of one session in the current commit.
type chunkWriter struct {
	pk          int64
	first, last int64 // seqs; last < first: empty
	prevTime    int64
	buf         []byte
}

// reset makes c an empty chunk of session pk starting at seq first.
func (c *chunkWriter) reset(pk, first int64) {
	c.pk, c.first, c.last, c.prevTime = pk, first, first-1, 0
	c.buf = append(c.buf[:0], chunkFormat)
}

func (c *chunkWriter) empty() bool { return c.last < c.first }

// add appends ev, whose seq must be c.last+1.
func (c *chunkWriter) add(ev *store.Event, seq int64) {
	if seq != c.last+1 {
		panic(fmt.Sprintf("sqlite: chunk of session %d: seq %d after %d", c.pk, seq, c.last))
	}
	t := ev.Time.UnixNano()
	b := c.buf
	b = binary.AppendVarint(b, t-c.prevTime)
	b = append(b, byte(ev.Direction))
	b = binary.AppendUvarint(b, uint64(len(ev.Type)))
	b = append(b, ev.Type...)
	b = binary.AppendUvarint(b, uint64(len(ev.Subtype)))
	b = append(b, ev.Subtype...)
	b = binary.AppendUvarint(b, uint64(ev.OriginalSize))
	b = binary.AppendUvarint(b, uint64(len(ev.Raw)))
	b = append(b, ev.Raw...)
	c.buf, c.prevTime, c.last = b, t, seq
}

var errBadChunk = errors.New("damaged event chunk")

// decodeChunk calls yield with the events of a chunk of session id whose
// first event has seq first, from seq from on, until yield returns false.
// The events' Raw are sub-slices of data, which the caller gives up.
func decodeChunk(id string, first int64, data []byte, from int64, yield func(store.Event) bool) error {
	if len(data) == 0 || data[0] != chunkFormat {
		return fmt.Errorf("%w: format %v (session %s, seq %d)", errBadChunk, data[:min(len(data), 1)], id, first)
	}
	d := data[1:]
	bad := func(what string, seq int64) error {
		return fmt.Errorf("%w: %s of event %d (session %s)", errBadChunk, what, seq, id)
	}
	var t int64
	for seq := first; len(d) > 0; seq++ {
		dt, n := binary.Varint(d)
		if n <= 0 {
			return bad("time", seq)
		}
		t += dt
		d = d[n:]
		if len(d) == 0 {
			return bad("direction", seq)
		}
		dir := store.Direction(d[0])
		d = d[1:]
		typ, rest, ok := chunkBytes(d)
		if !ok {
			return bad("type", seq)
		}
		sub, rest, ok := chunkBytes(rest)
		if !ok {
			return bad("subtype", seq)
		}
		size, n := binary.Uvarint(rest)
		if n <= 0 {
			return bad("size", seq)
		}
		raw, rest, ok := chunkBytes(rest[n:])
		if !ok {
			return bad("line", seq)
		}
		d = rest
		if seq < from {
			continue
		}
		ev := store.Event{SessionID: id, Seq: seq, Time: fromNanos(t), Direction: dir,
			Type: internType(typ), Subtype: internType(sub), Raw: raw, OriginalSize: int64(size)}
		if !yield(ev) {
			return nil
		}
	}
	return nil
}

// chunkBytes reads a length-prefixed byte string; the result's capacity
// ends with it, so that appending to it never writes over the next.
func chunkBytes(d []byte) (v, rest []byte, ok bool) {
	l, n := binary.Uvarint(d)
	if n <= 0 || uint64(len(d)-n) < l {
		return nil, nil, false
	}
	end := n + int(l)
	return d[n:end:end], d[end:], true
}

// internType returns the common types and subtypes without allocating.
func internType(b []byte) string {
	if s, ok := commonTypes[string(b)]; ok { // no allocation for the lookup
		return s
	}
	return string(b)
}

// commonTypes are the event types and subtypes most lines have.
var commonTypes = func() map[string]string {
	m := map[string]string{}
	for _, t := range []string{"", "stream_event", "text_delta", "assistant", "user", "result", "system", "status",
		"control_request", "control_response", "tool_use", "usage_report", "success", "init"} {
		m[t] = t
	}
	return m
}()

// convertEvents is migration 4's Go step: it moves the events of the
// row-per-event table of version 3 into chunks, a run of consecutive seqs
// of one session per chunk, and drops the old table.
func convertEvents(ctx context.Context, tx *sql.Tx) error {
	insert, err := tx.PrepareContext(ctx, insertChunkSQL)
	if err != nil {
		return err
	}
	defer insert.Close()
	c := chunkWriter{pk: -1, first: 1}
	flush := func() error {
		if c.empty() {
			return nil
		}
		_, err := insert.ExecContext(ctx, c.pk, c.first, c.last, c.buf)
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
			if r.pk != c.pk || r.seq != c.last+1 || len(c.buf) >= maxChunkBytes {
				if err := flush(); err != nil {
					return err
				}
				c.reset(r.pk, r.seq)
			}
			c.add(&r.ev, r.seq)
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
