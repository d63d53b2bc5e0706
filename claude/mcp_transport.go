package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The CLI reaches an in-process MCP server through control requests:
//
//	CLI → SDK  control_request {subtype:"mcp_message", server_name, message}
//	           message is a JSON-RPC request, notification or response.
//	SDK → CLI  control_response {mcp_response: <the server's JSON-RPC reply>}
//	           for a request; {mcp_response:{jsonrpc:"2.0",result:{},id:0}}
//	           for a notification (as the TypeScript SDK does).
//	SDK → CLI  control_request {subtype:"mcp_message", server_name, message}
//	           for what the server sends by itself (notifications, and
//	           requests such as ping); the CLI acknowledges it with an empty
//	           success, and sends its JSON-RPC reply later as a CLI → SDK
//	           mcp_message.
//
// Each server is connected with the go-sdk's in-memory transport: the
// server holds one end, an mcpConn holds the other and reads what the
// server writes on its own goroutine. The CLI starts an MCP session with
// "initialize" when it connects the server and again after mcp_toggle off
// and on; since a go-sdk ServerSession accepts only one initialize, a
// repeated initialize gets a fresh connection.

// mcpRouter holds the session's connections to its in-process servers. Its
// zero value is ready to use; Session.Close calls close.
type mcpRouter struct {
	mu      sync.Mutex
	servers map[string]*sdkServer // the in-process servers by name; guarded by mu
	links   map[string]*mcpConn   // current connection by server name; guarded by mu
	closed  bool                  // set by close: no connection is made after it; guarded by mu
	wg      sync.WaitGroup        // readers, acknowledgement waiters and retired connections
}

// sdkServer is one in-process server and its settings.
type sdkServer struct {
	srv      *mcp.Server
	settings MCPServerSettings
}

// init registers the servers given at Start.
func (r *mcpRouter) init(servers map[string]*mcp.Server, settings map[string]MCPServerSettings) {
	r.servers = make(map[string]*sdkServer, len(servers))
	for name, srv := range servers {
		r.servers[name] = &sdkServer{srv: srv, settings: settings[name]}
	}
}

// has reports whether the session has an in-process server of that name.
func (r *mcpRouter) has(name string) bool {
	_, _, ok := r.lookup(name)
	return ok
}

// lookup returns the named server and its settings.
func (r *mcpRouter) lookup(name string) (*mcp.Server, MCPServerSettings, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.servers[name]
	if !ok {
		return nil, MCPServerSettings{}, false
	}
	return s.srv, s.settings, true
}

// settingsByName returns every server's settings by name.
func (r *mcpRouter) settingsByName() map[string]MCPServerSettings {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]MCPServerSettings, len(r.servers))
	for name, s := range r.servers {
		m[name] = s.settings
	}
	return m
}

// add registers a server; the CLI connects it with its first mcp_message.
func (r *mcpRouter) add(name string, srv *mcp.Server, settings MCPServerSettings) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.servers == nil {
		r.servers = make(map[string]*sdkServer)
	}
	r.servers[name] = &sdkServer{srv: srv, settings: settings}
}

// remove forgets a server and closes its connection in the background (its
// running tool handlers see their contexts cancelled).
func (r *mcpRouter) remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.servers, name)
	if c := r.links[name]; c != nil {
		delete(r.links, name)
		if !r.closed {
			r.wg.Go(c.close)
		}
	}
}

// An mcpConn is one connection (one MCP session) to an in-process server.
type mcpConn struct {
	name string
	ss   *mcp.ServerSession
	conn mcp.Connection // our end of the in-memory pair

	// initialized is set when an initialize request has been passed on;
	// accessed only under mcpRouter.mu.
	initialized bool

	mu      sync.Mutex
	pending map[jsonrpc.ID]chan *jsonrpc.Response // the CLI's requests awaiting the server's reply; guarded by mu
	closed  bool                                  // guarded by mu
}

// errUnknownMCPServer answers a message for a server the session does not
// have.
var errUnknownMCPServer = errors.New("claude: no in-process MCP server of that name")

// errMCPConnClosed answers the CLI's requests that were in flight on a
// connection that was replaced or closed.
var errMCPConnClosed = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "claude: in-process MCP server connection closed"}

