package claude_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Unit tests of the in-process MCP routing: the test plays the CLI over a
// memConn and speaks MCP's JSON-RPC to the session's in-process server.

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

type barrierArgs struct {
	I int `json:"i"`
}

// testServer is an in-process MCP server with tools that let a test see
// concurrency, cancellation and server-initiated requests.
type testServer struct {
	*mcp.Server
	n        int           // calls to "barrier" that must be in flight at once
	arrived  chan struct{} // one value per barrier call that arrived
	release  chan struct{} // closed when n calls have arrived
	relOnce  sync.Once
	mu       sync.Mutex
	calls    []addArgs     // arguments "add" was called with
	blocked  chan struct{} // a value when "block" starts
	unblock  chan error    // why "block" ended: its context's error
	pingErrs chan error    // the result of the Ping that "ping_client" sends
}

func newTestServer(n int) *testServer {
	ts := &testServer{
		Server:   mcp.NewServer(&mcp.Implementation{Name: "calc", Version: "0.1.0"}, nil),
		n:        n,
		arrived:  make(chan struct{}, 100),
		release:  make(chan struct{}),
		blocked:  make(chan struct{}, 10),
		unblock:  make(chan error, 10),
		pingErrs: make(chan error, 10),
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "add", Description: "Adds two integers."}, func(ctx context.Context, req *mcp.CallToolRequest, in addArgs) (*mcp.CallToolResult, any, error) {
		ts.mu.Lock()
		ts.calls = append(ts.calls, in)
		ts.mu.Unlock()
		return text(fmt.Sprint(in.A + in.B)), nil, nil
	})
	var arrivedN int
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "barrier", Description: "Returns i once n calls are in flight."}, func(ctx context.Context, req *mcp.CallToolRequest, in barrierArgs) (*mcp.CallToolResult, any, error) {
		ts.mu.Lock()
		arrivedN++
		if arrivedN == ts.n {
			ts.relOnce.Do(func() { close(ts.release) })
		}
		ts.mu.Unlock()
		select {
		case <-ts.release:
			return text(fmt.Sprintf("barrier %d", in.I)), nil, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "block", Description: "Runs until cancelled."}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		ts.blocked <- struct{}{}
		<-ctx.Done()
		ts.unblock <- ctx.Err()
		return nil, nil, ctx.Err()
	})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "ping_client", Description: "Pings the client."}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		err := req.Session.Ping(ctx, nil)
		ts.pingErrs <- err
		if err != nil {
			return nil, nil, err
		}
		return text("pong"), nil, nil
	})
	return ts
}

// mcpPeer plays the CLI's side of the mcp_message protocol over a memConn.
type mcpPeer struct {
	t     *testing.T
	c     *claude.Session
	conn  *memConn
	mu    sync.Mutex
	seq   int
	stash []map[string]any // lines read while looking for another
}

func newMCPPeer(t *testing.T, opts *claude.Options) *mcpPeer {
	s, c := startMem(t, opts)
	return &mcpPeer{t: t, c: s, conn: c}
}

// send sends an mcp_message for server and returns its request id.
func (p *mcpPeer) send(server string, msg any) string {
	p.mu.Lock()
	p.seq++
	id := fmt.Sprintf("cli-%d", p.seq)
	p.mu.Unlock()
	p.conn.print(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{
		"subtype": "mcp_message", "server_name": server, "message": msg}})
	return id
}

// find returns the first line written by the session that matches, waiting
// for it; lines that do not match are kept for later finds.
func (p *mcpPeer) find(what string, match func(map[string]any) bool) map[string]any {
	p.t.Helper()
	for i, m := range p.stash {
		if match(m) {
			p.stash = slices.Delete(p.stash, i, i+1)
			return m
		}
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case b := <-p.conn.out:
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				p.t.Fatalf("session wrote %q: %v", b, err)
			}
			if match(m) {
				return m
			}
			p.stash = append(p.stash, m)
		case <-deadline:
			p.t.Fatalf("timed out waiting for %s; seen meanwhile: %v", what, p.stash)
			return nil
		}
	}
}

// response waits for the control_response to request id and returns its body.
func (p *mcpPeer) response(id string) map[string]any {
	p.t.Helper()
	m := p.find("the response to "+id, func(m map[string]any) bool {
		r, _ := m["response"].(map[string]any)
		return m["type"] == "control_response" && r["request_id"] == id
	})
	return m["response"].(map[string]any)
}

