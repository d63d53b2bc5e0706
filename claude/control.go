package claude

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Control sends a control request of the given subtype with the fields of
// payload (a struct or map marshalled to a JSON object; nil for none) and
// returns the CLI's raw response. It is the way to use a control request
// this package has no method for.
//
// If ctx ends first, the request is withdrawn with a control_cancel_request
// and ctx's error is returned. An error response is a *ControlError.
func (s *Session) Control(ctx context.Context, subtype string, payload any) (json.RawMessage, error) {
	req, err := requestPayload(subtype, payload)
	if err != nil {
		return nil, err
	}
	return s.request(ctx, subtype, req)
}

// requestPayload builds {"subtype": subtype, ...payload}.
func requestPayload(subtype string, payload any) (json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return nil, fmt.Errorf("claude: control request %s: %w", subtype, err)
		}
		if err := json.Unmarshal(b, &fields); err != nil {
			return nil, fmt.Errorf("claude: control request %s: payload must be a JSON object: %w", subtype, err)
		}
	}
	st, _ := json.Marshal(subtype)
	fields["subtype"] = st
	return json.Marshal(fields)
}

func (s *Session) newRequestID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("req_%d_%s", s.reqSeq.Add(1), hex.EncodeToString(b[:]))
}

func (s *Session) request(ctx context.Context, subtype string, req json.RawMessage) (json.RawMessage, error) {
	id, p, err := s.sendRequest(ctx, subtype, req)
	if err != nil {
		return nil, err
	}
	return s.awaitResponse(ctx, subtype, id, p)
}

// sendRequest writes a control request and registers it as pending.
func (s *Session) sendRequest(ctx context.Context, subtype string, req json.RawMessage) (string, *pendingRequest, error) {
	id := s.newRequestID()
	p := &pendingRequest{subtype: subtype, ch: make(chan controlResult, 1)}
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return "", nil, s.opErr("control request "+subtype, s.endErrOrClosed())
	default:
	}
	s.pending[id] = p
	s.mu.Unlock()
	if err := s.write(ctx, wireControlRequest{Type: "control_request", RequestID: id, Request: req}); err != nil {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return "", nil, s.opErr("control request "+subtype, err)
	}
	return id, p, nil
}

// awaitResponse waits for the response to a request sendRequest wrote.
func (s *Session) awaitResponse(ctx context.Context, subtype, id string, p *pendingRequest) (json.RawMessage, error) {
	forget := func() {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
	}
	timeout, stop := s.controlTimer(subtype)
	defer stop()
	select {
	case <-timeout:
		forget()
		s.withdraw(id)
		return nil, &ControlTimeoutError{SessionID: s.SessionID(), Subtype: subtype, RequestID: id, Timeout: s.controlTimeout()}
	case r := <-p.ch:
		if r.err != nil {
			return nil, s.opErr("control request "+subtype, r.err)
		}
		if r.body.Subtype == "error" {
			return nil, &ControlError{SessionID: s.SessionID(), Subtype: subtype, RequestID: id, Message: r.body.Error, Code: r.body.ErrorCode}
		}
		return r.body.Response, nil
	case <-ctx.Done():
		forget()
		s.withdraw(id)
		return nil, s.opErr("control request "+subtype, fmt.Errorf("gave up waiting for the answer: %w", ctx.Err()))
	}
}

// withdraw tells the CLI that the request id is no longer awaited, if the
// CLI is known to accept that.
func (s *Session) withdraw(id string) {
	if s.acceptsCancel() {
		// The CLI may already be past caring, so don't wait long.
		wctx, cancel := context.WithTimeout(s.ctx, time.Second)
		_ = s.write(wctx, wireCancel{Type: "control_cancel_request", RequestID: id})
		cancel()
	}
}

// cancelMinVersion is the oldest CLI known to accept a control_cancel_request
// on its stdin: 2.1.329 does; 2.1.37 exits on one ("Expected message type
// 'user' or 'control'"); versions in between are untested.
var cancelMinVersion = Version{Major: 2, Minor: 1, Patch: 329}

// acceptsCancel reports whether the CLI is known to accept
// control_cancel_request. When its version is not known yet (it comes with
// the initialize response or system/init), the request is not withdrawn:
// its late answer is simply dropped.
func (s *Session) acceptsCancel() bool {
	s.mu.Lock()
	v := s.cliVersion
	s.mu.Unlock()
	if v == "" {
		return false
	}
	pv, err := ParseVersion(v)
	return err == nil && pv.Compare(cancelMinVersion) >= 0
}