// answerMCP answers an mcp_message request: it passes the message to the
// named in-process server and returns the server's reply as mcp_response.
//
// Errors are JSON-RPC errors inside mcp_response, as the Python SDK does,
// so that the CLI's MCP client fails the one call: -32601 (method not
// found) for an unknown server, -32700 for a message that is not JSON-RPC.
// When ctx ends first (the CLI withdrew the request, or the session is
// closing) the reply is dropped.
func (s *Session) answerMCP(ctx context.Context, req json.RawMessage) (any, error) {
	var mm struct {
		ServerName string          `json:"server_name"`
		Message    json.RawMessage `json:"message"`
	}
	if err := unmarshal(req, &mm); err != nil {
		return nil, fmt.Errorf("decoding mcp_message request: %w", err)
	}
	msg, err := jsonrpc.DecodeMessage(mm.Message)
	if err != nil {
		return mcpReply(errorResponse(rawID(mm.Message), jsonrpc.CodeParseError, err.Error()))
	}
	c, err := s.mcp.connFor(s, mm.ServerName, msg)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		id := jsonrpc.ID{}
		if r, ok := msg.(*jsonrpc.Request); ok {
			id = r.ID
		}
		code := int64(jsonrpc.CodeInternalError)
		if errors.Is(err, errUnknownMCPServer) {
			code = jsonrpc.CodeMethodNotFound
		}
		return mcpReply(errorResponse(id, code, err.Error()))
	}
	r, ok := msg.(*jsonrpc.Request)
	if !ok || !r.IsCall() {
		// A notification, or the CLI's reply to a request of the server.
		if err := c.conn.Write(ctx, msg); err != nil {
			s.logger.Debug("claude: passing a message to an in-process MCP server", "server", mm.ServerName, "err", err)
		}
		if !ok {
			return struct{}{}, nil // nothing to reply with
		}
		return map[string]any{"mcp_response": map[string]any{"jsonrpc": "2.0", "result": struct{}{}, "id": 0}}, nil
	}
	resp, err := c.call(ctx, r)
	if err != nil {
		return nil, err
	}
	if r.Method == "tools/list" {
		if _, st, ok := s.mcp.lookup(mm.ServerName); ok && st.AlwaysLoad {
			resp = markAlwaysLoad(resp)
		}
	}
	return mcpReply(resp)
}

// alwaysLoadKey is the tool _meta key by which the CLI never defers a tool
// behind its tool search.
const alwaysLoadKey = "anthropic/alwaysLoad"

// markAlwaysLoad returns a tools/list response whose tools all carry
// _meta "anthropic/alwaysLoad": true, unless a tool sets it itself (as the
// TypeScript SDK's createSdkMcpServer({alwaysLoad}) marks them).
func markAlwaysLoad(resp *jsonrpc.Response) *jsonrpc.Response {
	if resp.Error != nil || len(resp.Result) == 0 {
		return resp
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return resp
	}
	var tools []map[string]any
	if err := json.Unmarshal(res["tools"], &tools); err != nil {
		return resp
	}
	for _, t := range tools {
		meta, _ := t["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		if _, set := meta[alwaysLoadKey]; !set {
			meta[alwaysLoadKey] = true
		}
		t["_meta"] = meta
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return resp
	}
	res["tools"] = b
	out, err := json.Marshal(res)
	if err != nil {
		return resp
	}
	return &jsonrpc.Response{ID: resp.ID, Result: out}
}

// manifestIDPrefix marks the ids of the requests captureMCPManifests sends.
const manifestIDPrefix = "sdk-manifest-capture:"

// manifestTimeout bounds the capture of all manifests: in-process Go servers
// answer in microseconds, so only a stuck handler takes long.
const manifestTimeout = time.Second

// captureMCPManifests asks each in-process server for what it answers to
// initialize and tools/list, as the TypeScript SDK does before it writes
// initialize, and returns them by server name for initialize's
// sdkMcpServerManifests: {initializeResult, toolsListResult}. With them the
// CLI has the servers' tools at once and reports them connected from its
// start, rather than after its own handshake over mcp_message requests.
// Each server's connection stays initialized; a server that fails is left
// to the CLI's handshake.
func (s *Session) captureMCPManifests() map[string]any {
	ctx, cancel := context.WithTimeout(s.ctx, manifestTimeout)
	defer cancel()
	out := map[string]any{}
	for name := range s.mcp.settingsByName() {
		if m, err := s.captureManifest(ctx, name); err != nil {
			s.logger.Debug("claude: no manifest of an in-process MCP server; the CLI will connect it itself", "server", name, "err", err)
		} else {
			out[name] = m
		}
	}
	return out
}

