package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/store"
)

// Health implements HealthService.
// Health is not ok while the store cannot write.
func (s *Service) Health(context.Context, *connect.Request[v1.HealthRequest]) (*connect.Response[v1.HealthResponse], error) {
	h, _ := s.D.StoreHealth()
	return connect.NewResponse(&v1.HealthResponse{Ok: h.Err == nil}), nil
}

// storeStatus says whether the store writes.
func (s *Service) storeStatus() *v1.StoreStatus {
	h, _ := s.D.StoreHealth()
	name, ttl := s.D.Lease()
	out := &v1.StoreStatus{Ok: h.Err == nil, Location: s.StoreLocation, DaemonName: name, LeaseTtlMs: ttl.Milliseconds()}
	if h.Err != nil {
		out.Error = h.Err.Error()
		out.FailingSince = timestamppb.New(h.Since)
	}
	if !h.LastOK.IsZero() {
		out.LastOk = timestamppb.New(h.LastOK)
	}
	return out
}

var levelToProto = map[claude.Compatibility]v1.CompatibilityLevel{
	claude.CompatibilityUnknown: v1.CompatibilityLevel_COMPATIBILITY_LEVEL_UNSPECIFIED,
	claude.FullyCompatible:      v1.CompatibilityLevel_COMPATIBILITY_LEVEL_FULLY_COMPATIBLE,
	claude.LikelyCompatible:     v1.CompatibilityLevel_COMPATIBILITY_LEVEL_LIKELY_COMPATIBLE,
	claude.Degraded:             v1.CompatibilityLevel_COMPATIBILITY_LEVEL_DEGRADED,
	claude.Incompatible:         v1.CompatibilityLevel_COMPATIBILITY_LEVEL_INCOMPATIBLE,
}

var protoToLevel = func() map[v1.CompatibilityLevel]claude.Compatibility {
	m := make(map[v1.CompatibilityLevel]claude.Compatibility, len(levelToProto))
	for k, v := range levelToProto {
		m[v] = k
	}
	return m
}()

// HealthDetails implements HealthService. It answers in an outage too,
// which is when it is asked: a store that cannot be read (its server is
// down, say) makes store.ok false with the reason and what could not be
// read, and the rest (the daemon's own state) is reported as usual.
func (s *Service) HealthDetails(ctx context.Context, _ *connect.Request[v1.HealthDetailsRequest]) (*connect.Response[v1.HealthDetailsResponse], error) {
	st := s.storeStatus()
	out := &v1.HealthDetailsResponse{Store: st, Version: Version, StartedAt: timestamppb.New(s.D.Started()),
		RunningSessions:    int32(s.D.Running()),
		PendingPermissions: int32(len(s.D.Pending(""))), QueuedSessions: int32(s.D.Queued()),
		MaxRunning: int32(s.D.MaxRunning()), Workers: workersToProto(s.D.ListWorkers())}
	all, err := s.D.Sessions(ctx, store.SessionFilter{})
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, toConnect(err)
	case err != nil:
		st.Ok = false
		st.ReadError = readFailure(err)
		st.Unread = append(st.Unread, "sessions")
	}
	out.Ok = st.Ok
	out.Sessions = int32(len(all))
	for _, sess := range all {
		if sess.Status == store.StatusSuspended {
			out.SuspendedSessions++
		}
	}
	out.ClaudeCode = s.claudeStatus(ctx)
	return connect.NewResponse(out), nil
}

// readFailure says why the store could not be read, in a client's words:
// the store's reason (it wraps store.ErrReadFailed when the disk, the file
// or the server caused it), without the layers it came through.
func readFailure(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if msg := e.Error(); strings.HasPrefix(msg, store.ErrReadFailed.Error()) || strings.HasPrefix(msg, store.ErrWriteFailed.Error()) {
			return msg
		}
	}
	return ClientMessage(err.Error())
}

// claudeStatus judges the Claude Code the daemon runs: the local CLI's
// version in the matrix, and every version its sessions ran with what they
// printed (daemon.Compatibility). The level is the worst of the local
// version and the versions a live session runs.
func (s *Service) claudeStatus(ctx context.Context) *v1.ClaudeCodeStatus {
	out := s.localStatus(ctx)
	local := out.Version
	compat := s.D.Compatibility()
	overall := protoToLevel[out.Level]
	for _, vc := range compat.Versions {
		counted := vc.LiveSessions > 0 || (local != "" && vc.Version == local)
		out.Versions = append(out.Versions, &v1.ClaudeCodeVersion{Version: vc.Version, Level: levelToProto[vc.Level],
			MatrixLevel: levelToProto[vc.Matrix.Level], Message: vc.Matrix.Message, Local: vc.Local, Worker: vc.Worker,
			LiveSessions: int32(vc.LiveSessions), Counted: counted})
		if !counted {
			continue
		}
		overall = daemon.WorstLevel(overall, vc.Level)
		for _, r := range vc.Reasons {
			out.Reasons = append(out.Reasons, reasonToProto(vc.Version, r))
		}
	}
	for _, sc := range compat.Sessions {
		out.DegradedSessions = append(out.DegradedSessions, &v1.DegradedSession{SessionId: sc.SessionID,
			ClaudeCodeVersion: sc.Version, Level: levelToProto[sc.Level], Missing: sc.Missing})
	}
	slices.SortStableFunc(out.Reasons, func(a, b *v1.CompatibilityReason) int {
		return cmp.Compare(levelRank(b.Level), levelRank(a.Level))
	})
	if overall != protoToLevel[out.Level] {
		out.Level = levelToProto[overall]
		out.Message = fmt.Sprintf("%s; the sessions' CLIs show it %s: %s", strings.TrimSuffix(out.Message, "."),
			overall, reasonSummary(out.Reasons))
	}
	return out
}

// reasonSummary is the worst reasons in a few words.
func reasonSummary(rs []*v1.CompatibilityReason) string {
	var parts []string
	for i, r := range rs {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(rs)-3))
			break
		}
		parts = append(parts, r.Message)
	}
	return strings.Join(parts, "; ")
}

func levelRank(l v1.CompatibilityLevel) int {
	switch l {
	case v1.CompatibilityLevel_COMPATIBILITY_LEVEL_FULLY_COMPATIBLE:
		return 1
	case v1.CompatibilityLevel_COMPATIBILITY_LEVEL_LIKELY_COMPATIBLE:
		return 2
	case v1.CompatibilityLevel_COMPATIBILITY_LEVEL_UNSPECIFIED:
		return 3
	case v1.CompatibilityLevel_COMPATIBILITY_LEVEL_DEGRADED:
		return 4
	}
	return 5
}

// localStatus is the local CLI's version in the compatibility matrix.
func (s *Service) localStatus(ctx context.Context) *v1.ClaudeCodeStatus {
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
