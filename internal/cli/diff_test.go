package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	t.Parallel()
	a := splitLines("one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\ntwelve\n")
	b := splitLines("one\ntwo\nTHREE\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\ntwelve\nthirteen\n")
	got := strings.Join(unifiedDiff(a, b, 1), "\n")
	want := `@@ -1,6 +1,6 @@
 one
 two
-three
+THREE
 four
 five
 six
@@ -10,3 +10,4 @@
 ten
 eleven
 twelve
+thirteen`
	if got != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got, want)
	}
	if d := unifiedDiff(a, a, 1); d != nil {
		t.Errorf("equal texts: %q", d)
	}
	// Starting at line 41 of a file; an empty side is "-40,0".
	if got := strings.Join(unifiedDiff(nil, []string{"x", "y"}, 41), "\n"); got != "@@ -40,0 +41,2 @@\n+x\n+y" {
		t.Errorf("insertion: %q", got)
	}
}

func TestPermissionDiff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	writeFile(t, file, "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n")
	input := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// Edit: numbered as in the file.
	got := strings.Join(permissionDiff("Edit", input(map[string]string{"file_path": file,
		"old_string": "\tprintln(\"hi\")", "new_string": "\tprintln(\"hello\")"}), maxDiffLines), "\n")
	want := "--- " + file + "\n+++ " + file + "\n@@ -4 +4 @@\n-\tprintln(\"hi\")\n+\tprintln(\"hello\")"
	if got != want {
		t.Errorf("Edit:\n%s\nwant:\n%s", got, want)
	}

	// Write over an existing file: against what is on disk.
	got = strings.Join(permissionDiff("Write", input(map[string]string{"file_path": file,
		"content": "package main\n\nfunc main() {}\n"}), maxDiffLines), "\n")
	if !strings.Contains(got, "-func main() {\n-\tprintln(\"hi\")\n-}\n+func main() {}") || !strings.Contains(got, "@@ -1,5 +1,3 @@") {
		t.Errorf("Write over a file:\n%s", got)
	}

	// Write of a new file: every line added.
	got = strings.Join(permissionDiff("Write", input(map[string]string{"file_path": filepath.Join(dir, "new.txt"),
		"content": "a\nb\n"}), maxDiffLines), "\n")
	if !strings.HasSuffix(got, "@@ -0,0 +1,2 @@\n+a\n+b") {
		t.Errorf("Write of a new file:\n%s", got)
	}

	// MultiEdit: a hunk per edit.
	got = strings.Join(permissionDiff("MultiEdit", input(map[string]any{"file_path": file, "edits": []map[string]string{
		{"old_string": "package main", "new_string": "package app"},
		{"old_string": "func main()", "new_string": "func Main()"},
	}}), maxDiffLines), "\n")
	if !strings.Contains(got, "@@ -1 +1 @@\n-package main\n+package app") || !strings.Contains(got, "@@ -3 +3 @@\n-func main()\n+func Main()") {
		t.Errorf("MultiEdit:\n%s", got)
	}

	// Bounded, saying how much was cut.
	var big strings.Builder
	for i := range 100 {
		fmt.Fprintf(&big, "line %d\n", i)
	}
	lines := permissionDiff("Write", input(map[string]string{"file_path": filepath.Join(dir, "big.txt"), "content": big.String()}), 10)
	if len(lines) != 11 || lines[10] != "… 93 more diff lines not shown" {
		t.Errorf("a long diff: %d lines, last %q", len(lines), lines[len(lines)-1])
	}

	// Other tools, or nothing to read: no diff.
	for _, c := range []struct {
		name  string
		input string
	}{{"Bash", `{"command":"ls"}`}, {"Edit", `{}`}, {"Write", `{"file_path":"/x"}`}, {"Edit", `not json`}} {
		if d := permissionDiff(c.name, json.RawMessage(c.input), maxDiffLines); d != nil {
			t.Errorf("%s %s: %q", c.name, c.input, d)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil {
		t.Error("the diff wrote the file")
	}
}

func TestColorDiff(t *testing.T) {
	t.Parallel()
	in := []string{"--- f", "+++ f", "@@ -1 +1 @@", "-old", "+new", " same"}
	if got := colorDiff(palette{}, in); strings.Join(got, "\n") != strings.Join(in, "\n") {
		t.Errorf("without colour: %q", got)
	}
	got := colorDiff(palette{on: true}, in)
	if got[3] != sgrRed+"-old"+sgrReset || got[4] != sgrGreen+"+new"+sgrReset || got[5] != " same" {
		t.Errorf("with colour: %q", got)
	}
}
