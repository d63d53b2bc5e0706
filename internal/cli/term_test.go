package cli

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestIsTerminal(t *testing.T) {
	t.Parallel()
	if isTerminal(strings.NewReader("")) {
		t.Error("a strings.Reader is a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a regular file is a terminal")
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if runtime.GOOS == "linux" && isTerminal(null) {
		t.Error("/dev/null is a terminal")
	}
}
