package claude

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// A stream_event line is what a session with partial messages prints most:
// about 99 in 100 lines. decodeStreamEvent decodes the usual shape of one
// directly, several times faster than the general decoder. It is strict:
// anything it is not sure about (a number that is not a plain integer, a
// field of the wrong JSON type, invalid UTF-8, malformed JSON) makes it
// report false, and the caller falls back to the general decoder, which
// applies the tolerant-reader rules. FuzzStreamEventFastPath checks that
// whatever it accepts decodes exactly as the general decoder would.
func decodeStreamEvent(line []byte, sid *sessionIDCache, shapes *shapeCache, arena *eventArena) (*StreamEvent, bool) {
	if shapes != nil {
		if sh := shapes.Load(); sh != nil {
			if ev, ok := sh.decode(line, sid, arena); ok {
				return ev, true
			}
		}
	}
	// The record is in the parser, on the stack: a pointer to one kept in
	// the parser would send it to the heap, a line's worth of bytes each.
	p := fastParser{b: line, recording: shapes != nil}
	ev, ok := p.streamEvent(sid, arena)
	if ok && shapes != nil {
		shapes.learn(line, &p.rec, ev)
	}
	return ev, ok
}

// streamEvent parses the whole line as a stream_event; while recording,
// it notes where each value that may differ from one line to the next is.
func (p *fastParser) streamEvent(sid *sessionIDCache, arena *eventArena) (*StreamEvent, bool) {
	// The event and its delta together; most events have one.
	a := arena.alloc()
	m := &a.ev
	// The members are read in a loop, not through a callback per member:
	// this runs for nearly every line, and a call through a func value
	// per member cost a tenth of the decoding.
	if !p.enter() {
		return nil, false
	}
	for first := true; ; first = false {
		key, more, ok := p.member(first)
		if !ok {
			return nil, false
		}
		if !more {
			break
		}
		switch string(key) {
		case "type":
			raw, _, sok := p.strRaw()
			m.Type = "stream_event"
			ok = sok && string(raw) == "stream_event"
		case "event":
			ok = p.event(&m.Event, &a.d)
		case "parent_tool_use_id":
			ok = p.slot(slotParent, m, nil, sid)
		case "agent_id":
			ok = p.slot(slotAgent, m, nil, sid)
		case "uuid":
			ok = p.slot(slotUUID, m, nil, sid)
		case "session_id":
			ok = p.slot(slotSession, m, nil, sid)
		case "ttft_ms":
			ok = p.slot(slotTTFT, m, nil, sid)
		default:
			ok = !foldsTo(key, "type", "event", "parent_tool_use_id", "agent_id", "uuid", "session_id", "ttft_ms") && p.skip()
		}
		if !ok {
			return nil, false
		}
	}
	if m.Type != "stream_event" {
		return nil, false
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, false
	}
	return m, true
}

// event decodes the event object; spare is used for the first delta.
func (p *fastParser) event(e *StreamEventData, spare *Delta) bool {
	if p.null() {
		return true
	}
	if !p.enter() {
		return false
	}
	for first := true; ; first = false {
		key, more, ok := p.member(first)
		if !ok || !more {
			return ok
		}
		switch string(key) {
		case "type":
			ok = p.nullableName(&e.Type)
		case "index":
			start := p.valueStart()
			if ok = p.integer(&e.Index); ok {
				p.mark(slotIndex, start)
			}
		case "delta":
			if p.null() {
				e.Delta = nil
				break
			}
			d := e.Delta // a repeated key merges, as in encoding/json
			if d == nil {
				d = spare
				spare = nil
				if d == nil {
					d = &Delta{}
				}
				e.Delta = d
			}
			ok = p.delta(d)
		case "content_block":
			ok = p.raw(&e.ContentBlock)
		case "message":
			ok = p.raw(&e.Message)
		case "usage":
			return false // rare (message_delta): leave it to the general decoder
		default:
			ok = !foldsTo(key, "type", "index", "delta", "content_block", "message", "usage") && p.skip()
		}
		if !ok {
			return false
		}
	}
}

