package apiserver

import (
	"context"
	"encoding/json"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/store"
)

// CreateSession implements SessionService.
func (s *Service) CreateSession(ctx context.Context, req *connect.Request[v1.CreateSessionRequest]) (*connect.Response[v1.CreateSessionResponse], error) {
	o := req.Msg.GetOptions()
	if o == nil {
		return nil, invalid("options", "", "required")
	}
	sess, err := s.D.Create(ctx, daemon.SessionOptions{
		Cwd: o.Cwd, Model: o.Model, PermissionMode: o.PermissionMode,
		AllowedTools: o.AllowedTools, DisallowedTools: o.DisallowedTools, AddDirs: o.AddDirs,
		SystemPrompt: o.SystemPrompt, AppendSystemPrompt: o.AppendSystemPrompt,
		MaxTurns: int(o.MaxTurns), MaxBudgetUSD: o.MaxBudgetUsd,
		IncludePartialMessages: o.IncludePartialMessages, ExtraArgs: o.ExtraArgs, Worker: o.Worker,
	}, req.Msg.GetPrompt())
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.CreateSessionResponse{Session: sessionToProto(sess)}), nil
}

// ListSessions implements SessionService.
func (s *Service) ListSessions(ctx context.Context, req *connect.Request[v1.ListSessionsRequest]) (*connect.Response[v1.ListSessionsResponse], error) {
	all, err := s.D.Sessions(ctx, store.SessionFilter{})
	if err != nil {
		return nil, toConnect(err)
	}
	out := &v1.ListSessionsResponse{}
	for _, ss := range all {
		p := sessionToProto(ss)
		if len(req.Msg.Status) > 0 && !slices.Contains(req.Msg.Status, p.Status) {
			continue
		}
		out.Sessions = append(out.Sessions, p)
	}
	return connect.NewResponse(out), nil
}

// GetSession implements SessionService.
func (s *Service) GetSession(ctx context.Context, req *connect.Request[v1.GetSessionRequest]) (*connect.Response[v1.GetSessionResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	ss, err := s.D.Session(ctx, req.Msg.SessionId)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.GetSessionResponse{Session: sessionToProto(ss)}), nil
}

// Send implements SessionService.
func (s *Service) Send(ctx context.Context, req *connect.Request[v1.SendRequest]) (*connect.Response[v1.SendResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	if err := s.D.Send(ctx, req.Msg.SessionId, req.Msg.Text); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.SendResponse{}), nil
}

// Interrupt implements SessionService.
func (s *Service) Interrupt(ctx context.Context, req *connect.Request[v1.InterruptRequest]) (*connect.Response[v1.InterruptResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	if err := s.D.Interrupt(ctx, req.Msg.SessionId); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.InterruptResponse{}), nil
}

// SetModel implements SessionService.
func (s *Service) SetModel(ctx context.Context, req *connect.Request[v1.SetModelRequest]) (*connect.Response[v1.SetModelResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	if err := s.D.SetModel(ctx, req.Msg.SessionId, req.Msg.Model); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.SetModelResponse{}), nil
}

// SetPermissionMode implements SessionService.
func (s *Service) SetPermissionMode(ctx context.Context, req *connect.Request[v1.SetPermissionModeRequest]) (*connect.Response[v1.SetPermissionModeResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	if err := s.D.SetPermissionMode(ctx, req.Msg.SessionId, req.Msg.Mode); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.SetPermissionModeResponse{}), nil
}

// CloseSession implements SessionService.
func (s *Service) CloseSession(ctx context.Context, req *connect.Request[v1.CloseSessionRequest]) (*connect.Response[v1.CloseSessionResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	if err := s.D.CloseSession(ctx, req.Msg.SessionId); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.CloseSessionResponse{}), nil
}

// ResumeSession implements SessionService.
func (s *Service) ResumeSession(ctx context.Context, req *connect.Request[v1.ResumeSessionRequest]) (*connect.Response[v1.ResumeSessionResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	sess, err := s.D.Resume(ctx, req.Msg.SessionId, req.Msg.Prompt)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.ResumeSessionResponse{Session: sessionToProto(sess)}), nil
}

// ForkSession implements SessionService.
func (s *Service) ForkSession(ctx context.Context, req *connect.Request[v1.ForkSessionRequest]) (*connect.Response[v1.ForkSessionResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	sess, err := s.D.Fork(ctx, req.Msg.SessionId, req.Msg.Prompt)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.ForkSessionResponse{Session: sessionToProto(sess)}), nil
}

