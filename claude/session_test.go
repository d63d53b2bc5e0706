package claude_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
)

// memConn is an in-memory Conn: the test plays the CLI.
type memConn struct {
	in        chan claude.Line // what the "CLI" prints
	out       chan []byte      // what the session writes
	closed    chan struct{}
	closeOnce sync.Once
	inOnce    sync.Once
}

func newMemConn() *memConn {
	return &memConn{in: make(chan claude.Line, 1024), out: make(chan []byte, 1024), closed: make(chan struct{})}
}

func (c *memConn) ReadLine() (claude.Line, error) {
	select {
	case l, ok := <-c.in:
		if !ok {
			return claude.Line{}, io.EOF
		}
		return l, nil
	case <-c.closed:
		return claude.Line{}, io.EOF
	}
}

func (c *memConn) WriteLine(ctx context.Context, line []byte) error {
	if !json.Valid(line) || !strings.HasSuffix(string(line), "\n") || strings.Count(string(line), "\n") != 1 {
		panic(fmt.Sprintf("session wrote an invalid line: %q", line))
	}
	select {
	case c.out <- append([]byte(nil), line...):
		return nil
	case <-c.closed:
		return claude.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *memConn) CloseWrite() error  { return nil }
func (c *memConn) StderrTail() string { return "" }
func (c *memConn) Wait() error        { return nil }
func (c *memConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// print makes the fake CLI print a line.
func (c *memConn) print(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	c.in <- claude.Line{Data: b}
}

// end makes the fake CLI's output end.
func (c *memConn) end() { c.inOnce.Do(func() { close(c.in) }) }

// next returns the next line the session wrote, decoded.
func (c *memConn) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case b := <-c.out:
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the session to write")
		return nil
	}
}

// nextRequest skips to the next control_request of the given subtype.
func (c *memConn) nextOf(t *testing.T, typ string) map[string]any {
	t.Helper()
	for {
		m := c.next(t)
		if m["type"] == typ {
			return m
		}
	}
}

type memTransport struct{ c *memConn }

func (tr memTransport) Start(context.Context, *claude.Command) (claude.Conn, error) { return tr.c, nil }

func startMem(t *testing.T, opts *claude.Options) (*claude.Session, *memConn) {
	t.Helper()
	c := newMemConn()
	if opts == nil {
		opts = &claude.Options{}
	}
	opts.Transport = memTransport{c}
	s, err := claude.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Answer initialize.
	init := c.nextOf(t, "control_request")
	if init["request"].(map[string]any)["subtype"] != "initialize" {
		t.Fatalf("first request = %v", init)
	}
	c.print(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": init["request_id"], "response": map[string]any{"commands": []any{}, "pid": 7, "claude_code_version": "2.1.329"}}})
	if _, err := s.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, c
}

func respond(c *memConn, id any, resp any) {
	c.print(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": id, "response": resp}})
}

func TestControlRequestsMultiplexed(t *testing.T) {
	s, c := startMem(t, nil)
	ctx := context.Background()
	if r, err := s.Initialize(ctx); err != nil || r.PID != 7 {
		t.Fatalf("Initialize = %+v, %v", r, err)
	}
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			raw, err := s.Control(ctx, "echo_n", map[string]int{"n": i})
			if err != nil {
				errs <- err
				return
			}
			var got struct{ N int }
			json.Unmarshal(raw, &got)
			if got.N != i {
				errs <- fmt.Errorf("request %d got response for %d", i, got.N)
			}
		})
	}
	var reqs []map[string]any
	for range n {
		reqs = append(reqs, c.nextOf(t, "control_request"))
	}
	// Answer in reverse order.
	for i := len(reqs) - 1; i >= 0; i-- {
		r := reqs[i]
		respond(c, r["request_id"], map[string]any{"n": r["request"].(map[string]any)["n"]})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestControlCancelAndErrors(t *testing.T) {
	s, c := startMem(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := s.Control(ctx, "slow_thing", nil); done <- err }()
	req := c.nextOf(t, "control_request")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled request = %v", err)
	}
	cr := c.nextOf(t, "control_cancel_request")
	if cr["request_id"] != req["request_id"] {
		t.Errorf("cancel names %v, request was %v", cr["request_id"], req["request_id"])
	}
	// A late response to the withdrawn request is ignored.
	respond(c, req["request_id"], map[string]any{})

	go func() { done <- s.SetModel(context.Background(), "m") }()
	req = c.nextOf(t, "control_request")
	if got := req["request"].(map[string]any); got["subtype"] != "set_model" || got["model"] != "m" {
		t.Errorf("set_model request = %v", got)
	}
	c.print(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "error", "request_id": req["request_id"], "error": "no such model", "error_code": "unsupported_request"}})
	err := <-done
	var ce *claude.ControlError
	if !errors.As(err, &ce) || ce.Subtype != "set_model" || ce.Message != "no such model" || !errors.Is(err, claude.ErrUnsupportedRequest) {
		t.Errorf("error response = %v", err)
	}
}

