package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

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
	mu     sync.Mutex
	links  map[string]*mcpConn // current connection by server name; guarded by mu
	closed bool                // set by close: no connection is made after it; guarded by mu
	wg     sync.WaitGroup      // readers, acknowledgement waiters and retired connections
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
	return mcpReply(resp)
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
	srv, ok := s.opts.MCPServers[name]
	if !ok || srv == nil {
		return nil, fmt.Errorf("%w: %q", errUnknownMCPServer, name)
	}
	req, _ := msg.(*jsonrpc.Request)
	isInit := req != nil && req.IsCall() && req.Method == "initialize"
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
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
	ss, err := srv.Connect(s.ctx, serverEnd, nil)
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
