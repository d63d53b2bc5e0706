package claudetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sseEvent is one decoded server-sent event.
type sseEvent struct {
	name string
	data map[string]any
	raw  string
}

// newClient returns an HTTP client whose connections are closed at the end
// of the test.
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func post(t *testing.T, c *http.Client, url string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readSSE parses an SSE body strictly: "event:" then "data:" then a blank line.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	br := bufio.NewReader(r)
	var out []sseEvent
	for {
		ev, err := br.ReadString('\n')
		if err == io.EOF && ev == "" {
			return out
		}
		if err != nil {
			t.Fatalf("read event line: %v", err)
		}
		name, ok := strings.CutPrefix(strings.TrimSuffix(ev, "\n"), "event: ")
		if !ok {
			t.Fatalf("want event line, got %q", ev)
		}
		data, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read data line: %v", err)
		}
		payload, ok := strings.CutPrefix(strings.TrimSuffix(data, "\n"), "data: ")
		if !ok {
			t.Fatalf("want data line, got %q", data)
		}
		if blank, err := br.ReadString('\n'); err != nil || blank != "\n" {
			t.Fatalf("want blank line after event, got %q, %v", blank, err)
		}
		e := sseEvent{name: name, raw: payload}
		if err := json.Unmarshal([]byte(payload), &e.data); err != nil {
			t.Fatalf("event %s: bad JSON %q: %v", name, payload, err)
		}
		if e.data["type"] != name {
			t.Errorf("event %s has data type %v", name, e.data["type"])
		}
		out = append(out, e)
	}
}

func messagesURL(s *Server) string { return s.URL + "/v1/messages?beta=true" }

func simpleRequest(stream bool, messages ...map[string]any) map[string]any {
	if len(messages) == 0 {
		messages = []map[string]any{{"role": "user", "content": "hi"}}
	}
	return map[string]any{
		"model":      "claude-test-model",
		"max_tokens": 1000,
		"stream":     stream,
		"system":     []any{map[string]any{"type": "text", "text": "sys one"}, map[string]any{"type": "text", "text": "sys two"}},
		"tools":      []any{map[string]any{"name": "Bash", "input_schema": map[string]any{}}, map[string]any{"name": "Write"}},
		"messages":   messages,
	}
}

// assembled is a reply rebuilt from its SSE events.
type assembled struct {
	Types      []string // event names in order
	Blocks     []map[string]any
	StopReason string
	Model      string
	ID         string
	Usage      map[string]any
	Deltas     int
}

func assemble(t *testing.T, events []sseEvent) assembled {
	t.Helper()
	var a assembled
	partial := map[int]string{}
	for _, e := range events {
		a.Types = append(a.Types, e.name)
		switch e.name {
		case "message_start":
			m := e.data["message"].(map[string]any)
			a.Model, _ = m["model"].(string)
			a.ID, _ = m["id"].(string)
			if c := m["content"].([]any); len(c) != 0 {
				t.Errorf("message_start content = %v, want empty", c)
			}
		case "content_block_start":
			idx := int(e.data["index"].(float64))
			if idx != len(a.Blocks) {
				t.Fatalf("content_block_start index %d, want %d", idx, len(a.Blocks))
			}
			a.Blocks = append(a.Blocks, e.data["content_block"].(map[string]any))
		case "content_block_delta":
			a.Deltas++
			idx := int(e.data["index"].(float64))
			b := a.Blocks[idx]
			d := e.data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				b["text"] = b["text"].(string) + d["text"].(string)
			case "thinking_delta":
				b["thinking"] = b["thinking"].(string) + d["thinking"].(string)
			case "signature_delta":
				b["signature"] = b["signature"].(string) + d["signature"].(string)
			case "input_json_delta":
				partial[idx] += d["partial_json"].(string)
			default:
				t.Fatalf("unknown delta %v", d)
			}
		case "content_block_stop":
			idx := int(e.data["index"].(float64))
			if p, ok := partial[idx]; ok {
				var in any
				if err := json.Unmarshal([]byte(p), &in); err != nil {
					t.Fatalf("tool input %q: %v", p, err)
				}
				a.Blocks[idx]["input"] = in
			}
		case "message_delta":
			a.StopReason, _ = e.data["delta"].(map[string]any)["stop_reason"].(string)
			a.Usage = e.data["usage"].(map[string]any)
		}
	}
	return a
}

