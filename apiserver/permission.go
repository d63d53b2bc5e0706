package apiserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// ListPending implements PermissionService.
func (s *Service) ListPending(ctx context.Context, req *connect.Request[v1.ListPendingRequest]) (*connect.Response[v1.ListPendingResponse], error) {
	if err := s.knownSession(ctx, req.Msg.SessionId); err != nil {
		return nil, err
	}
	out := &v1.ListPendingResponse{}
	sees := s.visible(ctx)
	for _, p := range s.D.Pending(req.Msg.SessionId) {
		if sees != nil && !sees(p.SessionID) {
			continue
		}
		out.Requests = append(out.Requests, pendingToProto(p, s.D.AlwaysOf(ctx, p)))
	}
	// The sessions held at a spend cap wait for an approver too.
	_, holds, _, err := s.D.BudgetCaps(ctx)
	if err != nil {
		return nil, toConnect(err)
	}
	for _, h := range budgetHoldsToProto(holds) {
		if (req.Msg.SessionId == "" || h.SessionId == req.Msg.SessionId) && (sees == nil || sees(h.SessionId)) {
			out.BudgetHolds = append(out.BudgetHolds, h)
		}
	}
	return connect.NewResponse(out), nil
}

// Decide implements PermissionService.
func (s *Service) Decide(ctx context.Context, req *connect.Request[v1.DecideRequest]) (*connect.Response[v1.DecideResponse], error) {
	m := req.Msg
	if err := required("request_id", m.RequestId); err != nil {
		return nil, err
	}
	var allow bool
	switch m.Behavior {
	case v1.Behavior_BEHAVIOR_ALLOW:
		allow = true
	case v1.Behavior_BEHAVIOR_DENY:
	default:
		return nil, invalid("behavior", m.Behavior.String(), "must be allow or deny")
	}
	if err := clientName(m.Client); err != nil {
		return nil, err
	}
	if m.Always && !allow {
		return nil, invalid("always", "true", "only an allow can be always")
	}
	d, _, err := s.D.Decide(ctx, daemon.Decision{RequestID: m.RequestId, Allow: allow, Message: m.Message,
		Always: m.Always, Answers: m.Answers, Client: who(ctx, m.Client)})
	if errors.Is(err, permission.ErrNotPending) { // the broker's error quotes the id whole
		return nil, notFound("no such pending request %q (claudectl pending lists them)", clip(m.RequestId))
	}
	if more := (*permission.ApprovalsNeededError)(nil); errors.As(err, &more) && d != nil {
		// Counted: the request waits for another person's allow.
		return connect.NewResponse(&v1.DecideResponse{Decision: decisionToProto(d), AwaitingApprovals: true,
			ApprovalsNeeded: int32(more.Need)}), nil
	}
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.DecideResponse{Decision: decisionToProto(d)}), nil
}

// ListRules implements PermissionService.
func (s *Service) ListRules(ctx context.Context, _ *connect.Request[v1.ListRulesRequest]) (*connect.Response[v1.ListRulesResponse], error) {
	rules, err := s.D.Rules(ctx)
	if err != nil {
		return nil, toConnect(err)
	}
	out := &v1.ListRulesResponse{}
	sees, id := s.visible(ctx), IdentityOf(ctx)
	for _, r := range rules {
		if sees != nil && !ruleSeen(id, sees, r) {
			continue
		}
		out.Rules = append(out.Rules, ruleToProto(r))
	}
	return connect.NewResponse(out), nil
}

// AddRule implements PermissionService.
func (s *Service) AddRule(ctx context.Context, req *connect.Request[v1.AddRuleRequest]) (*connect.Response[v1.AddRuleResponse], error) {
	pr := req.Msg.GetRule()
	if pr == nil {
		return nil, invalid("rule", "", "required")
	}
	if err := required("rule.pattern", pr.Pattern); err != nil {
		return nil, err
	}
	b, err := behaviorFromProto(pr.Behavior)
	if err != nil {
		return nil, err
	}
	r := &store.Rule{Spec: pr.Pattern, Behavior: b, CreatedBy: "client"}
	// Each scope is checked for a value that can match: a rule the client
	// is told was added must be one that can settle a request.
	switch v := pr.ScopeValue; pr.Scope {
	case v1.RuleScope_RULE_SCOPE_UNSPECIFIED, v1.RuleScope_RULE_SCOPE_GLOBAL:
		if v != "" { // dropping it would make global a rule meant for one place
			return nil, invalid("rule.scope_value", v, "must be empty for a global rule (set rule.scope to project or session to scope the rule)")
		}
	case v1.RuleScope_RULE_SCOPE_PROJECT:
		// Sessions' directories are absolute (options.cwd must be): a
		// relative one would match none of them.
		if v == "" || !filepath.IsAbs(v) {
			return nil, invalid("rule.scope_value", v, "must be an absolute directory path for a project rule")
		}
		r.ProjectDir = filepath.Clean(v)
	case v1.RuleScope_RULE_SCOPE_SESSION:
		if v == "" {
			return nil, invalid("rule.scope_value", v, "must be a session id for a session rule (claudectl sessions lists them)")
		}
		r.SessionID = v
	default:
		return nil, invalid("rule.scope", pr.Scope.String(), "unknown scope")
	}
	if err := s.D.AddRule(ctx, r); err != nil {
		if r.SessionID != "" && errors.Is(err, store.ErrNotFound) { // the one thing a rule refers to
			return nil, notFound("no session %q (claudectl sessions lists them)", clip(r.SessionID))
		}
		if le := (*store.LimitError)(nil); errors.As(err, &le) {
			return nil, connect.NewError(connect.CodeResourceExhausted,
				fmt.Errorf("%v (claudectl rules list shows them, claudectl rules rm ID removes one)", le))
		}
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.AddRuleResponse{Rule: ruleToProto(r)}), nil
}

