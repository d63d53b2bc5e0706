// Package api serves a daemon.Daemon over the claudectl.v1 API with
// connect-go: one handler speaks gRPC, gRPC-Web and Connect, with server
// reflection. NewHandler builds it; Server in server.go puts it on a port.
package apiserver

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"connectrpc.com/grpcreflect"

	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/notify"
	"github.com/claudectl/claudectl/store"
)

// Version is claudectl's version as HealthDetails reports it (BuildVersion).
var Version = BuildVersion()

// Service implements the five services on a daemon.
type Service struct {
	D *daemon.Daemon
	// VersionOf asks the CLI's version; nil means claude.VersionOf.
	VersionOf func(ctx context.Context, path string) (claude.Version, error)
	// Page, if set, serves the web page at / (web.Handler): its files need
	// no token (see requireToken), the API it calls does.
	Page http.Handler
	// StoreLocation says where the daemon's store is, for HealthDetails
	// ("sqlite PATH", "postgres HOST:PORT/DATABASE"; never credentials).
	StoreLocation string
	// MaxStreams bounds the streams (subscriptions, watches) served at
	// once; one more is refused with ResourceExhausted. Zero means
	// DefaultMaxStreams.
	MaxStreams int
	// StreamWriteTimeout is how long a client may accept nothing of an
	// answer under way before its stream is ended (stall.go); zero means
	// DefaultStreamWriteTimeout, negative never.
	StreamWriteTimeout time.Duration
	// StreamUnsentBytes is the largest message a stream keeps waiting
	// for a client that stopped reading longer than a few seconds; zero
	// means DefaultStreamUnsentBytes.
	StreamUnsentBytes int
	// Logger receives the streams ended for their stalled clients; nil
	// means slog.Default().
	Logger *slog.Logger
	// Auth verifies tokens (the server's, see ServerOptions.Auth); the
	// token methods reload it after a change. Nil: the AuthService's
	// token methods answer FailedPrecondition.
	Auth *Auth
	// Store keeps the tokens and the audit trail; nil keeps no audit.
	Store store.Store
	// OIDC, if set, serves the page's sign-in at /auth/.
	OIDC *OIDC
	// Metrics, if set, is served at MetricsPath (a MetricsHandler).
	Metrics http.Handler
	// Admin, if set, serves the operator's endpoints under AdminPath
	// (backup, prune, reload): behind the token as the API is.
	Admin http.Handler

	limit  *streamLimit // set by NewHandler; SetStreamLimits changes them
	stalls *stallLimits
	// Notify, if set, keeps people's devices and answers their
	// notifications' actions (PushActPath); nil: NotifyService answers
	// FailedPrecondition.
	Notify *notify.Notifier
}

var (
	_ claudectlv1connect.SessionServiceHandler    = (*Service)(nil)
	_ claudectlv1connect.PermissionServiceHandler = (*Service)(nil)
	_ claudectlv1connect.HealthServiceHandler     = (*Service)(nil)
	_ claudectlv1connect.WorkerServiceHandler     = (*Service)(nil)
	_ claudectlv1connect.AuthServiceHandler       = (*Service)(nil)
	_ claudectlv1connect.BudgetServiceHandler     = (*Service)(nil)
	_ claudectlv1connect.NotifyServiceHandler     = (*Service)(nil)
	_ claudectlv1connect.TerminalServiceHandler   = (*Service)(nil)
)

// MaxRequestBytes bounds one request message (a prompt, a decision), as
// gRPC's default does: a larger one is refused with ResourceExhausted
// before it is read whole.
const MaxRequestBytes = 4 << 20

// DefaultMaxStreams is how many streams the API serves at once unless
// Service.MaxStreams says otherwise. An open stream costs the daemon about
// 50 KB (its goroutine, its buffers, HTTP/2's), and every event of a
// session is sent to each of its subscribers: a client that opens streams
// in a loop meets this bound instead of the machine's memory.
const DefaultMaxStreams = 4096

// streamLimit refuses a stream past max open ones.
type streamLimit struct {
	open atomic.Int64
	max  atomic.Int64
}

func (l *streamLimit) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }

