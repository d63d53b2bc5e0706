package jsonl

import (
	"bytes"
	"errors"
	"io"
	"math"
)

// DefaultMaxLineBytes is the MaxLineBytes used when ReaderOptions leaves it
// zero: 10 MiB.
const DefaultMaxLineBytes = 10 << 20

const (
	// defaultBufferSize is the read chunk size used when ReaderOptions leaves
	// BufferSize zero.
	defaultBufferSize = 256 << 10
	// slabSize is the size of the blocks small lines are carved from.
	slabSize = 64 << 10
	// ownAllocBytes is the length from which a line gets its own allocation
	// instead of a piece of the slab.
	ownAllocBytes = slabSize / 8
	// maxMaxLineBytes keeps arithmetic on MaxLineBytes from overflowing.
	maxMaxLineBytes = math.MaxInt / 2
	// maxEmptyReads is how many reads in a row may return no data and no
	// error before the Reader gives up with io.ErrNoProgress.
	maxEmptyReads = 100
)

// errBadReadCount reports an io.Reader that returned a byte count outside
// the buffer it was given.
var errBadReadCount = errors.New("jsonl: reader returned an invalid byte count")

// ReaderOptions configures a Reader. The zero value, like a nil pointer,
// means the defaults.
type ReaderOptions struct {
	// MaxLineBytes is the largest line delivered whole. A longer line is
	// delivered truncated (see Line and Truncate). Zero or less means
	// DefaultMaxLineBytes.
	MaxLineBytes int
	// BufferSize is the read chunk size: the length of the slice passed to
	// the underlying io.Reader. Zero or less means 256 KiB.
	BufferSize int
}

// Line is one line delivered by Reader.Next.
type Line struct {
	// Data is the line without its "\n" or "\r\n". It is owned by the
	// caller: the Reader never writes to it again. Its capacity is clipped
	// to its length, so appending to it never touches another line. Lines
	// under 8 KiB are carved out of shared 64 KiB blocks, so keeping one
	// keeps its block alive: copy a small line you keep for long.
	Data []byte
	// Truncated reports that the line was longer than the maximum and Data
	// is its truncated form (see Truncate).
	Truncated bool
	// OriginalSize is the length in bytes of the line as read, before
	// truncation and without the newline. It equals len(Data) when
	// Truncated is false.
	OriginalSize int64
}

// Reader reads newline-delimited lines from an io.Reader. It splits on '\n'
// in a large buffer, never fails on a long line and keeps at most about
// MaxLineBytes plus one buffer in memory. A Reader is not safe for
// concurrent use.
type Reader struct {
	rd      io.Reader
	max     int
	bufSize int

	buf   []byte
	start int // first byte of the pending line in buf
	scan  int // buf[start:scan] is known to hold no '\n'
	end   int // end of the buffered data

	err        error // sticky error from rd, io.EOF included
	emptyReads int

	slab     []byte // copy of buf[slabBase:slabBase+len(slab)]; nil when buf moved
	slabBase int
}

// NewReader returns a Reader reading from rd. A nil opts means the defaults
// (DefaultMaxLineBytes, 256 KiB reads). The buffer is allocated on the first
// call to Next.
func NewReader(rd io.Reader, opts *ReaderOptions) *Reader {
	r := &Reader{rd: rd, max: DefaultMaxLineBytes, bufSize: defaultBufferSize}
	if opts != nil {
		if opts.MaxLineBytes > 0 {
			r.max = min(opts.MaxLineBytes, maxMaxLineBytes)
		}
		if opts.BufferSize > 0 {
			r.bufSize = opts.BufferSize
		}
	}
	return r
}

