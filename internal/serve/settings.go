package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/internal/suggest"
	"github.com/claudectl/claudectl/permission"
)

// Settings is the configuration of "claudectl serve": the settings file
// (parsed by Parse), with the command's flags applied over it, and the
// secrets its token files hold. A zero field means the default. It is the
// one type the configuration takes from the file to Start, which maps it
// to the options of each piece (store, broker, daemon, API server).
type Settings struct {
	Listen    string
	DataDir   string
	CLI       string
	TokenFile string
	// Token is the bearer token every client must send, read from
	// TokenFile by the command. Never logged.
	Token string
	// TLSCertFile and TLSKeyFile, both set, make the API speak HTTPS;
	// InsecureCleartext allows plain HTTP beyond loopback.
	TLSCertFile       string
	TLSKeyFile        string
	InsecureCleartext bool
	// AllowedHosts and AllowedOrigins widen what a request's Host and a
	// browser's Origin may name (apiserver.ServerOptions).
	AllowedHosts   []string
	AllowedOrigins []string
	// Env is added to every session's CLI environment.
	Env      map[string]string
	LogLevel slog.Level
	// LogFormat is "text" (the default) or "json": one JSON object per
	// line, for log collectors.
	LogFormat string

	MaxPayloadBytes  int // 0: default (10 MiB); -1: no limit
	FullSync         bool
	SubscriberBuffer int // 0: default (8192)
	MaxStreams       int // 0: default (apiserver.DefaultMaxStreams)
	// StreamWriteTimeout and StreamUnsentBytes bound what a client that
	// stops reading costs (apiserver.Service); zero means their defaults,
	// a negative timeout never.
	StreamWriteTimeout time.Duration
	StreamUnsentBytes  int
	// MaxUnauthenticated is how many connections may be open that have
	// not made a request with the token (apiserver.GuardOptions.Max); 0
	// means apiserver.DefaultMaxUnauthenticated.
	MaxUnauthenticated int

	WatchedTimeout   time.Duration
	UnwatchedTimeout time.Duration

	// What clients may ask of a session (daemon.SessionPolicy).
	AllowedExtraArgs       []string
	AllowBypassPermissions bool
	AllowedRoots           []string
	// WorktreeRoot is sessions.worktree_root: where the sessions that ask
	// for a git worktree of their own get one; "" means DATA_DIR/worktrees.
	WorktreeRoot string
	// Budgets are budgets.*: the spend caps that pause sessions.
	Budgets daemon.Budgets
	// Limits is sessions.limits: what each local session's CLI may use,
	// with everything it starts (zero fields: no limit).
	Limits claude.ResourceLimits
	// Sandbox is sessions.sandbox: Claude Code's sandbox settings object,
	// enforced on every session (daemon.EnforcedSandbox); nil for none.
	Sandbox json.RawMessage

	// IdleTimeout is how long a session's CLI may sit idle before the
	// daemon closes it (the session is suspended; its next prompt resumes
	// it). Zero means DefaultIdleTimeout; negative never.
	IdleTimeout time.Duration
	// MaxRunning caps the sessions with a live CLI; the rest queue. Zero
	// means DefaultMaxRunning; negative no limit.
	MaxRunning int
	// SpareCLIs is sessions.spare_clis: how many CLIs are started ahead
	// of need for new sessions like recent ones (daemon/pool.go). Zero
	// means DefaultSpareCLIs; negative none.
	SpareCLIs int
	// SpareLifetime is sessions.spare_lifetime: how long a spare waits for
	// a session before it is closed. Zero means DefaultSpareLifetime.
	SpareLifetime time.Duration
	// CLIScheduling is how the kernel schedules the sessions' CLIs and
	// their tools; "" means DefaultCLIScheduling.
	CLIScheduling claude.Scheduling

	// StoreURL is store.url: "sqlite:PATH" or a PostgreSQL URL; "" means
	// claudectl.db in DataDir.
	StoreURL string
	// DaemonName is store.daemon_name: this daemon's name in the leases of
	// a store shared by several daemons; "" means host name and data dir.
	DaemonName string
	// LeaseTTL is store.lease_ttl: how long a session's lease lasts unless
	// renewed (zero: daemon.DefaultLeaseTTL).
	LeaseTTL time.Duration

	// WorkerTokenFile, if set, makes the daemon accept remote workers
	// presenting the token it holds (WorkerToken, read by the command);
	// WorkerWait bounds how long a session waits for a worker to connect.
	WorkerTokenFile string
	WorkerToken     string
	// WorkersEnabled is workers.enabled: accept remote workers presenting a
	// token of role worker (claudectl tokens create --role worker), with or
	// without a WorkerToken.
	WorkersEnabled bool
	WorkerWait     time.Duration

	// OIDC is auth.oidc: sign-in for the page with OpenID Connect; its
	// Issuer is "" when none is set. OIDCClientSecretFile is read by the
	// command into OIDC.ClientSecret.
	OIDC                 apiserver.OIDCOptions
	OIDCClientSecretFile string
	// WorkerMaxConnections is workers.max_connections: the worker
	// connections open at once (0: claude.DefaultMaxWorkerConnections).
	WorkerMaxConnections int

	// MetricsListen is metrics_listen: a second address serving only
	// /metrics, without the token on loopback (for a local scraper); ""
	// means none (the API's address serves /metrics with the token).
	MetricsListen string
	// Retention is store.retention: how long what ended is kept.
	Retention Retention

	// Notify is the notify.* settings: webhooks, Web Push, the page's
	// address for links (notify_settings.go).
	Notify NotifySettings
	// Routes and Groups are permissions.routes and permissions.groups:
	// who is asked for what (notify_settings.go).
	Routes []permission.Route
	Groups map[string][]string

	// File is the settings file that was read; "" when there was none.
	File string
}

// Retention is store.retention: zero durations keep everything.
type Retention struct {
	// ClosedSessions is how long the events of a session that ended
	// (closed or failed) are kept after it ended; its row, usage and
	// audit entries stay.
	ClosedSessions time.Duration
	// Audit is how long the audit trail's entries (permission decisions)
	// are kept after they were made.
	Audit time.Duration
}

// FileName is the settings file's name in the config directory.
const FileName = "settings.json"

