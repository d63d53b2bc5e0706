// Package daemontest runs an in-process claudectl daemon for tests: its
// sessions run the real claude CLI (claudetest.CLIPath) against a scripted
// fake of the Messages API, and its API can be served on 127.0.0.1.
package daemontest

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/internal/serve"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

// StoreEnv names the environment variable that picks the test daemons'
// store: "postgres" keeps it on a throwaway PostgreSQL server (pgtest: a
// database per daemon), anything else on SQLite in the data dir. make test
// runs the daemon's end-to-end tests on each engine.
const StoreEnv = "CLAUDECTL_TEST_STORE"

// OnPostgres reports whether StoreEnv asks for PostgreSQL.
func OnPostgres() bool { return os.Getenv(StoreEnv) == "postgres" }

// Options adjusts the daemon; a nil *Options means the defaults.
type Options struct {
	// SubscriberBuffer is daemon.Options.SubscriberBuffer (0: its default).
	SubscriberBuffer int
	// Token, if set, is required of API clients (Serve).
	Token string
	// CLIPath, if set, runs this executable instead of the real CLI (a
	// stand-in for benchmarks); the scripted model still serves it.
	CLIPath string
	// Policy is what clients may ask of a session (the sessions.* settings;
	// its Sandbox is the sessions.sandbox setting as written).
	Policy daemon.SessionPolicy
	// Transport, if set, runs local sessions' CLIs (e.g. *InProcessCLI).
	Transport claude.Transport
	// ReadBufferSize is daemon.Options.ReadBufferSize (0: its default).
	ReadBufferSize int
	// MaxPayloadBytes is the daemon.max_payload_bytes setting (0: 10 MiB,
	// -1: no limit).
	MaxPayloadBytes int
	// MaxStreams is the daemon.max_streams setting (0: its default).
	MaxStreams int
	// StreamWriteTimeout and StreamUnsentBytes are the
	// daemon.stream_write_timeout and daemon.stream_unsent_bytes settings
	// (0: their defaults).
	StreamWriteTimeout time.Duration
	StreamUnsentBytes  int
	// Broker configures the permission broker's timeouts (nil: its
	// defaults).
	Broker *permission.BrokerOptions
	// WorkerToken, if set, makes the daemon host remote workers (served
	// by Serve at apiserver.WorkerPath) that present this token.
	WorkerToken string
	// WorkersEnabled is the workers.enabled setting: remote workers may
	// present tokens of role worker.
	WorkersEnabled bool
	// MaxWorkerConnections is the workers.max_connections setting (0:
	// its default).
	MaxWorkerConnections int
	// IdleTimeout is the sessions.idle_timeout setting (0: never, unlike
	// the setting's default, so that tests do not race it).
	IdleTimeout time.Duration
	// MaxRunning is the sessions.max_running setting (0: no limit, unlike
	// the setting's default).
	MaxRunning int
	// Spares and SpareLifetime are the sessions.spare_clis and
	// sessions.spare_lifetime settings (0: no spares, unlike the
	// setting's default, so that tests count only their sessions' CLIs).
	Spares        int
	SpareLifetime time.Duration
	// StoreURL, if set, is the store.url setting: daemons given the same
	// PostgreSQL URL share one store. Unset, StoreEnv decides.
	StoreURL string
	// DaemonName is the store.daemon_name setting.
	DaemonName string
	// CLIScheduling is the sessions.cli_scheduling setting ("": its
	// default).
	CLIScheduling claude.Scheduling
	// WrapStore, if set, wraps the store the daemon writes to (DB returns
	// the store itself), to inject its failures.
	WrapStore func(store.Store) store.Store
	// Log, if set, receives the daemon's log lines of level Info and above
	// (text format); without it the daemon logs nothing.
	Log io.Writer
	// DataDir, if set, is the daemon's data directory (a small disk to
	// fill, say); unset, a temporary directory.
	DataDir string
	// Budgets are the budgets.* settings (the spend caps).
	Budgets daemon.Budgets
	// Responder, if set, answers the CLIs' requests instead of a Script of
	// the turns Start is given (a reply that depends on the prompt).
	Responder claudetest.Responder
	// CLIEnv is set over the environment the daemon gives its CLIs (the
	// scripted model's, a temporary HOME): the settings' env. An empty
	// value removes the variable (no ANTHROPIC_API_KEY: no credentials).
	CLIEnv map[string]string
	// Routes and Groups are the permissions.routes and permissions.groups
	// settings; Notify the notify.* settings.
	Routes []permission.Route
	Groups map[string][]string
	Notify serve.NotifySettings
}

// Daemon is a running test daemon. Everything it starts is stopped by the
// test's cleanup.
type Daemon struct {
	D     *daemon.Daemon
	Ctx   context.Context    // bounds the test (90 s)
	Model *claudetest.Server // the scripted Messages API the CLIs talk to

	t        testing.TB
	opts     Options
	settings serve.Settings
	srv      *serve.Server
	httpc    *http.Client
	stopped  bool // Stop ran
}

