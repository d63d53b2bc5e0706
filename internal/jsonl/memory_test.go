package jsonl

import (
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"
)

// hugeLineReader produces head, then size bytes of string content, then
// tail, without ever holding them.
type hugeLineReader struct {
	parts [][]byte
	fill  int64 // content bytes still to produce, between parts 0 and 1
	off   int   // position in filler
}

func newHugeLineReader(head, tail string, size int64) *hugeLineReader {
	return &hugeLineReader{parts: [][]byte{[]byte(head), []byte(tail)}, fill: size}
}

var filler = []byte(strings.Repeat(`lorem ipsum dolor sit amet, \"quoted\" é✓ `, 1000))

func (h *hugeLineReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		switch {
		case len(h.parts[0]) > 0:
			c := copy(p[n:], h.parts[0])
			h.parts[0] = h.parts[0][c:]
			n += c
		case h.fill > 0:
			end := min(int64(len(filler)), int64(h.off)+h.fill)
			c := copy(p[n:], filler[h.off:end])
			h.off = (h.off + c) % len(filler)
			h.fill -= int64(c)
			n += c
		case len(h.parts[1]) > 0:
			c := copy(p[n:], h.parts[1])
			h.parts[1] = h.parts[1][c:]
			n += c
		default:
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
	}
	return n, nil
}

// TestReaderBoundedMemory reads a 200 MB line with the default limit and
// checks that the Reader allocated far less than the line.
func TestReaderBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 200 MB")
	}
	const size = 200 << 20
	pieces := int64(size / len(filler) * len(filler)) // whole fillers: escapes stay whole
	head := `{"type":"user","uuid":"u-big","message":{"role":"user","content":[{"type":"tool_result","content":"`
	tail := `"}]},"session_id":"s1"}` + "\n" + `{"type":"result","uuid":"u2"}` + "\n"
	original := int64(len(head)) + pieces + int64(len(tail)-len(`{"type":"result","uuid":"u2"}`)-2)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)

	r := NewReader(newHugeLineReader(head, tail, pieces), nil)
	big, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	next, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("third Next: %v, want io.EOF", err)
	}

	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("line of %d bytes: %d bytes allocated, %d delivered", big.OriginalSize, allocated, len(big.Data))
	if allocated > 60<<20 {
		t.Errorf("allocated %d MB reading a %d MB line, want < 60 MB", allocated>>20, size>>20)
	}
	if !big.Truncated || big.OriginalSize != original {
		t.Errorf("Truncated %v, OriginalSize %d, want true, %d", big.Truncated, big.OriginalSize, original)
	}
	if len(big.Data) > DefaultMaxLineBytes || !json.Valid(big.Data) {
		t.Errorf("%d bytes, valid JSON %v", len(big.Data), json.Valid(big.Data))
	}
	checkFields(t, topFields(t, big.Data), map[string]any{"type": "user", "uuid": "u-big", "session_id": "s1"})
	if string(next.Data) != `{"type":"result","uuid":"u2"}` || next.Truncated {
		t.Errorf("next line %q (truncated %v)", next.Data, next.Truncated)
	}
}