func (s *Session) captureManifest(ctx context.Context, name string) (map[string]json.RawMessage, error) {
	initID, _ := jsonrpc.MakeID(manifestIDPrefix + "initialize")
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		// The client the server would see from the CLI itself.
		"clientInfo": map[string]any{"name": "claude-code", "title": "Claude Code", "version": "1.0.0"},
	})
	init := &jsonrpc.Request{ID: initID, Method: "initialize", Params: params}
	c, err := s.mcp.connFor(s, name, init)
	if err != nil {
		return nil, err
	}
	resp, err := c.call(ctx, init)
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	if err := c.conn.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized"}); err != nil {
		return nil, err
	}
	m := map[string]json.RawMessage{"initializeResult": resp.Result}
	var caps struct {
		Capabilities struct {
			Tools json.RawMessage `json:"tools"`
		} `json:"capabilities"`
	}
	if json.Unmarshal(resp.Result, &caps) == nil && len(caps.Capabilities.Tools) > 0 && string(caps.Capabilities.Tools) != "null" {
		listID, _ := jsonrpc.MakeID(manifestIDPrefix + "tools-list")
		list, err := c.call(ctx, &jsonrpc.Request{ID: listID, Method: "tools/list"})
		if err != nil {
			return nil, err
		}
		if list.Error != nil {
			return nil, list.Error
		}
		if _, st, ok := s.mcp.lookup(name); ok && st.AlwaysLoad {
			list = markAlwaysLoad(list)
		}
		var page struct {
			NextCursor string `json:"nextCursor"`
		}
		if json.Unmarshal(list.Result, &page) == nil && page.NextCursor == "" {
			m["toolsListResult"] = list.Result
		}
	}
	return m, nil
}

// mcpReply wraps a JSON-RPC response as the answer to an mcp_message request.
func mcpReply(resp *jsonrpc.Response) (any, error) {
	b, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		return nil, fmt.Errorf("encoding MCP reply: %w", err)
	}
	return map[string]json.RawMessage{"mcp_response": b}, nil
}

func errorResponse(id jsonrpc.ID, code int64, msg string) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}}
}

// rawID digs the id out of a message that did not decode as JSON-RPC.
func rawID(msg json.RawMessage) jsonrpc.ID {
	var m struct {
		ID any `json:"id"`
	}
	_ = json.Unmarshal(msg, &m)
	id, _ := jsonrpc.MakeID(m.ID)
	return id
}

// connFor returns the connection to pass msg to for the named server,
// connecting the server on first use and again when msg is an initialize
// request to a connection that was already initialized. It fails with
// ErrClosed once the router is closed.
func (r *mcpRouter) connFor(s *Session, name string, msg jsonrpc.Message) (*mcpConn, error) {
	req, _ := msg.(*jsonrpc.Request)
	isInit := req != nil && req.IsCall() && req.Method == "initialize"
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	ss := r.servers[name]
	if ss == nil || ss.srv == nil {
		return nil, fmt.Errorf("%w: %q", errUnknownMCPServer, name)
	}
	srv := ss.srv
	c := r.links[name]
	if c == nil || (isInit && c.initialized) {
		nc, err := connectMCP(s, name, srv, &r.wg)
		if err != nil {
			return nil, err
		}
		if c != nil {
			// The CLI has started over with this server (mcp_toggle off and
			// on): retire the old session. Closing it waits for its tool
			// handlers, so don't hold up the new one.
			r.wg.Go(c.close)
		}
		if r.links == nil {
			r.links = make(map[string]*mcpConn)
		}
		r.links[name] = nc
		c = nc
	}
	if isInit {
		c.initialized = true
	}
	return c, nil
}

// close closes every connection and waits for their goroutines and tool
// handlers (whose contexts are cancelled) to finish.
func (r *mcpRouter) close() {
	r.mu.Lock()
	r.closed = true
	links := r.links
	r.links = nil
	r.mu.Unlock()
	for _, c := range links {
		c.close()
	}
	r.wg.Wait()
}

