// Command standin is a stand-in for the claude CLI that streams fast, for the
// daemon's benchmarks (daemon/bench_test.go). It speaks just enough of the
// stream-json protocol for claude.Start and the daemon:
//
//   - every control_request is answered with a success control_response
//     (initialize with an empty command list);
//   - every user message starts a turn: a system/init line, a message_start
//     and content_block_start, STANDIN_DELTAS content_block_delta text
//     deltas of about 300 bytes each, the assistant message, the closing
//     stream events and a success result with usage, total_cost_usd and
//     modelUsage (cumulative for the process, as the CLI reports them);
//   - between turns it waits on stdin, and it exits 0 when stdin ends.
//
// Each stream_event line carries "standin_ns", the wall-clock time
// (UnixNano) just before the line was written, so that a subscriber can
// measure how long the line took to reach it.
//
// Environment:
//
//	STANDIN_DELTAS    text deltas per turn (default 200)
//	STANDIN_INTERVAL  pause between two lines of a turn, a Go duration
//	                  (default 0: as fast as the pipe takes them)
//	STANDIN_DROP_TOOLS  tools, comma-separated, left out of the system/init
//	                  (as a CLI that lost them would; the daemon's health
//	                  tests use it)
//
// Every line is written with its own write call, as the CLI does.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const model = "claude-standin-1"

// text is cycled through to make the deltas: a few tokens each, as the API
// streams them, which makes stream_event lines of about 320 bytes.
const text = "The quick brown fox jumps over the lazy dog while the daemon stores every line " +
	"it reads, in order, before any subscriber sees it; group commit keeps the disk busy " +
	"and the readers fed. "

const deltaBytes = 12

func main() {
	// One stream, one thread running Go code, as the CLI runs its
	// JavaScript on one: with a P per core, each stand-in's idle threads
	// spin and park at every line, and in the lockstep benchmark a
	// hundred of them took 29 % of the machine's CPU in context switches
	// (perf), CPU the daemon under test needed.
	runtime.GOMAXPROCS(1)
	if len(os.Args) > 1 && os.Args[1] == "--version" { // as the daemon checks it at start
		fmt.Println("2.1.329 (Claude Code)")
		return
	}
	deltas := 200
	if v := os.Getenv("STANDIN_DELTAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fmt.Fprintln(os.Stderr, "standin: bad STANDIN_DELTAS", v)
			os.Exit(2)
		}
		deltas = n
	}
	var interval time.Duration
	if v := os.Getenv("STANDIN_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "standin: bad STANDIN_INTERVAL", v)
			os.Exit(2)
		}
		interval = d
	}
	tools := []string{"Bash", "Edit", "Read", "Write"}
	for t := range strings.SplitSeq(os.Getenv("STANDIN_DROP_TOOLS"), ",") {
		tools = slices.DeleteFunc(tools, func(x string) bool { return x == strings.TrimSpace(t) })
	}
	s := &standin{deltas: deltas, interval: interval, sessionID: newUUID(), turns: make(chan struct{}, 64), tools: tools}
	done := make(chan struct{})
	go func() { defer close(done); s.runTurns() }()
	err := s.readInput(os.Stdin)
	close(s.turns)
	<-done
	if err != nil {
		fmt.Fprintln(os.Stderr, "standin:", err)
		os.Exit(1)
	}
}

type standin struct {
	deltas    int
	interval  time.Duration
	sessionID string
	tools     []string      // the system/init's
	turns     chan struct{} // one per user message, run in order

	mu  sync.Mutex // serialises writes to stdout
	buf []byte

	// cumulative for the process, as the CLI reports them; only runTurns
	// touches these
	inputTokens, outputTokens int
	costUSD                   float64
	msgSeq                    int
}

