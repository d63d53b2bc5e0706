package jsonl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// maxSmallResult is the longest a truncated line can be when max is
// smaller than it: {"truncated":"<longest marker>"}.
const maxSmallResult = len(`{"truncated":""}`) + markerMax

func TestMarker(t *testing.T) {
	if got, want := Marker(12345), "[truncated: original_size=12345 bytes]"; got != want {
		t.Errorf("Marker = %q, want %q", got, want)
	}
	if got := len(Marker(1<<63 - 1)); got != markerMax {
		t.Errorf("longest marker is %d bytes, markerMax is %d", got, markerMax)
	}
	if maxSmallResult != 68 {
		t.Errorf("maxSmallResult = %d, the doc of Truncate says 68", maxSmallResult)
	}
}

// bigAssistantLine is the line of the brief: a 12 MB text block.
func bigAssistantLine(textLen int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":"assistant","uuid":"u1","session_id":"s1","message":{"content":[{"type":"text","text":"`)
	b.Write(bytes.Repeat([]byte("x"), textLen))
	b.WriteString(`"}]}}`)
	return b.Bytes()
}

// topFields decodes the top-level members of a JSON object.
func topFields(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%.300s", err, data)
	}
	return m
}

func checkFields(t *testing.T, m map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if m[k] != v {
			t.Errorf("member %q = %v, want %v", k, m[k], v)
		}
	}
}

func TestReaderBigLine(t *testing.T) {
	line := bigAssistantLine(12 << 20)
	in := append(append([]byte(`{"type":"system"}`+"\n"), line...), "\n{\"type\":\"result\"}\n"...)
	ids := map[string]any{"type": "assistant", "uuid": "u1", "session_id": "s1"}

	t.Run("default max truncates", func(t *testing.T) {
		lines, err := readAll(NewReader(bytes.NewReader(in), nil))
		if err != io.EOF || len(lines) != 3 {
			t.Fatalf("%d lines, error %v", len(lines), err)
		}
		l := lines[1]
		if !l.Truncated || l.OriginalSize != int64(len(line)) {
			t.Fatalf("Truncated %v, OriginalSize %d, want true, %d", l.Truncated, l.OriginalSize, len(line))
		}
		if len(l.Data) > DefaultMaxLineBytes+200 {
			t.Errorf("%d bytes, want at most %d", len(l.Data), DefaultMaxLineBytes+200)
		}
		if len(l.Data) < DefaultMaxLineBytes-maxReserve-100 {
			t.Errorf("%d bytes: the cut came too early", len(l.Data))
		}
		if !json.Valid(l.Data) {
			t.Fatalf("not valid JSON: ...%s", l.Data[len(l.Data)-200:])
		}
		if !bytes.Contains(l.Data, []byte(Marker(int64(len(line))))) {
			t.Errorf("no marker %q", Marker(int64(len(line))))
		}
		checkFields(t, topFields(t, l.Data), ids)
		if string(lines[2].Data) != `{"type":"result"}` {
			t.Errorf("next line %q", lines[2].Data)
		}
		same, _ := Truncate(line, DefaultMaxLineBytes)
		if !bytes.Equal(same, l.Data) {
			t.Errorf("Truncate and Reader disagree")
		}
	})
	t.Run("16MiB max keeps it whole", func(t *testing.T) {
		lines, err := readAll(NewReader(iotestHalf(in), &ReaderOptions{MaxLineBytes: 16 << 20}))
		if err != io.EOF || len(lines) != 3 {
			t.Fatalf("%d lines, error %v", len(lines), err)
		}
		if l := lines[1]; l.Truncated || !bytes.Equal(l.Data, line) {
			t.Errorf("line not delivered whole (truncated %v, %d bytes)", l.Truncated, len(l.Data))
		}
	})
}

func iotestHalf(b []byte) io.Reader { return readers[2].wrap(bytes.NewReader(b)) }

// TestTruncateCutPoint cuts strings made of escapes and multi-byte
// characters at every possible position.
func TestTruncateCutPoint(t *testing.T) {
	pieces := []string{`\"`, `\\`, `\u00e9`, `é`, `✓`, `😀`, `\ud83d\ude00`, `a`, `\n`}
	for _, max := range []int{80, 120, 200, 333, 1000} {
		for shift := range 40 {
			var s strings.Builder
			s.WriteString(`{"type":"assistant","pad":"` + strings.Repeat("p", shift) + `","text":"`)
			for i := 0; s.Len() < 3*max; i++ {
				s.WriteString(pieces[(i*7+shift)%len(pieces)])
			}
			s.WriteString(`","uuid":"u1"}`)
			line := []byte(s.String())
			if !json.Valid(line) {
				t.Fatalf("bad test line %s", line)
			}
			out, cut := Truncate(line, max)
			if !cut || len(out) > max {
				t.Fatalf("max %d: cut %v, %d bytes", max, cut, len(out))
			}
			if !json.Valid(out) || !utf8.Valid(out) {
				t.Fatalf("max %d shift %d: invalid result %s", max, shift, out)
			}
			checkNoLoneSurrogate(t, out)
			if max >= 200 {
				checkFields(t, topFields(t, out), map[string]any{"type": "assistant", "uuid": "u1"})
			}
		}
	}
}

