package apiserver

import (
	"context"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/store"
)

// GetBudget implements BudgetService.
func (s *Service) GetBudget(ctx context.Context, req *connect.Request[v1.GetBudgetRequest]) (*connect.Response[v1.GetBudgetResponse], error) {
	caps, holds, dayStart, err := s.D.BudgetCaps(ctx)
	if err != nil {
		return nil, toConnect(err)
	}
	out := &v1.GetBudgetResponse{}
	if !dayStart.IsZero() {
		out.DayStart = timestamppb.New(dayStart)
	}
	// A scoped token sees the caps of its sessions and of their
	// directories, and their holds; not the daemon's, nor others'.
	id, sees := IdentityOf(ctx), s.visible(ctx)
	for _, c := range caps {
		if sees != nil && !(c.Cap == store.CapSession && sees(c.Scope) || c.Cap == store.CapDirectory && len(id.Dirs) > 0 && id.InDirs(c.Scope)) {
			continue
		}
		out.Caps = append(out.Caps, budgetCapToProto(c))
	}
	for _, h := range budgetHoldsToProto(holds) {
		if sees == nil || sees(h.SessionId) {
			out.Holds = append(out.Holds, h)
		}
	}
	return connect.NewResponse(out), nil
}

// RaiseBudget implements BudgetService.
func (s *Service) RaiseBudget(ctx context.Context, req *connect.Request[v1.RaiseBudgetRequest]) (*connect.Response[v1.RaiseBudgetResponse], error) {
	m := req.Msg
	if err := required("session_id", m.SessionId); err != nil {
		return nil, err
	}
	if err := clientName(m.Client); err != nil {
		return nil, err
	}
	if m.OneTurn && m.LimitUsd != 0 {
		return nil, invalid("limit_usd", "", "give limit_usd or one_turn, not both")
	}
	c, released, err := s.D.RaiseBudget(ctx, m.SessionId, m.LimitUsd, m.OneTurn, m.Client)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.RaiseBudgetResponse{Cap: budgetCapToProto(c), Released: released}), nil
}

func budgetCapToProto(c daemon.BudgetCap) *v1.BudgetCap {
	return &v1.BudgetCap{Cap: c.Cap, Scope: c.Scope, SpentUsd: c.SpentUSD, LimitUsd: c.LimitUSD, Raised: c.Raised}
}

func budgetHoldsToProto(holds []daemon.BudgetHold) []*v1.BudgetHold {
	var out []*v1.BudgetHold
	for _, h := range holds {
		out = append(out, &v1.BudgetHold{SessionId: h.SessionID, Cap: budgetCapToProto(h.Cap), Detail: h.Detail,
			QueuedPrompts: int32(min(h.Queued, 1<<31-1)), Since: timestamppb.New(h.Since)})
	}
	return out
}
