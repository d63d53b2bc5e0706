package claude

import (
	"bytes"
	"reflect"
	"strings"
	"sync/atomic"
)

// Shapes. The stream_event lines of one content block differ only in a few
// values: a text delta's text, its uuid, the block's index. Everything
// else, the keys, the type names, the nulls, even the spaces, is the same
// bytes from one line to the next. Once the fast path has parsed such a
// line it keeps its shape: the bytes between those values. A later line
// that has the same bytes there is decoded by comparing them (memory
// comparisons, a few dozen bytes at a time) and reading the values alone,
// with the very functions the whole parse reads them with; a line that
// differs anywhere is parsed whole, and may become the new shape.
//
// Why it decodes a line exactly as the whole parse would: the bytes a shape
// compares are those of a line the whole parse accepted, so they hold the
// same keys in the same order with the same fixed values (which the shape
// copies from that line's message); and each value it leaves open is read
// by fastParser.slot as the whole parse reads it, into a message whose
// fields for those values start empty, as a new message's do. Both paths
// are fuzzed against the general decoder (FuzzStreamEventShape).

// slotKind says which field a value a shape leaves open goes to.
type slotKind uint8

const (
	slotIndex slotKind = iota + 1
	slotTTFT
	slotParent
	slotAgent
	slotUUID
	slotSession
	slotText
	slotPartialJSON
	slotThinking
	slotSignature
	slotStopReason
)

// field returns the string field of m or d (the message's, the delta's)
// that a value of kind k goes to; not for slotIndex and slotTTFT.
func (k slotKind) field(m *StreamEvent, d *Delta) *string {
	switch k {
	case slotParent:
		return &m.ParentToolUseID
	case slotAgent:
		return &m.AgentID
	case slotUUID:
		return &m.UUID
	case slotSession:
		return &m.SessionID
	case slotText:
		return &d.Text
	case slotPartialJSON:
		return &d.PartialJSON
	case slotThinking:
		return &d.Thinking
	case slotSignature:
		return &d.Signature
	case slotStopReason:
		return &d.StopReason
	}
	panic("claude: no string field for slot kind")
}

// slotSpan is where a value of a kind was in a line.
type slotSpan struct {
	kind       slotKind
	start, end int
}

// shapeRecord is what the whole parse of a line notes for its shape: the
// values it may leave open, in order. A line with more than it holds gets
// no shape.
type shapeRecord struct {
	slots    [12]slotSpan
	n        int
	overflow bool
}

// streamShape is the shape of a stream_event line.
type streamShape struct {
	lits  [][]byte   // the bytes before each open value, and after the last
	kinds []slotKind // the open values, in order
	proto StreamEvent
	delta Delta // proto's delta (proto.Event.Delta is nil)
	// simple: proto and delta have nothing but their type names (and
	// perhaps the index) set, which decode sets alone: copying the whole
	// message, pointers and all, cost a tenth of the decoding while the
	// collector runs (write barriers).
	simple bool
}

// shapeCache holds the shape of the last stream_event line that had a
// delta; safe for concurrent use.
type shapeCache struct{ atomic.Pointer[streamShape] }

// learn keeps the shape of line, which the whole parse decoded into ev
// noting rec, if it has one worth keeping: a delta event (the lines that
// come in runs), no raw members (a shape would share the learned line's
// bytes with every message decoded by it).
func (c *shapeCache) learn(line []byte, rec *shapeRecord, ev *StreamEvent) {
	e := &ev.Event
	if rec.overflow || e.Delta == nil || e.ContentBlock != nil || e.Message != nil || e.Usage != nil {
		return
	}
	sh := &streamShape{proto: *ev, delta: *e.Delta, kinds: make([]slotKind, rec.n), lits: make([][]byte, 0, rec.n+1)}
	// One allocation for every literal: a copy, so the shape keeps no line.
	own := bytes.Clone(line)
	prev := 0
	for i, sp := range rec.slots[:rec.n] {
		sh.kinds[i] = sp.kind
		sh.lits = append(sh.lits, own[prev:sp.start:sp.start])
		prev = sp.end
	}
	sh.lits = append(sh.lits, own[prev:])
	// The open values start empty, as in a new message; the fixed ones
	// are the learned line's, copied off it.
	p, d := &sh.proto, &sh.delta
	p.raw, p.Event.Delta = nil, nil
	p.Type, p.Event.Type, d.Type = strings.Clone(p.Type), strings.Clone(p.Event.Type), strings.Clone(d.Type)
	for _, k := range sh.kinds {
		switch k {
		case slotIndex:
			p.Event.Index = 0
		case slotTTFT:
			p.TTFTMS = 0
		default:
			*k.field(p, d) = ""
		}
	}
	rest, drest := sh.proto, sh.delta
	rest.Type, rest.Event.Type, rest.Event.Index, drest.Type = "", "", 0, ""
	sh.simple = reflect.ValueOf(rest).IsZero() && drest == Delta{}
	c.Store(sh)
}

// decode decodes line if it has the shape sh, and reports false if not.
func (sh *streamShape) decode(line []byte, sid *sessionIDCache, arena *eventArena) (*StreamEvent, bool) {
	if !bytes.HasPrefix(line, sh.lits[0]) {
		return nil, false
	}
	a := arena.alloc() // zeroed
	if sh.simple {
		a.ev.Type, a.ev.Event.Type, a.ev.Event.Index, a.d.Type = sh.proto.Type, sh.proto.Event.Type, sh.proto.Event.Index, sh.delta.Type
	} else {
		a.ev, a.d = sh.proto, sh.delta
	}
	a.ev.Event.Delta = &a.d
	p := fastParser{b: line, i: len(sh.lits[0])}
	for i, k := range sh.kinds {
		if !p.slot(k, &a.ev, &a.d, sid) {
			return nil, false
		}
		lit := sh.lits[i+1]
		if !bytes.HasPrefix(line[p.i:], lit) {
			return nil, false
		}
		p.i += len(lit)
	}
	if p.i != len(line) {
		return nil, false
	}
	return &a.ev, true
}