// Start starts a daemon whose sessions answer with the scripted turns.
func Start(t testing.TB, opts *Options, turns ...claudetest.Turn) *Daemon {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	bin := o.CLIPath
	if bin == "" {
		bin = claudetest.CLIPath(t)
	}
	var r claudetest.Responder = claudetest.Script(turns...)
	if o.Responder != nil {
		r = o.Responder
	}
	srv := claudetest.NewServer(r)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	var broker permission.BrokerOptions
	if o.Broker != nil {
		broker = *o.Broker
	}
	d := &Daemon{Ctx: ctx, Model: srv, t: t, opts: o, settings: serve.Settings{
		Listen: "127.0.0.1:0", DataDir: o.DataDir, CLI: bin, Token: o.Token, Env: srv.EnvMap(t.TempDir()),
		SubscriberBuffer: o.SubscriberBuffer, MaxPayloadBytes: o.MaxPayloadBytes, MaxStreams: o.MaxStreams,
		StreamWriteTimeout: o.StreamWriteTimeout, StreamUnsentBytes: o.StreamUnsentBytes,
		WatchedTimeout: broker.WatchedTimeout, UnwatchedTimeout: broker.UnwatchedTimeout,
		WorkerToken: o.WorkerToken, WorkersEnabled: o.WorkersEnabled, WorkerWait: 60 * time.Second, WorkerMaxConnections: o.MaxWorkerConnections,
		AllowedExtraArgs: o.Policy.ExtraArgs, AllowBypassPermissions: o.Policy.AllowBypassPermissions, AllowedRoots: o.Policy.Roots,
		Sandbox: o.Policy.Sandbox, Limits: o.Policy.Limits, Budgets: o.Budgets,
		LogLevel:    slog.LevelError + 1, // quiet
		IdleTimeout: cmp.Or(o.IdleTimeout, -1), MaxRunning: cmp.Or(o.MaxRunning, -1), CLIScheduling: o.CLIScheduling,
		SpareCLIs: cmp.Or(o.Spares, -1), SpareLifetime: o.SpareLifetime,
	}}
	if d.settings.DataDir == "" {
		d.settings.DataDir = t.TempDir()
	}
	maps.Copy(d.settings.Env, o.CLIEnv)
	d.settings.Routes, d.settings.Groups, d.settings.Notify = o.Routes, o.Groups, o.Notify
	d.settings.StoreURL, d.settings.DaemonName = o.StoreURL, o.DaemonName
	if o.Log != nil {
		d.settings.LogLevel = slog.LevelInfo
	}
	if o.StoreURL == "" && OnPostgres() {
		d.settings.StoreURL = pgtest.New(t)
	}
	d.open()
	t.Cleanup(d.stop)
	return d
}

// open starts a daemon on the data dir, as claudectl serve does.
func (d *Daemon) open() {
	t := d.t
	d.stopped = false
	t.Helper()
	logs := io.Discard
	if d.opts.Log != nil {
		logs = d.opts.Log
	}
	srv, err := serve.Start(d.Ctx, &d.settings, &serve.Options{Stderr: logs, ReadBufferSize: d.opts.ReadBufferSize,
		Transport: d.opts.Transport, Getenv: func(string) string { return "" }, StoreRetryInterval: 50 * time.Millisecond,
		WrapStore: d.opts.WrapStore})
	if err != nil {
		t.Fatal(err)
	}
	d.srv, d.D = srv, srv.Daemon
}

func (d *Daemon) stop() {
	if d.httpc != nil {
		d.httpc.CloseIdleConnections()
	}
	if !d.stopped {
		d.srv.Close()
	}
}

// Stop stops the daemon as claudectl serve stops on SIGTERM, for good:
// what the daemon's clients see when it is gone.
func (d *Daemon) Stop() {
	d.stop()
	d.stopped = true
}

// Restart stops the daemon as claudectl serve stops on SIGTERM and starts
// a new one on the same database (d.D changes).
func (d *Daemon) Restart() {
	d.t.Helper()
	d.stop()
	d.open()
}

// RestartWithBudgets is Restart with other budgets.* settings: a daemon
// whose spend caps were changed in its settings file.
func (d *Daemon) RestartWithBudgets(b daemon.Budgets) {
	d.t.Helper()
	d.stop()
	d.settings.Budgets = b
	d.open()
}

// DB is the daemon's store, for tests that must reach past the daemon
// (to stage a state no client can make).
func (d *Daemon) DB() store.Store { return d.srv.DB() }

// Serve returns the base URL of the daemon's API (on 127.0.0.1) and an HTTP
// client for it that sends the daemon's token.
func (d *Daemon) Serve() (url string, client *http.Client) {
	if d.httpc == nil {
		d.httpc = &http.Client{Transport: &bearer{token: d.srv.Token, next: &http.Transport{}}}
	}
	return "http://" + d.srv.Addr, d.httpc
}

// Token is the bearer token the daemon requires: Options.Token, or the one
// it generated.
func (d *Daemon) Token() string { return d.srv.Token }

type bearer struct {
	token string
	next  *http.Transport
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

func (b *bearer) CloseIdleConnections() { b.next.CloseIdleConnections() }

// LogBuffer collects a daemon's log lines (Options.Log), safe for its
// goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was logged so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
