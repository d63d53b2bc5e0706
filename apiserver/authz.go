package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/store"
)

// authorizer is the one place that decides what a verified identity may
// call: the method's permission (methodPermissions) against the token's
// role, then the token's scopes against the session the request names.
// Lists and watches are filtered by the handlers, through
// Service.visible. The calls that change something are written to the
// audit trail, refused ones included.
type authorizer struct{ s *Service }

// callInfo is what the authorizer learnt of a call, for its audit entry.
type callInfo struct {
	sessionID string
}

func (a authorizer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		id := IdentityOf(ctx)
		proc := req.Spec().Procedure
		var info callInfo
		if audited[proc] { // named in the entry even when refused
			info.sessionID = a.sessionOf(req.Any())
		}
		err := a.check(ctx, id, proc, req.Any(), &info)
		var res connect.AnyResponse
		if err == nil {
			res, err = next(ctx, req)
		}
		if audited[proc] {
			var out any
			if res != nil {
				out = res.Any()
			}
			a.s.audit(ctx, id, proc, req.Any(), out, err, &info)
		}
		return res, err
	}
}

func (a authorizer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a authorizer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		id := IdentityOf(ctx)
		proc := conn.Spec().Procedure
		need, ok := methodPermissions[proc]
		if !ok {
			return unknownMethod(proc)
		}
		if err := id.require(proc, need); err != nil {
			return err
		}
		return next(ctx, &scopedConn{StreamingHandlerConn: conn, a: a, ctx: ctx, id: id})
	}
}

// scopedConn checks the scopes against each message a stream receives
// (a server stream's one request).
type scopedConn struct {
	connect.StreamingHandlerConn
	a   authorizer
	ctx context.Context
	id  *Identity
}

func (c *scopedConn) Receive(m any) error {
	if err := c.StreamingHandlerConn.Receive(m); err != nil {
		return err
	}
	return c.a.scope(c.ctx, c.id, c.Spec().Procedure, m, &callInfo{})
}

func unknownMethod(proc string) error {
	return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s has no permission assigned: nobody may call it", clip(proc)))
}

// check is the authorizer's verdict on a unary call.
func (a authorizer) check(ctx context.Context, id *Identity, proc string, msg any, info *callInfo) error {
	need, ok := methodPermissions[proc]
	if !ok {
		return unknownMethod(proc)
	}
	if err := id.require(proc, need); err != nil {
		return err
	}
	return a.scope(ctx, id, proc, msg, info)
}

// scope checks a request against id's scopes: the session it names must
// be within them, a session it creates must be made in one of its
// directories, and a token scoped to one session makes no other.
func (a authorizer) scope(ctx context.Context, id *Identity, proc string, msg any, info *callInfo) error {
	switch m := msg.(type) {
	case *v1.CreateSessionRequest:
		if !id.Scoped() {
			return nil
		}
		if id.SessionID != "" {
			return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
				"%s is scoped to session %s: it cannot create sessions", id.describe(), id.SessionID))
		}
		cwd := m.GetOptions().GetCwd()
		if cwd == "" || !filepath.IsAbs(cwd) || !id.InDirs(cwd) {
			return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
				"options.cwd %q is outside the scope of %s: set options.cwd to one of %s or below",
				clip(cwd), id.describe(), strings.Join(id.Dirs, ", ")))
		}
		return nil
	case *v1.ForkSessionRequest:
		info.sessionID = m.SessionId
		if id.SessionID != "" {
			return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
				"%s is scoped to session %s: it cannot create sessions (a fork is a new one)", id.describe(), id.SessionID))
		}
	case *v1.DecideRequest:
		if info.sessionID == "" {
			info.sessionID = a.sessionOf(m)
		}
		if info.sessionID == "" {
			return nil // the handler says there is no such request
		}
		return a.sessionInScope(ctx, id, info.sessionID)
	}
	if s, ok := msg.(interface{ GetSessionId() string }); ok && s.GetSessionId() != "" {
		info.sessionID = s.GetSessionId()
		return a.sessionInScope(ctx, id, info.sessionID)
	}
	return nil
}

