package apiserver

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/store"
)

// Health implements HealthService.
func (s *Service) Health(context.Context, *connect.Request[v1.HealthRequest]) (*connect.Response[v1.HealthResponse], error) {
	return connect.NewResponse(&v1.HealthResponse{Ok: true}), nil
}

var levelToProto = map[claude.Compatibility]v1.CompatibilityLevel{
	claude.FullyCompatible:  v1.CompatibilityLevel_COMPATIBILITY_LEVEL_FULLY_COMPATIBLE,
	claude.LikelyCompatible: v1.CompatibilityLevel_COMPATIBILITY_LEVEL_LIKELY_COMPATIBLE,
	claude.Degraded:         v1.CompatibilityLevel_COMPATIBILITY_LEVEL_DEGRADED,
	claude.Incompatible:     v1.CompatibilityLevel_COMPATIBILITY_LEVEL_INCOMPATIBLE,
}

// HealthDetails implements HealthService.
func (s *Service) HealthDetails(ctx context.Context, _ *connect.Request[v1.HealthDetailsRequest]) (*connect.Response[v1.HealthDetailsResponse], error) {
	all, err := s.D.Sessions(ctx, store.SessionFilter{})
	if err != nil {
		return nil, toConnect(err)
	}
	out := &v1.HealthDetailsResponse{Ok: true, Version: Version, StartedAt: timestamppb.New(s.D.Started()),
		Sessions: int32(len(all)), RunningSessions: int32(s.D.Running()),
		PendingPermissions: int32(len(s.D.Pending("")))}
	out.ClaudeCode = s.claudeStatus(ctx)
	return connect.NewResponse(out), nil
}

func (s *Service) claudeStatus(ctx context.Context) *v1.ClaudeCodeStatus {
	path := s.D.CLIPath()
	if path == "" {
		p, err := claude.FindBinary(nil)
		if err != nil {
			return &v1.ClaudeCodeStatus{Message: err.Error()}
		}
		path = p
	}
	versionOf := s.VersionOf
	if versionOf == nil {
		versionOf = claude.VersionOf
	}
	v, err := versionOf(ctx, path)
	if err != nil {
		var ve *claude.VersionError
		msg := err.Error()
		if errors.As(err, &ve) {
			msg = ve.Error()
		}
		return &v1.ClaudeCodeStatus{Path: path, Message: msg}
	}
	rep := claude.CheckCompatibility(v)
	return &v1.ClaudeCodeStatus{Version: v.String(), ApiVersion: v.APIVersion, Level: levelToProto[rep.Level],
		Message: rep.Message, Path: path}
}
