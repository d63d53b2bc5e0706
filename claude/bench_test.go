package claude_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/claudectl/claudectl/claude"
)

// benchStream returns the lines of the reference benchmark's stream (SCALE
// 1, ~34 MB), generated with ../shared/bench/genstream.py into a cache.
func benchStream(b *testing.B) ([][]byte, int64) {
	b.Helper()
	gen, err := filepath.Abs("../../shared/bench/genstream.py")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(gen); err != nil {
		b.Skipf("reference stream generator not found: %v", err)
	}
	out := filepath.Join(os.TempDir(), "claudectl-bench-stream-1.ndjson")
	if _, err := os.Stat(out); err != nil {
		if msg, err := exec.Command("python3", gen, out, "1").CombinedOutput(); err != nil {
			b.Fatalf("genstream: %v\n%s", err, msg)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(data), []byte("\n")), int64(len(data))
}

// BenchmarkDecode decodes the reference stream with the SDK's decoder.
func BenchmarkDecode(b *testing.B) {
	lines, n := benchStream(b)
	b.SetBytes(n)
	b.ReportAllocs()
	var d claude.Decoder
	for b.Loop() {
		for _, l := range lines {
			if _, err := d.Decode(l); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkDecodeStdlib is the baseline: a bufio.Scanner-style loop that
// decodes each line with encoding/json into a typed envelope.
func BenchmarkDecodeStdlib(b *testing.B) {
	lines, n := benchStream(b)
	b.SetBytes(n)
	b.ReportAllocs()
	type envelope struct {
		Type    string          `json:"type"`
		Event   json.RawMessage `json:"event"`
		Message json.RawMessage `json:"message"`
		UUID    string          `json:"uuid"`
	}
	for b.Loop() {
		sc := bufio.NewScanner(bytes.NewReader(bytes.Join(lines, []byte("\n"))))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var e envelope
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				b.Fatal(err)
			}
		}
	}
}
