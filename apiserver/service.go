// Package api serves a daemon.Daemon over the claudectl.v1 API with
// connect-go: one handler speaks gRPC, gRPC-Web and Connect, with server
// reflection. NewHandler builds it; Server in server.go puts it on a port.
package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// Version is claudectl's version as HealthDetails reports it.
var Version = "dev"

// Service implements the three services on a daemon.
type Service struct {
	D *daemon.Daemon
	// VersionOf asks the CLI's version; nil means claude.VersionOf.
	VersionOf func(ctx context.Context, path string) (claude.Version, error)
}

var (
	_ claudectlv1connect.SessionServiceHandler    = (*Service)(nil)
	_ claudectlv1connect.PermissionServiceHandler = (*Service)(nil)
	_ claudectlv1connect.HealthServiceHandler     = (*Service)(nil)
)

// NewHandler returns the handler of every service and of server reflection.
func NewHandler(s *Service) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(claudectlv1connect.NewSessionServiceHandler(s))
	mux.Handle(claudectlv1connect.NewPermissionServiceHandler(s))
	mux.Handle(claudectlv1connect.NewHealthServiceHandler(s))
	r := grpcreflect.NewStaticReflector(
		claudectlv1connect.SessionServiceName,
		claudectlv1connect.PermissionServiceName,
		claudectlv1connect.HealthServiceName,
	)
	mux.Handle(grpcreflect.NewHandlerV1(r))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(r))
	if w := s.D.Workers(); w != nil {
		mux.Handle(WorkerPath, w)
	}
	return mux
}

// WorkerPath is where remote workers connect ("claudectl worker --connect
// ws://HOST:PORT/v1/worker"). The worker listener checks its own token, so
// this path is exempt from the API token.
const WorkerPath = "/v1/worker"