func TestStreamEncoding(t *testing.T) {
	s := NewServer(Script(Reply(
		Thinking("let me think"),
		Text("héllo wörld, "+strings.Repeat("ü", 100)),
		ToolUseID("toolu_fixed", "Bash", map[string]any{"command": "echo hi"}),
	)))
	defer s.Close()
	c := newClient(t)

	resp := post(t, c, messagesURL(s), simpleRequest(true))
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type = %q", ct)
	}
	if resp.Header.Get("request-id") == "" {
		t.Error("no request-id header")
	}
	a := assemble(t, readSSE(t, resp.Body))

	wantTypes := []string{"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start"}
	if diff := cmp.Diff(wantTypes, a.Types[:len(wantTypes)]); diff != "" {
		t.Errorf("event order (-want +got):\n%s", diff)
	}
	if last := a.Types[len(a.Types)-2:]; !cmp.Equal(last, []string{"message_delta", "message_stop"}) {
		t.Errorf("last events = %v", last)
	}
	wantBlocks := []map[string]any{
		{"type": "thinking", "thinking": "let me think", "signature": fakeSignature("let me think")},
		{"type": "text", "text": "héllo wörld, " + strings.Repeat("ü", 100)},
		{"type": "tool_use", "id": "toolu_fixed", "name": "Bash", "input": map[string]any{"command": "echo hi"}},
	}
	if diff := cmp.Diff(wantBlocks, a.Blocks); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}
	if a.Model != "claude-test-model" {
		t.Errorf("model = %q, want the request's", a.Model)
	}
	if a.StopReason != "tool_use" {
		t.Errorf("stop_reason = %q, want tool_use", a.StopReason)
	}
	if out, _ := a.Usage["output_tokens"].(float64); out < 1 {
		t.Errorf("usage = %v", a.Usage)
	}
	// 1 thinking + 1 signature + 4 text (215 bytes / 64) + 3 JSON pieces.
	if a.Deltas != 9 {
		t.Errorf("%d deltas, want 9", a.Deltas)
	}

	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	r := reqs[0]
	if diff := cmp.Diff([]string{"Bash", "Write"}, r.Tools); diff != "" {
		t.Error(diff)
	}
	if r.System != "sys one\nsys two" || r.Model != "claude-test-model" || r.MaxTokens != 1000 || !r.Stream {
		t.Errorf("decoded request = %+v", r)
	}
	if r.LastUserText() != "hi" {
		t.Errorf("LastUserText = %q", r.LastUserText())
	}
}

func TestStopReasonAndChunking(t *testing.T) {
	big := strings.Repeat("abcdefghij", 100_000) + "€" // 1 MB
	s := NewServer(Script(
		Reply(Text(big)),
		Turn{Blocks: []Block{Text("0123456789")}, ChunkSize: 3, StopReason: "max_tokens"},
	))
	defer s.Close()
	c := newClient(t)

	resp := post(t, c, messagesURL(s), simpleRequest(true))
	a := assemble(t, readSSE(t, resp.Body))
	resp.Body.Close()
	if a.Blocks[0]["text"] != big {
		t.Error("big text not reassembled")
	}
	if a.Deltas > maxDeltas {
		t.Errorf("%d deltas for 1 MB, want at most %d", a.Deltas, maxDeltas)
	}
	if a.StopReason != "end_turn" {
		t.Errorf("stop_reason %q", a.StopReason)
	}

	resp = post(t, c, messagesURL(s), simpleRequest(true,
		map[string]any{"role": "user", "content": "hi"},
		map[string]any{"role": "assistant", "content": "x"},
		map[string]any{"role": "user", "content": "more"}))
	a = assemble(t, readSSE(t, resp.Body))
	resp.Body.Close()
	if a.Deltas != 4 || a.Blocks[0]["text"] != "0123456789" || a.StopReason != "max_tokens" {
		t.Errorf("got %d deltas, %v, %q", a.Deltas, a.Blocks, a.StopReason)
	}
}