// DefaultPath returns $XDG_CONFIG_HOME/claudectl/settings.json, else
// ~/.config/claudectl/settings.json.
func DefaultPath(getenv func(string) string) string {
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "claudectl", FileName)
	}
	return filepath.Join(homeDir(getenv), ".config", "claudectl", FileName)
}

func homeDir(getenv func(string) string) string {
	if h := getenv("HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

// SettingsError is a bad settings file: its name, the line and column when
// known, and what is wrong.
type SettingsError struct {
	file      string
	line, col int // 0 when unknown
	msg       string
}

func (e *SettingsError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.file, e.line, e.col, e.msg)
	}
	return fmt.Sprintf("%s: %s", e.file, e.msg)
}

// A configKey is one setting: its dotted name, what it allows (for error
// messages) and how its JSON value is stored.
type configKey struct {
	name    string
	allowed string
	set     func(c *Settings, raw json.RawMessage, p *configParser) error
}

// errBadValue makes set report "invalid value V for KEY: ALLOWED".
var errBadValue = errors.New("bad value")

// configSections are the keys whose value is an object of more keys.
var configSections = []string{"auth", "auth.oidc", "budgets", "daemon", "permissions", "sessions", "sessions.limits", "store", "workers"}

// configKeys are the settings, in the order the usage lists them.
var configKeys = []configKey{
	{"listen", `an address "host:port" such as "127.0.0.1:7777"`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		s, err := jsonString(raw)
		if err != nil {
			return err
		}
		host, port, err := net.SplitHostPort(s)
		if err != nil || !ValidPort(port) || strings.ContainsAny(host, " \t") {
			return errBadValue
		}
		c.Listen = s
		return nil
	}},
	{"metrics_listen", `an address "host:port" such as "127.0.0.1:9464": it serves /metrics alone, without the token on loopback`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		s, err := jsonString(raw)
		if err != nil {
			return err
		}
		host, port, err := net.SplitHostPort(s)
		if err != nil || !ValidPort(port) || strings.ContainsAny(host, " \t") {
			return errBadValue
		}
		c.MetricsListen = s
		return nil
	}},
	{"data_dir", "a directory path (relative to the settings file's directory)", func(c *Settings, raw json.RawMessage, p *configParser) (err error) {
		c.DataDir, err = p.path(raw)
		return err
	}},
	{"cli", "the path of the claude executable (relative to the settings file's directory)", func(c *Settings, raw json.RawMessage, p *configParser) (err error) {
		c.CLI, err = p.path(raw)
		return err
	}},
	{"token_file", "the path of a file holding the bearer token (relative to the settings file's directory)", func(c *Settings, raw json.RawMessage, p *configParser) (err error) {
		c.TokenFile, err = p.path(raw)
		return err
	}},
	{"tls_cert_file", "the path of a PEM certificate (chain) file (relative to the settings file's directory)", func(c *Settings, raw json.RawMessage, p *configParser) (err error) {
		c.TLSCertFile, err = p.path(raw)
		return err
	}},
	{"tls_key_file", "the path of the PEM private key file of tls_cert_file (relative to the settings file's directory)", func(c *Settings, raw json.RawMessage, p *configParser) (err error) {
		c.TLSKeyFile, err = p.path(raw)
		return err
	}},
	{"insecure_cleartext", "true or false (default false)", func(c *Settings, raw json.RawMessage, _ *configParser) error {
		var b *bool
		if json.Unmarshal(raw, &b) != nil || b == nil {
			return errBadValue
		}
		c.InsecureCleartext = *b
		return nil
	}},
	{"allowed_hosts", `an array of host names, such as ["claude.example.com"]`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		var hosts []string
		if json.Unmarshal(raw, &hosts) != nil {
			return errBadValue
		}
		for _, h := range hosts {
			if h == "" || strings.ContainsAny(h, ":/ \t@") {
				return fmt.Errorf("invalid host %q in allowed_hosts: a name without port or scheme, such as \"claude.example.com\"", h)
			}
		}
		c.AllowedHosts = hosts
		return nil
	}},
	{"allowed_origins", `an array of origins, such as ["https://ops.example.com"]`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		var origins []string
		if json.Unmarshal(raw, &origins) != nil {
			return errBadValue
		}
		for _, o := range origins {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
				return fmt.Errorf("invalid origin %q in allowed_origins: scheme://host[:port], such as \"https://ops.example.com\"", o)
			}
		}
		c.AllowedOrigins = origins
		return nil
	}},
	{"env", `an object of environment variables with string values, such as {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8080"}`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil || m == nil {
			return errBadValue
		}
		env := make(map[string]string, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return fmt.Errorf("invalid variable name %q in env: must be non-empty, without '=' or NUL", k)
			}
			v, ok := m[k].(string)
			if !ok || strings.ContainsRune(v, 0) {
				return fmt.Errorf("invalid value %s for env.%s: must be a string (\"\" removes the variable)", shortJSON(m[k]), k)
			}
			env[k] = v
		}
		c.Env = env
		return nil
	}},
	{"log_level", `one of "debug", "info", "warn", "error"`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		s, err := jsonString(raw)
		if err != nil {
			return err
		}
		l, ok := ParseLogLevel(s)
		if !ok {
			return errBadValue
		}
		c.LogLevel = l
		return nil
	}},
	{"log_format", `"text" or "json"`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		s, err := jsonString(raw)
		if err != nil || (s != "text" && s != "json") {
			return errBadValue
		}
		c.LogFormat = s
		return nil
	}},
	{"budgets.session_usd", "a number of dollars > 0 (default no cap)", func(c *Settings, raw json.RawMessage, _ *configParser) (err error) {
		c.Budgets.SessionUSD, err = jsonDollars(raw)
		return err
	}},
	{"budgets.directory_usd_per_day", "a number of dollars > 0 (default no cap)", func(c *Settings, raw json.RawMessage, _ *configParser) (err error) {
		c.Budgets.DirectoryUSDPerDay, err = jsonDollars(raw)
		return err
	}},
	{"budgets.daemon_usd_per_day", "a number of dollars > 0 (default no cap)", func(c *Settings, raw json.RawMessage, _ *configParser) (err error) {
		c.Budgets.DaemonUSDPerDay, err = jsonDollars(raw)
		return err
	}},
	{"daemon.max_payload_bytes", "a whole number of bytes >= 1024, or -1 for no limit (default 10485760, 10 MiB)", func(c *Settings, raw json.RawMessage, _ *configParser) error {
		n, err := jsonInt(raw)
		if err != nil || (n != -1 && n < 1024) {
			return errBadValue
		}
		c.MaxPayloadBytes = n
		return nil
	}},
	{"daemon.full_sync", "true or false", func(c *Settings, raw json.RawMessage, _ *configParser) error {
		var b *bool
		if json.Unmarshal(raw, &b) != nil || b == nil {
			return errBadValue
		}
		c.FullSync = *b
		return nil
	}},
	{"daemon.subscriber_buffer", fmt.Sprintf("a whole number of events from 1 to %d (default 8192)", MaxSubscriberBuffer), func(c *Settings, raw json.RawMessage, _ *configParser) error {
		n, err := jsonInt(raw)
		if err != nil || n < 1 || n > MaxSubscriberBuffer {
			return errBadValue
		}
		c.SubscriberBuffer = n
		return nil
	}},
	{"daemon.max_streams", fmt.Sprintf("a whole number of streams from 1 to %d (default %d)", MaxStreams, apiserver.DefaultMaxStreams), func(c *Settings, raw json.RawMessage, _ *configParser) error {
		n, err := jsonInt(raw)
		if err != nil || n < 1 || n > MaxStreams {
			return errBadValue
		}
		c.MaxStreams = n
		return nil
	}},
	{"daemon.stream_write_timeout", `a duration > 0 such as "30s" or "2m", or "never" (default "30s")`, func(c *Settings, raw json.RawMessage, _ *configParser) (err error) {
		if s, err := jsonString(raw); err == nil && s == "never" {
			c.StreamWriteTimeout = -1
			return nil
		}
		c.StreamWriteTimeout, err = jsonDuration(raw)
		return err
	}},
	{"daemon.stream_unsent_bytes", fmt.Sprintf("a whole number of bytes from %d to %d (default %d)", MinStreamUnsentBytes, MaxStreamUnsentBytes, apiserver.DefaultStreamUnsentBytes), func(c *Settings, raw json.RawMessage, _ *configParser) error {
		n, err := jsonInt(raw)
		if err != nil || n < MinStreamUnsentBytes || n > MaxStreamUnsentBytes {
			return errBadValue
		}
		c.StreamUnsentBytes = n
		return nil
	}},
	{"daemon.max_unauthenticated_connections", fmt.Sprintf("a whole number of connections from 1 to %d (default %d)", MaxUnauthenticated, apiserver.DefaultMaxUnauthenticated), func(c *Settings, raw json.RawMessage, _ *configParser) error {
		n, err := jsonInt(raw)
		if err != nil || n < 1 || n > MaxUnauthenticated {
			return errBadValue
		}
		c.MaxUnauthenticated = n
		return nil
	}},
	{"permissions.watched_timeout", `a duration > 0 such as "90s", "5m" or "1h30m" (default "5m")`, func(c *Settings, raw json.RawMessage, _ *configParser) (err error) {
		c.WatchedTimeout, err = jsonDuration(raw)
		return err
	}},
	{"permissions.unwatched_timeout", `a duration > 0 such as "30m", "24h" or "72h" (default "24h")`, func(c *Settings, raw json.RawMessage, _ *configParser) (err error) {
		c.UnwatchedTimeout, err = jsonDuration(raw)
		return err
	}},
	{"sessions.allowed_extra_args", `an array of CLI flags sessions may pass in extra_args, such as ["--verbose"] (default none)`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		var flags []string
		if json.Unmarshal(raw, &flags) != nil {
			return errBadValue
		}
		for _, f := range flags {
			if !strings.HasPrefix(f, "--") || len(f) < 3 || strings.ContainsAny(f, "= \t") {
				return fmt.Errorf("invalid flag %q in sessions.allowed_extra_args: a flag name such as \"--verbose\", without a value", f)
			}
		}
		c.AllowedExtraArgs = flags
		return nil
	}},
	{"sessions.allow_bypass_permissions", "true or false (default false)", func(c *Settings, raw json.RawMessage, _ *configParser) error {
		var b *bool
		if json.Unmarshal(raw, &b) != nil || b == nil {
			return errBadValue
		}
		c.AllowBypassPermissions = *b
		return nil
	}},
	{"sessions.allowed_roots", "an array of directories sessions must work inside (relative to the settings file's directory; default anywhere)", func(c *Settings, raw json.RawMessage, p *configParser) error {
		var dirs []json.RawMessage
		if json.Unmarshal(raw, &dirs) != nil {
			return errBadValue
		}
		c.AllowedRoots = nil
		for _, d := range dirs {
			dir, err := p.path(d)
			if err != nil {
				return err
			}
			// A root that is not there is a typo: no session could start
			// in it, and the setting would silently mean nothing.
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				what := "does not exist"
				if err == nil {
					what = "is not a directory"
				}
				return fmt.Errorf("invalid value %s for sessions.allowed_roots: %s %s", clip(string(d)), dir, what)
			}
			c.AllowedRoots = append(c.AllowedRoots, dir)
		}
		return nil
	}},
	{"sessions.worktree_root", "a directory path (relative to the settings file's directory; default DATA_DIR/worktrees)", func(c *Settings, raw json.RawMessage, p *configParser) (err error) {
		c.WorktreeRoot, err = p.path(raw)
		return err
	}},
	{"sessions.limits.memory_max", `a size such as "2GiB" or "512MiB", or a whole number of bytes >= 16 MiB (default no limit)`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		var n int64
		if s, err := jsonString(raw); err == nil {
			if n, err = claude.ParseBytes(s); err != nil {
				return errBadValue
			}
		} else if i, err := jsonInt(raw); err == nil {
			n = int64(i)
		} else {
			return errBadValue
		}
		if n < 16<<20 { // less and no CLI starts
			return errBadValue
		}
		c.Limits.MemoryMax = n
		return nil
	}},
	{"sessions.limits.cpu_max", "a number of CPUs >= 0.01, such as 1.5 (default no limit)", func(c *Settings, raw json.RawMessage, _ *configParser) error {
		var f *float64
		if json.Unmarshal(raw, &f) != nil || f == nil || *f < 0.01 || *f > 1<<20 {
			return errBadValue
		}
		c.Limits.CPUMax = *f
		return nil
	}},
	{"sessions.limits.pids_max", "a whole number of processes >= 8 (default no limit)", func(c *Settings, raw json.RawMessage, _ *configParser) error {
		n, err := jsonInt(raw)
		if err != nil || n < 8 { // the CLI alone runs a few
			return errBadValue
		}
		c.Limits.PIDsMax = int64(n)
		return nil
	}},
	{"sessions.sandbox", `an object of Claude Code's sandbox settings, such as {"enabled": true, "network": {"allowedDomains": ["github.com"]}} (default none)`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		if _, err := daemon.EnforcedSandbox(raw); err != nil {
			return errBadValue
		}
		c.Sandbox = raw
		return nil
	}},
	{"sessions.idle_timeout", `a duration > 0 such as "10m" or "1h", or "never" (default "10m")`, func(c *Settings, raw json.RawMessage, _ *configParser) (err error) {
		if s, err := jsonString(raw); err == nil && s == "never" {
			c.IdleTimeout = -1
			return nil
		}
		c.IdleTimeout, err = jsonDuration(raw)
		return err
	}},
	{"sessions.max_running", "a whole number of sessions >= 1, or -1 for no limit (default 32)", func(c *Settings, raw json.RawMessage, _ *configParser) error {
		n, err := jsonInt(raw)
		if err != nil || n == 0 || n < -1 {
			return errBadValue
		}
		c.MaxRunning = n
		return nil
	}},
	{"sessions.spare_clis", "a whole number of CLIs from 0 to 64, 0 for none (default 2)", func(c *Settings, raw json.RawMessage, _ *configParser) error {
		n, err := jsonInt(raw)
		if err != nil || n < 0 || n > maxSpareCLIs {
			return errBadValue
		}
		if c.SpareCLIs = n; n == 0 {
			c.SpareCLIs = -1 // none, not the default
		}
		return nil
	}},
	{"sessions.spare_lifetime", `a duration > 0 such as "5m" (default "5m")`, func(c *Settings, raw json.RawMessage, _ *configParser) (err error) {
		c.SpareLifetime, err = jsonDuration(raw)
		return err
	}},
	{"sessions.cli_scheduling", `"batch" or "normal" (default "batch")`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		s, err := jsonString(raw)
		if err != nil {
			return err
		}
		if c.CLIScheduling, err = claude.ParseScheduling(s); err != nil {
			return errBadValue
		}
		return nil
	}},
	{"store.url", `"sqlite:PATH" or "postgres://USER@HOST:PORT/DATABASE"`, func(c *Settings, raw json.RawMessage, p *configParser) error {
		s, err := jsonString(raw)
		if err != nil {
			return err
		}
		if StoreKind(s) == "sqlite" && s != "" {
			path, err := p.path(json.RawMessage(strconv.Quote(strings.TrimPrefix(s, sqliteScheme))))
			if err != nil {
				return err
			}
			s = sqliteScheme + path
		}
		if err := CheckStoreURL(s); err != nil {
			// Not errBadValue: its message would quote the value, password and all.
			return fmt.Errorf("invalid store.url: %v", err)
		}
		c.StoreURL = s
		return nil
	}},
	{"store.daemon_name", "a name of up to 200 characters, distinct between the daemons sharing a store", func(c *Settings, raw json.RawMessage, _ *configParser) error {
		s, err := jsonString(raw)
		if err != nil {
			return err
		}
		if s == "" || len(s) > 200 || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return errBadValue
		}
		c.DaemonName = s
		return nil
	}},
	{"store.lease_ttl", `a duration >= 3s such as "15s" (default "15s")`, func(c *Settings, raw json.RawMessage, _ *configParser) (err error) {
		d, err := jsonDuration(raw)
		if err != nil {
			return err
		}
		if d < 3*time.Second {
			return errBadValue
		}
		c.LeaseTTL = d
		return nil
	}},
	{"store.retention", `an object such as {"closed_sessions": "30d", "audit": "365d"}: how long the events of ended sessions, and the audit trail's entries, are kept (durations in d, h, m; default forever)`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m == nil {
			return errBadValue
		}
		var r Retention
		for _, k := range slices.Sorted(maps.Keys(m)) {
			var to *time.Duration
			switch k {
			case "closed_sessions":
				to = &r.ClosedSessions
			case "audit":
				to = &r.Audit
			default:
				return fmt.Errorf("unknown key %q in store.retention: it takes closed_sessions and audit", clip(k))
			}
			if string(m[k]) == "null" {
				continue
			}
			d, err := retentionDuration(m[k])
			if err != nil {
				return fmt.Errorf("invalid value %s for store.retention.%s: must be a duration of at least 1h such as \"30d\", \"12h\" or \"90d12h\"", clip(string(m[k])), k)
			}
			*to = d
		}
		c.Retention = r
		return nil
	}},
	{"workers.token_file", "the path of a file holding the token remote workers must present (relative to the settings file's directory)", func(c *Settings, raw json.RawMessage, p *configParser) (err error) {
		c.WorkerTokenFile, err = p.path(raw)
		return err
	}},
	{"auth.oidc.issuer", `the identity provider's issuer URL, such as "https://id.example.com"`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		s, err := jsonString(raw)
		if err != nil {
			return err
		}
		u, perr := url.Parse(s)
		if perr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return errBadValue
		}
		c.OIDC.Issuer = s
		return nil
	}},
	{"auth.oidc.client_id", "the daemon's client id at the identity provider", func(c *Settings, raw json.RawMessage, _ *configParser) (err error) {
		c.OIDC.ClientID, err = jsonString(raw)
		return err
	}},
	{"auth.oidc.client_secret_file", "the path of a file holding the client's secret (relative to the settings file's directory)", func(c *Settings, raw json.RawMessage, p *configParser) (err error) {
		c.OIDCClientSecretFile, err = p.path(raw)
		return err
	}},
	{"auth.oidc.redirect_url", `where the provider sends the browser back, "https://HOST:PORT/auth/callback" (default: the address the page was opened at)`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		s, err := jsonString(raw)
		if err != nil {
			return err
		}
		u, perr := url.Parse(s)
		if perr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != apiserver.AuthCallbackPath {
			return errBadValue
		}
		c.OIDC.RedirectURL = s
		return nil
	}},
	{"auth.oidc.scopes", `an array of scopes (default ["openid", "email", "profile", "groups"])`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		if json.Unmarshal(raw, &c.OIDC.Scopes) != nil || !slices.Contains(c.OIDC.Scopes, "openid") {
			return errBadValue
		}
		return nil
	}},
	{"auth.oidc.groups_claim", `the ID token's claim that lists a person's groups (default "groups")`, func(c *Settings, raw json.RawMessage, _ *configParser) (err error) {
		c.OIDC.GroupsClaim, err = jsonString(raw)
		return err
	}},
	{"auth.oidc.roles", `an array mapping people to roles, the first match wins, such as [{"group": "ops", "role": "admin"}, {"email": "bob@example.com", "role": "approver"}]`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var roles []apiserver.RoleMapping
		if dec.Decode(&roles) != nil {
			return errBadValue
		}
		for _, m := range roles {
			if (m.Group == "") == (m.Email == "") || apiserver.RolePermissions(m.Role) == nil || m.Role == apiserver.RoleWorker {
				return errBadValue
			}
		}
		c.OIDC.Roles = roles
		return nil
	}},
	{"auth.oidc.session_ttl", `how long a sign-in lasts, a duration > 0 such as "8h" (default "12h")`, func(c *Settings, raw json.RawMessage, _ *configParser) (err error) {
		c.OIDC.SessionTTL, err = jsonDuration(raw)
		return err
	}},
	{"workers.enabled", "true or false (default: true when workers.token_file is set)", func(c *Settings, raw json.RawMessage, _ *configParser) error {
		return json.Unmarshal(raw, &c.WorkersEnabled)
	}},
	{"workers.wait_timeout", `a duration > 0 such as "30s" or "2m" (default "2m")`, func(c *Settings, raw json.RawMessage, _ *configParser) (err error) {
		c.WorkerWait, err = jsonDuration(raw)
		return err
	}},
	{"workers.max_connections", fmt.Sprintf("a whole number of connections from 1 to %d (default %d)", MaxWorkerConnections, claude.DefaultMaxWorkerConnections), func(c *Settings, raw json.RawMessage, _ *configParser) error {
		n, err := jsonInt(raw)
		if err != nil || n < 1 || n > MaxWorkerConnections {
			return errBadValue
		}
		c.WorkerMaxConnections = n
		return nil
	}},
}

