package claude

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The go-sdk runs an in-process server's handlers without recovering their
// panics, which would end the whole program: each server a session
// connects gets, once, a receiving middleware that turns a panic into an
// error result (tools/call) or an error (other methods), logged.

// recovering holds the servers that have the middleware, weakly: a server
// may be used by many sessions, or made for one and dropped.
var recovering sync.Map // weak.Pointer[mcp.Server] → struct{}

// recoverPanics adds the recovering middleware to srv unless it has it.
func recoverPanics(srv *mcp.Server) {
	key := weak.Make(srv)
	if _, loaded := recovering.LoadOrStore(key, struct{}{}); loaded {
		return
	}
	runtime.AddCleanup(srv, func(k weak.Pointer[mcp.Server]) { recovering.Delete(k) }, key)
	srv.AddReceivingMiddleware(recoverMiddleware)
}

// mcpLoggerKey carries the session's logger to the middleware, through
// the context the server session was connected with.
type mcpLoggerKey struct{}

func recoverMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			logger, _ := ctx.Value(mcpLoggerKey{}).(*slog.Logger)
			if logger == nil {
				logger = slog.Default()
			}
			msg := fmt.Sprintf("the handler of %s panicked: %v", method, r)
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
				msg = fmt.Sprintf("the tool %s panicked: %v", p.Name, r)
			}
			logger.Error("claude: an in-process MCP server's handler panicked", "method", method, "panic", r)
			if method == "tools/call" {
				res, err = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
				return
			}
			res, err = nil, fmt.Errorf("%s", msg)
		}()
		return next(ctx, method, req)
	}
}
