package cli

import (
	"strings"
	"testing"
)

// The columns after a CJK cell line up on a terminal: padding counts
// columns, not runes.
func TestWriteTableWide(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if err := writeTable(&b, [][]string{
		{"ID", "CWD", "COST"},
		{"a", "/home/u/プロジェクト", "$0.1000"},
		{"b", "/home/u/project", "$0.2000"},
		{"c", "/home/u/cafe\u0301", "$0.3000"}, // e and a combining acute accent
	}); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"ID  CWD                   COST\n" +
		"a   /home/u/プロジェクト  $0.1000\n" +
		"b   /home/u/project       $0.2000\n" +
		"c   /home/u/cafe\u0301          $0.3000\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}
