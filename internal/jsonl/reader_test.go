package jsonl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads lines until an error and returns them with that error.
func readAll(r *Reader) ([]Line, error) {
	var lines []Line
	for {
		l, err := r.Next()
		if err != nil {
			return lines, err
		}
		lines = append(lines, l)
	}
}

// readStrings reads every line of in and returns the data of each.
func readStrings(t *testing.T, in io.Reader, opts *ReaderOptions) []string {
	t.Helper()
	lines, err := readAll(NewReader(in, opts))
	if err != io.EOF {
		t.Fatalf("Next: got error %v, want io.EOF", err)
	}
	out := []string{}
	for _, l := range lines {
		if l.Truncated || l.OriginalSize != int64(len(l.Data)) {
			t.Errorf("line %q: Truncated=%v OriginalSize=%d, want whole", l.Data, l.Truncated, l.OriginalSize)
		}
		out = append(out, string(l.Data))
	}
	return out
}

// readers are the ways the framing tests deliver their input.
var readers = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"whole", func(r io.Reader) io.Reader { return r }},
	{"one-byte", iotest.OneByteReader},
	{"half", iotest.HalfReader},
	{"data-err", iotest.DataErrReader},
}

func TestReaderFraming(t *testing.T) {
	long := strings.Repeat("y", 3000) // longer than the small buffers below
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty input", "", []string{}},
		{"only newlines", "\n\n\r\n\n", []string{}},
		{"one line", "{\"a\":1}\n", []string{`{"a":1}`}},
		{"final line without newline", "{\"a\":1}\n{\"b\":2}", []string{`{"a":1}`, `{"b":2}`}},
		{"only a final line", "x", []string{"x"}},
		{"crlf", "a\r\nb\r\n", []string{"a", "b"}},
		{"final crlf without newline", "a\r\nb\r", []string{"a", "b"}},
		{"cr inside a line is kept", "a\rb\n", []string{"a\rb"}},
		{"blank lines skipped", "a\n\n   \n\t\r\n \v\f \nb\n", []string{"a", "b"}},
		{"leading spaces kept", "  {\"a\":1}\n", []string{`  {"a":1}`}},
		{"several lines", "1\n2\n3\n4\n5\n", []string{"1", "2", "3", "4", "5"}},
		{"long line", "s\n" + long + "\ne\n", []string{"s", long, "e"}},
		{"long final line", "s\n" + long, []string{"s", long}},
		{"utf8", "{\"t\":\"héllo ✓ 😀\"}\n", []string{"{\"t\":\"héllo ✓ 😀\"}"}},
	}
	for _, tt := range tests {
		for _, rd := range readers {
			for _, bufSize := range []int{0, 1, 2, 7, 64} {
				t.Run(fmt.Sprintf("%s/%s/buf%d", tt.name, rd.name, bufSize), func(t *testing.T) {
					got := readStrings(t, rd.wrap(strings.NewReader(tt.in)), &ReaderOptions{BufferSize: bufSize})
					if !equalStrings(got, tt.want) {
						t.Errorf("got %q, want %q", got, tt.want)
					}
				})
			}
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReaderLimitEdges checks lines around MaxLineBytes: a line of exactly
// max bytes is whole even with "\r\n", one byte more is truncated.
func TestReaderLimitEdges(t *testing.T) {
	const max = 100
	exact := `{"k":"` + strings.Repeat("a", max-8) + `"}`
	over := `{"k":"` + strings.Repeat("a", max-7) + `"}`
	for _, bufSize := range []int{1, 16, 101, 102, 103, 4096} {
		for _, rd := range readers {
			for _, nl := range []string{"\n", "\r\n", ""} {
				name := fmt.Sprintf("buf%d/%s/%q", bufSize, rd.name, nl)
				t.Run(name, func(t *testing.T) {
					in := exact + nl + over + nl + exact + nl + "{}" + nl
					lines, err := readAll(NewReader(rd.wrap(strings.NewReader(in)), &ReaderOptions{MaxLineBytes: max, BufferSize: bufSize}))
					if err != io.EOF {
						t.Fatalf("error %v", err)
					}
					if nl == "" {
						// Everything is one line of 4*len-ish bytes.
						if len(lines) != 1 || !lines[0].Truncated {
							t.Fatalf("got %d lines, want 1 truncated", len(lines))
						}
						return
					}
					if len(lines) != 4 {
						t.Fatalf("got %d lines, want 4", len(lines))
					}
					for i, want := range []string{exact, over, exact, "{}"} {
						l := lines[i]
						if l.OriginalSize != int64(len(want)) {
							t.Errorf("line %d: OriginalSize %d, want %d", i, l.OriginalSize, len(want))
						}
						if len(want) <= max {
							if l.Truncated || string(l.Data) != want {
								t.Errorf("line %d: got %q (truncated %v), want it whole", i, l.Data, l.Truncated)
							}
							continue
						}
						wantData, _ := Truncate([]byte(want), max)
						if !l.Truncated || !bytes.Equal(l.Data, wantData) {
							t.Errorf("line %d: got %q (truncated %v), want %q", i, l.Data, l.Truncated, wantData)
						}
					}
				})
			}
		}
	}
}

// TestReaderDataOwned checks that delivered lines survive later calls and
// that appending to one does not write over another.
func TestReaderDataOwned(t *testing.T) {
	var in strings.Builder
	var want []string
	for i := range 5000 {
		l := fmt.Sprintf(`{"i":%d,"s":"%s"}`, i, strings.Repeat("z", i%300))
		if i%1000 == 999 {
			l = `{"big":"` + strings.Repeat("b", 20000) + `"}` // own allocation
		}
		want = append(want, l)
		in.WriteString(l + "\n")
	}
	lines, err := readAll(NewReader(strings.NewReader(in.String()), &ReaderOptions{BufferSize: 1000}))
	if err != io.EOF {
		t.Fatal(err)
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d", len(lines), len(want))
	}
	for i := range lines {
		if cap(lines[i].Data) != len(lines[i].Data) {
			t.Fatalf("line %d: cap %d != len %d", i, cap(lines[i].Data), len(lines[i].Data))
		}
		_ = append(lines[i].Data, "XXXXXXXXXXXXXXXX"...)
	}
	for i := range lines {
		if string(lines[i].Data) != want[i] {
			t.Fatalf("line %d: got %q, want %q", i, lines[i].Data, want[i])
		}
	}
}

var errBoom = errors.New("boom")

// failingReader returns its data, then err.
type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestReaderErrors(t *testing.T) {
	wrapped := fmt.Errorf("read stdout: %w", errBoom)
	tests := []struct {
		name      string
		rd        io.Reader
		max       int
		wantLines []string
		wantErr   error
	}{
		{"error at once", iotest.ErrReader(errBoom), 0, nil, errBoom},
		{"error after lines", &failingReader{[]byte("a\nb\n"), errBoom}, 0, []string{"a", "b"}, errBoom},
		{"partial line dropped", &failingReader{[]byte("a\npartial"), wrapped}, 0, []string{"a"}, errBoom},
		{"error inside an overlong line", &failingReader{[]byte("a\n" + strings.Repeat("x", 500)), errBoom}, 100, []string{"a"}, errBoom},
		{"timeout", iotest.TimeoutReader(strings.NewReader("a\nb")), 0, []string{"a"}, iotest.ErrTimeout},
		{"no progress", &failingReader{[]byte("a\n"), nil}, 0, []string{"a"}, io.ErrNoProgress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.rd, &ReaderOptions{MaxLineBytes: tt.max, BufferSize: 64})
			lines, err := readAll(r)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			var got []string
			for _, l := range lines {
				got = append(got, string(l.Data))
			}
			if !equalStrings(got, tt.wantLines) {
				t.Errorf("lines %q, want %q", got, tt.wantLines)
			}
			if _, err2 := r.Next(); err2 != err {
				t.Errorf("second Next: %v, want the same error %v", err2, err)
			}
		})
	}
}

