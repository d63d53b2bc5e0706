package apiserver

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// GetChanges implements SessionService.
func (s *Service) GetChanges(ctx context.Context, req *connect.Request[v1.GetChangesRequest]) (*connect.Response[v1.GetChangesResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("worktrees: not yet"))
}

// MergeChanges implements SessionService.
func (s *Service) MergeChanges(ctx context.Context, req *connect.Request[v1.MergeChangesRequest]) (*connect.Response[v1.MergeChangesResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("worktrees: not yet"))
}

// DiscardWorktree implements SessionService.
func (s *Service) DiscardWorktree(ctx context.Context, req *connect.Request[v1.DiscardWorktreeRequest]) (*connect.Response[v1.DiscardWorktreeResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("worktrees: not yet"))
}
