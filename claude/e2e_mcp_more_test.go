package claude_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// In-process servers reported connected by the first MCPStatus after
// Initialize: the session hands the CLI each server's manifest in
// initialize, as the TypeScript SDK does, so the CLI has no handshake of
// its own to wait for.
func TestE2EMCPInProcessConnectedAtOnce(t *testing.T) {
	ws := newWeatherServer(false)
	e := newE2E(t)
	e.opts.MCPServers = map[string]*mcp.Server{"weather": ws.Server}
	s := e.start()
	r, err := s.Initialize(e.ctx)
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if !strings.Contains(string(r.Raw), `"sdk_mcp_manifests_parked":{"weather":"parked"}`) {
		t.Errorf("the CLI did not take the manifest: %s", r.Raw)
	}
	st, err := s.MCPStatus(e.ctx)
	if err != nil {
		t.Fatalf("MCPStatus: %v", err)
	}
	if len(st) != 1 || st[0].Name != "weather" || st[0].Status != "connected" || !strings.Contains(string(st[0].Tools), "lookup_weather") {
		t.Fatalf("first MCPStatus after Initialize = %+v, want weather connected with its tool", st)
	}
}

// An in-process server added after Start is connected and its tool called;
// removed, it is gone; the server given at Start stays throughout.
func TestE2EMCPAddRemoveInProcessServer(t *testing.T) {
	first := newWeatherServer(true)
	added := newWeatherServer(false)
	e := newE2E(t, weatherTurns("toolu_add_1", "mcp__late__lookup_weather", "Quito", "Sunny in Quito.")...)
	e.opts.MCPServers = map[string]*mcp.Server{"weather": first.Server}
	e.opts.AllowedTools = []string{"mcp__late", "mcp__weather"}
	s := e.start()
	if _, err := s.Initialize(e.ctx); err != nil {
		t.Fatal(err)
	}

	r, err := s.AddMCPServer(e.ctx, "late", added.Server, &claude.MCPServerSettings{AlwaysLoad: true, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("AddMCPServer: %v", err)
	}
	if diff := cmp.Diff(&claude.MCPSetServersResult{Added: []string{"late"}, Removed: []string{}, Errors: map[string]string{}}, r); diff != "" {
		t.Errorf("AddMCPServer result (-want +got):\n%s", diff)
	}
	waitStatus(t, e, s, "late", "connected")
	waitStatus(t, e, s, "weather", "connected")

	e.turn(s, "Weather in Quito?")
	if out, isErr := toolResult(t, e.srv, "toolu_add_1"); isErr || out != "Go says: sunny in Quito" {
		t.Errorf("tool_result of the added server = %q (is_error %v)", out, isErr)
	}
	if diff := cmp.Diff([]string{"Quito"}, added.asked()); diff != "" {
		t.Errorf("calls of the added server (-want +got):\n%s", diff)
	}
	// AlwaysLoad: the added server's tool was offered in full, not deferred.
	if tools := e.srv.Requests()[0].Tools; !slices.Contains(tools, "mcp__late__lookup_weather") {
		t.Errorf("the always-load tool of the added server was not offered: %v", tools)
	}

	r, err = s.RemoveMCPServer(e.ctx, "late")
	if err != nil {
		t.Fatalf("RemoveMCPServer: %v", err)
	}
	if diff := cmp.Diff(&claude.MCPSetServersResult{Added: []string{}, Removed: []string{"late"}, Errors: map[string]string{}}, r); diff != "" {
		t.Errorf("RemoveMCPServer result (-want +got):\n%s", diff)
	}
	st, err := s.MCPStatus(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range st {
		names = append(names, x.Name+"="+x.Status)
	}
	if diff := cmp.Diff([]string{"weather=connected"}, names); diff != "" {
		t.Errorf("servers after removing one (-want +got):\n%s", diff)
	}
	if _, err := s.RemoveMCPServer(e.ctx, "late"); err == nil {
		t.Error("removing a server twice succeeded")
	}
}

// A tool policy of an in-process server: always_deny makes the CLI refuse
// the call, although AllowedTools allows the tool.
func TestE2EMCPToolPolicyDeny(t *testing.T) {
	ws := newWeatherServer(true)
	e := newE2E(t, weatherTurns("toolu_deny_1", "mcp__weather__lookup_weather", "Bern", "Could not.")...)
	e.opts.MCPServers = map[string]*mcp.Server{"weather": ws.Server}
	e.opts.MCPServerSettings = map[string]claude.MCPServerSettings{"weather": {
		Tools: []claude.MCPToolPolicy{{Name: "lookup_weather", PermissionPolicy: "always_deny"}},
	}}
	e.opts.AllowedTools = []string{"mcp__weather__lookup_weather"}
	s := e.start()
	e.turn(s, "Weather in Bern?")
	if out, isErr := toolResult(t, e.srv, "toolu_deny_1"); !isErr {
		t.Errorf("call of an always_deny tool: tool_result %q, not an error", out)
	}
	if got := ws.asked(); len(got) != 0 {
		t.Errorf("the denied tool reached Go: %v", got)
	}
}