// handleResponse delivers a control_response to the request waiting for it.
func (s *Session) handleResponse(body *ControlResponseBody) {
	s.mu.Lock()
	p := s.pending[body.RequestID]
	delete(s.pending, body.RequestID)
	s.mu.Unlock()
	for _, raw := range body.PendingPermissionRequests {
		var cr ControlRequest
		if err := unmarshal(raw, &cr); err == nil && cr.RequestID != "" {
			_, cr.Subtype = sniffKind(cr.Request)
			s.handleRequest(cr.RequestID, cr.Subtype, cr.Request)
		}
	}
	if p == nil {
		s.logger.Debug("claude: control_response for no pending request", "request_id", body.RequestID)
		return
	}
	p.ch <- controlResult{body: *body}
}

// maxRequestsAtOnce bounds the CLI's control requests answered at once;
// maxRefusals bounds those refused but not yet told so.
const (
	maxRequestsAtOnce = 64
	maxRefusals       = 256
)

// handleRequest answers one of the CLI's control requests on its own
// goroutine; a control_cancel_request for its id cancels its context.
//
// At most maxRequestsAtOnce are answered at once; the dispatcher never
// waits for a slot (a handler may itself wait for a response that only
// the dispatcher can route), so a request beyond them is refused at once
// with an error response, written by one goroutine behind a bounded
// queue; beyond that queue, it is dropped unanswered and logged.
func (s *Session) handleRequest(id, subtype string, req json.RawMessage) {
	s.mu.Lock()
	if _, dup := s.incoming[id]; dup || id == "" {
		s.mu.Unlock()
		return
	}
	if len(s.incoming) >= maxRequestsAtOnce {
		s.refuseLocked(id, subtype)
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.incoming[id] = cancel
	s.handlers.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.handlers.Done()
		defer func() {
			cancel()
			s.mu.Lock()
			delete(s.incoming, id)
			s.mu.Unlock()
		}()
		resp, err := s.answer(ctx, id, subtype, req)
		if ctx.Err() != nil {
			return // withdrawn or session over: the CLI expects no answer
		}
		body := wireControlRespBody{Subtype: "success", RequestID: id, Response: resp}
		if err != nil {
			body = wireControlRespBody{Subtype: "error", RequestID: id, Error: err.Error()}
			var ce *ControlError
			if errors.As(err, &ce) {
				body.Error, body.ErrorCode = ce.Message, ce.Code
			}
		}
		if body.Response == nil && body.Subtype == "success" {
			body.Response = struct{}{}
		}
		if werr := s.write(s.ctx, wireControlResponse{Type: "control_response", Response: body}); werr != nil {
			s.logger.Debug("claude: could not answer control request", "subtype", subtype, "err", werr)
		}
	}()
}

// errTooManyRequests is the answer to a request beyond maxRequestsAtOnce.
const errTooManyRequests = "too many requests at once"

// refuseLocked queues an error response to a request that is not handled;
// s.mu is held.
func (s *Session) refuseLocked(id, subtype string) {
	if len(s.refusals) >= maxRefusals {
		s.dropped++
		if s.dropped == 1 || s.dropped%1000 == 0 {
			s.logger.Warn("claude: the CLI sends control requests faster than they can be answered; dropping some unanswered",
				"session", s.sessionID, "subtype", subtype, "dropped", s.dropped)
		}
		return
	}
	s.refusals = append(s.refusals, id)
	if !s.refusing {
		s.refusing = true
		s.handlers.Add(1)
		go s.writeRefusals()
	}
}

// writeRefusals writes the queued refusals, then ends.
func (s *Session) writeRefusals() {
	defer s.handlers.Done()
	for {
		s.mu.Lock()
		if len(s.refusals) == 0 || s.ctx.Err() != nil {
			s.refusals, s.refusing = nil, false
			s.mu.Unlock()
			return
		}
		id := s.refusals[0]
		s.refusals = s.refusals[1:]
		s.mu.Unlock()
		body := wireControlRespBody{Subtype: "error", RequestID: id, Error: errTooManyRequests}
		if err := s.write(s.ctx, wireControlResponse{Type: "control_response", Response: body}); err != nil {
			s.logger.Debug("claude: could not refuse a control request", "request_id", id, "err", err)
		}
	}
}

