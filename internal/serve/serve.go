// Package serve assembles the claudectl daemon process: it turns Settings
// into a running store, permission engine and broker, daemon and API
// server, and takes them down again. "claudectl serve" and the tests call
// Start; nothing else builds the pieces together.
package serve

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claudectl/claudectl/web"

	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/notify"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// Exit statuses of the start-up checks (sysexits), as seed 000 asks.
// claudectl doctor ends with the same for the same CLI.
const (
	ExitCLIBroken  = 69 // the CLI was found but does not run or print its version (EX_UNAVAILABLE)
	ExitCLIMissing = 72 // the CLI is not installed (EX_OSFILE)
	ExitCLITooOld  = 78 // the CLI is too old (EX_CONFIG)
)

// StartError is a start-up failure with the exit status the process should
// end with (ExitCLIBroken, ExitCLIMissing, ExitCLITooOld).
type StartError struct {
	Code int
	Err  error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// Defaults of the settings that have one here.
const (
	DefaultListen     = "127.0.0.1:7777"
	DefaultWorkerWait = 2 * time.Minute
)

// Options are what the process gives Start besides the settings.
type Options struct {
	// Getenv looks up the daemon's own environment; nil means os.Getenv.
	Getenv func(string) string
	// Stderr receives the compatibility notice and the logs; nil means
	// os.Stderr.
	Stderr io.Writer
	// ReadBufferSize is daemon.Options.ReadBufferSize (0: its default).
	ReadBufferSize int
	// Transport is daemon.Options.Transport: tests run in-process CLIs.
	Transport claude.Transport
	// StoreRetryInterval is daemon.Options.StoreRetryInterval (0: its
	// default); tests shorten it.
	StoreRetryInterval time.Duration
	// WrapStore, if set, wraps the store the daemon writes to (Server.DB
	// stays the store itself): tests inject the store's failures.
	WrapStore func(store.Store) store.Store
	// NoClientsNotice leaves out the start-up lines telling clients where
	// the token is: the caller says it its own way (serve --demo).
	NoClientsNotice bool
	// ClientFlags, if set, returns the flags a claudectl client command of
	// the daemon's user on this machine needs to reach it at url with
	// token, generated in tokenFile: "" when it finds both by itself (the
	// address and the file are where it looks). Nil: the start-up notice
	// names both.
	ClientFlags func(url, token, tokenFile string) string
	// Load reads the settings again for a reload (Server.Reload: SIGHUP,
	// claudectl reload): the settings file, with the command's flags
	// applied over it, as the command read them for Start. Nil: the
	// daemon cannot reload.
	Load func() (*Settings, error)
	// RetentionInterval is how often store.retention is applied (0:
	// DefaultRetentionInterval); tests shorten it.
	RetentionInterval time.Duration
	// TokenInPageURL prints the web page's address with the generated
	// token in its fragment (the address that logs a browser in). Set it
	// only when Stderr is a terminal: written to a log (a journal), the
	// address would put the token there; without it the notice says where
	// the token is.
	TokenInPageURL bool
}

// A Server is a running daemon: its store, engine, broker, sessions and
// API. Close stops it.
type Server struct {
	// Addr is the address served on.
	Addr string
	// Daemon hosts the sessions.
	Daemon *daemon.Daemon
	// Log is the daemon's logger.
	Log *slog.Logger
	// Token is the bearer token clients must send: the configured one, or
	// the one generated in TokenFile. Never logged.
	Token string
	// TokenFile is the generated token's file, "" when one was configured.
	TokenFile string

	// StoreLocation is where the store is: "sqlite PATH" or "postgres
	// HOST:PORT/DATABASE" (never credentials).
	StoreLocation string

	// MetricsAddr is the address of metrics_listen, "" without one.
	MetricsAddr string

	workers       *claude.WorkerListener
	auth          *apiserver.Auth
	metrics       *http.Server // metrics_listen's; nil without one
	metricsServed chan error
	service       *apiserver.Service
	level         *slog.LevelVar           // log_level, which a reload changes
	settings      atomic.Pointer[Settings] // in force (Settings)
	load          func() (*Settings, error)
	reloading     sync.Mutex // one Reload at a time
	pruning       sync.Mutex // one Prune at a time
	sqlitePath    string     // the SQLite store's file; "" on PostgreSQL
	retainStop    chan struct{}
	retainDone    chan struct{}
	db            store.Store
	broker        *permission.Broker
	srv           *http.Server
	served        chan error
	lock          *dataDirLock
	tls           bool // served with TLS
	notifier      *notify.Notifier
}

// DefaultDataDir returns $XDG_DATA_HOME/claudectl, else
// ~/.local/share/claudectl.
func DefaultDataDir(getenv func(string) string) string {
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "claudectl")
	}
	return filepath.Join(homeDir(getenv), ".local", "share", "claudectl")
}