func TestChunksKeepUTF8(t *testing.T) {
	s := "a€b😀cdé" + strings.Repeat("ß", 10)
	for size := 1; size < 8; size++ {
		parts := chunks(s, size)
		if strings.Join(parts, "") != s {
			t.Fatalf("size %d: parts do not join back", size)
		}
		for _, p := range parts {
			if !utf8.ValidString(p) || p == "" {
				t.Fatalf("size %d: bad part %q", size, p)
			}
		}
	}
	if got := chunks("", 10); len(got) != 0 {
		t.Errorf("chunks(\"\") = %q", got)
	}
}

func TestNonStreaming(t *testing.T) {
	s := NewServer(Script(Reply(Thinking("t"), Text("hello"), ToolUse("Read", map[string]any{"file_path": "/x"}))))
	defer s.Close()
	c := newClient(t)
	req := simpleRequest(false)
	delete(req, "stream") // the CLI's probe has no stream field
	resp := post(t, c, messagesURL(s), req)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var m struct {
		ID         string           `json:"id"`
		Type       string           `json:"type"`
		Role       string           `json:"role"`
		Model      string           `json:"model"`
		Content    []map[string]any `json:"content"`
		StopReason string           `json:"stop_reason"`
		Usage      map[string]int   `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Type != "message" || m.Role != "assistant" || m.Model != "claude-test-model" || m.StopReason != "tool_use" || !strings.HasPrefix(m.ID, "msg_") {
		t.Errorf("message = %+v", m)
	}
	if len(m.Content) != 3 || m.Content[1]["text"] != "hello" || m.Content[2]["name"] != "Read" ||
		!strings.HasPrefix(m.Content[2]["id"].(string), "toolu_") || m.Content[0]["signature"] == "" {
		t.Errorf("content = %v", m.Content)
	}
	if m.Usage["input_tokens"] < 1 || m.Usage["output_tokens"] < 1 {
		t.Errorf("usage = %v", m.Usage)
	}
	if r := s.Requests(); len(r) != 1 || r[0].Stream {
		t.Errorf("requests = %v", r)
	}
}

func TestToolUseIDsAreStable(t *testing.T) {
	s := NewServer(Script(
		Reply(ToolUse("Bash", map[string]any{"command": "ls"})),
		Reply(ToolUse("Bash", map[string]any{"command": "ls"})),
	))
	defer s.Close()
	c := newClient(t)
	id := func(req map[string]any) string {
		resp := post(t, c, messagesURL(s), req)
		defer resp.Body.Close()
		a := assemble(t, readSSE(t, resp.Body))
		return a.Blocks[0]["id"].(string)
	}
	first := id(simpleRequest(true))
	again := id(simpleRequest(true))
	next := id(simpleRequest(true,
		map[string]any{"role": "user", "content": "hi"},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": first, "name": "Bash", "input": map[string]any{"command": "ls"}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": first, "content": "a\nb"}}}))
	other := id(simpleRequest(true, map[string]any{"role": "user", "content": "another conversation"}))
	if first != again {
		t.Errorf("same request, different ids %q %q", first, again)
	}
	if first == next || first == other {
		t.Errorf("ids collide: %q %q %q", first, next, other)
	}
	if len(first) != len("toolu_")+24 {
		t.Errorf("id %q has an unexpected length", first)
	}
	if content, isErr, ok := s.Requests()[2].ToolResult(first); !ok || isErr || content != "a\nb" {
		t.Errorf("ToolResult = %q %v %v", content, isErr, ok)
	}
}

func TestErrorTurn(t *testing.T) {
	s := NewServer(Script(Error(529, "", ""), Turn{Status: 400, ErrorMessage: "bad thing"}))
	defer s.Close()
	c := newClient(t)
	check := func(req map[string]any, status int, typ, msg string) {
		t.Helper()
		resp := post(t, c, messagesURL(s), req)
		defer resp.Body.Close()
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
			RequestID string `json:"request_id"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != status || body.Type != "error" || body.Error.Type != typ || !strings.Contains(body.Error.Message, msg) || body.RequestID == "" {
			t.Errorf("got %d %+v, want %d %s %q", resp.StatusCode, body, status, typ, msg)
		}
	}
	check(simpleRequest(true), 529, "overloaded_error", "529")
	check(simpleRequest(true,
		map[string]any{"role": "user", "content": "hi"},
		map[string]any{"role": "assistant", "content": "x"},
		map[string]any{"role": "user", "content": "y"}), 400, "invalid_request_error", "bad thing")
}

