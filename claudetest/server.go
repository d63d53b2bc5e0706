package claudetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Server is a fake Anthropic Messages API on 127.0.0.1.
//
// It answers POST /v1/messages (streaming and not), POST
// /v1/messages/count_tokens, the connectivity check HEAD /api/hello, and 404
// with an Anthropic-style error for anything else (see Unhandled).
type Server struct {
	// URL is the base URL of the server, "http://127.0.0.1:PORT".
	URL string

	responder Responder
	srv       *http.Server
	ctx       context.Context
	cancel    context.CancelFunc
	serveDone chan struct{}
	closeOnce sync.Once
	active    sync.WaitGroup
	reqSeq    atomic.Int64
	msgSeq    atomic.Int64
	inFlight  atomic.Int64

	mu          sync.Mutex
	closed      bool
	requests    []*Request
	unhandled   []string
	countTokens int
}

// NewServer starts a fake on 127.0.0.1 (on a free port) answering Messages
// requests with r. Close stops it. NewServer panics if it cannot listen.
func NewServer(r Responder) *Server {
	if r == nil {
		r = Script()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("claudetest: listen on 127.0.0.1: %v", err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		URL:       "http://" + ln.Addr().String(),
		responder: r,
		ctx:       ctx,
		cancel:    cancel,
		serveDone: make(chan struct{}),
	}
	s.srv = &http.Server{
		Handler:     s,
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(s.serveDone)
		_ = s.srv.Serve(ln)
	}()
	return s
}

// Close stops the server: open streams are cancelled and closed, and Close
// returns once every handler has returned. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		_ = s.srv.Close()
		<-s.serveDone
		s.active.Wait()
	})
}

// Env returns the environment (KEY=VALUE) for running the claude CLI against
// this server with HOME set to home: the API URL and a test key, PATH from the
// current process, and the switches that keep the CLI offline and quiet (no
// telemetry, error reporting, auto-updater or other non-essential traffic).
// Nothing else of the current environment is passed on.
func (s *Server) Env(home string) []string {
	return []string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"ANTHROPIC_BASE_URL=" + s.URL,
		"ANTHROPIC_API_KEY=sk-ant-test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_BUG_COMMAND=1",
		"DISABLE_COST_WARNINGS=1",
		"DISABLE_INSTALLATION_CHECKS=1",
		"CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL=1",
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1",
		"CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1",
	}
}

// Requests returns the Messages API requests received so far, in the order
// they arrived (count_tokens and unknown requests are not included).
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// Unhandled returns a line for each request the server could not answer as
// asked: unknown paths or methods (answered 404), undecodable bodies
// (answered 400) and panics of the Responder (answered 500). A test can
// assert that it is empty.
func (s *Server) Unhandled() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unhandled...)
}

// InFlight returns the number of requests being answered right now. After the
// CLI aborts a request (an interrupt, or the process was killed) it drops back
// as soon as the server notices the client has gone.
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// CountTokensCalls returns how many count_tokens requests were answered.
func (s *Server) CountTokensCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.countTokens
}

func (s *Server) addUnhandled(format string, args ...any) {
	s.mu.Lock()
	s.unhandled = append(s.unhandled, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "api_error", "claudetest: server closed", "")
		return
	}
	s.active.Add(1)
	s.mu.Unlock()
	defer s.active.Done()
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)

	reqID := fmt.Sprintf("req_claudetest_%06d", s.reqSeq.Add(1))
	w.Header().Set("request-id", reqID)
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		s.messages(w, r, reqID)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		s.countTokensHandler(w, r, reqID)
	case (r.Method == http.MethodHead || r.Method == http.MethodGet) && r.URL.Path == "/api/hello":
		// Connectivity check the CLI makes at start-up when non-essential
		// traffic is not disabled.
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			_, _ = w.Write([]byte(`{"message":"hello"}`))
		}
	default:
		s.addUnhandled("%s %s: unknown endpoint", r.Method, r.URL.RequestURI())
		_, _ = io.Copy(io.Discard, r.Body)
		writeError(w, http.StatusNotFound, "not_found_error",
			fmt.Sprintf("claudetest: no handler for %s %s", r.Method, r.URL.Path), reqID)
	}
}

func writeError(w http.ResponseWriter, status int, errType, msg, reqID string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorJSON(errType, msg, reqID))
}

func (s *Server) countTokensHandler(w http.ResponseWriter, r *http.Request, reqID string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if !json.Valid(body) {
		s.addUnhandled("%s %s: invalid JSON body", r.Method, r.URL.RequestURI())
		writeError(w, http.StatusBadRequest, "invalid_request_error", "claudetest: invalid JSON body", reqID)
		return
	}
	s.mu.Lock()
	s.countTokens++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"input_tokens":` + strconv.Itoa(min(1+len(body)/256, maxUsageTokens)) + `}`))
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request, reqID string) {
	ctx := r.Context()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // client went away
	}
	req, err := decodeRequest(body, r.Header.Clone())
	if err != nil {
		s.addUnhandled("%s %s: cannot decode body: %v", r.Method, r.URL.RequestURI(), err)
		writeError(w, http.StatusBadRequest, "invalid_request_error", "claudetest: cannot decode request: "+err.Error(), reqID)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	turn, err := s.respond(req)
	if err != nil {
		s.addUnhandled("%s %s: %v", r.Method, r.URL.RequestURI(), err)
		writeError(w, http.StatusInternalServerError, "api_error", err.Error(), reqID)
		return
	}
	if sleep(ctx, turn.Delay) != nil {
		return
	}
	if turn.Status != 0 {
		typ, msg := turn.ErrorType, turn.ErrorMessage
		if typ == "" {
			typ = errorType(turn.Status)
		}
		if msg == "" {
			msg = fmt.Sprintf("claudetest: scripted %d %s", turn.Status, typ)
		}
		writeError(w, turn.Status, typ, msg, reqID)
		return
	}
	rp := resolve(&turn, req, fmt.Sprintf("msg_claudetest_%06d", s.msgSeq.Add(1)))
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(rp.messageJSON())
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rp.stream(&sseWriter{ctx: ctx, w: w, flush: rc.Flush})
}

// respond calls the responder, turning a panic into an error.
func (s *Server) respond(req *Request) (turn Turn, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("claudetest: responder panicked: %v", p)
		}
	}()
	turn = s.responder.Respond(req)
	for _, b := range turn.Blocks {
		switch b.(type) {
		case *TextBlock, *ThinkingBlock, *ToolUseBlock, nil:
		default:
			return Turn{}, errors.New("claudetest: unknown block type " + fmt.Sprintf("%T", b))
		}
	}
	return turn, nil
}

// EnvMap is [Server.Env] as a map, the form claude.Options.Env takes.
func (s *Server) EnvMap(home string) map[string]string {
	env := make(map[string]string)
	for _, kv := range s.Env(home) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}
