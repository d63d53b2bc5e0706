// Package chunk is the encoding of a run of one session's events that
// both store engines keep as one row.
package chunk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/internal/searchtext"
)

// A session's log is stored in chunks: one row of event_chunks holds the
// events first_seq..last_seq of one session, in order, encoded as below.
// The writer makes one chunk per session per commit (split at
// MaxBytes), so a commit of a thousand events of twenty sessions
// inserts twenty rows and twenty index entries instead of a thousand of
// each: the per-row cost of SQLite (and of binding eight values a row)
// is what bounded the daemon's throughput. Replays decode the chunks; a
// read from the middle of a chunk skips its first events.
//
// Encoding: one format byte (Format), then per event
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
const Format = 1

// MaxBytes ends a chunk once its encoding reaches it (a single larger
// event makes a chunk of its own), so that a replay starting inside a
// chunk decodes little it does not need, and a chunk is never more than
// one payload limit or so over it.
const MaxBytes = 128 << 10

// A Writer builds the chunk of one session in the current commit.
type Writer struct {
	PK          int64 // the session's key in the engine's tables
	First, Last int64 // seqs; Last < First: empty
	prevTime    int64
	Buf         []byte // the encoding so far
	// Text says the chunk holds an event the search index takes
	// (searchtext.Indexable): the SQLite writer queues such chunks for its
	// indexer.
	Text bool
}

// Reset makes c an empty chunk of session pk starting at seq first.
func (c *Writer) Reset(pk, first int64) {
	c.PK, c.First, c.Last, c.prevTime, c.Text = pk, first, first-1, 0, false
	c.Buf = append(c.Buf[:0], Format)
}

// Empty reports whether c holds no event.
func (c *Writer) Empty() bool { return c.Last < c.First }

// Add appends ev, whose seq must be c.Last+1.
func (c *Writer) Add(ev *store.Event, seq int64) {
	if seq != c.Last+1 {
		panic(fmt.Sprintf("chunk of session %d: seq %d after %d", c.PK, seq, c.Last))
	}
	t := ev.Time.UnixNano()
	b := c.Buf
	b = binary.AppendVarint(b, t-c.prevTime)
	b = append(b, byte(ev.Direction))
	b = binary.AppendUvarint(b, uint64(len(ev.Type)))
	b = append(b, ev.Type...)
	b = binary.AppendUvarint(b, uint64(len(ev.Subtype)))
	b = append(b, ev.Subtype...)
	b = binary.AppendUvarint(b, uint64(ev.OriginalSize))
	b = binary.AppendUvarint(b, uint64(len(ev.Raw)))
	b = append(b, ev.Raw...)
	c.Buf, c.prevTime, c.Last = b, t, seq
	c.Text = c.Text || searchtext.Indexable(ev)
}

// ErrBad means a chunk cannot be decoded.
var ErrBad = errors.New("damaged event chunk")

// Decode calls yield with the events of a chunk of session id whose
// first event has seq first, from seq from on, until yield returns false.
// The events' Raw are sub-slices of data, which the caller gives up.
func Decode(id string, first int64, data []byte, from int64, yield func(store.Event) bool) error {
	if len(data) == 0 || data[0] != Format {
		return fmt.Errorf("%w: format %v (session %s, seq %d)", ErrBad, data[:min(len(data), 1)], id, first)
	}
	d := data[1:]
	bad := func(what string, seq int64) error {
		return fmt.Errorf("%w: %s of event %d (session %s)", ErrBad, what, seq, id)
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
		ev := store.Event{SessionID: id, Seq: seq, Time: time.Unix(0, t).UTC(), Direction: dir,
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
