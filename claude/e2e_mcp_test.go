package claude_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// End-to-end tests of MCP servers with the real CLI: in-process servers
// written with the MCP Go SDK, and an external stdio server
// (claude/internal/testmcp) that the CLI runs.

type weatherArgs struct {
	City string `json:"city"`
}

// weatherServer is an in-process server with one tool, lookup_weather,
// that records the cities it was asked about.
type weatherServer struct {
	*mcp.Server
	mu     sync.Mutex
	cities []string
}

func newWeatherServer(alwaysLoad bool) *weatherServer {
	ws := &weatherServer{Server: mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1.0.0"}, nil)}
	tool := &mcp.Tool{Name: "lookup_weather", Description: "Looks up the weather of a city."}
	if alwaysLoad {
		tool.Meta = mcp.Meta{"anthropic/alwaysLoad": true}
	}
	mcp.AddTool(ws.Server, tool, func(ctx context.Context, req *mcp.CallToolRequest, in weatherArgs) (*mcp.CallToolResult, any, error) {
		ws.mu.Lock()
		ws.cities = append(ws.cities, in.City)
		ws.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Go says: sunny in " + in.City}}}, nil, nil
	})
	return ws
}

func (ws *weatherServer) asked() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return slices.Clone(ws.cities)
}

// weatherTurns scripts one prompt: the model calls tool with city, then
// answers text.
func weatherTurns(id, tool, city, text string) []claudetest.Turn {
	return []claudetest.Turn{
		claudetest.Reply(claudetest.ToolUseID(id, tool, map[string]any{"city": city})),
		claudetest.Reply(claudetest.Text(text)),
	}
}

// toolResult returns the tool_result for id as the fake model saw it.
func toolResult(t *testing.T, srv *claudetest.Server, id string) (string, bool) {
	t.Helper()
	reqs := srv.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if out, isErr, ok := reqs[i].ToolResult(id); ok {
			return out, isErr
		}
	}
	t.Fatalf("the model never got a tool_result for %s", id)
	return "", false
}

// lastTools returns the tool names of the last request the model got.
func lastTools(srv *claudetest.Server) []string {
	reqs := srv.Requests()
	return reqs[len(reqs)-1].Tools
}

// waitStatus polls MCPStatus until server has the wanted status.
func waitStatus(t *testing.T, e *e2e, s *claude.Session, server, want string) claude.MCPServerStatus {
	t.Helper()
	var last []claude.MCPServerStatus
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		st, err := s.MCPStatus(e.ctx)
		if err != nil {
			t.Fatalf("MCPStatus: %v", err)
		}
		last = st
		for _, ss := range st {
			if ss.Name == server && ss.Status == want {
				return ss
			}
		}
	}
	t.Fatalf("server %s never became %s; status: %+v", server, want, last)
	return claude.MCPServerStatus{}
}