// reply waits for the answer to request id and returns its mcp_response.
func (p *mcpPeer) reply(id string) map[string]any {
	p.t.Helper()
	r := p.response(id)
	if r["subtype"] != "success" {
		p.t.Fatalf("response to %s = %v", id, r)
	}
	mr, ok := r["response"].(map[string]any)["mcp_response"].(map[string]any)
	if !ok {
		p.t.Fatalf("response to %s has no mcp_response: %v", id, r)
	}
	return mr
}

// call sends a JSON-RPC request and returns the server's reply.
func (p *mcpPeer) call(server string, id any, method string, params any) map[string]any {
	p.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	return p.reply(p.send(server, msg))
}

// handshake does what the CLI does when it connects a server.
func (p *mcpPeer) handshake(server string) map[string]any {
	p.t.Helper()
	r := p.call(server, 0, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "claude-code", "version": "2.1.329"}})
	if r["error"] != nil {
		p.t.Fatalf("initialize: %v", r)
	}
	ack := p.reply(p.send(server, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}))
	if diff := cmp.Diff(map[string]any{"jsonrpc": "2.0", "result": map[string]any{}, "id": 0.0}, ack); diff != "" {
		p.t.Errorf("notification reply (-want +got):\n%s", diff)
	}
	return r
}

func toolText(t *testing.T, r map[string]any) string {
	t.Helper()
	res, ok := r["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result in %v", r)
	}
	var sb strings.Builder
	for _, c := range res["content"].([]any) {
		sb.WriteString(c.(map[string]any)["text"].(string))
	}
	return sb.String()
}

func TestMCPInitializeAndArgs(t *testing.T) {
	ts := newTestServer(1)
	opts := &claude.Options{
		MCPServers: map[string]*mcp.Server{"calc": ts.Server, "b": ts.Server},
		MCPServerSettings: map[string]claude.MCPServerSettings{"calc": {
			Timeout: 2500 * time.Millisecond, AlwaysLoad: true,
			Tools: []claude.MCPToolPolicy{{Name: "add", PermissionPolicy: "always_ask"}},
		}},
		MCPServerConfigs: map[string]claude.MCPServerConfig{"ext": {Command: "/bin/ext", Args: []string{"-v"}}},
		MCPConfig:        []string{`{"mcpServers":{}}`},
	}
	args, err := opts.Args()
	if err != nil {
		t.Fatal(err)
	}
	var cfgs []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--mcp-config="); ok {
			cfgs = append(cfgs, v)
		}
	}
	if len(cfgs) != 2 || cfgs[0] != `{"mcpServers":{}}` {
		t.Fatalf("--mcp-config values = %q", cfgs)
	}
	var got map[string]any
	json.Unmarshal([]byte(cfgs[1]), &got)
	// In-process servers are named in initialize only, as the TypeScript
	// SDK does.
	want := map[string]any{"mcpServers": map[string]any{
		"ext": map[string]any{"type": "stdio", "command": "/bin/ext", "args": []any{"-v"}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("--mcp-config (-want +got):\n%s", diff)
	}

	c := newMemConn()
	opts.Transport = memTransport{c}
	s, err := claude.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	init := c.nextOf(t, "control_request")["request"].(map[string]any)
	if diff := cmp.Diff([]any{"b", "calc"}, init["sdkMcpServers"]); diff != "" {
		t.Errorf("initialize sdkMcpServers (-want +got):\n%s", diff)
	}
	wantConfigs := map[string]any{"calc": map[string]any{"timeout": 2500.0, "tools": []any{map[string]any{"name": "add", "permission_policy": "always_ask"}}}}
	if diff := cmp.Diff(wantConfigs, init["sdkMcpServerConfigs"]); diff != "" {
		t.Errorf("initialize sdkMcpServerConfigs (-want +got):\n%s", diff)
	}
	// The manifests: each server's initialize and tools/list results,
	// captured before initialize was written; calc's tools are marked
	// always-load.
	manifests, _ := init["sdkMcpServerManifests"].(map[string]any)
	for _, name := range []string{"b", "calc"} {
		m, _ := manifests[name].(map[string]any)
		ir, _ := m["initializeResult"].(map[string]any)
		info, _ := ir["serverInfo"].(map[string]any)
		tl, _ := m["toolsListResult"].(map[string]any)
		tools, _ := tl["tools"].([]any)
		if info["name"] != "calc" || len(tools) == 0 {
			t.Fatalf("manifest of %s = %v", name, m)
		}
		for _, tool := range tools {
			meta, _ := tool.(map[string]any)["_meta"].(map[string]any)
			if got := meta["anthropic/alwaysLoad"] == true; got != (name == "calc") {
				t.Errorf("manifest of %s: tool %v always-load = %v", name, tool.(map[string]any)["name"], got)
			}
		}
	}
	// The connection the capture initialized serves the CLI's calls.
	id := "mcp-call"
	c.print(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{
		"subtype": "mcp_message", "server_name": "calc",
		"message": map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{"name": "add", "arguments": map[string]any{"a": 2, "b": 3}}}}})
	r := c.nextOf(t, "control_response")["response"].(map[string]any)
	if got := toolText(t, r["response"].(map[string]any)["mcp_response"].(map[string]any)); got != "5" {
		t.Errorf("tools/call after the capture = %q", got)
	}
}