// Next returns the next non-blank line. A line that is empty or holds only
// spaces, tabs, '\r', '\v' or '\f' is skipped. A line longer than
// MaxLineBytes is returned with Truncated set; that is not an error.
//
// At the end of the input Next returns io.EOF; a final line without a
// trailing newline is returned first. Any other error from the underlying
// io.Reader is returned as it is (a partial line pending at that moment is
// dropped), and so is io.ErrNoProgress after 100 reads in a row that return
// nothing. Once Next has returned an error, it keeps returning it.
func (r *Reader) Next() (Line, error) {
	for {
		if i := bytes.IndexByte(r.buf[r.scan:r.end], '\n'); i >= 0 {
			nl := r.scan + i
			s := r.start
			r.start = nl + 1
			r.scan = r.start
			if l, ok := r.deliver(s, nl); ok {
				return l, nil
			}
			continue
		}
		r.scan = r.end
		if r.end-r.start > r.max+1 {
			// More than max bytes (besides a possible '\r') and no newline
			// yet: the line is too long, truncate it while it streams by.
			l, ok, err := r.stream()
			if err != nil {
				return Line{}, err
			}
			if ok {
				return l, nil
			}
			continue
		}
		if r.err != nil {
			if r.err == io.EOF && r.start < r.end {
				s := r.start
				r.start = r.end
				if l, ok := r.deliver(s, r.end); ok {
					return l, nil
				}
			}
			return Line{}, r.err
		}
		r.fill()
	}
}

// deliver turns the complete line buf[s:e], newline removed, into a Line.
// It reports false for a blank line.
func (r *Reader) deliver(s, e int) (Line, bool) {
	if e > s && r.buf[e-1] == '\r' {
		e--
	}
	line := r.buf[s:e]
	if isBlank(line) {
		return Line{}, false
	}
	if len(line) > r.max {
		return Line{Data: r.truncateBuffered(line), Truncated: true, OriginalSize: int64(len(line))}, true
	}
	return Line{Data: r.own(s, e), OriginalSize: int64(len(line))}, true
}

// own returns a copy of buf[s:e] that belongs to the caller. Small lines
// are carved out of a slab: a copy of up to slabSize bytes of buf taken in
// one go, which serves the lines that follow too. Nothing in a slab is
// written after it is taken, and each line's capacity is clipped.
func (r *Reader) own(s, e int) []byte {
	n := e - s
	if n >= ownAllocBytes {
		return clip(append([]byte(nil), r.buf[s:e]...))
	}
	if r.slab == nil || s < r.slabBase || e > r.slabBase+len(r.slab) {
		// append does not zero what it copies, unlike make.
		r.slab = append([]byte(nil), r.buf[s:min(r.end, s+slabSize)]...)
		r.slabBase = s
	}
	off := s - r.slabBase
	return r.slab[off : off+n : off+n]
}

func clip(b []byte) []byte { return b[:len(b):len(b)] }

// truncateBuffered truncates a complete overlong line held in buf. When buf
// was grown for this line, the line is truncated in place and buf is handed
// over with it, so that memory is not needed twice.
func (r *Reader) truncateBuffered(line []byte) []byte {
	if len(r.buf) <= r.bufSize {
		out, _ := Truncate(line, r.max)
		return out
	}
	r.replaceBuf(r.buf[r.start:r.end])
	var t truncator
	t.init(r.max, line[:0])
	t.write(line)
	return t.finish()
}

// replaceBuf gives the Reader a fresh buffer holding a copy of keep and
// drops its reference to the old one.
func (r *Reader) replaceBuf(keep []byte) {
	size := r.bufSize
	for size < 2*len(keep) {
		size *= 2
	}
	nb := make([]byte, size)
	r.end = copy(nb, keep)
	r.buf = nb
	r.slab = nil
	r.start, r.scan = 0, 0
}

