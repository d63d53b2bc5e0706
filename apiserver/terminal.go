package apiserver

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/daemon"
)

// maxTerminalWait bounds how long a hook's request waits for a person.
const maxTerminalWait = time.Hour

// terminalHook reads a hook's input and checks it against the caller's
// scopes: a token scoped to a project asks only for sessions there.
func terminalHook(ctx context.Context, b []byte) (*daemon.TerminalHook, error) {
	h, err := daemon.ParseTerminalHook(b)
	if err != nil {
		return nil, toConnect(err)
	}
	if id := IdentityOf(ctx); id.Scoped() && (id.SessionID != "" || !id.InDirs(h.Cwd)) {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("the directory %q is outside the scope of %s: it may reach only %s",
			clip(h.Cwd), id.describe(), id.scopeWords()))
	}
	return h, nil
}

// AskTerminal implements TerminalService.
func (s *Service) AskTerminal(ctx context.Context, req *connect.Request[v1.AskTerminalRequest]) (*connect.Response[v1.AskTerminalResponse], error) {
	h, err := terminalHook(ctx, req.Msg.HookInput)
	if err != nil {
		return nil, err
	}
	if h.Event != "" && h.Event != "PermissionRequest" {
		return nil, invalid("hook_input.hook_event_name", h.Event, "AskTerminal takes PermissionRequest; ReportTerminal the others")
	}
	wait := time.Duration(req.Msg.WaitSeconds) * time.Second
	if req.Msg.WaitSeconds == 0 {
		wait = 300 * time.Second
	}
	if wait < 0 || wait > maxTerminalWait {
		return nil, invalid("wait_seconds", strconv.Itoa(int(req.Msg.WaitSeconds)), "must be from 0 (300) to 3600")
	}
	a, err := s.D.AskTerminal(ctx, h, wait)
	if err != nil {
		return nil, toConnect(err)
	}
	out := &v1.AskTerminalResponse{Decided: a.Decided, Message: a.Message, UpdatedInput: a.UpdatedInput, DecidedBy: a.By,
		SessionId: a.SessionID, RequestId: a.RequestID}
	if a.Decided {
		out.Behavior = v1.Behavior_BEHAVIOR_DENY
		if a.Allow {
			out.Behavior = v1.Behavior_BEHAVIOR_ALLOW
		}
	}
	return connect.NewResponse(out), nil
}

// ReportTerminal implements TerminalService.
func (s *Service) ReportTerminal(ctx context.Context, req *connect.Request[v1.ReportTerminalRequest]) (*connect.Response[v1.ReportTerminalResponse], error) {
	h, err := terminalHook(ctx, req.Msg.HookInput)
	if err != nil {
		return nil, err
	}
	sess, err := s.D.ReportTerminal(ctx, h)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.ReportTerminalResponse{SessionId: sess.ID}), nil
}

// GetTerminalTranscript implements TerminalService.
func (s *Service) GetTerminalTranscript(ctx context.Context, req *connect.Request[v1.GetTerminalTranscriptRequest]) (*connect.Response[v1.GetTerminalTranscriptResponse], error) {
	limit := int(req.Msg.Limit)
	if limit < 0 || limit > 2000 {
		return nil, invalid("limit", strconv.Itoa(limit), "must be from 0 (200) to 2000")
	}
	if limit == 0 {
		limit = 200
	}
	entries, path, truncated, err := s.D.TerminalTranscript(ctx, req.Msg.SessionId, limit)
	if err != nil {
		return nil, toConnect(err)
	}
	out := &v1.GetTerminalTranscriptResponse{Path: path, Truncated: truncated}
	for _, e := range entries {
		te := &v1.TranscriptEntry{Kind: e.Kind, Text: e.Text}
		if !e.Time.IsZero() {
			te.Time = timestamppb.New(e.Time)
		}
		out.Entries = append(out.Entries, te)
	}
	return connect.NewResponse(out), nil
}
