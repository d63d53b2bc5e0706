package jsonl

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// benchStream returns about 32 MB of lines shaped like the CLI's
// stream-json output, mostly 250 to 350 bytes long.
func benchStream() []byte {
	var b bytes.Buffer
	words := strings.Fields("the quick brown fox jumps over the lazy dog while reading files and running tools")
	for i := 0; b.Len() < 32<<20; i++ {
		var text strings.Builder
		for j := 0; text.Len() < 60+(i*37)%120; j++ {
			text.WriteString(words[(i+j)%len(words)])
			text.WriteByte(' ')
		}
		switch i % 10 {
		case 0:
			fmt.Fprintf(&b, `{"type":"assistant","message":{"id":"msg_%012d","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_%012d","name":"Read","input":{"file_path":"/work/src/file_%d.go"}}]},"parent_tool_use_id":null,"session_id":"6f1c1c3e-8a51-4b7e-9d8e-1f2a3b4c5d6e","uuid":"a1b2c3d4-%08d"}`+"\n", i, i, i, i)
		case 5:
			fmt.Fprintf(&b, `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_%012d","type":"tool_result","content":"%s"}]},"session_id":"6f1c1c3e-8a51-4b7e-9d8e-1f2a3b4c5d6e","uuid":"e5f6a7b8-%08d"}`+"\n", i, text.String(), i)
		default:
			fmt.Fprintf(&b, `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"%s"}},"session_id":"6f1c1c3e-8a51-4b7e-9d8e-1f2a3b4c5d6e","parent_tool_use_id":null,"uuid":"c9d0e1f2-%08d"}`+"\n", text.String(), i)
		}
	}
	return b.Bytes()
}

var benchData = sync.OnceValue(benchStream)

// BenchmarkReader reads the stream with Reader; every line is the
// caller's to keep.
func BenchmarkReader(b *testing.B) {
	data := benchData()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), nil)
		n := 0
		for {
			l, err := r.Next()
			if err != nil {
				break
			}
			n += len(l.Data)
		}
		if n == 0 {
			b.Fatal("no data")
		}
	}
}

// BenchmarkScannerBaseline reads the same stream with bufio.Scanner (with
// a 10 MiB token limit), without copying the lines ("nocopy", which
// leaves them to be overwritten by the next Scan) and with a copy of each
// line ("copy", which is what Reader delivers).
func BenchmarkScannerBaseline(b *testing.B) {
	data := benchData()
	for _, copyLines := range []bool{false, true} {
		name := "nocopy"
		if copyLines {
			name = "copy"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				s := bufio.NewScanner(bytes.NewReader(data))
				s.Buffer(make([]byte, 256<<10), DefaultMaxLineBytes)
				n := 0
				for s.Scan() {
					line := s.Bytes()
					if copyLines {
						line = bytes.Clone(line)
					}
					n += len(line)
				}
				if n == 0 || s.Err() != nil {
					b.Fatal("no data", s.Err())
				}
			}
		})
	}
}

// BenchmarkTruncate truncates a 12 MB line to the default limit.
func BenchmarkTruncate(b *testing.B) {
	line := bigAssistantLine(12 << 20)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		Truncate(line, DefaultMaxLineBytes)
	}
}
