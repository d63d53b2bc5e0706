package jsonl

import "strconv"

const (
	markerPrefix = "[truncated: original_size="
	markerSuffix = " bytes]"
	// markerMax is the longest a marker can be (an int64 has at most 19
	// digits). Room for this many bytes is kept for each cut while the
	// final size is still unknown.
	markerMax = len(markerPrefix) + 19 + len(markerSuffix)

	// maxReserve bounds the part of the limit kept, once the first big
	// string has been cut, for the rest of the line.
	maxReserve = 64 << 10
	// maxStringKeep is how many bytes a string keeps once that reserve is in
	// use, so ids and other short strings survive whole.
	maxStringKeep = 256
)

// Marker returns the text put where content was cut from a line of
// originalSize bytes: "[truncated: original_size=X bytes]".
func Marker(originalSize int64) string {
	return markerPrefix + strconv.FormatInt(originalSize, 10) + markerSuffix
}

// Truncate returns line cut down to about max bytes, the way Reader
// delivers an overlong line, and reports whether it cut anything. A line of
// at most max bytes is returned as it is (the same slice) with false. A max
// of zero or less means DefaultMaxLineBytes.
//
// Otherwise the result is newly allocated and at most max bytes long (at
// most 68 bytes when max is smaller than that). If line was valid JSON (in
// the sense of encoding/json.Valid), so is the result, and valid UTF-8
// stays valid UTF-8:
//   - Everything is copied up to about max minus 64 KiB (max/2 when max
//     is under 128 KiB). The string being read there is cut, and so is
//     every later string longer than 256 bytes (max/16 for a small max),
//     which keeps its first 256 bytes. Marker(len(line)) is written inside
//     each cut string, before its closing quote. Cuts fall on character
//     boundaries, never inside an escape sequence or a surrogate pair.
//     Structure, numbers and shorter strings are kept whole, so the type
//     and ids survive; whitespace between tokens is dropped past that point.
//   - If even that is longer than max, or nothing could be cut, the result
//     is an object made of the top-level scalar members of line (strings of
//     at most 256 bytes, numbers, booleans, null; "type", "subtype", "uuid",
//     "session_id" and "request_id" first) that fit, followed by
//     "truncated":"<marker>".
//   - If line is not valid JSON, the result is a prefix of line, cut on a
//     character boundary, followed by the marker.
func Truncate(line []byte, max int) (out []byte, truncated bool) {
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	if len(line) <= max {
		return line, false
	}
	var t truncator
	t.init(max, make([]byte, 0, max))
	t.write(line)
	return t.finish(), true
}

// truncMode is what a truncator does with the bytes it is fed.
type truncMode uint8

const (
	modeCopy truncMode = iota // copying, cutting strings as needed
	modeScan                  // output full: only lexing, for the fallback object
	modeRaw                   // not JSON: keeping a prefix
)

// A truncator turns one overlong line, fed in pieces, into its truncated
// form. It lexes the line as JSON and copies it to out, cutting string
// values, so its memory stays bounded by max plus small buffers whatever
// the length of the line. out may share memory with the input as long as
// the input is fed from behind: out never grows faster than the input is
// consumed.
type truncator struct {
	max    int // limit on the final output
	budget int // below this output length, everything is copied
	keep   int // bytes a string keeps once the budget is spent

	out        []byte
	cuts       []int // positions in out where a marker goes
	markerCost int   // room kept for the markers: markerMax per cut

	n        int64 // input bytes consumed
	nonSpace bool  // some input byte was not blank
	mode     truncMode

	// exact holds while out is a verbatim copy of the input so far;
	// afterwards out[:verbatim] still is the input's prefix.
	exact    bool
	verbatim int

	// The current string.
	strStart int  // where its content starts in out
	strLimit int  // out length its content may reach
	strLen   int  // content bytes read, escapes counted as written
	strCut   bool // it was cut: its remaining content is dropped
	surr     bool // the previous escape was a high surrogate: keep the pair
	pairRoom bool // the current escape was checked with room for a pair
	// safeCut is where the string will be cut if it must be: -1 while its
	// content is within cutLine (cut at the end), -2 if it cannot be cut.
	safeCut int

	lexer
}

