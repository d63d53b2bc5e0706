package jsonl

import (
	"encoding/json"
	"strings"
	"testing"
)

// lexValid runs the truncator's lexer over b, with room to copy it all.
func lexValid(b []byte) bool {
	var t truncator
	t.init(len(b)+1, nil)
	t.write(b)
	return t.mode != modeRaw && t.complete()
}

// lexerCases are tricky inputs for the lexer, valid and not.
var lexerCases = []string{
	"", " ", "\t\r\n", "1", " 1 ", "-", "-0", "-01", "01", "0.", "1.", "1.5", "2.e3", ".5",
	"1e", "1e+", "1e+5", "1E5", "1e-0", "1ee", "-a", "0x1", "1.5.5",
	"tru", "true", "truex", "t", "nul", "null", "nulL", "false", "fals", "falsee",
	`""`, `"abc`, `"a"b`, `"\x"`, `"\u12g4"`, `"\uABCD"`, `"\uabcd"`, `"\u12"`, "\"a\tb\"", "\"\x1f\"",
	`"\"\\\/\b\f\n\r\t"`, "\"\xff\xfe\"", "\xff", `"é✓😀"`,
	"[]", "{}", "[[]]", "[1,]", "[,1]", "[1 2]", "[1,2", "[1}", "{]", "{1:2}",
	`{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":1 "b":2}`, `{"a":1,"b":[true,{"c":null}]}`,
	"1 2", "{} {}", "[] x", `{"a":"b"}x`, `{"a":-1.5e+10}`, `{"a":0}`, `[-0.0E-0]`,
	strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
	strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	strings.Repeat(`{"a":`, maxDepth) + "1" + strings.Repeat("}", maxDepth),
}

func TestLexerMatchesJSONValid(t *testing.T) {
	for _, c := range lexerCases {
		if got, want := lexValid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("%.40q: lexer says %v, json.Valid says %v", c, got, want)
		}
	}
}

// FuzzLexer checks that the truncator's lexer accepts exactly the lines
// encoding/json accepts, which the promise "valid JSON stays valid"
// rests on.
func FuzzLexer(f *testing.F) {
	for _, c := range lexerCases {
		f.Add([]byte(c))
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := lexValid(b), json.Valid(b); got != want {
			t.Fatalf("%q: lexer says %v, json.Valid says %v", b, got, want)
		}
	})
}