// Subscribe implements SessionService.
func (s *Service) Subscribe(ctx context.Context, req *connect.Request[v1.SubscribeRequest], stream *connect.ServerStream[v1.SubscribeResponse]) error {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return err
	}
	if req.Msg.AfterSeq < 0 {
		return invalid("after_seq", "negative", "must be 0 or more")
	}
	for ev, err := range s.D.Subscribe(ctx, req.Msg.SessionId, req.Msg.AfterSeq) {
		if err != nil {
			return toConnect(err)
		}
		if err := stream.Send(&v1.SubscribeResponse{Event: eventToProto(&ev)}); err != nil {
			return err
		}
	}
	return nil
}

// eventToProto turns a logged event into its API form: the daemon's own
// events become typed kinds, the CLI's lines are passed raw.
func eventToProto(ev *store.Event) *v1.Event {
	out := &v1.Event{SessionId: ev.SessionID, Seq: ev.Seq, Time: timestamppb.New(ev.Time)}
	if ev.Direction == store.FromDaemon {
		switch ev.Type {
		case "status":
			var st daemon.StatusEvent
			if json.Unmarshal(ev.Raw, &st) == nil {
				out.Kind = &v1.Event_StatusChange{StatusChange: &v1.StatusChange{Status: statusToProto[st.Status], Detail: st.Detail}}
				return out
			}
		case "permission_request":
			var pr daemon.PermissionRequestEvent
			if json.Unmarshal(ev.Raw, &pr) == nil {
				sugs, _ := json.Marshal(pr.Suggestions)
				out.Kind = &v1.Event_PermissionRequest{PermissionRequest: &v1.PermissionRequest{
					RequestId: pr.RequestID, SessionId: ev.SessionID, ToolName: pr.ToolName, Input: pr.Input,
					ToolUseId: pr.ToolUseID, Description: pr.Description, DecisionReason: pr.Reason, Suggestions: sugs,
					Questions: questionsOf(pr.ToolName, pr.Input)}}
				return out
			}
		case "text_delta":
			var td daemon.TextDeltaEvent
			if json.Unmarshal(ev.Raw, &td) == nil {
				out.Kind = &v1.Event_TextDelta{TextDelta: &v1.TextDelta{Text: td.Text, ParentToolUseId: td.ParentToolUseID}}
				return out
			}
		case "tool_use":
			var tu daemon.ToolUseEvent
			if json.Unmarshal(ev.Raw, &tu) == nil {
				out.Kind = &v1.Event_ToolUse{ToolUse: &v1.ToolUse{ToolUseId: tu.ToolUseID, Name: tu.Name,
					Input: tu.Input, ParentToolUseId: tu.ParentToolUseID}}
				return out
			}
		case "usage_report":
			var ur daemon.UsageReportEvent
			if json.Unmarshal(ev.Raw, &ur) == nil {
				out.Kind = &v1.Event_UsageReport{UsageReport: &v1.UsageReport{
					Turn: turnUsageToProto(&ur.Turn), SessionTotals: totalsToProto(ur.Totals)}}
				return out
			}
		case "error":
			var e daemon.ErrorEvent
			if json.Unmarshal(ev.Raw, &e) == nil {
				out.Kind = &v1.Event_Error{Error: &v1.Error{Message: e.Message, StderrTail: e.StderrTail}}
				return out
			}
		case "permission_resolved":
			var pr daemon.PermissionResolvedEvent
			if json.Unmarshal(ev.Raw, &pr) == nil {
				d := &store.Decision{RequestID: pr.RequestID, Behavior: pr.Behavior, By: pr.By, RuleID: pr.RuleID,
					Message: pr.Message, DecidedAt: ev.Time, ToolName: pr.ToolName, SessionID: ev.SessionID}
				out.Kind = &v1.Event_PermissionResolved{PermissionResolved: &v1.PermissionResolved{
					RequestId: pr.RequestID, Decision: decisionToProto(d)}}
				return out
			}
		}
	}
	m := &v1.Message{Type: ev.Type, Subtype: ev.Subtype, Raw: ev.Raw, ToCli: ev.Direction == store.ToCLI}
	if ev.Truncated() {
		m.OriginalSize = ev.OriginalSize
	}
	out.Kind = &v1.Event_Message{Message: m}
	return out
}