// sessionOf returns the session a request is about: the one it names, or
// a decision's request's.
func (a authorizer) sessionOf(msg any) string {
	if m, ok := msg.(*v1.DecideRequest); ok {
		if m.RequestId == "" {
			return ""
		}
		for _, p := range a.s.D.Pending("") {
			if p.Request.RequestID == m.RequestId {
				return p.SessionID
			}
		}
		return ""
	}
	if s, ok := msg.(interface{ GetSessionId() string }); ok {
		return s.GetSessionId()
	}
	return ""
}

// sessionInScope checks a session id a request names against id's
// scopes. An unknown session is left to the handler (NotFound), except
// for a scoped token, which learns nothing of sessions outside its scope.
func (a authorizer) sessionInScope(ctx context.Context, id *Identity, sessionID string) error {
	if !id.Scoped() {
		return nil
	}
	if id.SessionID != "" && id.SessionID != sessionID {
		return id.outOfScope(sessionID)
	}
	sess, err := a.s.D.Session(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return id.outOfScope(sessionID)
	}
	if err != nil {
		return toConnect(err)
	}
	if !id.Sees(sess.ID, sess.Cwd) {
		return id.outOfScope(sessionID)
	}
	return nil
}

// visible returns a filter of the sessions ctx's identity sees, by id:
// nil for an unscoped token (it sees all). The filter remembers the
// sessions it looked up.
func (s *Service) visible(ctx context.Context) func(sessionID string) bool {
	id := IdentityOf(ctx)
	if !id.Scoped() {
		return nil
	}
	seen := map[string]bool{}
	return func(sessionID string) bool {
		if v, ok := seen[sessionID]; ok {
			return v
		}
		v := false
		if id.SessionID == "" || id.SessionID == sessionID {
			if sess, err := s.D.Session(ctx, sessionID); err == nil {
				v = id.InDirs(sess.Cwd)
			}
		}
		if len(seen) < 10_000 {
			seen[sessionID] = v
		}
		return v
	}
}

// auditDetail says what of a request matters for the audit trail: the
// request as JSON, without what is said elsewhere or is too long to be
// useful (a prompt's text is cut by PrepareAudit).
var auditJSON = protojson.MarshalOptions{EmitUnpopulated: false}

// audit writes a call to the audit trail; a failure to write it is
// logged, and the call's answer stands.
func (s *Service) audit(ctx context.Context, id *Identity, proc string, req, res any, callErr error, info *callInfo) {
	db := s.Store
	if db == nil {
		return
	}
	e := &store.AuditEntry{User: id.User, Token: id.Token, ClientKind: id.ClientKind, Remote: id.Remote,
		Action: proc[strings.LastIndexByte(proc, '/')+1:], SessionID: info.sessionID, Outcome: "ok"}
	if m, ok := req.(proto.Message); ok {
		if b, err := auditJSON.Marshal(m); err == nil {
			e.Detail = string(b)
		}
	}
	if c, ok := req.(interface{ GetClient() string }); ok {
		e.ClientHint = c.GetClient()
	}
	switch r := res.(type) {
	case *v1.CreateSessionResponse:
		e.SessionID = r.GetSession().GetId()
	case *v1.ForkSessionResponse:
		e.SessionID = r.GetSession().GetId() // the new session; the detail names the one forked
	case *v1.DecideResponse:
		e.Detail = fmt.Sprintf("%s %s by %s: %s", behaviorWord(r.GetDecision().GetBehavior()), r.GetDecision().GetToolName(),
			r.GetDecision().GetDecidedBy(), e.Detail)
	}
	if callErr != nil {
		e.Outcome = connect.CodeOf(callErr).String()
	}
	if err := db.AddAudit(context.WithoutCancel(ctx), e); err != nil {
		s.logger().Warn("writing the audit trail failed", "action", e.Action, "user", e.User, "token", e.Token, "err", err)
	}
}

func (s *Service) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// behaviorWord is BEHAVIOR_ALLOW as "allow".
func behaviorWord(b v1.Behavior) string {
	return strings.ToLower(strings.TrimPrefix(b.String(), "BEHAVIOR_"))
}