func TestNoCancelToOldCLI(t *testing.T) {
	// CLI 2.1.37 exits on a control_cancel_request: none is sent to a CLI
	// older than the first one known to accept it.
	c := newMemConn()
	s, err := claude.Start(context.Background(), &claude.Options{Transport: memTransport{c}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	init := c.nextOf(t, "control_request")
	respond(c, init["request_id"], map[string]any{"claude_code_version": "2.1.37"})
	if _, err := s.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := s.Control(ctx, "slow_thing", nil); done <- err }()
	c.nextOf(t, "control_request")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Control = %v", err)
	}
	if err := s.SendText(context.Background(), "next"); err != nil {
		t.Fatal(err)
	}
	if m := c.next(t); m["type"] != "user" {
		t.Errorf("after the cancelled request the session wrote %v, want the user line", m)
	}
}

func TestIncomingRequests(t *testing.T) {
	var mu sync.Mutex
	var seen []*claude.PermissionRequest
	cancelled := make(chan struct{})
	s, c := startMem(t, &claude.Options{CanUseTool: func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		mu.Lock()
		seen = append(seen, req)
		mu.Unlock()
		switch req.ToolName {
		case "Wait":
			<-ctx.Done()
			close(cancelled)
			return claude.Allow(), nil
		case "Panic":
			panic("boom")
		case "Deny":
			return claude.PermissionResult{Message: "no", Interrupt: true}, nil
		}
		return claude.Allow(), nil
	}})
	ask := func(id, tool string) {
		c.print(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{
			"subtype": "can_use_tool", "tool_name": tool, "input": map[string]any{"command": "ls"}, "tool_use_id": "tu_" + id,
			"permission_suggestions": []any{map[string]any{"type": "addRules", "rules": []any{map[string]any{"toolName": "Bash", "ruleContent": "ls"}}, "behavior": "allow", "destination": "session"}},
			"blocked_path":           "/etc", "decision_reason": "why", "agent_id": "a1",
		}})
	}
	responses := map[string]map[string]any{}
	collect := func(n int) {
		for range n {
			r := c.nextOf(t, "control_response")["response"].(map[string]any)
			responses[r["request_id"].(string)] = r
		}
	}
	ask("r-wait", "Wait")
	ask("r-allow", "Bash")
	ask("r-panic", "Panic")
	ask("r-deny", "Deny")
	c.print(map[string]any{"type": "control_request", "request_id": "r-unknown", "request": map[string]any{"subtype": "teleport"}})
	collect(4)
	c.print(map[string]any{"type": "control_cancel_request", "request_id": "r-wait"})
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("control_cancel_request did not cancel the handler")
	}
	allow := responses["r-allow"]["response"].(map[string]any)
	if allow["behavior"] != "allow" || allow["toolUseID"] != "tu_r-allow" || allow["updatedInput"].(map[string]any)["command"] != "ls" {
		t.Errorf("allow = %v", allow)
	}
	deny := responses["r-deny"]["response"].(map[string]any)
	if deny["behavior"] != "deny" || deny["message"] != "no" || deny["interrupt"] != true {
		t.Errorf("deny = %v", deny)
	}
	if p := responses["r-panic"]; p["subtype"] != "error" || !strings.Contains(p["error"].(string), "boom") {
		t.Errorf("panic = %v", p)
	}
	if u := responses["r-unknown"]; u["subtype"] != "error" || u["error_code"] != "unsupported_request" || !strings.Contains(u["error"].(string), "teleport") {
		t.Errorf("unknown = %v", u)
	}
	if _, ok := responses["r-wait"]; ok {
		t.Error("a withdrawn request was answered")
	}
	mu.Lock()
	var bash *claude.PermissionRequest
	for _, r := range seen {
		if r.ToolName == "Bash" {
			bash = r
		}
	}
	mu.Unlock()
	if bash == nil || bash.RequestID != "r-allow" || bash.BlockedPath != "/etc" || bash.DecisionReason != "why" || bash.AgentID != "a1" ||
		len(bash.Suggestions) != 1 || bash.Suggestions[0].Rules[0].RuleContent != "ls" || len(bash.Raw) == 0 {
		t.Errorf("request as seen by the callback = %+v", bash)
	}
	// The session is still alive and delivering.
	c.print(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{map[string]any{"type": "text", "text": "still here"}}}})
	m, err := s.Next(context.Background())
	if a, ok := m.(*claude.AssistantMessage); err != nil || !ok || a.Text() != "still here" {
		t.Errorf("Next = %v, %v", m, err)
	}
}