func TestE2EMCPInProcessTool(t *testing.T) {
	ws := newWeatherServer(true)
	turns := slices.Concat(
		weatherTurns("toolu_wx_1", "mcp__weather__lookup_weather", "Paris", "It is sunny in Paris."),
		weatherTurns("toolu_wx_2", "mcp__weather__lookup_weather", "Rome", "Not available."),
		weatherTurns("toolu_wx_3", "mcp__weather__lookup_weather", "Oslo", "Sunny in Oslo too."))
	e := newE2E(t, turns...)
	e.opts.MCPServers = map[string]*mcp.Server{"weather": ws.Server}
	e.opts.AllowedTools = []string{"mcp__weather__lookup_weather"}
	// An sdk server the session does not have: the CLI's connection fails.
	e.opts.MCPConfig = []string{`{"mcpServers":{"ghost":{"type":"sdk","name":"ghost"}}}`}
	s := e.start()

	msgs, res := e.turn(s, "What's the weather in Paris?")
	if res.IsError || res.Result != "It is sunny in Paris." {
		t.Fatalf("result = %s", res.Raw())
	}
	if diff := cmp.Diff([]string{"Paris"}, ws.asked()); diff != "" {
		t.Errorf("Go handler calls (-want +got):\n%s", diff)
	}
	if out, isErr := toolResult(t, e.srv, "toolu_wx_1"); isErr || out != "Go says: sunny in Paris" {
		t.Errorf("tool_result = %q (is_error %v)", out, isErr)
	}
	if tools := e.srv.Requests()[0].Tools; !slices.Contains(tools, "mcp__weather__lookup_weather") {
		t.Errorf("the model was not offered the tool: %v", tools)
	}
	var init *claude.SystemInit
	for _, m := range msgs {
		if in, ok := m.(*claude.SystemInit); ok {
			init = in
		}
	}
	if init == nil || !slices.Contains(init.Tools, "mcp__weather__lookup_weather") ||
		!slices.Contains(init.MCPServers, claude.MCPServer{Name: "weather", Status: "connected", Source: "sdk"}) {
		if init == nil {
			t.Fatal("no system/init")
		}
		t.Errorf("system/init tools %v, MCP servers %+v", init.Tools, init.MCPServers)
	}
	st := waitStatus(t, e, s, "weather", "connected")
	if !strings.Contains(string(st.ServerInfo), `"weather"`) || !strings.Contains(string(st.Tools), "lookup_weather") {
		t.Errorf("status = %+v", st)
	}
	// The unknown server was answered with a JSON-RPC error, which the CLI
	// reports as a failed server.
	waitStatus(t, e, s, "ghost", "failed")

	// Disabled, the tool is withdrawn and a call fails without reaching Go.
	if err := s.MCPToggle(e.ctx, "weather", false); err != nil {
		t.Fatalf("MCPToggle off: %v", err)
	}
	waitStatus(t, e, s, "weather", "disabled")
	e.turn(s, "And in Rome?")
	// CLI 2.1.329 still lists the tool but refuses to call it.
	if out, isErr := toolResult(t, e.srv, "toolu_wx_2"); !isErr || !strings.Contains(out, "No such tool available") {
		t.Errorf("call to a disabled server: tool_result %q (is_error %v)", out, isErr)
	}

	// Enabled again, the CLI initializes the server anew, and it works.
	if err := s.MCPToggle(e.ctx, "weather", true); err != nil {
		t.Fatalf("MCPToggle on: %v", err)
	}
	waitStatus(t, e, s, "weather", "connected")
	e.turn(s, "And in Oslo?")
	if out, isErr := toolResult(t, e.srv, "toolu_wx_3"); isErr || out != "Go says: sunny in Oslo" {
		t.Errorf("tool_result after re-enabling = %q (is_error %v)", out, isErr)
	}
	if diff := cmp.Diff([]string{"Paris", "Oslo"}, ws.asked()); diff != "" {
		t.Errorf("Go handler calls (-want +got):\n%s", diff)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestE2EMCPInProcessCanUseTool(t *testing.T) {
	// Without alwaysLoad the CLI defers the tool behind its tool search,
	// and without AllowedTools it asks CanUseTool before each call.
	ws := newWeatherServer(false)
	e := newE2E(t, weatherTurns("toolu_wx_1", "mcp__weather__lookup_weather", "Lima", "Sunny.")...)
	e.opts.MCPServers = map[string]*mcp.Server{"weather": ws.Server}
	var mu sync.Mutex
	var asked []string
	e.opts.CanUseTool = func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		mu.Lock()
		asked = append(asked, req.ToolName)
		mu.Unlock()
		return claude.Allow(), nil
	}
	s := e.start()
	_, res := e.turn(s, "Weather in Lima?")
	if res.IsError {
		t.Fatalf("result = %s", res.Raw())
	}
	mu.Lock()
	if diff := cmp.Diff([]string{"mcp__weather__lookup_weather"}, asked); diff != "" {
		t.Errorf("permission prompts (-want +got):\n%s", diff)
	}
	mu.Unlock()
	if out, isErr := toolResult(t, e.srv, "toolu_wx_1"); isErr || out != "Go says: sunny in Lima" {
		t.Errorf("tool_result = %q (is_error %v)", out, isErr)
	}
	if first := e.srv.Requests()[0]; slices.Contains(first.Tools, "mcp__weather__lookup_weather") ||
		!strings.Contains(string(first.Raw), "mcp__weather__lookup_weather") {
		t.Errorf("expected the tool deferred (named, not offered): tools %v", first.Tools)
	}
}

// buildTestMCP builds the stdio MCP server of claude/internal/testmcp.
func buildTestMCP(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testmcp")
	out, err := exec.Command("go", "build", "-o", bin, "./internal/testmcp").CombinedOutput()
	if err != nil {
		t.Fatalf("building testmcp: %v\n%s", err, out)
	}
	return bin
}

func TestE2EMCPExternalServer(t *testing.T) {
	bin := buildTestMCP(t)
	callLog := filepath.Join(t.TempDir(), "calls.log")
	turns := slices.Concat(
		weatherTurns("toolu_ext_1", "mcp__wx__lookup_weather", "Paris", "ok 1"),
		weatherTurns("toolu_ext_2", "mcp__wx__lookup_weather", "Rome", "ok 2"),
		weatherTurns("toolu_ext_3", "mcp__wx__lookup_weather", "Oslo", "ok 3"),
		weatherTurns("toolu_ext_4", "mcp__wx2__lookup_weather", "Lima", "ok 4"))
	e := newE2E(t, turns...)
	e.opts.MCPServerConfigs = map[string]claude.MCPServerConfig{
		"wx": {Command: bin, Args: []string{"-name", "wx", "-log", callLog}},
	}
	// A whole server can be allowed by its prefix.
	e.opts.AllowedTools = []string{"mcp__wx__lookup_weather", "mcp__wx2"}
	s := e.start()

	e.turn(s, "Weather in Paris?")
	if out, isErr := toolResult(t, e.srv, "toolu_ext_1"); isErr || out != "wx says: sunny in Paris" {
		t.Errorf("tool_result = %q (is_error %v)", out, isErr)
	}
	if tools := lastTools(e.srv); !slices.Contains(tools, "mcp__wx__lookup_weather") {
		t.Errorf("the model was not offered the tool: %v", tools)
	}
	st := waitStatus(t, e, s, "wx", "connected")
	if !strings.Contains(string(st.ServerInfo), `"wx"`) {
		t.Errorf("status = %+v", st)
	}

	// Off: status disabled, the tool is gone and a call fails.
	if err := s.MCPToggle(e.ctx, "wx", false); err != nil {
		t.Fatalf("MCPToggle off: %v", err)
	}
	waitStatus(t, e, s, "wx", "disabled")
	e.turn(s, "Weather in Rome?")
	// CLI 2.1.329 still lists the tool but refuses to call it.
	if out, isErr := toolResult(t, e.srv, "toolu_ext_2"); !isErr || !strings.Contains(out, "No such tool available") {
		t.Errorf("call to a disabled server: tool_result %q (is_error %v)", out, isErr)
	}

	// On again: it works again.
	if err := s.MCPToggle(e.ctx, "wx", true); err != nil {
		t.Fatalf("MCPToggle on: %v", err)
	}
	waitStatus(t, e, s, "wx", "connected")
	e.turn(s, "Weather in Oslo?")
	if out, isErr := toolResult(t, e.srv, "toolu_ext_3"); isErr || out != "wx says: sunny in Oslo" {
		t.Errorf("tool_result after re-enabling = %q (is_error %v)", out, isErr)
	}

	if err := s.MCPReconnect(e.ctx, "wx"); err != nil {
		t.Errorf("MCPReconnect: %v", err)
	}
	waitStatus(t, e, s, "wx", "connected")
	if err := s.MCPReconnect(e.ctx, "nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("MCPReconnect of an unknown server = %v", err)
	}

	// A second server added at run time; the first, from the command
	// line, stays.
	r, err := s.MCPSetServers(e.ctx, map[string]claude.MCPServerConfig{
		"wx2": {Type: claude.MCPStdio, Command: bin, Args: []string{"-name", "wx2", "-log", callLog}},
	})
	if err != nil {
		t.Fatalf("MCPSetServers: %v", err)
	}
	if diff := cmp.Diff(&claude.MCPSetServersResult{Added: []string{"wx2"}, Removed: []string{}, Errors: map[string]string{}}, r); diff != "" {
		t.Errorf("MCPSetServers (-want +got):\n%s", diff)
	}
	waitStatus(t, e, s, "wx2", "connected")
	waitStatus(t, e, s, "wx", "connected")
	e.turn(s, "Weather in Lima?")
	if out, isErr := toolResult(t, e.srv, "toolu_ext_4"); isErr || out != "wx2 says: sunny in Lima" {
		t.Errorf("tool_result from the added server = %q (is_error %v)", out, isErr)
	}

	b, _ := os.ReadFile(callLog)
	want := "wx lookup_weather Paris\nwx lookup_weather Oslo\nwx2 lookup_weather Lima\n"
	if string(b) != want {
		t.Errorf("calls the servers got:\n%s\nwant:\n%s", b, want)
	}
}