// answer computes the response to one CLI request. A panic in user code
// becomes an error response; the session goes on.
func (s *Session) answer(ctx context.Context, id, subtype string, req json.RawMessage) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("claude: handler for %s panicked: %v", subtype, r)
			s.logger.Error("claude: control request handler panicked", "subtype", subtype, "panic", r)
		}
	}()
	switch subtype {
	case "can_use_tool":
		if s.opts.CanUseTool == nil {
			return nil, errors.New("no permission handler is set (Options.CanUseTool)")
		}
		pr := &PermissionRequest{RequestID: id, Raw: req}
		if err := unmarshal(req, pr); err != nil {
			return nil, fmt.Errorf("decoding can_use_tool request: %w", err)
		}
		res, err := s.opts.CanUseTool(ctx, pr)
		if err != nil {
			return nil, err
		}
		return res.wire(pr), nil
	case "elicitation":
		return s.answerElicitation(ctx, req)
	case "hook_callback":
		return s.answerHook(ctx, req)
	case "mcp_message":
		return s.answerMCP(ctx, req)
	case "request_user_dialog":
		return s.answerUserDialog(ctx, id, req) // options_more.go
	}
	return nil, &ControlError{Subtype: subtype, Message: "Unsupported control request subtype: " + subtype, Code: "unsupported_request"}
}

// InitializeResponse is the CLI's answer to the initialize request.
type InitializeResponse struct {
	Commands []struct {
		Name         string `json:"name"`
		Description  string `json:"description"`
		ArgumentHint string `json:"argumentHint,omitempty"`
	} `json:"commands"`
	Agents []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Model       string `json:"model,omitempty"`
	} `json:"agents,omitempty"`
	OutputStyle           string   `json:"output_style"`
	AvailableOutputStyles []string `json:"available_output_styles"`
	Models                []struct {
		Value       string `json:"value"`
		DisplayName string `json:"displayName"`
		Description string `json:"description"`
	} `json:"models"`
	Account struct {
		Email            string `json:"email,omitempty"`
		Organization     string `json:"organization,omitempty"`
		SubscriptionType string `json:"subscriptionType,omitempty"`
		APIKeySource     string `json:"apiKeySource,omitempty"`
	} `json:"account"`
	PID               int    `json:"pid,omitempty"`
	ClaudeCodeVersion string `json:"claude_code_version,omitempty"`
	// Capabilities are some of the protocol features this CLI supports
	// (system/init lists them all; see [Session.Capabilities]).
	Capabilities []Capability `json:"capabilities,omitempty"`
	// What the CLI did with the options sent in initialize (nil when it
	// does not say: a CLI too old for them): PluginsApplied with
	// Options.PluginsInInitialize, MCPServersApplied with
	// Options.MCPServersInInitialize; SDKMCPManifestsParked says, by
	// in-process server, what it did with its manifest ("parked": taken).
	PluginsApplied         *bool             `json:"plugins_applied,omitempty"`
	MCPServersApplied      *bool             `json:"mcp_servers_applied,omitempty"`
	HookOnFailureSupported bool              `json:"hook_on_failure_supported,omitempty"`
	SDKMCPManifestsParked  map[string]string `json:"sdk_mcp_manifests_parked,omitempty"`
	// Raw is the whole response.
	Raw json.RawMessage `json:"-"`
}

// initialize writes the initialize request and waits for its answer on its
// own goroutine. Start calls it, so that the request is written before any
// prompt can be: the CLI runs a prompt it reads first without the hooks,
// agents and MCP servers that initialize brings.
func (s *Session) initialize() {
	req, err := s.initializeRequest()
	var id string
	var p *pendingRequest
	if err == nil {
		id, p, err = s.sendRequest(s.ctx, "initialize", req)
	}
	go func() {
		defer close(s.initDone)
		var raw json.RawMessage
		if err == nil {
			raw, err = s.awaitResponse(s.ctx, "initialize", id, p)
		}
		var r *InitializeResponse
		if err == nil {
			r = &InitializeResponse{Raw: raw}
			if derr := unmarshal(raw, r); derr != nil {
				err = fmt.Errorf("claude: decoding initialize response: %w", derr)
			}
		}
		s.mu.Lock()
		s.initResp, s.initErr = r, err
		if r != nil && r.ClaudeCodeVersion != "" {
			s.cliVersion = r.ClaudeCodeVersion
		}
		s.mu.Unlock()
		var ce *ControlError
		if errors.As(err, &ce) {
			// The CLI refused the configuration: the session cannot go on
			// as asked. The reader gets the CLI's message at once, and the
			// CLI is stopped.
			s.logger.Warn("claude: the CLI refused the initialize request; ending the session", "err", err)
			s.q.close(err)
			s.cancel(err)
		}
	}()
}