// delta decodes a delta object into d.
func (p *fastParser) delta(d *Delta) bool {
	if !p.enter() {
		return false
	}
	for first := true; ; first = false {
		key, more, ok := p.member(first)
		if !ok || !more {
			return ok
		}
		switch string(key) {
		case "type":
			ok = p.nullableName(&d.Type)
		case "text":
			ok = p.slot(slotText, nil, d, nil)
		case "partial_json":
			ok = p.slot(slotPartialJSON, nil, d, nil)
		case "thinking":
			ok = p.slot(slotThinking, nil, d, nil)
		case "signature":
			ok = p.slot(slotSignature, nil, d, nil)
		case "stop_reason":
			ok = p.slot(slotStopReason, nil, d, nil)
		default:
			ok = !foldsTo(key, "type", "text", "partial_json", "thinking", "signature", "stop_reason") && p.skip()
		}
		if !ok {
			return false
		}
	}
}

// eventAndDelta is a stream event with room for its delta.
type eventAndDelta struct {
	ev StreamEvent
	d  Delta
}

// eventArena hands out the events of one batch of lines from chunks of
// up to eventChunk, an allocation per chunk instead of one per event:
// stream events come by the hundred thousand. A chunk is no larger than
// the lines left in the batch (lines says how many), so that a batch of
// one line, as a model streaming in real time makes, costs one event,
// not a chunk. Keeping one event keeps its chunk (up to about 20 KB), as
// keeping a short line keeps its block (jsonl.Line). A nil *eventArena
// allocates each event on its own. Not safe for concurrent use: one per
// batch.
type eventArena struct {
	free  []eventAndDelta
	lines int // the batch's lines not yet given a chunk
}

const eventChunk = 64

func (a *eventArena) alloc() *eventAndDelta {
	if a == nil {
		return new(eventAndDelta)
	}
	if len(a.free) == 0 {
		n := min(eventChunk, max(a.lines, 1))
		a.lines -= n
		a.free = make([]eventAndDelta, n)
	}
	e := &a.free[0]
	a.free = a.free[1:]
	return e
}

// sessionIDCache returns the same string for the same session id, so that
// half a million messages of one session share one allocation. It is safe
// for concurrent use.
type sessionIDCache struct{ last atomic.Pointer[string] }

// intern returns raw (a plain string body) as a string.
func (c *sessionIDCache) intern(raw []byte) string {
	if c == nil {
		return string(raw)
	}
	if last := c.last.Load(); last != nil && string(raw) == *last {
		return *last
	}
	s := string(raw)
	c.last.Store(&s)
	return s
}

// foldsTo reports whether key matches one of names ignoring case but is not
// exactly one of them: encoding/json would match it to a field, so the fast
// path must leave such a line to the general decoder.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if len(key) == len(n) && strings.EqualFold(string(key), n) {
			return true
		}
	}
	return false
}

// fastParser is a strict, minimal JSON reader over one line.
type fastParser struct {
	b         []byte
	i         int
	recording bool        // note in rec where the values a shape leaves open are
	rec       shapeRecord // (fastshape.go)
}

// valueStart passes over the whitespace before a value and returns where
// the value starts.
func (p *fastParser) valueStart() int {
	p.ws()
	return p.i
}

// mark notes that the value of kind k just read began at start.
func (p *fastParser) mark(k slotKind, start int) {
	if !p.recording {
		return
	}
	r := &p.rec
	if r.n == len(r.slots) {
		r.overflow = true
		return
	}
	r.slots[r.n] = slotSpan{kind: k, start: start, end: p.i}
	r.n++
}

// slot reads the value of a member of kind k into m (the message's
// members) or d (the delta's), and marks it. A value is read the same way
// whether the whole line is parsed or a shape is applied.
func (p *fastParser) slot(k slotKind, m *StreamEvent, d *Delta, sid *sessionIDCache) bool {
	start := p.valueStart()
	var ok bool
	switch k {
	case slotIndex:
		ok = p.integer(&m.Event.Index)
	case slotTTFT:
		ok = p.integer64(&m.TTFTMS)
	case slotSession:
		if p.peek() != '"' {
			ok = p.nullableStr(&m.SessionID)
			break
		}
		raw, plain, sok := p.strRaw()
		switch {
		case !sok:
		case plain:
			m.SessionID, ok = sid.intern(raw), true
		default:
			m.SessionID, ok = unescape(raw)
		}
	default:
		ok = p.nullableStr(k.field(m, d))
	}
	if ok {
		p.mark(k, start)
	}
	return ok
}