// MaxWorkerConnections bounds workers.max_connections: each connection
// holds a file descriptor.
const MaxWorkerConnections = 1 << 16

// The defaults of sessions.idle_timeout and sessions.max_running: a CLI
// holds about 200 MB, so 32 of them fit a workstation.
const (
	DefaultIdleTimeout = 10 * time.Minute
	DefaultMaxRunning  = 32
)

// The defaults of sessions.spare_clis and sessions.spare_lifetime: two
// spares (about 400 MB) cover a person switching between two projects;
// five minutes, half the idle timeout, is how long a person's next
// session in a directory is worth a CLI waiting for it. maxSpareCLIs
// bounds the setting: each spare is a CLI of the machine's.
const (
	DefaultSpareCLIs     = 2
	DefaultSpareLifetime = 5 * time.Minute
	maxSpareCLIs         = 64
)

// DefaultCLIScheduling is sessions.cli_scheduling's default: the CLIs and
// their tools never preempt the daemon as they wake, so that it stays
// responsive to its clients however many sessions stream or build.
const DefaultCLIScheduling = claude.SchedulingBatch

// MaxStreams bounds daemon.max_streams: an open stream costs about 50 KB.
const MaxStreams = 1 << 20

// MinStreamUnsentBytes and MaxStreamUnsentBytes bound
// daemon.stream_unsent_bytes: below a few pieces every message of a
// streaming session would count as large; above the payload limit the
// setting would mean nothing.
const (
	MinStreamUnsentBytes = 16 << 10
	MaxStreamUnsentBytes = 64 << 20
)