// Initialize waits for the CLI's answer to the initialize request that Start
// sent, and returns it: the slash commands, models and account. The CLI
// answers within a few seconds of starting. If it answers with an error
// (it refused what Options put in the request), that is a *ControlError
// with the CLI's message; the session then ends, and Next returns the same
// error as soon as the answer arrives.
func (s *Session) Initialize(ctx context.Context) (*InitializeResponse, error) {
	select {
	case <-s.initDone:
	case <-ctx.Done():
		return nil, s.opErr("initialize", fmt.Errorf("gave up waiting for the answer: %w", ctx.Err()))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initResp, s.initErr
}

// Interrupt asks the CLI to stop the current turn, and returns once it has
// confirmed. The turn then ends with a result (subtype
// error_during_execution); the session stays usable. Prompts queued
// behind the turn still run; see [Session.InterruptWith] to drop them or
// to learn which they are.
func (s *Session) Interrupt(ctx context.Context) error {
	_, err := s.InterruptWith(ctx, nil)
	return err
}

// SetModel switches the model for the following turns; "" restores the default.
func (s *Session) SetModel(ctx context.Context, model string) error {
	var m any
	if model != "" {
		m = model
	}
	_, err := s.Control(ctx, "set_model", map[string]any{"model": m})
	return err
}

// SetPermissionMode switches the permission mode and returns the mode now
// in effect, which is not always the one asked for: record the returned
// mode, not mode. It is "" when the CLI's answer names no mode (a host
// other than `claude -p` may answer with none): mode is then only a best
// guess, and the next [SystemStatus] or [SystemInit] says what holds. A
// refused mode is an error, a *ControlError whose Code says why
// ("invalid_mode", "bypass_not_launched", "bypass_disabled",
// "auto_mode_unavailable", ...), and the mode does not change.
func (s *Session) SetPermissionMode(ctx context.Context, mode PermissionMode) (PermissionMode, error) {
	raw, err := s.Control(ctx, "set_permission_mode", map[string]any{"mode": mode})
	if err != nil {
		return "", err
	}
	// The switch succeeded: an answer that does not name a mode as a
	// string is no mode, not an error.
	var r struct {
		Mode PermissionMode `json:"mode"`
	}
	_ = json.Unmarshal(raw, &r)
	return r.Mode, nil
}

// SetMaxThinkingTokens sets the thinking budget; 0 clears it.
func (s *Session) SetMaxThinkingTokens(ctx context.Context, n int) error {
	var v any
	if n > 0 {
		v = n
	}
	_, err := s.Control(ctx, "set_max_thinking_tokens", map[string]any{"max_thinking_tokens": v})
	return err
}

// MCPServerStatus is one MCP server's state, from [Session.MCPStatus].
type MCPServerStatus struct {
	Name       string          `json:"name"`
	Status     string          `json:"status"`
	ServerInfo json.RawMessage `json:"serverInfo,omitempty"`
	Error      string          `json:"error,omitempty"`
	Scope      string          `json:"scope,omitempty"`
	Tools      json.RawMessage `json:"tools,omitempty"`
}

// MCPStatus returns the state of the session's MCP servers.
func (s *Session) MCPStatus(ctx context.Context) ([]MCPServerStatus, error) {
	raw, err := s.Control(ctx, "mcp_status", nil)
	if err != nil {
		return nil, err
	}
	var r struct {
		MCPServers []MCPServerStatus `json:"mcpServers"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("claude: decoding mcp_status response: %w", err)
	}
	return r.MCPServers, nil
}

// RewindResult says what [Session.RewindFiles] did or would do.
type RewindResult struct {
	CanRewind    bool     `json:"canRewind"`
	Error        string   `json:"error,omitempty"`
	FilesChanged []string `json:"filesChanged,omitempty"`
	Insertions   int      `json:"insertions,omitempty"`
	Deletions    int      `json:"deletions,omitempty"`
}

// RewindFiles restores files to their state at the given user message (file
// checkpointing must be on); with dryRun it only reports.
func (s *Session) RewindFiles(ctx context.Context, userMessageID string, dryRun bool) (*RewindResult, error) {
	raw, err := s.Control(ctx, "rewind_files", map[string]any{"user_message_id": userMessageID, "dry_run": dryRun})
	if err != nil {
		return nil, err
	}
	var r RewindResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("claude: decoding rewind_files response: %w", err)
	}
	return &r, nil
}

// StopTask stops a running background task (a sub-agent or shell).
func (s *Session) StopTask(ctx context.Context, taskID string) error {
	_, err := s.Control(ctx, "stop_task", map[string]any{"task_id": taskID})
	return err
}

// ContextUsage returns the CLI's context-window usage report, raw.
func (s *Session) ContextUsage(ctx context.Context) (json.RawMessage, error) {
	return s.Control(ctx, "get_context_usage", nil)
}