func (p *fastParser) ws() {
	// Most values and keys follow nothing or one space: look at one or two
	// bytes before looping.
	if p.i < len(p.b) && p.b[p.i] > ' ' {
		return
	}
	if p.i+1 < len(p.b) && p.b[p.i] == ' ' && p.b[p.i+1] > ' ' {
		p.i++
		return
	}
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *fastParser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

func (p *fastParser) null() bool {
	if p.peek() == 'n' {
		return p.lit("null")
	}
	return false
}

// enter reads the '{' that opens an object; member then reads its members.
func (p *fastParser) enter() bool {
	if p.peek() != '{' {
		return false
	}
	p.i++
	return true
}

// member reads what comes before the next member's value in an object that
// enter opened (first: the first member; else the ',' after the previous
// value too), leaving the parser at the value, which the caller must
// consume: the key (escape-free keys only) and more. At the object's '}'
// it returns more false; ok false on anything else.
func (p *fastParser) member(first bool) (key []byte, more, ok bool) {
	c := p.peek()
	if c == '}' {
		p.i++
		return nil, false, true
	}
	if !first {
		if c != ',' {
			return nil, false, false
		}
		p.i++
		c = p.peek()
	}
	if c != '"' {
		return nil, false, false
	}
	start := p.i + 1
	j := plainRun(p.b, start)
	for j < len(p.b) && p.b[j] != '"' {
		if p.b[j] == '\\' || p.b[j] < 0x20 || p.b[j] >= 0x80 {
			return nil, false, false // unusual key: general decoder
		}
		j++
	}
	if j >= len(p.b) {
		return nil, false, false
	}
	key = p.b[start:j]
	p.i = j + 1
	if p.peek() != ':' {
		return nil, false, false
	}
	p.i++
	p.ws()
	return key, true, true
}

// str reads a string, unescaping it. A plain string (no escapes, ASCII)
// shares the line's memory instead of being copied, which saves two
// allocations per stream event: the line is the message's Raw, which the
// package never modifies after decoding (callers must not either, see
// [Message.Raw]), so the string stays immutable; the price is that keeping
// such a string keeps its line's memory too.
func (p *fastParser) str() (string, bool) {
	raw, plain, ok := p.strRaw()
	if !ok {
		return "", false
	}
	if plain {
		if len(raw) == 0 {
			return "", true
		}
		return unsafe.String(&raw[0], len(raw)), true
	}
	return unescape(raw)
}

// strRaw reads a string and returns its body as it is in the line, and
// whether that body is plain (no escapes, ASCII only).
func (p *fastParser) strRaw() (raw []byte, plain, ok bool) {
	if p.peek() != '"' {
		return nil, false, false
	}
	start := p.i + 1
	b := p.b
	// The common case in one pass, eight bytes at a time: no quote,
	// backslash, control character or byte 0x80 and above. (Searching for
	// the quote, then for a backslash, then checking the bytes cost three
	// passes and two calls per string, and most strings here are short.)
	j := plainRun(b, start)
	plain = true
	for ; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			p.i = j + 1
			body := b[start:j]
			if !plain && bytes.IndexByte(body, '\\') < 0 && !validStringBody(body) {
				return nil, false, false // invalid UTF-8: the general decoder
			}
			return body, plain, true
		case c < 0x20:
			return nil, false, false
		case c == '\\':
			plain = false
			j++ // skip the escaped character
		case c >= 0x80:
			plain = false
		}
	}
	return nil, false, false
}