// badCountReader claims to have read more than it was given.
type badCountReader struct{}

func (badCountReader) Read(p []byte) (int, error) { return len(p) + 1, nil }

func TestReaderBadCount(t *testing.T) {
	_, err := NewReader(badCountReader{}, nil).Next()
	if !errors.Is(err, errBadReadCount) {
		t.Fatalf("error %v, want errBadReadCount", err)
	}
}

func TestReaderBlankOverlongLine(t *testing.T) {
	in := "a\n" + strings.Repeat(" \t", 5000) + "\r\nb\n" + strings.Repeat(" ", 3000)
	got := readStrings(t, strings.NewReader(in), &ReaderOptions{MaxLineBytes: 100, BufferSize: 64})
	if want := []string{"a", "b"}; !equalStrings(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestReaderDefaults(t *testing.T) {
	for _, opts := range []*ReaderOptions{nil, {}, {MaxLineBytes: -1, BufferSize: -1}} {
		r := NewReader(strings.NewReader(""), opts)
		if r.max != DefaultMaxLineBytes || r.bufSize != defaultBufferSize {
			t.Errorf("opts %+v: max %d buf %d, want defaults", opts, r.max, r.bufSize)
		}
	}
	huge := strings.Repeat("h", 100000)
	got := readStrings(t, strings.NewReader(huge+"\nb"), &ReaderOptions{MaxLineBytes: math.MaxInt, BufferSize: 10})
	if !equalStrings(got, []string{huge, "b"}) {
		t.Errorf("MaxLineBytes = MaxInt: lines not delivered whole")
	}
	if DefaultMaxLineBytes != 10485760 {
		t.Errorf("DefaultMaxLineBytes = %d", DefaultMaxLineBytes)
	}
}

// TestReaderShrinksBuffer checks that a buffer grown for a long line goes
// back to the normal size afterwards.
func TestReaderShrinksBuffer(t *testing.T) {
	in := strings.Repeat("q", 50000) + "\n" + strings.Repeat("s\n", 100000)
	r := NewReader(strings.NewReader(in), &ReaderOptions{BufferSize: 1024})
	if l, err := r.Next(); err != nil || len(l.Data) != 50000 {
		t.Fatalf("first line: %d bytes, %v", len(l.Data), err)
	}
	for range 90000 {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.buf) != 1024 {
		t.Errorf("buffer is %d bytes after the long line, want 1024", len(r.buf))
	}
}

// TestReaderBuffered pins Buffered (buffered.go) to the Reader's
// bookkeeping: bytes read but not yet returned.
func TestReaderBuffered(t *testing.T) {
	r := NewReader(strings.NewReader("a\nbb\r\nccc"), nil)
	if n := r.Buffered(); n != 0 {
		t.Errorf("before Next: Buffered %d, want 0", n)
	}
	for _, want := range []int{7, 3, 0} { // "bb\r\nccc", "ccc", nothing
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if n := r.Buffered(); n != want {
			t.Errorf("Buffered %d, want %d", n, want)
		}
	}
	if _, err := r.Next(); err != io.EOF || r.Buffered() != 0 {
		t.Errorf("at EOF: %v, Buffered %d", err, r.Buffered())
	}
}