// MaxUnauthenticated bounds daemon.max_unauthenticated_connections: each
// such connection holds a file descriptor, and a limit past the process's
// would let strangers use them up before it closes any.
const MaxUnauthenticated = 1 << 16

// MaxSubscriberBuffer bounds daemon.subscriber_buffer: every subscriber
// gets a channel of that many events.
const MaxSubscriberBuffer = 1 << 20

func ValidPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && n <= 65535
}

// ParseLogLevel accepts debug, info, warn and error.
func ParseLogLevel(s string) (slog.Level, bool) {
	switch s {
	case "debug":
		return slog.LevelDebug, true
	case "info":
		return slog.LevelInfo, true
	case "warn":
		return slog.LevelWarn, true
	case "error":
		return slog.LevelError, true
	}
	return 0, false
}

func jsonString(raw json.RawMessage) (string, error) {
	var s *string
	if json.Unmarshal(raw, &s) != nil || s == nil || strings.TrimSpace(*s) == "" {
		return "", errBadValue
	}
	return *s, nil
}

// jsonInt accepts a JSON number that is a whole number fitting an int
// (1e6 included).
func jsonInt(raw json.RawMessage) (int, error) {
	var n *json.Number
	if json.Unmarshal(raw, &n) != nil || n == nil {
		return 0, errBadValue
	}
	if i, err := strconv.ParseInt(n.String(), 10, 0); err == nil {
		return int(i), nil
	}
	f, err := n.Float64()
	if err != nil || f != float64(int64(f)) || f > 1<<53 || f < -(1<<53) {
		return 0, errBadValue
	}
	return int(f), nil
}

