package claude

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/claudectl/claudectl/internal/relay"
)

// WebSocketTransport runs the CLI as a child process that connects back to a
// WebSocket server of this transport (the CLI's hidden --sdk-url flag) and
// speaks the same NDJSON over it. Its zero value is ready to use.
//
// Start serves ws://127.0.0.1:PORT/ws/ID on a random port (see Addr), starts
// the CLI with --sdk-url pointing there and a random per-session token in
// CLAUDE_CODE_SESSION_ACCESS_TOKEN, and accepts only connections presenting
// "Authorization: Bearer <token>" (anything else gets 401, logged without the
// token). The CLI's exit status and stderr are reported as with
// [ProcessTransport].
//
// The connection may drop and the CLI dials again: lines written meanwhile
// are kept and sent once it is back. Every line sent is kept until a
// WebSocket pong confirms the CLI has read it, and sent again after a failed
// connection; user messages get a uuid, which the CLI uses to drop a copy.
// Lines the CLI sends again (by uuid) are delivered once. On reconnection the
// CLI names the last message it sent in X-Last-Request-Id; when that one
// never arrived, what the CLI wrote while it was disconnected is lost (CLI
// 2.1.37 does not resend it) and a warning is logged. The hybrid transport's
// HTTP ingress (HybridIngress) is served too, as is
// [Session.UpdateEnvironment].
//
// Since version 2.1.121 the CLI refuses --sdk-url hosts other than
// Anthropic's, so Start checks the CLI's version first and fails with an
// *SDKURLUnsupportedError for those; run such CLIs on a remote worker over
// stdio instead (see [WorkerListener]).
//
// Unlike stdin, a WebSocket has no "end of input" the CLI acts on at once.
// When the input ends (CloseWrite, or Close), the CLI is stopped with SIGTERM
// as soon as every prompt written has its result, and that exit counts as
// clean.
type WebSocketTransport struct {
	// Addr is the address to listen on; empty means "127.0.0.1:0", a free
	// port on the loopback interface.
	Addr string
	// Process runs the child; nil means a zero ProcessTransport. Its
	// GracePeriod is how long Close waits for the current turn to finish
	// (zero: 5s); its Stderr receives the CLI's stderr.
	Process *ProcessTransport
	// SkipVersionCheck skips running `claude --version` in Start (for a CLI
	// known to accept a local --sdk-url).
	SkipVersionCheck bool
	// HybridIngress makes the CLI post its messages over HTTP
	// (CLAUDE_CODE_POST_FOR_SESSION_INGRESS_V2) and receive over the
	// WebSocket; both are served.
	HybridIngress bool
	// ReplayBytes bounds the lines kept for sending again until the CLI
	// confirms them; a write blocks while it is full. Zero means 8 MiB.
	ReplayBytes int
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger
}

// SDKURLUnsupportedError is returned by [WebSocketTransport.Start] for a CLI
// that refuses --sdk-url to a non-Anthropic host (2.1.121 and later).
type SDKURLUnsupportedError struct {
	Path    string
	Version Version
}

func (e *SDKURLUnsupportedError) Error() string {
	return fmt.Sprintf("claude: %s is Claude Code %s, which refuses --sdk-url to a non-Anthropic host (only %s and older accept it); "+
		"run it over stdio on a remote worker instead: \"claudectl worker --connect URL --token-file FILE\" with a claude.WorkerListener",
		e.Path, e.Version, SDKURLMaxVersion)
}

// Environment variables WebSocketTransport sets for the CLI.
const (
	envSessionToken = "CLAUDE_CODE_SESSION_ACCESS_TOKEN"
	envTokenFD      = "CLAUDE_CODE_WEBSOCKET_AUTH_FILE_DESCRIPTOR"
	envHybrid       = "CLAUDE_CODE_POST_FOR_SESSION_INGRESS_V2"
)

// Start implements [Transport]. It returns once the CLI is started, without
// waiting for it to connect: lines written before are sent when it does.
func (t *WebSocketTransport) Start(ctx context.Context, c *Command) (Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path := c.Path
	if path == "" {
		p, err := FindBinary(nil)
		if err != nil {
			return nil, err
		}
		path = p
	}
	if !t.SkipVersionCheck {
		v, err := VersionOf(ctx, path)
		if err != nil {
			return nil, err
		}
		if !v.SupportsSDKURLHost() {
			return nil, &SDKURLUnsupportedError{Path: path, Version: v}
		}
	}
	addr := t.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &StartError{Path: path, Err: fmt.Errorf("listening for the CLI's WebSocket: %w", err)}
	}
	id := randomHex(12)
	wc := &wsConn{
		logger:   t.Logger,
		token:    randomHex(32),
		wsPath:   "/ws/" + id,
		postPath: "/session/" + id + "/events",
		maxLine:  orDefault(c.MaxLineBytes, DefaultMaxPayloadBytes),
		out:      relay.NewOutbox(orDefault(t.ReplayBytes, 8<<20)),
		inWake:   make(chan struct{}),
		exited:   make(chan struct{}),
		seen:     newUUIDSet(4096),
	}
	if wc.logger == nil {
		wc.logger = slog.Default()
	}
	host := ln.Addr().String()
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		host = net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
	}
	wc.url = "ws://" + host + wc.wsPath

	env := slices.DeleteFunc(slices.Clone(c.Env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == envSessionToken || k == envTokenFD || k == envHybrid
	})
	env = append(env, envSessionToken+"="+wc.token)
	if t.HybridIngress {
		env = append(env, envHybrid+"=1")
	}
	args := append(slices.Clone(c.Args), "--sdk-url="+wc.url)

	var pt ProcessTransport
	if t.Process != nil {
		pt = *t.Process
	}
	wc.grace = pt.GracePeriod
	if wc.grace <= 0 {
		wc.grace = defaultGracePeriod
	}
	pt.GracePeriod = -1 // the grace period is ours: SIGTERM is the CLI's end of input
	pt.stdoutNotProtocol = true
	wc.srv = &http.Server{Handler: wc, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	wc.bg.Add(1)
	go func() {
		defer wc.bg.Done()
		wc.srv.Serve(ln)
	}()
	conn, err := pt.Start(ctx, &Command{Path: path, Args: args, Env: env, Dir: c.Dir, MaxLineBytes: c.MaxLineBytes})
	if err != nil {
		wc.srv.Close()
		wc.bg.Wait()
		return nil, err
	}
	wc.proc = conn.(*process)
	wc.bg.Add(2)
	go wc.drainStdout()
	go wc.supervise()
	return wc, nil
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return hex.EncodeToString(b)
}
