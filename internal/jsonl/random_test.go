package jsonl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// jsonGen writes random valid JSON shaped like the CLI's messages: objects
// with ids, long texts full of escapes and multi-byte characters, arrays of
// content blocks and numbers.
type jsonGen struct {
	r *rand.Rand
	b bytes.Buffer
}

var genPieces = []string{`\"`, `\\`, `\/`, `\n`, `\t`, `\u00e9`, `\ud83d\ude00`, `é`, `✓`, `😀`, " ", "abc", "x"}

func (g *jsonGen) space() {
	if g.r.IntN(8) == 0 {
		g.b.WriteString([]string{" ", "\n  ", "\t", "\r\n"}[g.r.IntN(4)])
	}
}

func (g *jsonGen) str(maxLen int) {
	g.b.WriteByte('"')
	n := g.r.IntN(maxLen + 1)
	for start := g.b.Len(); g.b.Len()-start < n; {
		if g.r.IntN(3) == 0 {
			g.b.WriteString(strings.Repeat("y", g.r.IntN(200)))
		} else {
			g.b.WriteString(genPieces[g.r.IntN(len(genPieces))])
		}
	}
	g.b.WriteByte('"')
}

func (g *jsonGen) value(depth int) {
	g.space()
	switch k := g.r.IntN(10); {
	case k < 3 || depth > 6:
		g.str([]int{8, 40, 300, 3000}[g.r.IntN(4)])
	case k == 3:
		g.b.WriteString([]string{"0", "-1.5e+10", "123", "3.25", "1E-7", "true", "false", "null"}[g.r.IntN(8)])
	case k < 7:
		g.b.WriteByte('[')
		for i := range g.r.IntN(6) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.value(depth + 1)
		}
		g.space()
		g.b.WriteByte(']')
	default:
		g.object(depth, nil)
	}
	g.space()
}

// object writes an object starting with the given members.
func (g *jsonGen) object(depth int, first []string) {
	g.b.WriteByte('{')
	n := 0
	member := func(key string, val func()) {
		if n > 0 {
			g.b.WriteByte(',')
		}
		n++
		g.space()
		g.b.WriteString(`"` + key + `"`)
		g.space()
		g.b.WriteByte(':')
		val()
	}
	for i := 0; i+1 < len(first); i += 2 {
		v := first[i+1]
		member(first[i], func() { g.b.WriteString(v) })
	}
	keys := []string{"text", "content", "id", "input", "name", "tool_use_id", "é✓", `k\"q`}
	for range g.r.IntN(5) {
		member(keys[g.r.IntN(len(keys))], func() { g.value(depth + 1) })
	}
	g.space()
	g.b.WriteByte('}')
}

// line returns a random top-level line; most are objects carrying ids,
// some put the ids after the big content, as the CLI does.
func (g *jsonGen) line() []byte {
	g.b.Reset()
	ids := []string{"type", `"assistant"`, "uuid", `"u-1"`, "session_id", `"s-1"`}
	switch g.r.IntN(4) {
	case 0:
		g.value(0)
	case 1:
		g.object(0, nil)
		// Put the ids last: drop the '}' and append them.
		g.b.Truncate(len(bytes.TrimRight(g.b.Bytes()[:g.b.Len()-1], " \t\r\n")))
		if !bytes.HasSuffix(g.b.Bytes(), []byte("{")) {
			g.b.WriteByte(',')
		}
		g.b.WriteString(`"type":"assistant","uuid":"u-1","session_id":"s-1"}`)
	default:
		g.object(0, ids)
	}
	return bytes.Clone(g.b.Bytes())
}

// TestTruncateRandomJSON truncates many random valid lines at random
// limits, whole and in random pieces.
func TestTruncateRandomJSON(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	g := &jsonGen{r: rand.New(rand.NewPCG(1, 2))}
	var kept, fell int
	for i := range n {
		line := g.line()
		if !json.Valid(line) {
			t.Fatalf("generator made invalid JSON: %s", line)
		}
		max := 1 + g.r.IntN(len(line)+len(line)/8)
		out, cut := Truncate(line, max)
		if !cut {
			continue
		}
		checkTruncated(t, line, out, max)
		checkNoLoneSurrogate(t, out)

		// Fed in random pieces, the truncator gives the same bytes.
		var tr truncator
		tr.init(max, make([]byte, 0, max))
		for rest := line; len(rest) > 0; {
			k := 1 + g.r.IntN(min(len(rest), 64))
			tr.write(rest[:k])
			rest = rest[k:]
		}
		if got := tr.finish(); !bytes.Equal(got, out) {
			t.Fatalf("case %d: in pieces\n%q\nwhole\n%q", i, got, out)
		}

		// Objects keep their ids whenever there is room for them.
		var m map[string]any
		if line[0] != '{' || max < 200 || json.Unmarshal(line, &m) != nil || m["type"] != "assistant" {
			continue
		}
		got := topFields(t, out)
		if _, fallback := got["truncated"]; fallback {
			fell++
		} else {
			kept++
		}
		for _, k := range []string{"type", "uuid", "session_id"} {
			if got[k] != m[k] {
				t.Fatalf("case %d, max %d: %s = %v, want %v\n%s", i, max, k, got[k], m[k], out)
			}
		}
	}
	t.Logf("objects with ids: %d cut in place, %d fell back to the minimal object", kept, fell)
	if kept == 0 {
		t.Errorf("no object was cut in place")
	}
}

func ExampleTruncate() {
	line := []byte(`{"type":"assistant","uuid":"u1","text":"` + strings.Repeat("x", 300) + `"}`)
	out, truncated := Truncate(line, 200)
	fmt.Println(truncated, json.Valid(out))
	fmt.Println(string(out))
	// Output:
	// true true
	// {"type":"assistant","uuid":"u1","text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx[truncated: original_size=342 bytes]"}
}