func jsonDuration(raw json.RawMessage) (time.Duration, error) {
	s, err := jsonString(raw)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return 0, errBadValue
	}
	return d, nil
}

// shortJSON renders v as compact JSON for a message, cut at 60 bytes.
func shortJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return clip(string(b))
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

// Parse parses a settings file's contents. name is how messages
// call the file; dir is the directory relative paths are taken from.
// Whitespace alone is an empty configuration.
func Parse(name, dir string, data []byte, getenv func(string) string) (*Settings, error) {
	p := &configParser{name: name, dir: dir, data: data, getenv: getenv, seen: map[string]int{}}
	c := &Settings{File: name}
	if len(bytes.TrimSpace(data)) == 0 {
		return c, nil
	}
	if err := p.parse(c); err != nil {
		return nil, err
	}
	// The key pair goes together: one alone would fail at start-up, after
	// the CLI check, as "open : no such file or directory".
	for _, k := range [][2]string{{"tls_key_file", "tls_cert_file"}, {"tls_cert_file", "tls_key_file"}} {
		if p.isSet(k[0]) && !p.isSet(k[1]) {
			return nil, p.errorAt(p.seen[k[0]], "%s needs %s: set both (a certificate and its private key), or neither", k[0], k[1])
		}
	}
	return c, nil
}