func TestCountTokensAndUnknown(t *testing.T) {
	s := NewServer(Script())
	defer s.Close()
	c := newClient(t)

	resp := post(t, c, s.URL+"/v1/messages/count_tokens?beta=true", simpleRequest(false))
	var ct struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ct); err != nil || ct.InputTokens < 1 {
		t.Errorf("count_tokens: %+v %v", ct, err)
	}
	resp.Body.Close()
	if s.CountTokensCalls() != 1 {
		t.Errorf("CountTokensCalls = %d", s.CountTokensCalls())
	}

	resp, err := c.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"not_found_error"`) {
		t.Errorf("unknown path: %d %s", resp.StatusCode, body)
	}
	resp, err = c.Post(messagesURL(s), "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("bad JSON: status %d", resp.StatusCode)
	}
	if got := s.Unhandled(); len(got) != 2 || !strings.Contains(got[0], "GET /v1/models") {
		t.Errorf("Unhandled = %q", got)
	}
	if len(s.Requests()) != 0 {
		t.Errorf("Requests = %v, want none", s.Requests())
	}

	resp = post(t, c, messagesURL(s), simpleRequest(true))
	a := assemble(t, readSSE(t, resp.Body))
	resp.Body.Close()
	if a.Blocks[0]["text"] != EndOfScript {
		t.Errorf("past the end of the script: %v", a.Blocks)
	}
}

func TestResponderPanics(t *testing.T) {
	s := NewServer(ResponderFunc(func(*Request) Turn { panic("boom") }))
	defer s.Close()
	c := newClient(t)
	resp := post(t, c, messagesURL(s), simpleRequest(true))
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Errorf("status %d", resp.StatusCode)
	}
	if u := s.Unhandled(); len(u) != 1 || !strings.Contains(u[0], "boom") {
		t.Errorf("Unhandled = %q", u)
	}
}

func TestRequestDecoding(t *testing.T) {
	body := `{"model":"m","max_tokens":5,"stream":true,"system":"plain system",
	"messages":[
	 {"role":"user","content":[{"type":"text","text":"<system-reminder>\nnoise\n</system-reminder>"},{"type":"text","text":"first"}]},
	 {"role":"system","content":[{"type":"text","text":"env"}]},
	 {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"false"}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":[{"type":"text","text":"exit 1"},{"type":"text","text":"oops"}]}]}
	]}`
	r, err := decodeRequest([]byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.System != "plain system" || r.AssistantCount() != 1 || r.LastUserText() != "" || r.firstUserText() != "first" {
		t.Errorf("decoded %+v", r)
	}
	if c, isErr, ok := r.ToolResult("toolu_1"); !ok || !isErr || c != "exit 1\noops" {
		t.Errorf("ToolResult = %q %v %v", c, isErr, ok)
	}
	if _, _, ok := r.ToolResult("toolu_nope"); ok {
		t.Error("ToolResult found a missing id")
	}
	uses := r.ToolUses()
	if len(uses) != 1 || uses[0].Name != "Bash" || string(uses[0].Input) != `{"command":"false"}` {
		t.Errorf("ToolUses = %+v", uses)
	}
	if r.Messages[2].Content[0].Text != "hmm" {
		t.Errorf("thinking text = %q", r.Messages[2].Content[0].Text)
	}
}

// A stream that never ends is cancelled by Close, which returns promptly.
func TestCloseCancelsOpenStreams(t *testing.T) {
	s := NewServer(Script(Turn{Blocks: []Block{Text(strings.Repeat("x", 1000))}, ChunkSize: 1, DeltaDelay: time.Hour}))
	c := newClient(t)
	resp := post(t, c, messagesURL(s), simpleRequest(true))
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if l, err := br.ReadString('\n'); err != nil || l != "event: message_start\n" {
		t.Fatalf("first line %q %v", l, err)
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close hangs on an open stream")
	}
	if _, err := io.ReadAll(br); err == nil {
		// A clean EOF would make the client think the reply was complete;
		// either way the stream must have ended.
		t.Log("stream ended with EOF")
	}
	if s.InFlight() != 0 {
		t.Errorf("InFlight = %d after Close", s.InFlight())
	}
	s.Close() // idempotent
}

// The handler notices the client going away in the middle of a stream.
func TestClientGoesAway(t *testing.T) {
	s := NewServer(Script(Turn{Blocks: []Block{Text(strings.Repeat("x", 1000))}, ChunkSize: 1, DeltaDelay: 20 * time.Millisecond}))
	defer s.Close()
	c := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	b, _ := json.Marshal(simpleRequest(true))
	req, _ := http.NewRequestWithContext(ctx, "POST", messagesURL(s), bytes.NewReader(b))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for range 10 {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	if s.InFlight() != 1 {
		t.Errorf("InFlight = %d while streaming", s.InFlight())
	}
	cancel()
	resp.Body.Close()
	waitFor(t, 30*time.Second, "handler to notice the client left", func() bool { return s.InFlight() == 0 })
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConcurrentRequests(t *testing.T) {
	s := NewServer(Script(Turn{Blocks: []Block{Text("concurrent")}, DeltaDelay: time.Millisecond}))
	defer s.Close()
	c := newClient(t)
	const n = 20
	errs := make(chan string, n)
	for range n {
		go func() {
			b, _ := json.Marshal(simpleRequest(true))
			resp, err := c.Post(messagesURL(s), "application/json", bytes.NewReader(b))
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(body), `"text":"concurrent"`) {
				errs <- "missing text"
				return
			}
			errs <- ""
		}()
	}
	for range n {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
	if got := len(s.Requests()); got != n {
		t.Errorf("%d requests recorded, want %d", got, n)
	}
}

func TestEnv(t *testing.T) {
	s := NewServer(Script())
	defer s.Close()
	env := map[string]string{}
	for _, kv := range s.Env("/h") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("bad entry %q", kv)
		}
		if _, dup := env[k]; dup {
			t.Errorf("duplicate %s", k)
		}
		env[k] = v
	}
	for k, v := range map[string]string{
		"HOME": "/h", "ANTHROPIC_BASE_URL": s.URL, "ANTHROPIC_API_KEY": "sk-ant-test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
		"PATH": os.Getenv("PATH"),
	} {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Errorf("URL = %q", s.URL)
	}
}

// fakeTB records Fatal and Skip instead of stopping the test.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Fatal(args ...any)                 { f.fatal = strings.TrimSpace(fmtArgs(args)) }
func (f *fakeTB) Fatalf(format string, args ...any) { f.fatal = format }
func (f *fakeTB) Skip(args ...any)                  { f.skip = strings.TrimSpace(fmtArgs(args)) }

func fmtArgs(args []any) string {
	var sb strings.Builder
	for _, a := range args {
		sb.WriteString(a.(string))
	}
	return sb.String()
}

func TestCLIPathLookup(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("go.mod")
	mk(".tools/claude-code-2.1.9/node_modules/.bin/claude")
	want := mk(".tools/claude-code-2.1.10/node_modules/.bin/claude")
	sub := filepath.Join(root, "pkg", "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	t.Setenv("PATH", t.TempDir()) // no claude on PATH

	t.Setenv(CLIEnv, "")
	if got := CLIPath(t); got != want {
		t.Errorf("CLIPath = %q, want the newest %q", got, want)
	}

	t.Setenv(CLIEnv, "/explicit/claude")
	ftb := &fakeTB{TB: t}
	CLIPath(ftb)
	if !strings.Contains(ftb.fatal, "claude CLI not found") {
		t.Errorf("missing explicit CLI: fatal = %q", ftb.fatal)
	}

	t.Setenv(CLIEnv, "")
	t.Chdir(t.TempDir()) // no go.mod above with .tools (walks up to /)
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		ftb := &fakeTB{TB: t}
		CLIPath(ftb)
		got := ftb.skip
		if ci == "true" {
			got = ftb.fatal
		}
		if !strings.Contains(got, "claude CLI not found") || !strings.Contains(got, "run make test") {
			t.Errorf("CI=%q: fatal %q skip %q", ci, ftb.fatal, ftb.skip)
		}
	}
}