func TestPendingPermissionRequestsInResponse(t *testing.T) {
	got := make(chan string, 1)
	c := newMemConn()
	s, err := claude.Start(context.Background(), &claude.Options{Transport: memTransport{c}, CanUseTool: func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		got <- req.ToolName
		return claude.Allow(), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	init := c.nextOf(t, "control_request")
	c.print(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": init["request_id"], "response": map[string]any{},
		"pending_permission_requests": []any{map[string]any{"type": "control_request", "request_id": "queued-1", "request": map[string]any{"subtype": "can_use_tool", "tool_name": "Write", "input": map[string]any{}}}}}})
	select {
	case name := <-got:
		if name != "Write" {
			t.Errorf("tool = %q", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("queued permission request was not handled")
	}
	if r := c.nextOf(t, "control_response")["response"].(map[string]any); r["request_id"] != "queued-1" {
		t.Errorf("response = %v", r)
	}
}

func TestOrderAndEndOfSession(t *testing.T) {
	s, c := startMem(t, nil)
	// A request still waiting when the output ends fails with ErrClosed.
	done := make(chan error, 1)
	go func() { _, err := s.Control(context.Background(), "never_answered", nil); done <- err }()
	c.nextOf(t, "control_request")
	const n = 3000
	go func() {
		for i := range n {
			c.print(map[string]any{"type": "stream_event", "uuid": fmt.Sprint(i), "event": map[string]any{"type": "content_block_delta", "delta": map[string]any{"type": "text_delta", "text": "x"}}})
		}
		c.end()
	}()
	i := 0
	for m, err := range s.Messages(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if ev := m.(*claude.StreamEvent); ev.UUID != fmt.Sprint(i) {
			t.Fatalf("message %d has uuid %s", i, ev.UUID)
		}
		i++
	}
	if i != n {
		t.Errorf("got %d messages, want %d", i, n)
	}
	if err := <-done; !errors.Is(err, claude.ErrClosed) {
		t.Errorf("pending request = %v, want ErrClosed", err)
	}
	if err := s.SendText(context.Background(), "late"); !errors.Is(err, claude.ErrClosed) {
		t.Errorf("SendText after the end = %v", err)
	}
}

func TestUnreadMessagesDoNotBlockControl(t *testing.T) {
	s, c := startMem(t, &claude.Options{CanUseTool: func(context.Context, *claude.PermissionRequest) (claude.PermissionResult, error) {
		return claude.Allow(), nil
	}})
	for range 500 {
		c.print(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{}}})
	}
	c.print(map[string]any{"type": "control_request", "request_id": "p1", "request": map[string]any{"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]any{}}})
	if r := c.nextOf(t, "control_response")["response"].(map[string]any); r["request_id"] != "p1" {
		t.Errorf("response = %v", r)
	}
	_ = s
}

func TestSendWritesUserLine(t *testing.T) {
	s, c := startMem(t, nil)
	tricky := "line one\nline \"two\" \u2028 \x00 end"
	if err := s.SendText(context.Background(), tricky); err != nil {
		t.Fatal(err)
	}
	m := c.nextOf(t, "user")
	content := m["message"].(map[string]any)["content"].([]any)[0].(map[string]any)
	if m["session_id"] != "" || m["parent_tool_use_id"] != nil || content["type"] != "text" || content["text"] != tricky {
		t.Errorf("user line = %v", m)
	}
	// A control payload that is not an object is refused before writing.
	if _, err := s.Control(context.Background(), "x", []int{1}); err == nil {
		t.Error("a non-object payload was accepted")
	}
	if _, err := claude.EncodeLine(map[string]any{"bad": json.RawMessage(`{"unterminated"`)}); err == nil {
		t.Error("EncodeLine accepted invalid raw JSON")
	}
}

func TestAnswerQuestions(t *testing.T) {
	h := claude.AnswerQuestions(func(ctx context.Context, qs []claude.Question) (map[string]string, error) {
		return map[string]string{qs[0].Question: qs[0].Options[1].Label}, nil
	}, nil)
	in := `{"questions":[{"question":"Q?","header":"H","options":[{"label":"A"},"B"],"multiSelect":false}]}`
	res, err := h(context.Background(), &claude.PermissionRequest{ToolName: "AskUserQuestion", Input: json.RawMessage(in)})
	if err != nil || !res.Allow {
		t.Fatalf("%+v %v", res, err)
	}
	var out struct {
		Questions []claude.Question
		Answers   map[string]string
	}
	json.Unmarshal(res.UpdatedInput, &out)
	if out.Answers["Q?"] != "B" || len(out.Questions) != 1 {
		t.Errorf("updated input = %s", res.UpdatedInput)
	}
	res, _ = h(context.Background(), &claude.PermissionRequest{ToolName: "Bash"})
	if res.Allow {
		t.Error("other tools allowed without a next handler")
	}
}
