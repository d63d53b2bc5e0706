package daemontest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/claudectl/claudectl/claude"
)

// InProcessCLI is a claude.Transport whose "CLI" is a few lines of Go in
// this process: it answers control requests with success and each prompt
// with a system/init (shaped like the real CLI's, version
// claude.TestedMaxVersion) and a successful result, and ends when its
// input is closed. It costs no process, so tests can run thousands of
// sessions.
type InProcessCLI struct {
	// Ignore lists control request subtypes it never answers ("interrupt"),
	// as a stuck CLI would not.
	Ignore []string
	// Init, if set, shapes each system/init before it is printed: the
	// fields of the JSON object, which it may change or delete.
	Init func(fields map[string]any)
	// Script, if set, gives the lines printed for the nth prompt (from 1)
	// instead of an init and a result; "$SESSION_ID" in them is replaced
	// by the session's id. It lets tests replay recorded CLI lines.
	Script func(n int) [][]byte
	// Answer, if set, gives the response to each control request it
	// answers, as a JSON object ("" for the usual empty success); request
	// is the request's JSON ({"subtype": ..., ...}).
	Answer func(subtype string, request json.RawMessage) string

	started atomic.Int64
}

// Started returns how many CLIs it has started.
func (t *InProcessCLI) Started() int64 { return t.started.Load() }

// Start implements claude.Transport.
func (t *InProcessCLI) Start(ctx context.Context, _ *claude.Command) (claude.Conn, error) {
	n := t.started.Add(1)
	c := &inProcessConn{sessionID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), wake: make(chan struct{}, 1),
		ignore: t.Ignore, shapeInit: t.Init, script: t.Script, answer: t.Answer}
	context.AfterFunc(ctx, func() { c.Close() })
	return c, nil
}

type inProcessConn struct {
	sessionID string
	ignore    []string
	shapeInit func(map[string]any)
	script    func(int) [][]byte
	answer    func(string, json.RawMessage) string
	prompts   int           // written by WriteLine only (the SDK writes one line at a time)
	wake      chan struct{} // capacity 1: lines or the end are waiting

	mu     sync.Mutex
	out    [][]byte // guarded by mu
	closed bool     // guarded by mu: the input ended
}

func (c *inProcessConn) push(lines ...[]byte) {
	c.mu.Lock()
	c.out = append(c.out, lines...)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *inProcessConn) ReadLine() (claude.Line, error) {
	for {
		c.mu.Lock()
		if len(c.out) > 0 {
			l := c.out[0]
			c.out = c.out[1:]
			c.mu.Unlock()
			return claude.Line{Data: l}, nil
		}
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return claude.Line{}, io.EOF
		}
		<-c.wake
	}
}

func (c *inProcessConn) WriteLine(_ context.Context, line []byte) error {
	var msg struct {
		Type      string          `json:"type"`
		RequestID string          `json:"request_id"`
		Request   json.RawMessage `json:"request"`
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		return fmt.Errorf("in-process CLI: bad line %q: %w", line, err)
	}
	switch msg.Type {
	case "control_request":
		var req struct {
			Subtype string `json:"subtype"`
		}
		json.Unmarshal(msg.Request, &req)
		if slices.Contains(c.ignore, req.Subtype) {
			return nil
		}
		resp := "{}"
		if c.answer != nil {
			resp = cmp.Or(c.answer(req.Subtype, msg.Request), resp)
		}
		c.push(fmt.Appendf(nil, `{"type":"control_response","response":{"subtype":"success","request_id":%q,"response":%s}}`, msg.RequestID, resp))
	case "user":
		c.prompts++
		if c.script != nil {
			lines := c.script(c.prompts)
			for i, l := range lines {
				lines[i] = bytes.ReplaceAll(l, []byte("$SESSION_ID"), []byte(c.sessionID))
			}
			c.push(lines...)
			return nil
		}
		c.push(c.init(),
			fmt.Appendf(nil, `{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":%q,"total_cost_usd":0.001,"duration_ms":1,"num_turns":1}`, c.sessionID))
	}
	return nil
}

// DefaultTools are the tools of the in-process CLI's system/init.
var DefaultTools = []string{"Task", "AskUserQuestion", "Bash", "Edit", "Glob", "Grep", "Read", "WebFetch", "WebSearch", "Write"}

func (c *inProcessConn) init() []byte {
	fields := map[string]any{"type": "system", "subtype": "init", "session_id": c.sessionID, "model": "stand-in",
		"tools": slices.Clone(DefaultTools), "cwd": "/", "permissionMode": "default",
		"claude_code_version": claude.TestedMaxVersion}
	if c.shapeInit != nil {
		c.shapeInit(fields)
	}
	b, err := json.Marshal(fields)
	if err != nil {
		panic("in-process CLI: an init that is not JSON: " + err.Error())
	}
	return b
}

func (c *inProcessConn) CloseWrite() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

func (c *inProcessConn) Close() error { return c.CloseWrite() }
func (c *inProcessConn) Wait() error  { return nil }

func (c *inProcessConn) StderrTail() string { return "" }
