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
//
// The turn's lines are rendered by appending to one reused buffer, not by
// encoding/json on maps: a stand-in's CPU is the benchmark's, not the
// daemon's, and with maps the hundred stand-ins of the lockstep benchmark,
// ending a turn together, took 95 % of both cores of the machine for 18 ms
// (perf), which the daemon under test then waited for.
package main

import (
	"bufio"
	"encoding/hex"
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
	s.initHead = s.makeInitHead()
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

	initHead []byte // the system/init line up to its uuid
	full     []byte // the turn's text

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
	msgID := "msg_standin_" + strconv.Itoa(1000000 + s.msgSeq)[1:]
	s.line(func(b []byte) []byte {
		b = append(b, s.initHead...)
		return appendUUID(b)
	}, "\"}")
	s.streamEvent(msgID, func(b []byte) []byte {
		b = append(b, `{"type":"message_start","message":{"id":"`...)
		b = append(b, msgID...)
		b = append(b, `","type":"message","role":"assistant","model":"`+model+`","content":[],"stop_reason":null,"stop_sequence":null,`...)
		return append(appendUsage(b, 1), "}}}"...)
	})
	s.pause()
	s.streamEvent(msgID, func(b []byte) []byte {
		return append(b, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`...)
	})
	full := s.full[:0]
	off := 0
	for range s.deltas {
		s.pause()
		n0 := len(full)
		for len(full)-n0 < deltaBytes {
			n := min(deltaBytes-(len(full)-n0), len(text)-off)
			full = append(full, text[off:off+n]...)
			off = (off + n) % len(text)
		}
		s.textDelta(msgID, full[n0:])
	}
	s.full = full
	s.pause()
	out := 1 + s.deltas*deltaBytes/4
	s.line(func(b []byte) []byte {
		b = append(b, `{"type":"assistant","message":{"id":"`...)
		b = append(b, msgID...)
		b = append(b, `","type":"message","role":"assistant","model":"`+model+`","content":[{"type":"text","text":`...)
		b = strconv.AppendQuote(b, string(full)) // the text is plain ASCII
		b = append(b, `}],"stop_reason":null,"stop_sequence":null,`...)
		b = appendUsage(b, 1)
		b = append(b, `},"context_management":null},"parent_tool_use_id":null,"session_id":"`...)
		b = append(b, s.sessionID...)
		b = append(b, `","uuid":"`...)
		b = appendUUID(b)
		b = append(b, `","timestamp":"`...)
		return time.Now().UTC().AppendFormat(b, time.RFC3339Nano)
	}, "\"}")
	s.streamEvent(msgID, func(b []byte) []byte {
		return append(b, `{"type":"content_block_stop","index":0}`...)
	})
	s.streamEvent(msgID, func(b []byte) []byte {
		b = append(b, `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},`...)
		return append(appendUsage(b, out), "}}"...)
	})
	s.streamEvent(msgID, func(b []byte) []byte { return append(b, `{"type":"message_stop"}`...) })
	cost := float64(inputTokens)*15e-6 + float64(out)*75e-6
	s.inputTokens += inputTokens
	s.outputTokens += out
	s.costUSD += cost
	ms := time.Since(start).Milliseconds()
	s.line(func(b []byte) []byte {
		b = append(b, `{"type":"result","subtype":"success","is_error":false,"duration_ms":`...)
		b = strconv.AppendInt(b, ms, 10)
		b = append(b, `,"duration_api_ms":`...)
		b = strconv.AppendInt(b, ms, 10)
		b = append(b, `,"num_turns":1,"result":`...)
		b = strconv.AppendQuote(b, string(full))
		b = append(b, `,"stop_reason":"end_turn","session_id":"`...)
		b = append(b, s.sessionID...)
		b = append(b, `","total_cost_usd":`...)
		b = strconv.AppendFloat(b, s.costUSD, 'f', -1, 64)
		b = append(b, ',')
		b = appendUsage(b, out)
		b = append(b, `,"service_tier":"standard","server_tool_use":{"web_search_requests":0,"web_fetch_requests":0}},"modelUsage":{"`+model+`":{"inputTokens":`...)
		b = strconv.AppendInt(b, int64(s.inputTokens), 10)
		b = append(b, `,"outputTokens":`...)
		b = strconv.AppendInt(b, int64(s.outputTokens), 10)
		b = append(b, `,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"webSearchRequests":0,"costUSD":`...)
		b = strconv.AppendFloat(b, s.costUSD, 'f', -1, 64)
		b = append(b, `,"contextWindow":200000,"maxOutputTokens":32000}},"permission_denials":[],"terminal_reason":"completed","uuid":"`...)
		return appendUUID(b)
	}, "\"}")
}

// inputTokens is every turn's input, as the API reports it.
const inputTokens = 211

// appendUsage appends a "usage" member, open: the caller closes it.
func appendUsage(b []byte, outputTokens int) []byte {
	b = append(b, `"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, inputTokens, 10)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":`...)
	return strconv.AppendInt(b, int64(outputTokens), 10)
}

func (s *standin) pause() {
	if s.interval > 0 {
		time.Sleep(s.interval)
	}
}

// textDelta writes one content_block_delta line.
func (s *standin) textDelta(msgID string, chunk []byte) {
	s.streamEvent(msgID, func(b []byte) []byte {
		b = append(b, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`...)
		b = strconv.AppendQuote(b, string(chunk)) // the text is plain ASCII
		return append(b, "}}"...)
	})
}

// streamEvent writes a stream_event line around the event event appends,
// its "standin_ns" taken last.
func (s *standin) streamEvent(msgID string, event func([]byte) []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := append(s.buf[:0], `{"type":"stream_event","event":`...)
	b = event(b)
	b = append(b, `,"session_id":"`...)
	b = append(b, s.sessionID...)
	b = append(b, `","parent_tool_use_id":null,"uuid":"`...)
	b = appendUUID(b)
	b = append(b, `","api_message_id":"`...)
	b = append(b, msgID...)
	b = append(b, `","standin_ns":`...)
	b = strconv.AppendInt(b, time.Now().UnixNano(), 10)
	b = append(b, "}\n"...)
	s.buf = b
	os.Stdout.Write(b)
}

// line writes the line body appends, then tail and a newline.
func (s *standin) line(body func([]byte) []byte, tail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := body(s.buf[:0])
	b = append(b, tail...)
	b = append(b, '\n')
	s.buf = b
	os.Stdout.Write(b)
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

func newUUID() string { return string(appendUUID(nil)) }

// appendUUID appends a random version 4 UUID.
func appendUUID(dst []byte) []byte {
	var b [16]byte
	for i := range 2 {
		v := rand.Uint64()
		for j := range 8 {
			b[i*8+j] = byte(v >> (8 * j))
		}
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	dst = hex.AppendEncode(dst, b[0:4])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, b[4:6])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, b[6:8])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, b[8:10])
	dst = append(dst, '-')
	return hex.AppendEncode(dst, b[10:16])
}

// makeInitHead renders the system/init line but for its uuid, the same
// for every turn.
func (s *standin) makeInitHead() []byte {
	head, err := json.Marshal(map[string]any{"type": "system", "subtype": "init", "cwd": cwd(), "session_id": s.sessionID,
		"tools": s.tools, "mcp_servers": []any{}, "model": model,
		"permissionMode": "default", "apiKeySource": "ANTHROPIC_API_KEY", "claude_code_version": "2.1.329",
		"output_style": "default"})
	if err != nil {
		panic(err)
	}
	return append(head[:len(head)-1], `,"uuid":"`...)
}

func cwd() string {
	d, _ := os.Getwd()
	return d
}