// connectMCP connects srv to a new in-memory pair and starts reading what
// it writes; wg tracks the reader.
func connectMCP(s *Session, name string, srv *mcp.Server, wg *sync.WaitGroup) (*mcpConn, error) {
	serverEnd, ourEnd := mcp.NewInMemoryTransports()
	// The go-sdk does not pass ctx's cancellation on to tool handlers;
	// closing our end does (see close).
	recoverPanics(srv)
	ss, err := srv.Connect(context.WithValue(s.ctx, mcpLoggerKey{}, s.logger), serverEnd, nil)
	if err != nil {
		return nil, fmt.Errorf("claude: connecting in-process MCP server %q: %w", name, err)
	}
	conn, err := ourEnd.Connect(s.ctx)
	if err != nil {
		ss.Close()
		return nil, fmt.Errorf("claude: connecting in-process MCP server %q: %w", name, err)
	}
	c := &mcpConn{name: name, ss: ss, conn: conn, pending: make(map[jsonrpc.ID]chan *jsonrpc.Response)}
	wg.Go(func() { c.read(s, wg) })
	return c, nil
}

// call passes the CLI's request to the server and waits for its reply. Only
// the session ending or ctx ending stops the wait; a connection closed
// meanwhile answers with errMCPConnClosed.
func (c *mcpConn) call(ctx context.Context, req *jsonrpc.Request) (*jsonrpc.Response, error) {
	ch := make(chan *jsonrpc.Response, 1)
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return &jsonrpc.Response{ID: req.ID, Error: errMCPConnClosed}, nil
	case c.pending[req.ID] != nil:
		c.mu.Unlock()
		return errorResponse(req.ID, jsonrpc.CodeInvalidRequest, fmt.Sprintf("request id %v is already in use", req.ID.Raw())), nil
	}
	c.pending[req.ID] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		if c.pending[req.ID] == ch {
			delete(c.pending, req.ID)
		}
		c.mu.Unlock()
	}
	if err := c.conn.Write(ctx, req); err != nil {
		forget()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return &jsonrpc.Response{ID: req.ID, Error: errMCPConnClosed}, nil
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-ctx.Done():
		// The CLI withdrew the request (its MCP client sends
		// notifications/cancelled itself) or the session is closing.
		forget()
		return nil, ctx.Err()
	}
}

// read delivers what the server writes: replies go to the CLI's requests
// waiting in call, and what the server starts itself goes to the CLI as an
// mcp_message control request, in the order written. It returns when the
// connection is closed.
func (c *mcpConn) read(s *Session, wg *sync.WaitGroup) {
	for {
		msg, err := c.conn.Read(s.ctx)
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			c.mu.Lock()
			ch := c.pending[m.ID]
			delete(c.pending, m.ID)
			c.mu.Unlock()
			if ch == nil {
				s.logger.Debug("claude: in-process MCP server replied to no pending request", "server", c.name, "id", m.ID.Raw())
				continue
			}
			ch <- m
		case *jsonrpc.Request:
			s.sendMCPMessage(c.name, m, wg)
		}
	}
}

// close closes the connection: the server session sees its transport
// close, which cancels the contexts of its running handlers, and close
// waits for them. The CLI's requests still waiting get errMCPConnClosed.
func (c *mcpConn) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for id, ch := range pending {
		ch <- &jsonrpc.Response{ID: id, Error: errMCPConnClosed}
	}
	c.conn.Close()
	c.ss.Close()
}

// sendMCPMessage writes a message that an in-process server started to the
// CLI as an mcp_message control request. The write is done before it
// returns, which keeps the server's messages in order; the CLI's
// acknowledgement is awaited on a goroutine tracked by wg, to log a refusal.
func (s *Session) sendMCPMessage(server string, msg jsonrpc.Message, wg *sync.WaitGroup) {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		s.logger.Warn("claude: encoding a message of an in-process MCP server", "server", server, "err", err)
		return
	}
	req, err := requestPayload("mcp_message", map[string]any{"server_name": server, "message": json.RawMessage(b)})
	if err != nil {
		s.logger.Warn("claude: encoding a message of an in-process MCP server", "server", server, "err", err)
		return
	}
	id := s.newRequestID()
	p := &pendingRequest{subtype: "mcp_message", ch: make(chan controlResult, 1)}
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return
	default:
	}
	s.pending[id] = p
	s.mu.Unlock()
	if err := s.write(s.ctx, wireControlRequest{Type: "control_request", RequestID: id, Request: req}); err != nil {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		s.logger.Debug("claude: could not pass on a message of an in-process MCP server", "server", server, "err", err)
		return
	}
	wg.Go(func() {
		select {
		case r := <-p.ch:
			if r.err == nil && r.body.Subtype == "error" {
				s.logger.Warn("claude: the CLI refused a message of an in-process MCP server", "server", server, "error", r.body.Error)
			}
		case <-s.ctx.Done():
			s.mu.Lock()
			delete(s.pending, id)
			s.mu.Unlock()
		}
	})
}