// plainRun returns an index from j on up to which b[j:] has no quote,
// backslash, control character or byte 0x80 and above, found eight bytes at
// a time: the bytes from it on need a look one by one (a word that has
// such a byte, or a false alarm, or the last few bytes).
func plainRun(b []byte, j int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for j+8 <= len(b) {
		w := binary.LittleEndian.Uint64(b[j:])
		q := w ^ ('"' * ones)
		bs := w ^ ('\\' * ones)
		// A byte is flagged when it is zero in q or bs, below 0x20 in w, or
		// has its high bit set.
		if ((q-ones)&^q|(bs-ones)&^bs|(w-0x20*ones)&^w|w)&highs != 0 {
			return j
		}
		j += 8
	}
	return j
}

// validStringBody reports whether b (no backslash, no control character)
// is valid UTF-8; invalid UTF-8 is left to the general decoder.
func validStringBody(b []byte) bool { return utf8.Valid(b) }

// unescape decodes the body of a JSON string that has escapes or non-ASCII
// bytes. Invalid UTF-8 is refused (the general decoder replaces it).
func unescape(raw []byte) (string, bool) {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c >= 0x80 {
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size <= 1 {
				return "", false
			}
			out = append(out, raw[i:i+size]...)
			i += size
			continue
		}
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(raw) {
			return "", false
		}
		switch raw[i+1] {
		case '"', '\\', '/':
			out = append(out, raw[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(raw, i+2)
			if !ok {
				return "", false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(-1), false
				if i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2, ok = hex4(raw, i+2)
				}
				if d := utf16.DecodeRune(r, r2); ok && d != utf8.RuneError {
					r = d
					i += 6
				} else {
					return "", false // lone surrogate: general decoder
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", false
		}
		i += 2
	}
	return string(out), true
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[i:i+4]), 16, 32)
	return rune(n), err == nil
}

// nullableName is nullableStr for the event and delta type names, which
// repeat on every line: the known ones cost no allocation.
func (p *fastParser) nullableName(dst *string) bool {
	if p.peek() != '"' {
		return p.nullableStr(dst)
	}
	raw, plain, ok := p.strRaw()
	if !ok {
		return false
	}
	if !plain {
		s, ok := unescape(raw)
		*dst = s
		return ok
	}
	var s string
	switch string(raw) {
	case "content_block_delta":
		s = "content_block_delta"
	case "text_delta":
		s = "text_delta"
	case "input_json_delta":
		s = "input_json_delta"
	case "thinking_delta":
		s = "thinking_delta"
	case "content_block_start":
		s = "content_block_start"
	case "content_block_stop":
		s = "content_block_stop"
	default:
		s = string(raw)
	}
	*dst = s
	return true
}

func (p *fastParser) nullableStr(dst *string) bool {
	if p.null() {
		return true // null leaves the field as it was, like encoding/json
	}
	s, ok := p.str()
	*dst = s
	return ok
}

// integer reads a plain integer (no fraction or exponent) that fits in an int.
func (p *fastParser) integer(dst *int) bool {
	var n int64
	if !p.integer64(&n) {
		return false
	}
	*dst = int(n)
	return true
}

func (p *fastParser) integer64(dst *int64) bool {
	if p.null() {
		return true
	}
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == digits || p.i-digits > 18 || (p.b[digits] == '0' && p.i-digits > 1) {
		return false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return false
		}
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	*dst = n
	return err == nil
}

// raw validates one value and stores its bytes (a sub-slice of the line).
func (p *fastParser) raw(dst *json.RawMessage) bool {
	p.ws()
	start := p.i
	if !p.skip() {
		return false
	}
	*dst = p.b[start:p.i:p.i]
	return true
}

// skip validates and passes over one value.
func (p *fastParser) skip() bool {
	switch c := p.peek(); {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '{':
		p.i++
		for first := true; ; first = false {
			_, more, ok := p.member(first)
			if !ok || !more {
				return ok
			}
			if !p.skip() {
				return false
			}
		}
	case c == '[':
		p.i++
		if p.peek() == ']' {
			p.i++
			return true
		}
		for {
			if !p.skip() {
				return false
			}
			switch p.peek() {
			case ',':
				p.i++
			case ']':
				p.i++
				return true
			default:
				return false
			}
		}
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return false
}

// number passes over a JSON number, validating its grammar.
func (p *fastParser) number() bool {
	if p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		s := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		return p.i - s
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}
