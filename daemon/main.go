package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store/sqlite"
)

// Exit statuses of the daemon's start-up checks (sysexits), as seed 000 asks.
const (
	ExitCLIMissing = 72 // the CLI is not installed (EX_OSFILE)
	ExitCLITooOld  = 78 // the CLI is too old (EX_CONFIG)
)

// ExitError is a start-up failure with the exit status the process should
// end with.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Main is the daemon process, kept apart from the command so that tests can
// run it: set the fields, call Run, then Close.
type Main struct {
	// Listen is the address to serve on; empty means 127.0.0.1:7777.
	Listen string
	// DataDir holds claudectl.db; empty means DefaultDataDir.
	DataDir string
	// CLIPath is the claude executable; empty means claude.FindBinary.
	CLIPath string
	// Token is required of every client when set; it must be set for a
	// Listen address that is not loopback. Never logged.
	Token string
	// Env is added to every session's environment.
	Env map[string]string
	// MaxPayloadBytes is the store's limit on one event line
	// (sqlite.Options.MaxPayloadBytes): zero means 10 MiB, negative no
	// limit.
	MaxPayloadBytes int
	// FullSync makes every store commit fsync (sqlite.Options.FullSync).
	FullSync bool
	// BrokerOptions configures the permission broker (its watched and
	// unwatched timeouts); nil means its defaults.
	BrokerOptions *permission.BrokerOptions
	// SubscriberBuffer is how many live events a subscriber may fall
	// behind before it is dropped (Options.SubscriberBuffer); zero means
	// 1024.
	SubscriberBuffer int
	// LogLevel is the least level logged; zero means slog.LevelInfo.
	LogLevel slog.Level
	// SettingsFile is the settings file the configuration came from, for
	// the start-up log; empty for none.
	SettingsFile string
	// WorkerToken, if set, makes the daemon accept remote workers
	// ("claudectl worker") at api.WorkerPath that present it. Never logged.
	WorkerToken string
	// WorkerWait bounds how long a remote session waits for a worker to
	// connect; zero means 2 minutes.
	WorkerWait time.Duration
	// Getenv looks up the daemon's own environment; nil means os.Getenv.
	Getenv func(string) string
	// Stderr receives the compatibility notice and the logs.
	Stderr io.Writer
	// NewHandler builds the API handler for the daemon (package
	// daemon/api); it is a field so that this package does not import it.
	NewHandler func(*Daemon) http.Handler
	// NewServer builds the http.Server (api.NewServer).
	NewServer func(addr string, h http.Handler, token string) (*http.Server, error)

	// Addr is the address served on, once Run has returned nil.
	Addr string

	workers *claude.WorkerListener
	db      *sqlite.DB
	broker  *permission.Broker
	d       *Daemon
	srv     *http.Server
	served  chan error
}

// DefaultDataDir returns $XDG_DATA_HOME/claudectl, else
// ~/.local/share/claudectl.
func DefaultDataDir(getenv func(string) string) string {
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "claudectl")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".local", "share", "claudectl")
}