// readInput answers control requests at once and queues a turn per user
// message, until stdin ends.
func (s *standin) readInput(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if perr := s.handle(line); perr != nil {
				return perr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (s *standin) handle(line []byte) error {
	var m struct {
		Type      string `json:"type"`
		RequestID string `json:"request_id"`
		Request   struct {
			Subtype string `json:"subtype"`
		} `json:"request"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		//lint:ignore ST1005 the real CLI's words
		return fmt.Errorf("Error parsing streaming input line: %w", err)
	}
	switch m.Type {
	case "control_request":
		resp := map[string]any{}
		if m.Request.Subtype == "initialize" {
			resp = map[string]any{"commands": []any{}, "output_style": "default",
				"available_output_styles": []string{"default"}, "models": []any{},
				"account": map[string]any{}}
		}
		s.writeJSON(map[string]any{"type": "control_response", "response": map[string]any{
			"subtype": "success", "request_id": m.RequestID, "response": resp}})
	case "user":
		s.turns <- struct{}{}
	}
	return nil
}

func (s *standin) runTurns() {
	for range s.turns {
		s.turn()
	}
}

func (s *standin) turn() {
	start := time.Now()
	s.msgSeq++
	msgID := fmt.Sprintf("msg_standin_%06d", s.msgSeq)
	s.writeJSON(map[string]any{"type": "system", "subtype": "init", "cwd": cwd(), "session_id": s.sessionID,
		"tools": s.tools, "mcp_servers": []any{}, "model": model,
		"permissionMode": "default", "apiKeySource": "ANTHROPIC_API_KEY", "claude_code_version": "2.1.329",
		"output_style": "default", "uuid": newUUID()})
	const in = 211
	usage := map[string]any{"input_tokens": in, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}
	s.streamEvent(msgID, map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	s.pause()
	s.streamEvent(msgID, map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]any{"type": "text", "text": ""}})
	var full []byte
	off := 0
	for range s.deltas {
		s.pause()
		chunk := make([]byte, 0, deltaBytes)
		for len(chunk) < deltaBytes {
			n := min(deltaBytes-len(chunk), len(text)-off)
			chunk = append(chunk, text[off:off+n]...)
			off = (off + n) % len(text)
		}
		full = append(full, chunk...)
		s.textDelta(msgID, chunk)
	}
	s.pause()
	out := 1 + s.deltas*deltaBytes/4
	s.writeJSON(map[string]any{"type": "assistant", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model,
		"content":     []any{map[string]any{"type": "text", "text": string(full)}},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage, "context_management": nil},
		"parent_tool_use_id": nil, "session_id": s.sessionID, "uuid": newUUID(),
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano)})
	s.streamEvent(msgID, map[string]any{"type": "content_block_stop", "index": 0})
	s.streamEvent(msgID, map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
		"usage": map[string]any{"input_tokens": in, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": out}})
	s.streamEvent(msgID, map[string]any{"type": "message_stop"})
	cost := float64(in)*15e-6 + float64(out)*75e-6
	s.inputTokens += in
	s.outputTokens += out
	s.costUSD += cost
	ms := time.Since(start).Milliseconds()
	s.writeJSON(map[string]any{"type": "result", "subtype": "success", "is_error": false,
		"duration_ms": ms, "duration_api_ms": ms, "num_turns": 1, "result": string(full),
		"stop_reason": "end_turn", "session_id": s.sessionID, "total_cost_usd": s.costUSD,
		"usage": map[string]any{"input_tokens": in, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
			"output_tokens": out, "service_tier": "standard",
			"server_tool_use": map[string]any{"web_search_requests": 0, "web_fetch_requests": 0}},
		"modelUsage": map[string]any{model: map[string]any{"inputTokens": s.inputTokens, "outputTokens": s.outputTokens,
			"cacheReadInputTokens": 0, "cacheCreationInputTokens": 0, "webSearchRequests": 0,
			"costUSD": s.costUSD, "contextWindow": 200000, "maxOutputTokens": 32000}},
		"permission_denials": []any{}, "terminal_reason": "completed", "uuid": newUUID()})
}

func (s *standin) pause() {
	if s.interval > 0 {
		time.Sleep(s.interval)
	}
}

// textDelta writes one content_block_delta line by hand: it is most of the
// output, and its timestamp should be taken as late as possible.
func (s *standin) textDelta(msgID string, chunk []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buf[:0]
	b = append(b, `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`...)
	b = strconv.AppendQuote(b, string(chunk)) // the text is plain ASCII
	b = append(b, `}},"session_id":"`...)
	b = append(b, s.sessionID...)
	b = append(b, `","parent_tool_use_id":null,"uuid":"`...)
	b = append(b, newUUID()...)
	b = append(b, `","api_message_id":"`...)
	b = append(b, msgID...)
	b = append(b, `","standin_ns":`...)
	b = strconv.AppendInt(b, time.Now().UnixNano(), 10)
	b = append(b, "}\n"...)
	s.buf = b
	os.Stdout.Write(b)
}

// streamEvent writes a stream_event line around event.
func (s *standin) streamEvent(msgID string, event map[string]any) {
	s.writeJSON(map[string]any{"type": "stream_event", "event": event, "session_id": s.sessionID,
		"parent_tool_use_id": nil, "uuid": newUUID(), "api_message_id": msgID,
		"standin_ns": time.Now().UnixNano()})
}

func (s *standin) writeJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

func newUUID() string {
	var b [16]byte
	for i := range 2 {
		v := rand.Uint64()
		for j := range 8 {
			b[i*8+j] = byte(v >> (8 * j))
		}
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func cwd() string {
	d, _ := os.Getwd()
	return d
}