func TestMCPServerConfigJSON(t *testing.T) {
	for _, tc := range []struct {
		c    claude.MCPServerConfig
		want string
	}{
		{claude.MCPServerConfig{Command: "srv"}, `{"type":"stdio","command":"srv","args":[]}`},
		{claude.MCPServerConfig{Type: "stdio", Command: "srv", Args: []string{"a b"}, Env: map[string]string{"K": "v"}},
			`{"type":"stdio","command":"srv","args":["a b"],"env":{"K":"v"}}`},
		{claude.MCPServerConfig{Type: claude.MCPHTTP, URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
			`{"type":"http","url":"http://127.0.0.1:1/mcp","headers":{"Authorization":"Bearer x"}}`},
		{claude.MCPServerConfig{Type: claude.MCPSSE, URL: "http://127.0.0.1:1/sse"}, `{"type":"sse","url":"http://127.0.0.1:1/sse"}`},
	} {
		b, err := json.Marshal(tc.c)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tc.c, b, err, tc.want)
		}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "x", Version: "1"}, nil)
	for _, tc := range []struct {
		o     claude.Options
		field string
		msg   string
	}{
		{claude.Options{MCPServers: map[string]*mcp.Server{"x": nil}}, "MCPServers", "nil"},
		{claude.Options{MCPServers: map[string]*mcp.Server{"": srv}}, "MCPServers", "name"},
		{claude.Options{MCPServerConfigs: map[string]claude.MCPServerConfig{"e": {}}}, "MCPServerConfigs", "Command"},
		{claude.Options{MCPServerConfigs: map[string]claude.MCPServerConfig{"e": {Type: "http"}}}, "MCPServerConfigs", "URL"},
		{claude.Options{MCPServerConfigs: map[string]claude.MCPServerConfig{"e": {Type: "ws", URL: "ws://x"}}}, "MCPServerConfigs", "unknown Type"},
		{claude.Options{MCPServerConfigs: map[string]claude.MCPServerConfig{"e": {Type: "sse", URL: "u", Command: "c"}}}, "MCPServerConfigs", "stdio"},
		{claude.Options{MCPServers: map[string]*mcp.Server{"x": srv}, MCPServerConfigs: map[string]claude.MCPServerConfig{"x": {Command: "c"}}}, "MCPServerConfigs", "in-process"},
	} {
		_, err := tc.o.Args()
		var oe *claude.OptionError
		if !errors.As(err, &oe) || oe.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Args(%+v) = %v, want an OptionError on %s mentioning %q", tc.o, err, tc.field, tc.msg)
		}
	}
	_, err := claude.Start(context.Background(), &claude.Options{Transport: memTransport{newMemConn()}, MCPServers: map[string]*mcp.Server{"x": nil}})
	if err == nil {
		t.Error("Start accepted a nil in-process server")
	}
}