// Start checks the CLI, opens the store, marks the sessions of a previous
// daemon interrupted and starts serving. It returns once the listener is
// up. Start-up failures that have an exit status of their own are
// *StartError; a non-loopback address without a token is
// apiserver.ErrTokenRequired; an address in use is a *ListenError.
func Start(ctx context.Context, s *Settings, o *Options) (_ *Server, err error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	stderr := opts.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	listen := cmp.Or(s.Listen, DefaultListen)
	dataDir := cmp.Or(s.DataDir, DefaultDataDir(getenv))
	level := new(slog.LevelVar)
	level.Set(s.LogLevel)
	log := newLogger(stderr, s.LogFormat, level)

	path, err := claude.FindBinary(&claude.FindOptions{Path: s.CLI, Env: getenv})
	if err != nil {
		return nil, CLINotFound(err)
	}
	rep, cliErr := CheckCLI(ctx, path)
	if rep.Version == (claude.Version{}) {
		return nil, cliErr // it did not say its version
	}
	v := rep.Version
	if s.LogFormat == "json" { // every line a JSON object
		log.Info("Claude Code detected", "version", rep.Version.String(), "path", path, "compatibility", rep.Level.String(),
			"message", rep.Message, "tested_min", claude.TestedMinVersion, "tested_max", claude.TestedMaxVersion)
	} else {
		fmt.Fprint(stderr, CompatibilityNotice(path, rep))
	}
	if cliErr != nil {
		return nil, cliErr
	}
	loginHint, noCredentials := checkCredentials(s, getenv, stderr, log)

	// Refuse a bad listen address before touching the store.
	serverOpts := &apiserver.ServerOptions{Token: s.Token, AllowedHosts: s.AllowedHosts,
		AllowedOrigins: s.AllowedOrigins, Logger: log, InsecureCleartext: s.InsecureCleartext, WorkerToken: s.WorkerToken,
		Workers:      s.WorkersEnabled,
		WriteTimeout: s.StreamWriteTimeout}
	if s.TLSCertFile != "" || s.TLSKeyFile != "" {
		cert, err := tls.LoadX509KeyPair(s.TLSCertFile, s.TLSKeyFile)
		if err != nil {
			return nil, &SettingsError{file: cmp.Or(s.File, "settings"), msg: fmt.Sprintf(
				"tls_cert_file %q and tls_key_file %q: %v", s.TLSCertFile, s.TLSKeyFile, err)}
		}
		serverOpts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if _, err := apiserver.NewServer(listen, http.NotFoundHandler(), serverOpts); err != nil {
		return nil, err
	}
	srv := &Server{Log: log, level: level, load: opts.Load}
	cur := *s
	srv.settings.Store(&cur)
	defer func() {
		if err != nil {
			srv.Close()
		}
	}()
	if srv.lock, err = lockDataDir(dataDir, log); err != nil {
		return nil, err
	}
	// What the tools of an earlier run's CLIs left, if it was killed
	// before it could end them (SIGKILL), ends now rather than at the
	// first CLI this run starts.
	claude.KillLeftovers()
	if serverOpts.Token == "" { // a token always, loopback included
		if serverOpts.Token, err = loadOrCreateToken(dataDir); err != nil {
			return nil, err
		}
		srv.TokenFile = TokenPath(dataDir)
	}
	srv.Token = serverOpts.Token
	srv.db, srv.StoreLocation, err = openStore(ctx, s, dataDir, log)
	if err != nil {
		return nil, err
	}
	if p, ok := strings.CutPrefix(srv.StoreLocation, "sqlite "); ok {
		srv.sqlitePath = p
	}
	srv.auth, err = apiserver.NewAuth(ctx, &apiserver.AuthOptions{Token: srv.Token, WorkerToken: s.WorkerToken, Store: srv.db,
		Logger: log, Groups: s.Groups})
	if err != nil {
		return nil, err
	}
	serverOpts.Auth = srv.auth
	var signIn *apiserver.OIDC
	if s.OIDC.Issuer != "" || s.OIDC.ClientID != "" || len(s.OIDC.Roles) > 0 {
		o := s.OIDC
		o.Store, o.Auth, o.Logger, o.Secure = srv.db, srv.auth, log, serverOpts.TLS != nil
		if signIn, err = apiserver.NewOIDC(&o); err != nil {
			return nil, &SettingsError{file: cmp.Or(s.File, "settings"), msg: err.Error()}
		}
	}
	if s.WorkerToken != "" || s.WorkersEnabled {
		// A worker presents the shared token, or one of its own (role
		// worker), which the store's tokens say.
		srv.workers = &claude.WorkerListener{Token: s.WorkerToken, Authorize: srv.auth.WorkerVerifier(),
			WaitTimeout: cmp.Or(s.WorkerWait, DefaultWorkerWait), Logger: log,
			MaxConnections: s.WorkerMaxConnections, MaxConnectionsSetting: "workers.max_connections"}
	}
	srv.broker = permission.NewBroker(&permission.BrokerOptions{
		WatchedTimeout: s.WatchedTimeout, UnwatchedTimeout: s.UnwatchedTimeout})
	if err := claude.CheckLimits(s.Limits); err != nil {
		// Limits set and not applied would be worse than none: refused.
		return nil, &SettingsError{file: cmp.Or(s.File, "settings"), msg: fmt.Sprintf(
			"sessions.limits (%s) cannot be applied on this machine: %v (see docs/security.md, \"Resource limits\")", s.Limits, limitsReason(err))}
	}
	sandbox, err := daemon.EnforcedSandbox(s.Sandbox)
	if err != nil {
		return nil, &SettingsError{file: cmp.Or(s.File, "settings"), msg: "sessions.sandbox: " + err.Error()}
	}
	router, err := permission.NewRouter(s.Routes, homeDir(getenv))
	if err != nil {
		return nil, &SettingsError{file: cmp.Or(s.File, "settings"), msg: "permissions.routes: " + err.Error()}
	}
	if srv.notifier, err = startNotifier(ctx, s, srv.db, srv.auth, log); err != nil {
		return nil, err
	}
	db := srv.db
	if opts.WrapStore != nil {
		db = opts.WrapStore(db)
	}
	srv.Daemon, err = daemon.New(ctx, &daemon.Options{DB: db, Engine: permission.NewEngine(nil), Broker: srv.broker,
		CLIPath: path, Env: s.Env, Logger: log, SubscriberBuffer: s.SubscriberBuffer,
		MaxPayloadBytes: s.MaxPayloadBytes, Workers: srv.workers, ReadBufferSize: opts.ReadBufferSize,
		Transport: opts.Transport, Policy: daemon.SessionPolicy{ExtraArgs: s.AllowedExtraArgs,
			AllowBypassPermissions: s.AllowBypassPermissions, Roots: s.AllowedRoots, Sandbox: sandbox, Limits: s.Limits},
		IdleTimeout: orDefault(s.IdleTimeout, DefaultIdleTimeout), MaxRunning: orDefault(s.MaxRunning, DefaultMaxRunning),
		Spares: orDefault(s.SpareCLIs, DefaultSpareCLIs), SpareLifetime: orDefault(s.SpareLifetime, DefaultSpareLifetime),
		CLIScheduling:      cmp.Or(s.CLIScheduling, DefaultCLIScheduling),
		StoreRetryInterval: opts.StoreRetryInterval, LeaseTTL: s.LeaseTTL,
		LoginHint: loginHint, NoCredentials: noCredentials,
		WorktreeRoot: cmp.Or(s.WorktreeRoot, filepath.Join(dataDir, "worktrees")), Budgets: s.Budgets,
		Notifier: daemonNotifier(srv.notifier), Router: router, Groups: srv.auth.Groups})
	if err != nil {
		return nil, err
	}
	metrics := newMetrics(srv.Daemon, srv.db, log)
	srv.service = &apiserver.Service{D: srv.Daemon, Page: web.Handler(), MaxStreams: s.MaxStreams,
		StreamWriteTimeout: s.StreamWriteTimeout, StreamUnsentBytes: s.StreamUnsentBytes, Logger: log,
		StoreLocation: srv.StoreLocation, Auth: srv.auth, Store: srv.db, OIDC: signIn,
		Metrics: apiserver.MetricsHandler(metrics), Admin: srv.adminHandler(), Notify: srv.notifier}
	hs, err := apiserver.NewServer(listen, apiserver.NewHandler(srv.service), serverOpts)
	if err != nil {
		return nil, err
	}
	if s.MetricsListen != "" {
		if err := srv.serveMetrics(ctx, s.MetricsListen, metrics, serverOpts); err != nil {
			return nil, err
		}
	}
	ln, err := listenOn(ctx, listen)
	if err != nil {
		return nil, err
	}
	ln = apiserver.GuardListener(ln, &apiserver.GuardOptions{Max: s.MaxUnauthenticated, Logger: log})
	srv.Addr = ln.Addr().String()
	srv.lock.record(srv.Addr)
	srv.srv = hs
	srv.served = make(chan error, 1)
	useTLS := serverOpts.TLS != nil // read before Serve: it configures hs
	srv.tls = useTLS
	go func() {
		if useTLS {
			srv.served <- hs.ServeTLS(ln, "", "")
		} else {
			srv.served <- hs.Serve(ln)
		}
	}()
	srv.retainStop, srv.retainDone = make(chan struct{}), make(chan struct{})
	go srv.retain(cmp.Or(opts.RetentionInterval, DefaultRetentionInterval), srv.retainStop, srv.retainDone)
	log.Info("serving", "addr", srv.Addr, "tls", useTLS, "data_dir", dataDir, "store", srv.StoreLocation, "cli", path, "cli_version", v.String(),
		"settings", cmp.Or(s.File, "none"))
	switch {
	case opts.NoClientsNotice || srv.TokenFile == "":
	default:
		u := scheme(useTLS) + "://" + srv.Addr
		flags := "--server " + u + " --token-file " + srv.TokenFile
		if opts.ClientFlags != nil {
			flags = opts.ClientFlags(u, srv.Token, srv.TokenFile)
		}
		if s.LogFormat == "json" {
			log.Info("clients read the token from the token file", "server", u, "token_file", srv.TokenFile, "client_flags", flags)
			break
		}
		page := srv.PageURL()
		if !opts.TokenInPageURL {
			page = u + "/ (log in with the token in " + srv.TokenFile + ")"
		}
		clients := fmt.Sprintf("claudectl commands of this user on this machine find this daemon and its token (in %s) by themselves: claudectl sessions", srv.TokenFile)
		if flags != "" {
			clients = fmt.Sprintf("claudectl sessions %s, and the same flags for the other commands (or CLAUDECTL_SERVER and CLAUDECTL_TOKEN; the token is in %s)", flags, srv.TokenFile)
		}
		fmt.Fprintf(stderr, "\nClients: %s\nWeb page: %s\n\n", clients, page)
	}
	log.Debug("configuration", "max_payload_bytes", s.MaxPayloadBytes, "full_sync", s.FullSync,
		"subscriber_buffer", s.SubscriberBuffer, "watched_timeout", s.WatchedTimeout,
		"unwatched_timeout", s.UnwatchedTimeout, "token", s.Token != "",
		"idle_timeout", s.IdleTimeout, "max_running", s.MaxRunning, "cli_scheduling", cmp.Or(s.CLIScheduling, DefaultCLIScheduling),
		"max_streams", cmp.Or(s.MaxStreams, apiserver.DefaultMaxStreams),
		"max_unauthenticated_connections", cmp.Or(s.MaxUnauthenticated, apiserver.DefaultMaxUnauthenticated))
	return srv, nil
}

// DB is the daemon's store.
func (s *Server) DB() store.Store { return s.db }

// Close stops serving, closes the sessions (their CLIs end), then the
// broker and the database. Idempotent.
func (s *Server) Close() error {
	var errs []error
	if s.retainStop != nil {
		close(s.retainStop)
		<-s.retainDone
		s.retainStop = nil
	}
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// Sessions first: that ends the Subscribe streams Shutdown waits for.
		if s.Daemon != nil {
			s.Daemon.Close()
		}
		if err := s.srv.Shutdown(ctx); err != nil {
			// Connections still open after the sessions ended: cut them.
			s.Log.Warn("closing connections that did not end", "err", err)
			s.srv.Close()
		}
		cancel()
		if err := <-s.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
		s.srv = nil
	}
	if s.metrics != nil {
		s.metrics.Close() // scrapes are short: nothing to drain
		if err := <-s.metricsServed; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
		s.metrics = nil
	}
	if s.Daemon != nil {
		s.Daemon.Close()
	}
	if s.workers != nil {
		s.workers.Close()
		s.workers = nil
	}
	if s.notifier != nil {
		s.notifier.Close() // after the daemon: nothing tells it more
		s.notifier = nil
	}
	if s.broker != nil {
		s.broker.Close()
		s.broker = nil
	}
	if s.auth != nil {
		s.auth.Close() // before the store: it writes the tokens' last use
		s.auth = nil
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
		s.db = nil
	}
	s.lock.release() // last: the database is closed
	return errors.Join(errs...)
}