// stream truncates an overlong line whose newline has not been read yet. It
// feeds the bytes buffered so far and then every further chunk of the line
// to a truncator, so the line is never held whole. It reports false when
// the line turned out to be blank.
func (r *Reader) stream() (Line, bool, error) {
	var t truncator
	seg := r.buf[r.start:r.end]
	held := trailingCR(seg)
	seg = seg[:len(seg)-held]
	if len(r.buf) > r.bufSize {
		// buf was grown for this line: truncate in place, reading on into
		// a fresh buffer. The truncator only ever writes behind its input.
		t.init(r.max, seg[:0:cap(seg)])
		r.replaceBuf(r.buf[r.end-held : r.end])
	} else {
		t.init(r.max, make([]byte, 0, r.max))
		r.start = r.end - held
	}
	t.write(seg)
	r.scan = r.end

	for {
		if i := bytes.IndexByte(r.buf[r.scan:r.end], '\n'); i >= 0 {
			nl := r.scan + i
			seg := r.buf[r.start:nl]
			t.write(seg[:len(seg)-trailingCR(seg)])
			r.start = nl + 1
			r.scan = r.start
			return r.finishStream(&t)
		}
		seg := r.buf[r.start:r.end]
		held := trailingCR(seg)
		t.write(seg[:len(seg)-held])
		r.start = r.end - held
		r.scan = r.end
		if r.err != nil {
			if r.err == io.EOF {
				r.start = r.end // a final "\r" is dropped like a "\r\n"
				return r.finishStream(&t)
			}
			return Line{}, false, r.err
		}
		r.fill()
	}
}

func (r *Reader) finishStream(t *truncator) (Line, bool, error) {
	if !t.nonSpace {
		return Line{}, false, nil
	}
	n := t.n
	return Line{Data: t.finish(), Truncated: true, OriginalSize: n}, true, nil
}

// fill makes room in buf and reads from rd once. Errors are kept in r.err.
func (r *Reader) fill() {
	// No line read from here on can be in the slab: it copies at most up
	// to r.end. Dropping it now means a Reader blocked in Read (an idle
	// session) does not keep up to 64 KiB of old lines alive.
	r.slab = nil
	if r.buf == nil {
		r.buf = make([]byte, r.bufSize)
	}
	if r.end == len(r.buf) {
		pending := r.end - r.start
		switch {
		case pending < len(r.buf)/2 && len(r.buf) > r.bufSize && pending <= r.bufSize/2:
			// A long line is gone: return to a buffer of the normal size.
			r.replaceBuf(r.buf[r.start:r.end])
		case pending < len(r.buf)/2 || len(r.buf) >= r.max+2:
			r.scan -= r.start
			r.end = copy(r.buf, r.buf[r.start:r.end])
			r.start = 0
			r.slab = nil
		default:
			// The pending line fills most of the buffer: grow it, up to
			// max+2 bytes (a whole line of max bytes plus "\r\n"). A line
			// longer than that is streamed through a truncator instead.
			size := 2 * len(r.buf)
			if size > r.max+2 {
				size = r.max + 2
			}
			nb := make([]byte, size)
			r.scan -= r.start
			r.end = copy(nb, r.buf[r.start:r.end])
			r.start = 0
			r.buf = nb
			r.slab = nil
		}
	}
	n, err := r.rd.Read(r.buf[r.end:])
	if n < 0 || n > len(r.buf)-r.end {
		n, err = 0, errBadReadCount
	}
	r.end += n
	switch {
	case err != nil:
		r.err = err
	case n > 0:
		r.emptyReads = 0
	default:
		r.emptyReads++
		if r.emptyReads >= maxEmptyReads {
			r.err = io.ErrNoProgress
		}
	}
}

// trailingCR returns 1 if b ends with '\r', else 0.
func trailingCR(b []byte) int {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return 1
	}
	return 0
}

// isBlank reports whether b is empty or holds only blank bytes.
func isBlank(b []byte) bool {
	if len(b) > 0 && b[0] > ' ' {
		return false // the common case: a line starting with '{'
	}
	return !hasNonBlank(b)
}

func hasNonBlank(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\v', '\f':
		default:
			return true
		}
	}
	return false
}