func TestMCPRouting(t *testing.T) {
	const n = 8
	ts := newTestServer(n)
	p := newMCPPeer(t, &claude.Options{MCPServers: map[string]*mcp.Server{"calc": ts.Server}})
	init := p.handshake("calc")
	if res := init["result"].(map[string]any); res["serverInfo"].(map[string]any)["name"] != "calc" || init["id"] != 0.0 {
		t.Errorf("initialize reply = %v", init)
	}
	list := p.call("calc", 1, "tools/list", nil)
	var names []string
	for _, tl := range list["result"].(map[string]any)["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"add", "barrier", "block", "ping_client"}, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}

	// Concurrent calls: none can finish before all n are in flight, and each
	// reply must reach the control request that carried its call.
	ids := map[string]int{}
	for i := range n {
		ids[p.send("calc", map[string]any{"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
			"params": map[string]any{"name": "barrier", "arguments": map[string]any{"i": i}}})] = i
	}
	for id, i := range ids {
		r := p.reply(id)
		if r["id"] != float64(100+i) || toolText(t, r) != fmt.Sprintf("barrier %d", i) {
			t.Errorf("reply to call %d = %v", i, r)
		}
	}

	r := p.call("calc", "str-id", "tools/call", map[string]any{"name": "add", "arguments": map[string]any{"a": 2, "b": 40}})
	if r["id"] != "str-id" || toolText(t, r) != "42" {
		t.Errorf("add reply = %v", r)
	}
	ts.mu.Lock()
	if diff := cmp.Diff([]addArgs{{2, 40}}, ts.calls); diff != "" {
		t.Errorf("add called with (-want +got):\n%s", diff)
	}
	ts.mu.Unlock()

	// An unknown server and a message that is not JSON-RPC are JSON-RPC
	// errors inside a successful control response.
	r = p.call("nope", 7, "tools/list", nil)
	if e, _ := r["error"].(map[string]any); r["id"] != 7.0 || e["code"] != -32601.0 || !strings.Contains(e["message"].(string), "nope") {
		t.Errorf("unknown server reply = %v", r)
	}
	r = p.reply(p.send("calc", map[string]any{"id": 8, "method": "tools/list"})) // no "jsonrpc"
	if e, _ := r["error"].(map[string]any); r["id"] != 8.0 || e["code"] != -32700.0 {
		t.Errorf("malformed message reply = %v", r)
	}

	// The CLI starts over (mcp_toggle off and on): a second initialize
	// gets a fresh MCP session rather than "duplicate initialize".
	p.handshake("calc")
	r = p.call("calc", 1, "tools/call", map[string]any{"name": "add", "arguments": map[string]any{"a": 1, "b": 1}})
	if toolText(t, r) != "2" {
		t.Errorf("add after a new initialize = %v", r)
	}
}

func TestMCPServerInitiatedMessages(t *testing.T) {
	ts := newTestServer(1)
	p := newMCPPeer(t, &claude.Options{MCPServers: map[string]*mcp.Server{"calc": ts.Server}})
	p.handshake("calc")
	p.call("calc", 1, "tools/list", nil)

	// A tool that pings the client: the ping goes to the CLI as an SDK→CLI
	// mcp_message control request, the CLI acknowledges it, and later sends
	// the JSON-RPC reply as a CLI→SDK mcp_message.
	callID := p.send("calc", map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": "ping_client", "arguments": map[string]any{}}})
	out := p.find("the server's ping", func(m map[string]any) bool {
		r, _ := m["request"].(map[string]any)
		return m["type"] == "control_request" && r["subtype"] == "mcp_message"
	})
	req := out["request"].(map[string]any)
	msg := req["message"].(map[string]any)
	if req["server_name"] != "calc" || msg["method"] != "ping" || msg["id"] == nil {
		t.Fatalf("server-initiated request = %v", out)
	}
	p.conn.print(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": out["request_id"]}})
	ack := p.response(p.send("calc", map[string]any{"jsonrpc": "2.0", "id": msg["id"], "result": map[string]any{}}))
	if ack["subtype"] != "success" {
		t.Errorf("answer to the CLI's reply = %v", ack)
	}
	if err := <-ts.pingErrs; err != nil {
		t.Errorf("Ping = %v", err)
	}
	if r := p.reply(callID); toolText(t, r) != "pong" {
		t.Errorf("ping_client reply = %v", r)
	}

	// A tool added while connected: the server notifies the client.
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "late", Description: "Added late."}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	out = p.find("tools/list_changed", func(m map[string]any) bool {
		r, _ := m["request"].(map[string]any)
		msg, _ := r["message"].(map[string]any)
		return m["type"] == "control_request" && r["subtype"] == "mcp_message" && msg["method"] == "notifications/tools/list_changed"
	})
	if out["request"].(map[string]any)["message"].(map[string]any)["id"] != nil {
		t.Errorf("a notification with an id: %v", out)
	}
	// An error answer from the CLI is only logged.
	p.conn.print(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "error", "request_id": out["request_id"], "error": "SDK MCP server not connected"}})
}