// isSet reports whether the file sets key to something other than null.
func (p *configParser) isSet(key string) bool {
	at, ok := p.seen[key]
	return ok && !bytes.HasPrefix(p.data[at:], []byte("null"))
}

// configParser walks the file token by token, so that every error can say
// where it is.
type configParser struct {
	name   string
	dir    string
	data   []byte
	getenv func(string) string
	dec    *json.Decoder
	seen   map[string]int // key -> offset of its value
}

func (p *configParser) parse(c *Settings) error {
	p.dec = json.NewDecoder(bytes.NewReader(p.data))
	p.dec.UseNumber()
	if err := p.object("", c); err != nil {
		return err
	}
	if _, err := p.dec.Token(); err != io.EOF {
		if err != nil {
			return p.syntaxError(err)
		}
		return p.errorAt(int(p.dec.InputOffset())-1, "unexpected data after the settings object")
	}
	return nil
}

// object reads an object of settings; prefix is "" at the top and
// "section." inside a section.
func (p *configParser) object(prefix string, c *Settings) error {
	start := p.skipSpace(int(p.dec.InputOffset()))
	tok, err := p.dec.Token()
	if err != nil {
		return p.syntaxError(err)
	}
	if tok != json.Delim('{') {
		if prefix == "" {
			return p.errorAt(start, "the settings must be a JSON object {...}, not %s", describeToken(tok))
		}
		// Not reached: callers check for an object first.
		return p.errorAt(start, "%s must be an object", strings.TrimSuffix(prefix, "."))
	}
	for p.dec.More() {
		tok, err := p.dec.Token()
		if err != nil {
			return p.syntaxError(err)
		}
		key := prefix + tok.(string)
		keyEnd := int(p.dec.InputOffset())
		if slices.Contains(configSections, key) {
			valStart := p.valueStart(keyEnd)
			if valStart < len(p.data) && p.data[valStart] == '{' {
				if err := p.object(key+".", c); err != nil {
					return err
				}
				continue
			}
			var raw json.RawMessage
			if err := p.dec.Decode(&raw); err != nil {
				return p.syntaxError(err)
			}
			if string(raw) == "null" {
				continue
			}
			return p.errorAt(valStart, "invalid value %s for %s: must be an object with the keys %s",
				clip(string(raw)), key, strings.Join(sectionKeys(key), ", "))
		}
		var raw json.RawMessage
		if err := p.dec.Decode(&raw); err != nil {
			return p.syntaxError(err)
		}
		valStart := int(p.dec.InputOffset()) - len(raw)
		if err := p.set(c, key, raw, keyEnd, valStart); err != nil {
			return err
		}
	}
	if _, err := p.dec.Token(); err != nil { // the closing '}'
		return p.syntaxError(err)
	}
	return nil
}

// set stores one setting; null leaves it at its default.
func (p *configParser) set(c *Settings, key string, raw json.RawMessage, keyEnd, valStart int) error {
	i := slices.IndexFunc(configKeys, func(k configKey) bool { return k.name == key })
	if i < 0 {
		msg := fmt.Sprintf("unknown key %q", key)
		if s := suggestKey(key); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return p.errorAt(p.keyStart(keyEnd), "%s", msg)
	}
	if prev, ok := p.seen[key]; ok {
		line, _ := lineCol(p.data, prev)
		return p.errorAt(valStart, "%s is set twice (first on line %d)", key, line)
	}
	p.seen[key] = valStart
	if string(raw) == "null" {
		return nil
	}
	k := configKeys[i]
	switch err := k.set(c, raw, p); {
	case err == nil:
		return nil
	case errors.Is(err, errBadValue):
		return p.errorAt(valStart, "invalid value %s for %s: must be %s", clip(string(raw)), key, k.allowed)
	default:
		return p.errorAt(valStart, "%v", err)
	}
}

// path reads a path setting: "~/" is the home directory, and a relative
// path is taken from the settings file's directory.
func (p *configParser) path(raw json.RawMessage) (string, error) {
	s, err := jsonString(raw)
	if err != nil {
		return "", err
	}
	if strings.ContainsRune(s, 0) {
		return "", errBadValue
	}
	if s == "~" || strings.HasPrefix(s, "~/") {
		s = filepath.Join(homeDir(p.getenv), s[1:])
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(p.dir, s)
	}
	return filepath.Clean(s), nil
}

func sectionKeys(section string) []string {
	var keys []string
	for _, k := range configKeys {
		if strings.HasPrefix(k.name, section+".") {
			keys = append(keys, strings.TrimPrefix(k.name, section+"."))
		}
	}
	return keys
}

// suggestKey returns the valid key closest to an unknown one: the same
// last part in another place ("max_payload_bytes" for
// "daemon.max_payload_bytes"), or one a few edits away, a section's name
// included ("daemon" for "deamon"). "" if none is close.
func suggestKey(key string) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "_")) }
	leaf := norm(key[strings.LastIndexByte(key, '.')+1:])
	for _, k := range configKeys {
		if norm(k.name) == norm(key) || k.name[strings.LastIndexByte(k.name, '.')+1:] == leaf {
			return k.name
		}
	}
	for _, k := range configKeys { // "max_payload" for "max_payload_bytes"
		if kl := k.name[strings.LastIndexByte(k.name, '.')+1:]; len(leaf) >= 4 && (strings.HasPrefix(kl, leaf) || strings.HasPrefix(leaf, kl)) {
			return k.name
		}
	}
	best, bestDist := "", 0
	consider := func(name string, d int) {
		if best == "" || d < bestDist {
			best, bestDist = name, d
		}
	}
	for _, k := range configKeys {
		consider(k.name, min(suggest.Distance(norm(key), k.name), suggest.Distance(leaf, k.name[strings.LastIndexByte(k.name, '.')+1:])))
	}
	if !strings.Contains(key, ".") { // a section mistyped at the top: "deamon": {...}
		for _, s := range configSections {
			consider(s, suggest.Distance(norm(key), s))
		}
	}
	if bestDist > max(2, len(leaf)/3) {
		return ""
	}
	return best
}

