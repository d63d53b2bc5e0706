// Command sdkconsume reads one whole session through the claude SDK's public
// API and prints the same checksum line as ../shared/bench/ts_consume.mjs, so
// that ../shared/bench/compare.sh can measure both SDKs on the same stream.
//
//	compare.sh '/path/to/sdkconsume'   (the stand-in CLI's path is appended)
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"syscall"
	"time"

	"github.com/claudectl/claudectl/claude"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sdkconsume CLI_PATH")
		os.Exit(2)
	}
	if p := os.Getenv("SDKCONSUME_TRACE"); p != "" {
		f, err := os.Create(p)
		if err == nil {
			trace.Start(f)
			defer trace.Stop()
		}
	}
	if p := os.Getenv("SDKCONSUME_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	if p := os.Getenv("SDKCONSUME_MEMPROFILE"); p != "" {
		// The allocations of the whole run (go tool pprof -sample_index=alloc_space).
		defer func() {
			if f, err := os.Create(p); err == nil {
				pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	if err := run(os.Args[len(os.Args)-1]); err != nil {
		fmt.Fprintln(os.Stderr, "sdkconsume:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(cli string) error {
	t0 := time.Now()
	ctx := context.Background()
	s, err := claude.Start(ctx, &claude.Options{CLIPath: cli, IncludePartialMessages: true})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.SendText(ctx, "go"); err != nil {
		return err
	}
	var messages, deltaChars, blocks, toolResultChars int
	for m, err := range s.Turn(ctx) {
		if err != nil {
			return err
		}
		messages++
		switch m := m.(type) {
		case *claude.StreamEvent:
			if m.Event.Type == "content_block_delta" && m.Event.Delta != nil && m.Event.Delta.Type == "text_delta" {
				deltaChars += utf16Len(m.Event.Delta.Text)
			}
		case *claude.AssistantMessage:
			blocks += len(m.Message.Content)
		case *claude.UserMessage:
			for _, b := range m.Message.Content.Blocks {
				if tr, ok := b.(*claude.ToolResultBlock); ok && tr.Content.IsText() {
					toolResultChars += utf16Len(tr.Content.Text)
				}
			}
		}
	}
	if err := s.Close(); err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	// This process's CPU only: GNU time's figures include the stand-in
	// CLI's, a child the SDK waits for.
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	out, _ := json.Marshal(map[string]any{
		"sdk":        "go",
		"messages":   messages,
		"checksum":   fmt.Sprintf("%d/%d/%d", deltaChars, blocks, toolResultChars),
		"seconds":    float64(int(secs*1000)) / 1000,
		"msgs_per_s": int(float64(messages) / secs),
		"user_s":     float64(ru.Utime.Nano()/1e6) / 1000,
		"sys_s":      float64(ru.Stime.Nano()/1e6) / 1000,
		"alloc_mb":   ms.TotalAlloc >> 20,
		"gcs":        ms.NumGC,
	})
	fmt.Println(string(out))
	return nil
}

// utf16Len counts UTF-16 code units, as JavaScript's String.length does:
// one per UTF-8 sequence, two for a 4-byte one. Counting lead bytes needs
// no decoding (strings from the decoder are valid UTF-8).
func utf16Len(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 { // ASCII prefix, eight bytes at a time
		if binary.LittleEndian.Uint64([]byte(s[i:i+8]))&0x8080808080808080 != 0 {
			break
		}
	}
	n := i
	for ; i < len(s); i++ {
		c := s[i]
		if c < 0x80 || c >= 0xC0 {
			n++
			if c >= 0xF0 {
				n++
			}
		}
	}
	return n
}