func TestMCPCancelAndClose(t *testing.T) {
	ts := newTestServer(1)
	p := newMCPPeer(t, &claude.Options{MCPServers: map[string]*mcp.Server{"calc": ts.Server}})
	p.handshake("calc")
	block := map[string]any{"name": "block", "arguments": map[string]any{}}

	// The CLI withdraws its control request and cancels the call the MCP way.
	id := p.send("calc", map[string]any{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": block})
	<-ts.blocked
	p.conn.print(map[string]any{"type": "control_cancel_request", "request_id": id})
	ack := p.reply(p.send("calc", map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": 5}}))
	if ack["result"] == nil {
		t.Errorf("notification reply = %v", ack)
	}
	select {
	case err := <-ts.unblock:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("handler context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("notifications/cancelled did not cancel the tool")
	}
	// The withdrawn request gets no answer; the next call still works.
	if r := p.call("calc", 6, "tools/call", map[string]any{"name": "add", "arguments": map[string]any{"a": 1, "b": 2}}); toolText(t, r) != "3" {
		t.Errorf("add = %v", r)
	}
	for _, m := range p.stash {
		if r, _ := m["response"].(map[string]any); r["request_id"] == id {
			t.Errorf("a withdrawn request was answered: %v", m)
		}
	}

	// Close while a tool runs: its context is cancelled and Close waits
	// for it (goleak in TestMain checks that nothing is left).
	p.send("calc", map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": block})
	<-ts.blocked
	done := make(chan error, 1)
	go func() { done <- p.c.Close() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while a tool was running")
	}
	select {
	case err := <-ts.unblock:
		if err == nil {
			t.Error("tool context not cancelled")
		}
	default:
		t.Error("Close returned before the running tool ended")
	}
}

func TestMCPControlRequests(t *testing.T) {
	ts := newTestServer(1)
	s, c := startMem(t, &claude.Options{MCPServers: map[string]*mcp.Server{"calc": ts.Server}})
	ctx := context.Background()

	type result struct {
		r   *claude.MCPSetServersResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := s.MCPSetServers(ctx, map[string]claude.MCPServerConfig{
			"ext": {Command: "/bin/ext"},
			"web": {Type: claude.MCPHTTP, URL: "http://127.0.0.1:9/mcp"},
		})
		done <- result{r, err}
	}()
	req := c.nextOf(t, "control_request")
	want := map[string]any{"subtype": "mcp_set_servers", "servers": map[string]any{
		"calc": map[string]any{"type": "sdk", "name": "calc"},
		"ext":  map[string]any{"type": "stdio", "command": "/bin/ext", "args": []any{}},
		"web":  map[string]any{"type": "http", "url": "http://127.0.0.1:9/mcp"},
	}}
	if diff := cmp.Diff(want, req["request"]); diff != "" {
		t.Errorf("mcp_set_servers request (-want +got):\n%s", diff)
	}
	respond(c, req["request_id"], map[string]any{"added": []string{"ext", "web"}, "removed": []string{}, "errors": map[string]string{"web": "connection refused"}})
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if diff := cmp.Diff(&claude.MCPSetServersResult{Added: []string{"ext", "web"}, Removed: []string{}, Errors: map[string]string{"web": "connection refused"}}, got.r); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}

	if _, err := s.MCPSetServers(ctx, map[string]claude.MCPServerConfig{"calc": {Command: "x"}}); err == nil || !strings.Contains(err.Error(), "in-process") {
		t.Errorf("MCPSetServers naming an in-process server = %v", err)
	}
	if _, err := s.MCPSetServers(ctx, map[string]claude.MCPServerConfig{"bad": {Type: "sse"}}); err == nil || !strings.Contains(err.Error(), "URL") {
		t.Errorf("MCPSetServers with a bad config = %v", err)
	}

	errs := make(chan error, 1)
	go func() { errs <- s.MCPToggle(ctx, "ext", false) }()
	req = c.nextOf(t, "control_request")
	if diff := cmp.Diff(map[string]any{"subtype": "mcp_toggle", "serverName": "ext", "enabled": false}, req["request"]); diff != "" {
		t.Errorf("mcp_toggle request (-want +got):\n%s", diff)
	}
	c.print(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": req["request_id"]}})
	if err := <-errs; err != nil {
		t.Errorf("MCPToggle = %v", err)
	}

	go func() { errs <- s.MCPReconnect(ctx, "gone") }()
	req = c.nextOf(t, "control_request")
	if diff := cmp.Diff(map[string]any{"subtype": "mcp_reconnect", "serverName": "gone"}, req["request"]); diff != "" {
		t.Errorf("mcp_reconnect request (-want +got):\n%s", diff)
	}
	c.print(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "error", "request_id": req["request_id"], "error": "Server not found: gone"}})
	var ce *claude.ControlError
	if err := <-errs; !errors.As(err, &ce) || ce.Message != "Server not found: gone" {
		t.Errorf("MCPReconnect = %v", err)
	}
}