// Run checks the CLI, opens the store, marks the sessions of a previous
// daemon interrupted and starts serving. It returns once the listener is
// up; Close stops everything. Start-up failures that have an exit status
// of their own are *ExitError.
func (m *Main) Run(ctx context.Context) (err error) {
	if m.NewHandler == nil || m.NewServer == nil {
		panic("daemon.Main: NewHandler and NewServer are required")
	}
	if m.Getenv == nil {
		m.Getenv = os.Getenv
	}
	if m.Stderr == nil {
		m.Stderr = os.Stderr
	}
	if m.Listen == "" {
		m.Listen = "127.0.0.1:7777"
	}
	if m.DataDir == "" {
		m.DataDir = DefaultDataDir(m.Getenv)
	}
	log := slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: m.LogLevel}))

	path, err := claude.FindBinary(&claude.FindOptions{Path: m.CLIPath, Env: m.Getenv})
	if err != nil {
		return &ExitError{Code: ExitCLIMissing, Err: fmt.Errorf("claude CLI not found: %w", err)}
	}
	v, err := claude.VersionOf(ctx, path)
	if err != nil {
		return &ExitError{Code: ExitCLIMissing, Err: fmt.Errorf("claude CLI at %s does not run: %w", path, err)}
	}
	rep := claude.CheckCompatibility(v)
	fmt.Fprint(m.Stderr, CompatibilityNotice(path, rep))
	if rep.Level == claude.Incompatible || rep.Level == claude.CompatibilityUnknown {
		return &ExitError{Code: ExitCLITooOld, Err: fmt.Errorf("claude CLI %s at %s: %s", v, path, rep.Message)}
	}

	// Refuse a bad listen address before touching the store.
	if _, err := m.NewServer(m.Listen, http.NotFoundHandler(), m.Token); err != nil {
		return err
	}
	if err := os.MkdirAll(m.DataDir, 0o700); err != nil {
		return err
	}
	m.db, err = sqlite.Open(ctx, filepath.Join(m.DataDir, "claudectl.db"),
		&sqlite.Options{MaxPayloadBytes: m.MaxPayloadBytes, FullSync: m.FullSync})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if m.WorkerToken != "" {
		wait := m.WorkerWait
		if wait <= 0 {
			wait = 2 * time.Minute
		}
		m.workers = &claude.WorkerListener{Token: m.WorkerToken, WaitTimeout: wait, Logger: log}
	}
	m.broker = permission.NewBroker(m.BrokerOptions)
	m.d, err = New(ctx, &Options{DB: m.db, Engine: permission.NewEngine(nil), Broker: m.broker,
		CLIPath: path, Env: m.Env, Logger: log, SubscriberBuffer: m.SubscriberBuffer, Workers: m.workers})
	if err != nil {
		return err
	}
	hs, err := m.NewServer(m.Listen, m.NewHandler(m.d), m.Token)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", m.Listen)
	if err != nil {
		return err
	}
	m.Addr = ln.Addr().String()
	m.srv = hs
	m.served = make(chan error, 1)
	go func() { m.served <- hs.Serve(ln) }()
	log.Info("serving", "addr", m.Addr, "data_dir", m.DataDir, "cli", path, "cli_version", v.String(),
		"settings", cmp.Or(m.SettingsFile, "none"))
	var bo permission.BrokerOptions
	if m.BrokerOptions != nil {
		bo = *m.BrokerOptions
	}
	log.Debug("configuration", "max_payload_bytes", m.MaxPayloadBytes, "full_sync", m.FullSync,
		"subscriber_buffer", m.SubscriberBuffer, "watched_timeout", bo.WatchedTimeout,
		"unwatched_timeout", bo.UnwatchedTimeout, "token", m.Token != "")
	return nil
}

// Close stops serving, closes the sessions (their CLIs end), then the
// broker and the database. Idempotent.
func (m *Main) Close() error {
	var errs []error
	if m.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// Sessions first: that ends the Subscribe streams Shutdown waits for.
		if m.d != nil {
			m.d.Close()
		}
		if err := m.srv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
			m.srv.Close()
		}
		cancel()
		if err := <-m.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
		m.srv = nil
	}
	if m.d != nil {
		m.d.Close()
		m.d = nil
	}
	if m.workers != nil {
		m.workers.Close()
		m.workers = nil
	}
	if m.broker != nil {
		m.broker.Close()
		m.broker = nil
	}
	if m.db != nil {
		errs = append(errs, m.db.Close())
		m.db = nil
	}
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
	mode := map[claude.Compatibility]string{
		claude.FullyCompatible:  "FULLY_COMPATIBLE",
		claude.LikelyCompatible: "LIKELY_COMPATIBLE",
		claude.Degraded:         "DEGRADED",
		claude.Incompatible:     "INCOMPATIBLE",
	}[rep.Level]
	if rep.Level == claude.Incompatible || mode == "" {
		fmt.Fprintf(&b, "Refusing to start: %s\n", rep.Message)
	} else {
		fmt.Fprintf(&b, "Starting daemon in %s mode...\n", mode)
	}
	return b.String()
}
