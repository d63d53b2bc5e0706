package jsonl

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// fuzzSeeds are lines worth mutating: long strings, escapes, multi-byte
// characters, surrogate pairs, structure-heavy lines, lines that are not
// JSON.
var fuzzSeeds = []string{
	`{"type":"assistant","uuid":"u1","session_id":"s1","message":{"content":[{"type":"text","text":"` + strings.Repeat("x", 700) + `"}]}}`,
	`{"type":"user","a":"` + strings.Repeat(`\"\\\u00e9é✓`, 60) + `","b":"` + strings.Repeat(`😀\ud83d\ude00`, 50) + `","uuid":"u"}`,
	`{"type":"x","data":[` + strings.Repeat("1,-2.5e+3,true,null,", 40) + `0],"session_id":"s"}`,
	`[` + strings.Repeat(`{"k":"`+strings.Repeat("v", 40)+`"},`, 20) + `{}]`,
	`"` + strings.Repeat("s", 600) + `"`,
	strings.Repeat("9", 600),
	"{\n  \"type\": \"t\",\n  \"text\": \"" + strings.Repeat("w ", 300) + "\"\n}",
	"not json " + strings.Repeat("é", 300),
	strings.Repeat("[", 300) + strings.Repeat("]", 300),
	`{"truncated":true,"type":"t","x":"` + strings.Repeat("y", 600) + `"}`,
	`{"a":"` + strings.Repeat("z", 300) + `",` + strings.Repeat(" ", 300) + `"b":1}`,
	`{"bad":"` + strings.Repeat("q", 600) + `\x"}`,
	"{\"ctl\":\"\x01" + strings.Repeat("c", 600) + "\"}",
}

func FuzzReader(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s+"\n"+`{"type":"next"}`+"\r\n\n  \n"+s), uint16(i*37), uint8(i*11), i%3 == 0)
	}
	f.Add([]byte(""), uint16(0), uint8(0), false)
	f.Add([]byte("a\r\nb\rc\n\n"), uint16(1), uint8(1), true)
	f.Fuzz(func(t *testing.T, data []byte, maxSeed uint16, bufSeed uint8, oneByte bool) {
		max := 64 + int(maxSeed)%449 // 64..512
		bufSize := 1 + int(bufSeed)  // 1..256: many lines span reads
		var rd io.Reader = bytes.NewReader(data)
		if oneByte {
			rd = iotest.OneByteReader(rd)
		}
		lines, err := readAll(NewReader(rd, &ReaderOptions{MaxLineBytes: max, BufferSize: bufSize}))
		if err != io.EOF {
			t.Fatalf("error %v", err)
		}

		var want [][]byte
		for _, l := range bytes.Split(data, []byte("\n")) {
			l = l[:len(l)-trailingCR(l)]
			if hasNonBlank(l) {
				want = append(want, l)
			}
		}
		if len(lines) != len(want) {
			t.Fatalf("%d lines, want %d", len(lines), len(want))
		}
		for i, l := range lines {
			orig := want[i]
			if l.OriginalSize != int64(len(orig)) {
				t.Fatalf("line %d: OriginalSize %d, want %d", i, l.OriginalSize, len(orig))
			}
			if bytes.IndexByte(l.Data, '\n') >= 0 {
				t.Fatalf("line %d has a newline", i)
			}
			if len(orig) <= max {
				if l.Truncated || !bytes.Equal(l.Data, orig) {
					t.Fatalf("line %d: got %q (truncated %v), want it whole: %q", i, l.Data, l.Truncated, orig)
				}
				continue
			}
			if !l.Truncated {
				t.Fatalf("line %d of %d bytes not truncated", i, len(orig))
			}
			checkTruncated(t, orig, l.Data, max)
			// Streaming through the Reader and truncating in memory agree.
			if mem, _ := Truncate(orig, max); !bytes.Equal(mem, l.Data) {
				t.Fatalf("line %d: Reader gave\n%q\nTruncate gives\n%q", i, l.Data, mem)
			}
		}
	})
}

func FuzzTruncate(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), uint16(i*41), uint16(i*97))
	}
	f.Fuzz(func(t *testing.T, line []byte, maxSeed, splitSeed uint16) {
		max := 1 + int(maxSeed)%700
		out, cut := Truncate(line, max)
		if len(line) <= max {
			if cut || !bytes.Equal(out, line) {
				t.Fatalf("short line changed: %q -> %q, %v", line, out, cut)
			}
			return
		}
		if !cut {
			t.Fatalf("line of %d bytes, max %d: not truncated", len(line), max)
		}
		checkTruncated(t, line, out, max)
		// Fed in two pieces, the truncator gives the same result.
		split := int(splitSeed) % (len(line) + 1)
		var tr truncator
		tr.init(max, make([]byte, 0, max))
		tr.write(line[:split])
		tr.write(line[split:])
		if got := tr.finish(); !bytes.Equal(got, out) {
			t.Fatalf("split at %d gives\n%q\nwhole gives\n%q", split, got, out)
		}
	})
}

// checkTruncated checks the promises of Truncate for a line that was cut.
func checkTruncated(t *testing.T, orig, out []byte, max int) {
	t.Helper()
	if len(out) > max && len(out) > maxSmallResult {
		t.Fatalf("%d bytes, max %d", len(out), max)
	}
	if !bytes.Contains(out, []byte(Marker(int64(len(orig))))) {
		t.Fatalf("no marker in %q", out)
	}
	if json.Valid(orig) && !json.Valid(out) {
		t.Fatalf("valid JSON\n%q\nbecame invalid\n%q", orig, out)
	}
	if utf8.Valid(orig) && !utf8.Valid(out) {
		t.Fatalf("valid UTF-8\n%q\nbecame invalid\n%q", orig, out)
	}
}
