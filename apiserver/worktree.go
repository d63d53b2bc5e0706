package apiserver

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/internal/worktree"
	"github.com/claudectl/claudectl/store"
)

// GetChanges implements SessionService.
func (s *Service) GetChanges(ctx context.Context, req *connect.Request[v1.GetChangesRequest]) (*connect.Response[v1.GetChangesResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	c, sess, err := s.D.Changes(ctx, req.Msg.SessionId)
	if err != nil {
		return nil, toConnect(err)
	}
	out := &v1.GetChangesResponse{Worktree: worktreeToProto(sess.Worktree), Diff: c.Diff, Truncated: c.Truncated}
	for _, f := range c.Files {
		out.Files = append(out.Files, &v1.FileChange{Path: f.Path, Status: f.Status, OldPath: f.OldPath,
			Additions: f.Additions, Deletions: f.Deletions, Binary: f.Binary})
	}
	return connect.NewResponse(out), nil
}

// MergeChanges implements SessionService.
func (s *Service) MergeChanges(ctx context.Context, req *connect.Request[v1.MergeChangesRequest]) (*connect.Response[v1.MergeChangesResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	if err := clientName(req.Msg.Client); err != nil {
		return nil, err
	}
	m, err := s.D.MergeChanges(ctx, req.Msg.SessionId, req.Msg.Client)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.MergeChangesResponse{BaseBranch: m.BaseBranch, Commit: m.Commit, Files: m.Files}), nil
}

// DiscardWorktree implements SessionService.
func (s *Service) DiscardWorktree(ctx context.Context, req *connect.Request[v1.DiscardWorktreeRequest]) (*connect.Response[v1.DiscardWorktreeResponse], error) {
	if err := required("session_id", req.Msg.SessionId); err != nil {
		return nil, err
	}
	if err := clientName(req.Msg.Client); err != nil {
		return nil, err
	}
	if err := s.D.DiscardWorktree(ctx, req.Msg.SessionId, req.Msg.Client); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.DiscardWorktreeResponse{}), nil
}

// worktreeToProto maps a session's worktree; nil for none.
func worktreeToProto(w store.Worktree) *v1.Worktree {
	if w.Path == "" {
		return nil
	}
	return &v1.Worktree{Path: w.Path, Branch: w.Branch, BaseBranch: w.BaseBranch, BaseCommit: w.BaseCommit,
		Repository: w.Repo, Discarded: w.Discarded}
}

// worktreeCode is the code of a worktree's failure: the person's to fix
// (a conflict, a dirty base, git missing), or the daemon's.
func worktreeCode(err error) (connect.Code, bool) {
	var we *worktree.Error
	if !errors.As(err, &we) {
		return 0, false
	}
	if we.Kind == worktree.ErrGitFailed {
		return connect.CodeInternal, true
	}
	return connect.CodeFailedPrecondition, true
}
