package claude_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// askPermission makes the in-memory CLI ask for a tool.
func askPermission(c *memConn, id string) {
	c.print(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{
		"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]any{"command": "ls"}, "tool_use_id": "tu_" + id,
	}})
}

// A permission callback may close its own session.
func TestCloseFromCallback(t *testing.T) {
	closed := make(chan error, 1)
	var s *claude.Session
	ready := make(chan struct{})
	s, c := startMem(t, &claude.Options{CanUseTool: func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		<-ready
		closed <- s.Close()
		return claude.Deny("closed"), nil
	}})
	close(ready)
	askPermission(c, "p1")
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close from the callback = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close called from CanUseTool did not return")
	}
}

// A callback that ignores its ctx does not hold Close up.
func TestCloseDoesNotWaitForeverForCallbacks(t *testing.T) {
	block := make(chan struct{})
	defer close(block) // the abandoned callback ends with the test
	entered := make(chan struct{})
	s, c := startMem(t, &claude.Options{CanUseTool: func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		close(entered)
		<-block // ignores ctx
		return claude.Allow(), nil
	}})
	askPermission(c, "p1")
	<-entered
	returnsWithin(t, 30*time.Second, "Close with a callback that ignores its ctx", func() { s.Close() })
}

// The Stderr callback may close its session, and a panic in it is logged,
// not fatal; with Options.Stderr and with ProcessTransport.Stderr.
func TestStderrCallbackClosesOrPanics(t *testing.T) {
	defer claude.SetShutdownTimings(200*time.Millisecond, 300*time.Millisecond, 100*time.Millisecond)()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := func(t *testing.T, direct bool, f func(string)) *claude.Session {
		o := &claude.Options{CLIPath: exe, Env: map[string]string{fakeCLIEnv: "exit3"}}
		if direct {
			o.Transport = &claude.ProcessTransport{Stderr: f}
		} else {
			o.Stderr = f
		}
		s, err := claude.Start(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, direct := range []bool{false, true} {
		name := "Options.Stderr"
		if direct {
			name = "ProcessTransport.Stderr"
		}
		t.Run(name+"/close", func(t *testing.T) {
			var s atomic.Pointer[claude.Session]
			ready := make(chan struct{})
			closed := make(chan error, 1)
			s.Store(start(t, direct, func(string) {
				<-ready
				closed <- s.Load().Close()
			}))
			close(ready)
			select {
			case err := <-closed:
				var ee *claude.ExitError
				if !errors.As(err, &ee) || ee.Code != 3 {
					t.Errorf("Close from Stderr = %v, want the exit with code 3", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Close called from the Stderr callback did not return")
			}
		})
		t.Run(name+"/panic", func(t *testing.T) {
			s := start(t, direct, func(string) { panic("stderr callback") })
			<-s.Done()
			var ee *claude.ExitError
			if err := s.Close(); !errors.As(err, &ee) || ee.Code != 3 {
				t.Errorf("Close = %v, want the exit with code 3", err)
			}
		})
	}
}

// A panic in an in-process MCP tool becomes an error result for that call;
// the server and the session go on.
func TestMCPToolPanicIsAnErrorResult(t *testing.T) {
	ts := newTestServer(1)
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "boom"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		panic("tool handler panicked")
	})
	for range 2 { // the server is shared by two sessions: one middleware
		p := newMCPPeer(t, &claude.Options{MCPServers: map[string]*mcp.Server{"calc": ts.Server}})
		p.handshake("calc")
		r := p.call("calc", 1, "tools/call", map[string]any{"name": "boom", "arguments": map[string]any{}})
		if res, _ := r["result"].(map[string]any); res["isError"] != true || !strings.Contains(toolText(t, r), "boom panicked: tool handler panicked") {
			t.Errorf("reply to a panicking tool = %v", r)
		}
		r = p.call("calc", 2, "tools/call", map[string]any{"name": "add", "arguments": map[string]any{"a": 1, "b": 2}})
		if toolText(t, r) != "3" {
			t.Errorf("add after the panic = %v", r)
		}
	}
}

// A flood of the CLI's requests is answered 64 at a time; the rest are
// refused at once.
func TestRequestFloodIsBounded(t *testing.T) {
	const n, limit = 200, 64
	var running, most atomic.Int32
	s, c := startMem(t, &claude.Options{CanUseTool: func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		r := running.Add(1)
		for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
		}
		<-ctx.Done() // busy until the session ends
		running.Add(-1)
		return claude.Allow(), nil
	}})
	for i := range n {
		askPermission(c, fmt.Sprint("p", i))
	}
	for range n - limit {
		m := c.nextOf(t, "control_response")
		r := m["response"].(map[string]any)
		if r["subtype"] != "error" || r["error"] != "too many requests at once" {
			t.Fatalf("response = %v, want a refusal", r)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for running.Load() < limit && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := most.Load(); got != limit {
		t.Errorf("at most %d callbacks ran at once, want %d", got, limit)
	}
	s.Close()
}