func (l *streamLimit) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (l *streamLimit) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if m := l.max.Load(); l.open.Add(1) > m {
			l.open.Add(-1)
			return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
				"the daemon serves at most %d streams at once (subscriptions and watches) and that many are open: "+
					"close some (pages left open, attached clients) or raise daemon.max_streams in its settings", m))
		}
		defer l.open.Add(-1)
		return next(ctx, conn)
	}
}

// NewHandler returns the handler of every service and of server reflection.
func NewHandler(s *Service) http.Handler {
	mux := http.NewServeMux()
	limit := &streamLimit{}
	s.limit = limit
	opts := connect.WithHandlerOptions(connect.WithReadMaxBytes(MaxRequestBytes), limitedGzip(MaxRequestBytes), jsonCodecs(),
		connect.WithInterceptors(clientWords{}, authorizer{s}, limit))
	mux.Handle(claudectlv1connect.NewSessionServiceHandler(s, opts))
	mux.Handle(claudectlv1connect.NewPermissionServiceHandler(s, opts))
	mux.Handle(claudectlv1connect.NewHealthServiceHandler(s, opts))
	mux.Handle(claudectlv1connect.NewWorkerServiceHandler(s, opts))
	mux.Handle(claudectlv1connect.NewAuthServiceHandler(s, opts))
	mux.Handle(claudectlv1connect.NewBudgetServiceHandler(s, opts))
	mux.Handle(claudectlv1connect.NewNotifyServiceHandler(s, opts))
	mux.Handle(claudectlv1connect.NewTerminalServiceHandler(s, opts))
	mux.HandleFunc(PushActPath, s.pushAct)
	r := grpcreflect.NewStaticReflector(
		claudectlv1connect.SessionServiceName,
		claudectlv1connect.PermissionServiceName,
		claudectlv1connect.HealthServiceName,
		claudectlv1connect.WorkerServiceName,
		claudectlv1connect.AuthServiceName,
		claudectlv1connect.BudgetServiceName,
		claudectlv1connect.NotifyServiceName,
		claudectlv1connect.TerminalServiceName,
	)
	// Reflection is behind the same authorizer: a worker's token may not
	// read the API's schema.
	reflectOpts := connect.WithInterceptors(clientWords{}, authorizer{s})
	mux.Handle(grpcreflect.NewHandlerV1(r, reflectOpts))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(r, reflectOpts))
	if w := s.D.Workers(); w != nil {
		mux.Handle(WorkerPath, w)
	}
	if s.OIDC != nil {
		mux.Handle("/auth/", s.OIDC)
	}
	if s.Metrics != nil {
		mux.Handle(MetricsPath, s.Metrics)
	}
	if s.Admin != nil {
		mux.Handle(AdminPath, s.Admin)
	}
	if s.Page != nil {
		mux.Handle("/", s.Page)
	}
	stalls := &stallLimits{log: s.Logger}
	if stalls.log == nil {
		stalls.log = slog.Default()
	}
	s.stalls = stalls
	s.SetStreamLimits(s.MaxStreams, s.StreamWriteTimeout, s.StreamUnsentBytes)
	return limitBodies(watchStalls(mux, stalls)) // limits.go, stall.go
}

// SetStreamLimits changes MaxStreams, StreamWriteTimeout and
// StreamUnsentBytes (zero: their defaults) of the handler NewHandler made
// of s, while it serves (a reload of the settings): a lower MaxStreams
// ends no stream open, it refuses new ones until enough have ended; the
// timeouts apply from each stream's next write.
func (s *Service) SetStreamLimits(maxStreams int, writeTimeout time.Duration, unsentBytes int) {
	if s.limit == nil {
		panic("apiserver: SetStreamLimits before NewHandler")
	}
	s.limit.max.Store(int64(cmp.Or(max(maxStreams, 0), DefaultMaxStreams)))
	s.stalls.timeout.Store(int64(cmp.Or(writeTimeout, DefaultStreamWriteTimeout)))
	s.stalls.unsent.Store(int64(cmp.Or(max(unsentBytes, 0), DefaultStreamUnsentBytes)))
}

// WorkerPath is where remote workers connect ("claudectl worker --connect
// ws://HOST:PORT/v1/worker"). The worker listener checks its own token, so
// this path is exempt from the API token.
const WorkerPath = "/v1/worker"