func describeToken(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		return "an array"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprint(tok)
}

// keyStart returns the offset of the opening quote of the key that ends
// just before end.
func (p *configParser) keyStart(end int) int {
	if end <= 0 || end > len(p.data) {
		return end
	}
	for i := end - 2; i >= 0; i-- {
		if p.data[i] == '"' && (i == 0 || p.data[i-1] != '\\') {
			return i
		}
	}
	return end
}

// valueStart returns the offset of the value after the key ending at end.
func (p *configParser) valueStart(end int) int {
	i := p.skipSpace(end)
	if i < len(p.data) && p.data[i] == ':' {
		i = p.skipSpace(i + 1)
	}
	return i
}

func (p *configParser) skipSpace(i int) int {
	for i < len(p.data) && (p.data[i] == ' ' || p.data[i] == '\t' || p.data[i] == '\n' || p.data[i] == '\r' || p.data[i] == ',') {
		i++
	}
	return i
}

func (p *configParser) errorAt(offset int, format string, args ...any) error {
	line, col := lineCol(p.data, offset)
	return &SettingsError{file: p.name, line: line, col: col, msg: fmt.Sprintf(format, args...)}
}

// syntaxError places a decoding error at its line and column.
func (p *configParser) syntaxError(err error) error {
	// The Decoder's offsets are sometimes before the whitespace ahead of
	// the offending byte and sometimes after that byte; Unmarshal's are
	// always just after it.
	var se *json.SyntaxError
	if errors.As(json.Unmarshal(p.data, new(any)), &se) {
		if se.Offset >= int64(len(p.data)) && strings.HasPrefix(se.Error(), "unexpected end") {
			return p.errorAt(len(p.data), "invalid JSON: unexpected end of file")
		}
		return p.errorAt(max(int(se.Offset)-1, 0), "invalid JSON: %s", se.Error())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return p.errorAt(len(p.data), "invalid JSON: unexpected end of file")
	}
	return &SettingsError{file: p.name, msg: "invalid JSON: " + err.Error()}
}