// checkNoLoneSurrogate fails if a surrogate pair escape was split.
func checkNoLoneSurrogate(t *testing.T, b []byte) {
	t.Helper()
	if i := bytes.Index(b, []byte(`\ud83d`)); i >= 0 && !bytes.HasPrefix(b[i+6:], []byte(`\ude00`)) {
		t.Errorf("surrogate pair split: %s", b[i:])
	}
}

func TestTruncate(t *testing.T) {
	big := strings.Repeat("x", 5000)
	nums := strings.Repeat("1,", 5000) + "1"
	tests := []struct {
		name  string
		in    string
		max   int
		valid bool           // the result must be valid JSON
		has   map[string]any // top-level members the result must have
		want  string         // the exact result, if set
	}{
		{
			name: "short line unchanged", in: `{"a":"b"}`, max: 9,
			want: `{"a":"b"}`,
		},
		{
			name: "big string cut", in: `{"type":"user","content":"` + big + `","session_id":"s1"}`, max: 400,
			valid: true, has: map[string]any{"type": "user", "session_id": "s1"},
		},
		{
			name: "two big strings", in: `{"type":"user","a":"` + big + `","b":"` + big + `","uuid":"u"}`, max: 600,
			valid: true, has: map[string]any{"type": "user", "uuid": "u"},
		},
		{
			name: "structure alone too big", in: `{"type":"x","n":3.5,"ok":true,"none":null,"data":[` + nums + `],"uuid":"u9"}`, max: 300,
			valid: true, has: map[string]any{"type": "x", "n": 3.5, "ok": true, "none": nil, "uuid": "u9", "truncated": "{M}"},
		},
		{
			// The cut at 2048 leaves room for the numbers, then the content
			// of "id" (100 escapes) starts at 3900. It cannot fit; a cut
			// would back off to the escape at 3980, leaving room for `"}`.
			// But it is a short string (at most 256 bytes), which is never
			// cut: the result falls back, with "id" whole.
			name: "short string never cut",
			in:   `{"type":"t","a":"` + strings.Repeat("x", 3000) + `","b":[` + strings.Repeat("1,", 918) + `1],"id":"` + strings.Repeat(`\n`, 100) + `"}`,
			max:  4096, valid: true, has: map[string]any{"type": "t", "id": strings.Repeat("\n", 100), "truncated": "{M}"},
		},
		{
			name: "fallback puts priority keys first", in: `{"aaa":"` + strings.Repeat("1", 200) + `","data":[` + nums + `],"type":"x","session_id":"s"}`, max: 120,
			want: `{"type":"x","session_id":"s","truncated":"{M}"}`,
		},
		{
			name: "first of a duplicate priority key kept", in: `{"type":"a","type":"b","x":1,"x":2,"data":[` + nums + `]}`, max: 100,
			want: `{"type":"a","x":1,"x":2,"truncated":"{M}"}`,
		},
		{
			name: "original truncated member dropped", in: `{"truncated":false,"data":[` + nums + `]}`, max: 100,
			want: `{"truncated":"{M}"}`,
		},
		{
			name: "top-level array", in: `[` + nums + `]`, max: 100,
			want: `{"truncated":"{M}"}`,
		},
		{
			name: "top-level string", in: `"` + big + `"`, max: 100,
			want: `"` + strings.Repeat("x", 100-markerMax-2) + `{M}"`,
		},
		{
			name: "top-level number", in: strings.Repeat("9", 500), max: 100,
			want: `{"truncated":"{M}"}`,
		},
		{
			name: "whitespace only dropped: fallback", in: `{"type":"t",` + strings.Repeat(" ", 500) + `"a":1}`, max: 200,
			want: `{"type":"t","a":1,"truncated":"{M}"}`,
		},
		{
			name: "pretty-printed", in: "{\n  \"type\": \"t\",\n  \"text\": \"" + big + "\",\n  \"uuid\": \"u\"\n}", max: 300,
			valid: true, has: map[string]any{"type": "t", "uuid": "u"},
		},
		{
			name: "not JSON", in: "hello " + big, max: 100,
			want: "hello " + strings.Repeat("x", 100-markerMax-6) + "{M}",
		},
		{
			name: "not JSON, multibyte at the cut", in: strings.Repeat("é", 3000), max: 100,
			want: strings.Repeat("é", (100-markerMax)/2) + "{M}",
		},
		{
			name: "invalid after the cut", in: `{"text":"` + big + `",oops}`, max: 100,
			want: `{"text":"` + strings.Repeat("x", 100-markerMax-1-9) + "{M}",
		},
		{
			name: "incomplete JSON", in: `{"text":"` + big, max: 100,
			want: `{"text":"` + strings.Repeat("x", 100-markerMax-1-9) + "{M}",
		},
		{
			name: "too deep", in: strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), max: 100,
			// The structure overflowed before the depth error: the whole verbatim
			// output is there, cut to fit the marker (38 bytes).
			want: strings.Repeat("[", 100-38) + "{M}",
		},
		{
			name: "max deep is JSON", in: strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth), max: 100,
			want: `{"truncated":"{M}"}`,
		},
		{
			name: "tiny max", in: `{"type":"assistant","text":"` + big + `"}`, max: 10,
			want: `{"truncated":"{M}"}`,
		},
		{
			name: "tiny max, not JSON", in: big, max: 10,
			want: "{M}",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Marker(int64(len(tt.in)))
			tt.want = strings.ReplaceAll(tt.want, "{M}", m)
			for k, v := range tt.has {
				if v == "{M}" {
					tt.has[k] = m
				}
			}
			out, cut := Truncate([]byte(tt.in), tt.max)
			if cut != (len(tt.in) > tt.max) {
				t.Errorf("truncated = %v for %d bytes, max %d", cut, len(tt.in), tt.max)
			}
			if tt.want != "" && string(out) != tt.want {
				t.Errorf("got  %s\nwant %s", out, tt.want)
			}
			if cut {
				if len(out) > max(tt.max, maxSmallResult) {
					t.Errorf("%d bytes, max %d", len(out), tt.max)
				}
				if !bytes.Contains(out, []byte(Marker(int64(len(tt.in))))) {
					t.Errorf("no marker in %s", out)
				}
			}
			if tt.valid && !json.Valid(out) {
				t.Errorf("not valid JSON: %s", out)
			}
			if tt.has != nil {
				checkFields(t, topFields(t, out), tt.has)
			}
		})
	}
}

