package apiserver

import (
	"context"
	"strconv"

	"github.com/claudectl/claudectl/daemon"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/store"
)

// CreateSession implements SessionService.
func (s *Service) CreateSession(ctx context.Context, req *connect.Request[v1.CreateSessionRequest]) (*connect.Response[v1.CreateSessionResponse], error) {
	sess, err := s.D.Create(ctx, req.Msg.GetOptions(), req.Msg.GetPrompt())
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.CreateSessionResponse{Session: s.sessionToProto(sess)}), nil
}

// ListSessions implements SessionService.
func (s *Service) ListSessions(ctx context.Context, req *connect.Request[v1.ListSessionsRequest]) (*connect.Response[v1.ListSessionsResponse], error) {
	// A set: the request may repeat a status a million times, and each
	// session is checked against it.
	want := map[v1.SessionStatus]bool{}
	for _, st := range req.Msg.Status {
		// A status no session can have (a number this daemon does not
		// know, or UNSPECIFIED) filters by nothing the client meant.
		if _, ok := v1.SessionStatus_name[int32(st)]; !ok || st == v1.SessionStatus_SESSION_STATUS_UNSPECIFIED {
			return nil, invalid("status", st.String(), "not a session status (SESSION_STATUS_RUNNING, SESSION_STATUS_IDLE, …)")
		}
		want[st] = true
	}
	all, err := s.D.Sessions(ctx, store.SessionFilter{})
	if err != nil {
		return nil, toConnect(err)
	}
	out := &v1.ListSessionsResponse{}
	id := IdentityOf(ctx)
	for _, ss := range all {
		if !id.Sees(ss.ID, ss.Cwd) {
			continue
		}
		p := s.sessionToProto(ss)
		if len(want) > 0 && !want[p.Status] {
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
	return connect.NewResponse(&v1.GetSessionResponse{Session: s.sessionToProto(ss)}), nil
}

// Send implements SessionService.
func (s *Service) Send(ctx context.Context, req *connect.Request[v1.SendRequest]) (*connect.Response[v1.SendResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	if err := s.D.Send(ctx, req.Msg.SessionId, req.Msg.Text); err != nil {
		return nil, toConnect(err)
	}
	hint := s.D.BudgetHint(ctx, req.Msg.SessionId) // the prompt waits for an approver
	if hint == "" {
		hint = s.D.LoginHint(req.Msg.SessionId)
	}
	return connect.NewResponse(&v1.SendResponse{Hint: hint}), nil
}

// Typing implements SessionService.
func (s *Service) Typing(ctx context.Context, req *connect.Request[v1.TypingRequest]) (*connect.Response[v1.TypingResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	resuming, err := s.D.Typing(ctx, req.Msg.SessionId)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.TypingResponse{Resuming: resuming}), nil
}

// Interrupt implements SessionService.
func (s *Service) Interrupt(ctx context.Context, req *connect.Request[v1.InterruptRequest]) (*connect.Response[v1.InterruptResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	if err := clientName(req.Msg.Client); err != nil {
		return nil, err
	}
	if err := s.D.Interrupt(ctx, req.Msg.SessionId, who(ctx, req.Msg.Client)); err != nil {
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
	mode, err := s.D.SetPermissionMode(ctx, req.Msg.SessionId, req.Msg.Mode)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.SetPermissionModeResponse{Mode: mode}), nil
}

// CloseSession implements SessionService.
func (s *Service) CloseSession(ctx context.Context, req *connect.Request[v1.CloseSessionRequest]) (*connect.Response[v1.CloseSessionResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	if err := clientName(req.Msg.Client); err != nil {
		return nil, err
	}
	if err := s.D.CloseSession(ctx, req.Msg.SessionId, who(ctx, req.Msg.Client)); err != nil {
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
	return connect.NewResponse(&v1.ResumeSessionResponse{Session: s.sessionToProto(sess)}), nil
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
	return connect.NewResponse(&v1.ForkSessionResponse{Session: s.sessionToProto(sess)}), nil
}

// Subscribe implements SessionService.
func (s *Service) Subscribe(ctx context.Context, req *connect.Request[v1.SubscribeRequest], stream *connect.ServerStream[v1.SubscribeResponse]) error {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return err
	}
	if req.Msg.AfterSeq < 0 {
		return invalid("after_seq", strconv.FormatInt(req.Msg.AfterSeq, 10), "must be 0 or more")
	}
	sw := stallOf(ctx)
	if sw != nil {
		sw.session = req.Msg.SessionId
		sw.sent.Store(req.Msg.AfterSeq)
	}
	for ev, err := range s.D.Subscribe(ctx, req.Msg.SessionId, req.Msg.AfterSeq) {
		if err != nil {
			return toConnect(err)
		}
		if err := stream.Send(&v1.SubscribeResponse{Event: eventToProto(&ev)}); err != nil {
			return stalledOr(ctx, err)
		}
		if sw != nil {
			sw.sent.Store(ev.Seq)
		}
	}
	return nil
}

// WatchSessions implements SessionService.
func (s *Service) WatchSessions(ctx context.Context, _ *connect.Request[v1.WatchSessionsRequest], stream *connect.ServerStream[v1.WatchSessionsResponse]) error {
	id := IdentityOf(ctx)
	for ch, err := range s.D.WatchSessions(ctx) {
		if err != nil {
			return toConnect(err)
		}
		out := &v1.WatchSessionsResponse{Snapshot: ch.Snapshot}
		for _, ss := range ch.Sessions {
			if id.Sees(ss.ID, ss.Cwd) {
				out.Sessions = append(out.Sessions, s.sessionToProto(ss))
			}
		}
		if !ch.Snapshot && len(out.Sessions) == 0 {
			continue // nothing this token sees changed
		}
		if err := stream.Send(out); err != nil {
			return stalledOr(ctx, err)
		}
	}
	return nil
}

// who is what the daemon is told of who acts (a Decide, an Interrupt, a
// CloseSession): the verified user of a token the daemon made, or, for
// the daemon's own token, shared by whoever holds it, the name the client
// gives itself.
func who(ctx context.Context, client string) string {
	if id := IdentityOf(ctx); !id.Bootstrap {
		return daemon.VerifiedBy(id.User)
	}
	return client
}