// RemoveRule implements PermissionService.
func (s *Service) RemoveRule(ctx context.Context, req *connect.Request[v1.RemoveRuleRequest]) (*connect.Response[v1.RemoveRuleResponse], error) {
	id, err := parseRuleID("rule_id", req.Msg.RuleId)
	if err != nil {
		return nil, err
	}
	if err := s.D.RemoveRule(ctx, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, notFound("no rule with id %d (claudectl rules list shows the rules)", id)
		}
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.RemoveRuleResponse{}), nil
}

// ListDecisions implements PermissionService.
func (s *Service) ListDecisions(ctx context.Context, req *connect.Request[v1.ListDecisionsRequest]) (*connect.Response[v1.ListDecisionsResponse], error) {
	if req.Msg.Limit < 0 {
		return nil, invalid("limit", strconv.Itoa(int(req.Msg.Limit)), "must not be negative")
	}
	if err := s.knownSession(ctx, req.Msg.SessionId); err != nil {
		return nil, err
	}
	ds, err := s.D.Decisions(ctx, store.DecisionFilter{SessionID: req.Msg.SessionId, Limit: int(req.Msg.Limit)})
	if err != nil {
		return nil, toConnect(err)
	}
	out := &v1.ListDecisionsResponse{}
	sees := s.visible(ctx)
	for _, d := range ds {
		if sees != nil && !sees(d.SessionID) {
			continue
		}
		pd := decisionToProto(d)
		pd.Target = decisionTarget(d.Input)
		out.Decisions = append(out.Decisions, pd)
	}
	return connect.NewResponse(out), nil
}

// WatchPending implements PermissionService.
func (s *Service) WatchPending(ctx context.Context, req *connect.Request[v1.WatchPendingRequest], stream *connect.ServerStream[v1.WatchPendingResponse]) error {
	if err := s.knownSession(ctx, req.Msg.SessionId); err != nil {
		return err
	}
	sees := s.visible(ctx)
	for ch, err := range s.D.WatchPending(ctx, req.Msg.SessionId) {
		if err != nil {
			return toConnect(err)
		}
		out := &v1.WatchPendingResponse{Snapshot: ch.Snapshot}
		for _, p := range ch.Pending {
			if sees == nil || sees(p.SessionID) {
				out.Requests = append(out.Requests, pendingToProto(p, s.D.AlwaysOf(ctx, p)))
			}
		}
		if st := ch.Settled; st != nil && (sees == nil || sees(st.SessionID)) {
			out.Settled = &v1.SettledRequest{RequestId: st.RequestID, SessionId: st.SessionID, Outcome: st.Outcome,
				By: st.By, At: timestamppb.New(st.At)}
		}
		if !ch.Snapshot && len(out.Requests) == 0 && out.Settled == nil {
			continue // nothing this token sees
		}
		if err := stream.Send(out); err != nil {
			return stalledOr(ctx, err)
		}
	}
	return nil
}

// ruleSeen reports whether a scoped token sees a rule: a global one, a
// project one whose directory and the token's overlap, a session one of
// a session it sees.
func ruleSeen(id *Identity, sees func(string) bool, r *store.Rule) bool {
	switch {
	case r.SessionID != "":
		return sees(r.SessionID)
	case r.ProjectDir != "":
		if id.SessionID != "" {
			return false
		}
		for _, d := range id.Dirs {
			if Within(d, r.ProjectDir) || Within(r.ProjectDir, d) {
				return true
			}
		}
		return false
	}
	return true
}

// knownSession checks the session a request filters on, if any: a typo
// would list or watch nothing, silently. An unknown id is NotFound, in the
// words of Subscribe's.
func (s *Service) knownSession(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	if _, err := s.D.Session(ctx, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return notFound("no session %q (claudectl sessions lists them)", clip(id))
		}
		return toConnect(err)
	}
	return nil
}