// CompatibilityNotice is the start-up notice of seed 000: which CLI was
// found and how well claudectl works with it.
func CompatibilityNotice(path string, rep claude.CompatibilityReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Detected Claude Code v%s at %s (tested %s to %s)\n", rep.Version, path,
		claude.TestedMinVersion, claude.TestedMaxVersion)
	if rep.Level != claude.FullyCompatible {
		fmt.Fprintf(&b, "\nCOMPATIBILITY NOTICE:\n  %s\n\n", rep.Message)
	}
	if rep.Level == claude.Incompatible || rep.Level == claude.CompatibilityUnknown {
		fmt.Fprintf(&b, "Refusing to start: %s\n", rep.Message)
	} else {
		fmt.Fprintf(&b, "Starting the daemon (compatibility: %s)...\n", rep.Level)
	}
	return b.String()
}

func scheme(useTLS bool) string {
	if useTLS {
		return "https"
	}
	return "http"
}

// NewLogger returns the daemon's logger: text lines, or one JSON object
// per line when format is "json".
func NewLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	return newLogger(w, format, level)
}

// newLogger is NewLogger with a level that may change (a slog.LevelVar).
func newLogger(w io.Writer, format string, level slog.Leveler) *slog.Logger {
	o := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// orDefault maps a setting's zero to its default and a negative value
// (none, never) to the daemon's zero.
func orDefault[T int | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// PageURL is the address of the web page that logs a browser in: the token
// rides in the fragment, which browsers never send to the server (so it is
// in no log) and which the page removes from the address bar.
func (srv *Server) PageURL() string {
	u := scheme(srv.tls) + "://" + srv.Addr + "/"
	if srv.Token != "" {
		u += "#token=" + url.QueryEscape(srv.Token)
	}
	return u
}

// limitsReason is why the limits cannot be applied, without the SDK's
// prefix.
func limitsReason(err error) string {
	var le *claude.LimitsError
	if errors.As(err, &le) {
		return le.Reason
	}
	return err.Error()
}

// serveMetrics serves /metrics alone on addr (metrics_listen): without the
// token on loopback, where a local scraper reads it; elsewhere with the
// token, and TLS unless insecure_cleartext, as the API.
func (srv *Server) serveMetrics(ctx context.Context, addr string, metrics http.Handler, api *apiserver.ServerOptions) error {
	o := *api
	o.WorkerToken, o.Workers = "", false
	token := !apiserver.IsLoopback(addr)
	if !token { // a local scraper's: no token
		o.Token, o.Auth = "", nil
	}
	mux := http.NewServeMux()
	mux.Handle(apiserver.MetricsPath, apiserver.MetricsHandler(metrics))
	hs, err := apiserver.NewServer(addr, mux, &o)
	if err != nil {
		return fmt.Errorf("metrics_listen %s: %w", addr, err)
	}
	ln, err := listenOn(ctx, addr)
	if err != nil {
		return fmt.Errorf("metrics_listen: %w", err)
	}
	srv.MetricsAddr = ln.Addr().String()
	srv.metrics, srv.metricsServed = hs, make(chan error, 1)
	go func() {
		if o.TLS != nil {
			srv.metricsServed <- hs.ServeTLS(ln, "", "")
		} else {
			srv.metricsServed <- hs.Serve(ln)
		}
	}()
	srv.Log.Info("serving metrics", "addr", srv.MetricsAddr, "path", apiserver.MetricsPath, "token", token)
	return nil
}

// Settings returns the settings in force: those Start was given, with
// what reloads applied since.
func (srv *Server) Settings() *Settings { return srv.settings.Load() }