// toConnect maps daemon, store and permission errors to connect codes.
func toConnect(err error) error {
	if err == nil {
		return nil
	}
	var ia *daemon.InvalidArgumentError
	var re *permission.ResolvedError
	switch {
	case errors.As(err, &ia):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.As(err, &re):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, store.ErrNotFound), errors.Is(err, permission.ErrNotPending):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, store.ErrInvalid), errors.Is(err, permission.ErrInvalidDecision), errors.Is(err, permission.ErrSyntax):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, store.ErrUnavailable):
		return connect.NewError(connect.CodeOutOfRange, err)
	case errors.Is(err, daemon.ErrNotRunning), errors.Is(err, daemon.ErrAlreadyRunning), errors.Is(err, claude.ErrClosed):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, daemon.ErrSlowSubscriber):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, daemon.ErrClosed), errors.Is(err, store.ErrClosed), errors.Is(err, permission.ErrBrokerClosed):
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	var ce *claude.ControlError
	if errors.As(err, &ce) {
		return connect.NewError(connect.CodeFailedPrecondition, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

func invalid(field, value, reason string) error {
	return toConnect(&daemon.InvalidArgumentError{Field: field, Value: value, Reason: reason})
}

func required(field, value string) error {
	if value == "" {
		return invalid(field, value, "required")
	}
	return nil
}

var statusToProto = map[store.SessionStatus]v1.SessionStatus{
	store.StatusStarting:    v1.SessionStatus_SESSION_STATUS_STARTING,
	store.StatusRunning:     v1.SessionStatus_SESSION_STATUS_RUNNING,
	store.StatusIdle:        v1.SessionStatus_SESSION_STATUS_IDLE,
	store.StatusInterrupted: v1.SessionStatus_SESSION_STATUS_INTERRUPTED,
	store.StatusClosed:      v1.SessionStatus_SESSION_STATUS_CLOSED,
	store.StatusFailed:      v1.SessionStatus_SESSION_STATUS_FAILED,
	store.StatusWaiting:     v1.SessionStatus_SESSION_STATUS_WAITING,
}

func sessionToProto(s *store.Session) *v1.Session {
	worker := s.Worker
	if worker == "" {
		worker = "local"
	}
	return &v1.Session{
		Id: s.ID, ClaudeSessionId: s.ClaudeSessionID, Cwd: s.Cwd, Model: s.Model,
		PermissionMode: s.PermissionMode, Status: statusToProto[s.Status],
		CreatedAt: timestamppb.New(s.CreatedAt), UpdatedAt: timestamppb.New(s.UpdatedAt),
		LastSeq: s.LastSeq, BudgetUsd: s.BudgetUSD, Worker: worker, Error: s.Error, ParentId: s.ParentID,
		Totals: totalsToProto(s.Totals),
	}
}

func totalsToProto(t store.Totals) *v1.Usage {
	return &v1.Usage{CostUsd: t.CostUSD, InputTokens: t.InputTokens,
		OutputTokens: t.OutputTokens, CacheReadInputTokens: t.CacheReadTokens,
		CacheCreationInputTokens: t.CacheWriteTokens}
}

// turnUsageToProto returns a turn's usage, by model too.
func turnUsageToProto(r *store.UsageRecord) *v1.Usage {
	u := &v1.Usage{CostUsd: r.CostUSD, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
		CacheReadInputTokens: r.CacheReadTokens, CacheCreationInputTokens: r.CacheWriteTokens}
	if len(r.Models) > 0 {
		u.ByModel = make(map[string]*v1.ModelUsage, len(r.Models))
		for name, m := range r.Models {
			u.ByModel[name] = &v1.ModelUsage{CostUsd: m.CostUSD, InputTokens: m.InputTokens, OutputTokens: m.OutputTokens,
				CacheReadInputTokens: m.CacheReadTokens, CacheCreationInputTokens: m.CacheWriteTokens}
		}
	}
	return u
}

func parseRuleID(field, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, invalid(field, s, "not a rule id")
	}
	return id, nil
}

func behaviorToProto(b string) v1.Behavior {
	switch b {
	case "allow":
		return v1.Behavior_BEHAVIOR_ALLOW
	case "deny":
		return v1.Behavior_BEHAVIOR_DENY
	case "ask":
		return v1.Behavior_BEHAVIOR_ASK
	}
	return v1.Behavior_BEHAVIOR_UNSPECIFIED
}

func behaviorFromProto(b v1.Behavior) (string, error) {
	switch b {
	case v1.Behavior_BEHAVIOR_ALLOW:
		return "allow", nil
	case v1.Behavior_BEHAVIOR_DENY:
		return "deny", nil
	case v1.Behavior_BEHAVIOR_ASK:
		return "ask", nil
	}
	return "", invalid("behavior", b.String(), "must be allow, deny or ask")
}

func ruleToProto(r *store.Rule) *v1.Rule {
	p := &v1.Rule{Id: strconv.FormatInt(r.ID, 10), Pattern: r.Spec, Behavior: behaviorToProto(r.Behavior),
		CreatedAt: timestamppb.New(r.CreatedAt)}
	switch r.Scope() {
	case "session":
		p.Scope, p.ScopeValue = v1.RuleScope_RULE_SCOPE_SESSION, r.SessionID
	case "project":
		p.Scope, p.ScopeValue = v1.RuleScope_RULE_SCOPE_PROJECT, r.ProjectDir
	default:
		p.Scope = v1.RuleScope_RULE_SCOPE_GLOBAL
	}
	return p
}

func decisionToProto(d *store.Decision) *v1.Decision {
	by := d.By
	if by == "rule" {
		by = fmt.Sprintf("rule:%d", d.RuleID)
	}
	return &v1.Decision{RequestId: d.RequestID, Behavior: behaviorToProto(d.Behavior), DecidedBy: by,
		Message: d.Message, DecidedAt: timestamppb.New(d.DecidedAt), ToolName: d.ToolName, SessionId: d.SessionID}
}