func (t *truncator) init(max int, out []byte) {
	reserve := min(max/2, maxReserve)
	t.max = max
	t.budget = max - reserve
	t.keep = min(reserve/8, maxStringKeep)
	t.out = out
	t.exact = true
	t.lexer.init()
}

// write feeds the next piece of the line.
func (t *truncator) write(p []byte) {
	t.n += int64(len(p))
	if !t.nonSpace {
		t.nonSpace = hasNonBlank(p)
	}
	i := 0
	for i < len(p) && t.mode != modeRaw {
		if t.st == sString {
			j := i
			for j < len(p) && !stringSpecial[p[j]] {
				j++
			}
			if j > i {
				t.stringRun(p[i:j])
				i = j
				continue
			}
		}
		t.step(p[i])
		if t.mode == modeRaw {
			break // p[i] was not consumed
		}
		i++
	}
	if t.mode == modeRaw {
		t.rawCopy(p[i:])
	}
}

// stringSpecial marks the bytes that end a run of plain string content.
var stringSpecial = func() (s [256]bool) {
	for c := 0; c < 0x20; c++ {
		s[c] = true
	}
	s['"'] = true
	s['\\'] = true
	return s
}()

// drop records that some input was not copied to out.
func (t *truncator) drop() {
	if t.exact {
		t.exact = false
		t.verbatim = len(t.out)
	}
}

// overflow gives up copying: the result will be the fallback object.
func (t *truncator) overflow() {
	t.drop()
	t.mode = modeScan
}

// fail records that the line is not valid JSON.
func (t *truncator) fail() {
	t.st = sError
	if !t.exact {
		t.out = t.out[:t.verbatim]
	}
	t.mode = modeRaw
}

// emit copies a byte outside of strings: structure, numbers, literals,
// whitespace.
func (t *truncator) emit(c byte) {
	if t.mode != modeCopy {
		return
	}
	if len(t.out) >= t.budget && isJSONSpace(c) {
		t.drop()
		return
	}
	if len(t.out)+1+t.markerCost > t.max {
		t.overflow()
		return
	}
	t.out = append(t.out, c)
}

// openString emits the opening quote of a string and sets its limit.
func (t *truncator) openString() {
	t.emit('"')
	t.strStart = len(t.out)
	t.strLimit = t.strStart + t.keep
	if t.strStart < t.budget {
		t.strLimit = max(t.strLimit, t.budget)
	}
	t.strLen = 0
	t.strCut = false
	t.surr = false
	t.safeCut = -1
	if t.strStart > t.cutLine() {
		t.safeCut = -2
	}
}

// cutLine is the furthest a string can be cut at: its marker and closing
// quote must still fit.
func (t *truncator) cutLine() int {
	return t.max - t.markerCost - markerMax - 1
}

// fitLine is the furthest string content can go without a cut: its closing
// quote must still fit.
func (t *truncator) fitLine() int {
	return min(t.strLimit, t.max-t.markerCost-1)
}

// stringRun handles plain string content (no quote, backslash or control
// character).
func (t *truncator) stringRun(run []byte) {
	t.captureRun(run)
	t.strLen += len(run)
	t.surr = false
	if t.mode != modeCopy {
		return
	}
	if t.strCut {
		t.drop()
		return
	}
	k := min(len(run), max(t.fitLine()-len(t.out), 0))
	t.out = append(t.out, run[:k]...)
	if line := t.cutLine(); t.safeCut == -1 && len(t.out) > line {
		// The content now passes the cut line: remember the last
		// character boundary before it, in case a cut comes later.
		t.safeCut = runeStart(t.out, line, t.strStart)
	}
	if k < len(run) {
		t.cutString()
	}
}