// lineCol returns the 1-based line and column (in bytes) of offset.
func lineCol(data []byte, offset int) (line, col int) {
	offset = min(max(offset, 0), len(data))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = offset - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// Usage documents the settings file for "claudectl serve -h".
const Usage = `Settings file:
  --config FILE, else $XDG_CONFIG_HOME/claudectl/settings.json, else
  ~/.config/claudectl/settings.json (all defaults when that one is missing).
  A JSON object; relative paths in it are taken from its directory and null
  leaves a setting at its default. The flags of the same name (--listen,
  --data-dir, --cli, --token-file, --log-level, --log-format) override it,
  as do --store (store.url) and --worker-token-file (workers.token_file).
  Keys:

  listen                         "host:port" to serve on (default "127.0.0.1:7777")
  metrics_listen                 a second "host:port" serving only /metrics
                                 (Prometheus), without the token on loopback
                                 (default none: the API's address serves
                                 /metrics with the token)
  data_dir                       directory of claudectl.db
  cli                            path of the claude executable
  token_file                     file holding the bearer token clients must send
  tls_cert_file                  PEM certificate (chain): the API speaks HTTPS
                                 (required beyond loopback)
  tls_key_file                   its PEM private key
  insecure_cleartext             true: plain HTTP beyond loopback, behind a proxy
                                 that provides TLS (default false)
  allowed_hosts                  host names requests may be addressed to besides
                                 loopback and IP addresses (against DNS rebinding)
  allowed_origins                browser origins allowed to call the API besides
                                 the daemon's own (they get CORS headers)
  env                            {"NAME": "value", ...} added to every session's
                                 CLI environment ("" removes a variable)
  log_level                      "debug", "info", "warn" or "error" (default "info")
  log_format                     "text" or "json" (one object per line) (default "text")
  budgets.session_usd            a session's spend at which it is held: the turn
                                 in flight ends, no other starts, its prompts wait
                                 for an approver (claudectl budget) (default no cap)
  budgets.directory_usd_per_day  the same for the sessions of one directory, each
                                 day (the daemon's local midnight)
  budgets.daemon_usd_per_day     the same for every session of the daemon, each day
  daemon.max_payload_bytes       event lines longer than this are stored truncated;
                                 -1 for no limit (default 10485760, 10 MiB)
  daemon.full_sync               true: fsync every commit, surviving power loss
                                 (default false)
  daemon.subscriber_buffer       recent events of a session kept in memory for its
                                 subscribers; one further behind reads the store
                                 (default 8192)
  daemon.max_streams             subscriptions and watches served at once; one more
                                 is refused (default 4096)
  daemon.stream_write_timeout    a stream whose client accepts nothing of it for
                                 this long is ended (it may subscribe again from
                                 its last event); "never" to keep it (default "30s")
  daemon.stream_unsent_bytes     a stream whose client stopped reading for 5s while
                                 a larger message waits for it is ended then
                                 (default 262144, 256 KiB)
  daemon.max_unauthenticated_connections
                                 connections open at once that have made no request
                                 with the token yet; one more closes the oldest, and
                                 a warning is logged (default 256)
  permissions.watched_timeout    how long a permission request waits while someone
                                 watches its session (default "5m")
  permissions.unwatched_timeout  how long it waits while nobody does (default "24h")
  sessions.allowed_extra_args    CLI flags sessions may pass in extra_args, such as
                                 ["--verbose"] (default none: a flag such as
                                 --settings can run any command)
  sessions.allow_bypass_permissions
                                 true: sessions may use bypassPermissions
                                 (default false)
  sessions.allowed_roots         directories sessions' cwd and add_dirs must be
                                 inside (default anywhere)
  sessions.worktree_root         directory of the git worktrees of the sessions that
                                 ask for one (default DATA_DIR/worktrees)
  sessions.limits.memory_max     most memory each session's CLI and its tools may
                                 use together ("2GiB"); beyond it the kernel kills
                                 one, and the session says so (default no limit)
  sessions.limits.cpu_max        CPUs each session's CLI and its tools may use
                                 together (1.5) (default no limit)
  sessions.limits.pids_max       processes and threads each session's CLI and its
                                 tools may have at once (default no limit)
  sessions.sandbox               Claude Code's sandbox settings ({"enabled": true,
                                 "filesystem": {...}, "network": {"allowedDomains":
                                 [...]}}), forced on every session: clients cannot
                                 weaken it; enabled, no command outside it, and a
                                 session fails rather than run without it unless
                                 the object says otherwise (default none)
  sessions.idle_timeout          how long an idle session keeps its CLI before it
                                 is suspended (its next prompt resumes it), or
                                 "never" (default "10m")
  sessions.max_running           most sessions with a live CLI at once; the rest
                                 queue (status queued) and idle ones are suspended
                                 to make room; -1 for no limit (default 32)
  sessions.spare_clis            CLIs started ahead of need, initialized, that new
                                 sessions created with the options of a recent one
                                 take (a first token at once); each counts against
                                 sessions.max_running; 0 for none (default 2)
  sessions.spare_lifetime        how long a spare CLI waits for a session before it
                                 is closed, at most sessions.idle_timeout
                                 (default "5m")
  sessions.cli_scheduling        "batch": the CLIs and the tools they run keep their
                                 share of the CPU but never preempt the daemon when
                                 they wake (Linux SCHED_BATCH), so it stays
                                 responsive; "normal": as any process (default
                                 "batch")
  store.url                      where sessions and events are kept: "sqlite:PATH"
                                 or "postgres://USER@HOST:PORT/DATABASE" (the
                                 password in PGPASSFILE or the URL; default
                                 claudectl.db in data_dir)
  store.lease_ttl                how long a session's lease lasts unless renewed (every
                                 third of it): after a daemon dies, another takes its
                                 sessions this long after (default "15s")
  store.daemon_name              this daemon's name in the session leases of a store
                                 shared by several daemons (default host name and
                                 data_dir)
  store.retention                {"closed_sessions": "30d", "audit": "365d"}: the
                                 events of sessions ended longer ago than
                                 closed_sessions are removed (the sessions stay
                                 listed), and audit entries older than audit;
                                 checked every hour (default: kept forever)
  workers.token_file             file holding the token remote workers present
                                 ("claudectl worker --connect ws://ADDR/v1/worker");
                                 unset: no remote workers but those with a
                                 worker token (workers.enabled)
  auth.oidc.issuer               sign-in for the page with OpenID Connect: the
                                 identity provider's issuer URL (docs/security.md)
  auth.oidc.client_id            the daemon's client id at the provider
  auth.oidc.client_secret_file   file holding the client's secret
  auth.oidc.redirect_url         https://HOST:PORT/auth/callback (default: the
                                 address the page was opened at)
  auth.oidc.scopes               scopes asked for (default openid, email, profile,
                                 groups)
  auth.oidc.groups_claim         the ID token's claim of groups (default "groups")
  auth.oidc.roles                [{"group": G | "email": E, "role": R}, ...]: the
                                 first match gives the role; nobody else gets in
  auth.oidc.session_ttl          how long a sign-in lasts (default "12h")
  workers.enabled                accept remote workers presenting a token of role
                                 worker (claudectl tokens create NAME --role worker),
                                 with or without workers.token_file
  workers.wait_timeout           how long a session waits for a worker (default "2m")
  workers.max_connections        worker connections open at once (control links,
                                 session links, workers waiting); one more is
                                 refused with 503 and told why (default 1024)
  permissions.routes             who is asked for what: [{"name": N, "tools":
                                 ["Bash(git push:*)"], "dirs": [...], "ask":
                                 ["alice", "group:ops"], "approvals": 2,
                                 "escalate_after": "10m", "escalate_to": [...],
                                 "expire_after": "1h", "on_expiry": MSG}]; the
                                 first that matches applies (default none)
  permissions.groups             {"ops": ["alice", "bob"]}: groups routes ask
  notify.webhooks                [{"name": N, "url": U, "events": [...], "format":
                                 "json" | "slack" | "ntfy", "secret_file": F,
                                 "timeout": "10s", "attempts": 5}]: signed
                                 deliveries of requests and sessions' news
  notify.allow_private_targets   true: webhooks and push endpoints may be on
                                 loopback or private networks (default false)
  notify.push_subject            the mailto: or https: contact push services see
                                 (default mailto:claudectl@HOST)
  notify.page_url                the page's address, for links in webhooks

  A section may be an object ({"daemon": {"full_sync": true}}) or dotted keys
  ({"daemon.full_sync": true}). See docs/config.md.
`

// Keys returns the settings' dotted names, in the order Usage lists them.
func Keys() []string {
	keys := make([]string, len(configKeys))
	for i, k := range configKeys {
		keys[i] = k.name
	}
	return keys
}

// jsonDollars reads a number of dollars > 0.
func jsonDollars(raw json.RawMessage) (float64, error) {
	var f *float64
	if json.Unmarshal(raw, &f) != nil || f == nil || *f <= 0 || *f > 1e9 {
		return 0, errBadValue
	}
	return *f, nil
}

// MinRetention is the shortest store.retention: pruning runs once an
// hour, and a shorter one is more likely a typo ("30m" for "30d").
const MinRetention = time.Hour

// retentionDuration reads a retention: Go's durations with days ("30d",
// "1d12h"), at least MinRetention.
func retentionDuration(raw json.RawMessage) (time.Duration, error) {
	s, err := jsonString(raw)
	if err != nil {
		return 0, err
	}
	d, err := ParseDays(strings.TrimSpace(s))
	if err != nil || d < MinRetention {
		return 0, errBadValue
	}
	return d, nil
}

// ParseDays parses a duration as time.ParseDuration does, with days (d,
// 24 hours) allowed before the rest: "30d", "1d12h", "36h".
func ParseDays(s string) (time.Duration, error) {
	days, rest, ok := strings.Cut(s, "d")
	if !ok {
		return time.ParseDuration(s)
	}
	n, err := strconv.ParseUint(days, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	d := time.Duration(n) * 24 * time.Hour
	if rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil || r < 0 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		d += r
	}
	return d, nil
}