func TestTruncateDefaultMax(t *testing.T) {
	line := []byte(`{"a":"b"}`)
	if out, cut := Truncate(line, 0); cut || &out[0] != &line[0] {
		t.Errorf("Truncate(short, 0) = %q, %v; want the same slice, false", out, cut)
	}
	big := bigAssistantLine(DefaultMaxLineBytes)
	out, cut := Truncate(big, -1)
	if !cut || len(out) > DefaultMaxLineBytes {
		t.Errorf("Truncate(big, -1): cut %v, %d bytes", cut, len(out))
	}
}

// TestTruncateManyCuts has many big strings after the budget: each keeps
// its head and a marker while the reserve lasts; past that the result is
// the fallback object.
func TestTruncateManyCuts(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"list","items":[`)
	for i := range 100 {
		fmt.Fprintf(&b, `{"id":"id%d","body":"%s"},`, i, strings.Repeat("b", 2000))
	}
	b.WriteString(`{}],"uuid":"u"}`)
	line := []byte(b.String())
	for _, max := range []int{2000, 10000, 100000} {
		out, _ := Truncate(line, max)
		if !json.Valid(out) || len(out) > max {
			t.Fatalf("max %d: %d bytes, valid %v", max, len(out), json.Valid(out))
		}
		m := topFields(t, out)
		checkFields(t, m, map[string]any{"type": "list", "uuid": "u"})
		if max < 100000 {
			if _, ok := m["truncated"]; !ok {
				t.Errorf("max %d: want the fallback object, got %.200s", max, out)
			}
			continue
		}
		items, _ := m["items"].([]any)
		if len(items) != 101 {
			t.Fatalf("%d items, want 101", len(items))
		}
		for i, it := range items[:100] {
			item, _ := it.(map[string]any)
			if item["id"] != fmt.Sprintf("id%d", i) {
				t.Errorf("item %d: id %v", i, item["id"])
			}
			body, _ := item["body"].(string)
			if i >= 50 && body != strings.Repeat("b", maxStringKeep)+Marker(int64(len(line))) {
				t.Errorf("item %d: body %q", i, body)
			}
		}
	}
}