// stringByte copies a byte of an escape sequence.
func (t *truncator) stringByte(c byte) {
	t.captureByte(c)
	t.strLen++
	if t.mode == modeCopy {
		if t.strCut {
			t.drop()
		} else {
			t.out = append(t.out, c)
		}
	}
}

// backslash starts an escape sequence. The string is cut before it unless
// the sequence fits whole, with room for a second \uXXXX in case this one
// is a high surrogate.
func (t *truncator) backslash() {
	t.pairRoom = !t.surr
	if t.mode == modeCopy && !t.strCut && t.pairRoom {
		p := len(t.out)
		if p+12 > t.fitLine() {
			t.cutString()
		} else if t.safeCut == -1 && p+12 > t.cutLine() {
			t.safeCut = p
		}
	}
	t.surr = false
	t.stringByte('\\')
}

// closeString handles the closing quote of a string. A string of at most
// keep bytes must not be cut, so ids survive whole: if it was, the output
// cannot be used and the fallback object is made instead.
func (t *truncator) closeString() {
	t.surr = false
	if t.strCut && t.strLen <= t.keep {
		t.overflow()
	}
	t.emit('"')
}

// cutString cuts the current string, at the end of out backed off to a
// character boundary or, if the content has passed the cut line, at the
// boundary remembered before it, and records where the marker goes.
func (t *truncator) cutString() {
	c := t.safeCut
	switch c {
	case -2:
		t.overflow()
		return
	case -1:
		c = runeStart(t.out, len(t.out), t.strStart)
	}
	t.out = t.out[:c]
	t.drop()
	t.cuts = append(t.cuts, c)
	t.markerCost += markerMax
	t.strCut = true
}

// rawCopy keeps the prefix of a line that is not JSON, while out is still
// a verbatim copy of the input.
func (t *truncator) rawCopy(p []byte) {
	if !t.exact {
		return
	}
	room := max(t.max-markerMax-len(t.out), 0)
	if len(p) <= room {
		t.out = append(t.out, p...)
		return
	}
	t.out = append(t.out, p[:room]...)
	t.drop()
}

// finish returns the truncated line once all of it has been fed. The
// result aliases out, except for the fallback object.
func (t *truncator) finish() []byte {
	m := Marker(t.n)
	if t.mode != modeRaw && !t.complete() {
		t.fail()
	}
	var b []byte
	switch {
	case t.mode == modeRaw:
		b = t.rawResult(m)
	case t.mode == modeScan || len(t.cuts) == 0:
		b = t.fields.object(t.max, m)
	default:
		b = t.insertMarkers(m)
	}
	return b[:len(b):len(b)]
}

// rawResult returns the verbatim prefix, cut on a character boundary so
// that the marker fits within max, followed by the marker.
func (t *truncator) rawResult(m string) []byte {
	n := min(len(t.out), max(t.max-len(m), 0))
	n = runeStart(t.out, n, 0)
	return append(t.out[:n], m...)
}

// insertMarkers writes the marker at every cut, working from the back so
// that out can be extended in place.
func (t *truncator) insertMarkers(m string) []byte {
	src := len(t.out)
	size := src + len(t.cuts)*len(m)
	var b []byte
	if size <= cap(t.out) {
		b = t.out[:size]
	} else {
		b = make([]byte, size)
		copy(b, t.out)
	}
	dst := size
	for i := len(t.cuts) - 1; i >= 0; i-- {
		c := t.cuts[i]
		dst -= src - c
		copy(b[dst:], b[c:src])
		dst -= len(m)
		copy(b[dst:], m)
		src = c
	}
	return b
}

// runeStart returns the largest i <= n such that b[floor:i] does not end
// in the middle of a UTF-8 sequence.
func runeStart(b []byte, n, floor int) int {
	for i := n - 1; i >= floor && i >= n-4; i-- {
		c := b[i]
		switch {
		case c < 0x80:
			return n
		case c >= 0xC0:
			size := 2
			if c >= 0xF0 {
				size = 4
			} else if c >= 0xE0 {
				size = 3
			}
			if i+size > n {
				return i
			}
			return n
		}
	}
	return n
}
