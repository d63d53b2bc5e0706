package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Reloading the settings (SIGHUP, claudectl reload) is caddy's way: the
// whole file is read and checked into a new Settings first, and only a
// file that is good in full changes anything; then what can change while
// the daemon runs is applied, and what needs a restart is named (and left
// as it is until the daemon restarts).

// liveKeys are the settings a reload applies, each with what applies it.
// Every other key needs a restart (restartKeys); TestReloadKeys checks
// that each key is one or the other.
var liveKeys = map[string]func(srv *Server, s *Settings){
	"log_level": func(srv *Server, s *Settings) { srv.level.Set(s.LogLevel) },
	"permissions.watched_timeout": func(srv *Server, s *Settings) {
		srv.broker.SetTimeouts(cmp.Or(s.WatchedTimeout, DefaultWatchedTimeout), 0)
	},
	"permissions.unwatched_timeout": func(srv *Server, s *Settings) {
		srv.broker.SetTimeouts(0, cmp.Or(s.UnwatchedTimeout, DefaultUnwatchedTimeout))
	},
	"sessions.idle_timeout": func(srv *Server, s *Settings) {
		srv.Daemon.SetIdleTimeout(orDefault(s.IdleTimeout, DefaultIdleTimeout))
	},
	"sessions.max_running": func(srv *Server, s *Settings) {
		srv.Daemon.SetMaxRunning(orDefault(s.MaxRunning, DefaultMaxRunning))
	},
	"sessions.spare_clis":         setSpares,
	"sessions.spare_lifetime":     setSpares,
	"daemon.max_streams":          setStreamLimits,
	"daemon.stream_write_timeout": setStreamLimits,
	"daemon.stream_unsent_bytes":  setStreamLimits,
	"store.retention":             func(*Server, *Settings) {}, // read at each pruning
}

// setSpares applies sessions.spare_clis and sessions.spare_lifetime: the
// spares running are closed, and new ones start under the new settings.
func setSpares(srv *Server, s *Settings) {
	srv.Daemon.SetSpares(orDefault(s.SpareCLIs, DefaultSpareCLIs), orDefault(s.SpareLifetime, DefaultSpareLifetime))
}

// The defaults of permissions.watched_timeout and unwatched_timeout (the
// broker's, which its zero options mean).
const (
	DefaultWatchedTimeout   = 5 * time.Minute
	DefaultUnwatchedTimeout = 24 * time.Hour
)

func setStreamLimits(srv *Server, s *Settings) {
	srv.service.SetStreamLimits(s.MaxStreams, s.StreamWriteTimeout, s.StreamUnsentBytes)
}

// restartKeys are the settings a reload cannot apply: the daemon reads
// them once as it starts (its addresses, files, store, the CLI, what each
// session's CLI was started with).
var restartKeys = []string{"listen", "metrics_listen", "data_dir", "cli", "token_file", "tls_cert_file", "tls_key_file",
	"insecure_cleartext", "allowed_hosts", "allowed_origins", "env", "log_format", "daemon.max_payload_bytes",
	"daemon.full_sync", "daemon.subscriber_buffer", "daemon.max_unauthenticated_connections",
	"sessions.allowed_extra_args", "sessions.allow_bypass_permissions", "sessions.allowed_roots", "sessions.cli_scheduling",
	"store.url", "store.daemon_name", "store.lease_ttl", "workers.token_file", "workers.enabled", "workers.wait_timeout",
	"workers.max_connections", "auth.oidc.issuer", "auth.oidc.client_id", "auth.oidc.client_secret_file", "auth.oidc.redirect_url",
	"auth.oidc.scopes", "auth.oidc.groups_claim", "auth.oidc.roles", "auth.oidc.session_ttl",
	"budgets.session_usd", "budgets.directory_usd_per_day", "budgets.daemon_usd_per_day", "sessions.worktree_root",
	"sessions.limits.memory_max", "sessions.limits.cpu_max", "sessions.limits.pids_max", "sessions.sandbox",
	// The notifier's targets and the broker's routes are built as the
	// daemon starts.
	"notify.webhooks", "notify.allow_private_targets", "notify.push_subject", "notify.page_url",
	"permissions.routes", "permissions.groups"}

// settingOf returns what key holds in s, for comparing two settings.
func settingOf(s *Settings, key string) any {
	switch key {
	case "listen":
		return s.Listen
	case "metrics_listen":
		return s.MetricsListen
	case "data_dir":
		return s.DataDir
	case "cli":
		return s.CLI
	case "token_file":
		return s.TokenFile
	case "tls_cert_file":
		return s.TLSCertFile
	case "tls_key_file":
		return s.TLSKeyFile
	case "insecure_cleartext":
		return s.InsecureCleartext
	case "allowed_hosts":
		return s.AllowedHosts
	case "allowed_origins":
		return s.AllowedOrigins
	case "env":
		return s.Env
	case "log_level":
		return s.LogLevel
	case "log_format":
		return s.LogFormat
	case "daemon.max_payload_bytes":
		return s.MaxPayloadBytes
	case "daemon.full_sync":
		return s.FullSync
	case "daemon.subscriber_buffer":
		return s.SubscriberBuffer
	case "daemon.max_streams":
		return s.MaxStreams
	case "daemon.stream_write_timeout":
		return s.StreamWriteTimeout
	case "daemon.stream_unsent_bytes":
		return s.StreamUnsentBytes
	case "daemon.max_unauthenticated_connections":
		return s.MaxUnauthenticated
	case "permissions.watched_timeout":
		return s.WatchedTimeout
	case "permissions.unwatched_timeout":
		return s.UnwatchedTimeout
	case "sessions.allowed_extra_args":
		return s.AllowedExtraArgs
	case "sessions.allow_bypass_permissions":
		return s.AllowBypassPermissions
	case "sessions.allowed_roots":
		return s.AllowedRoots
	case "sessions.idle_timeout":
		return s.IdleTimeout
	case "sessions.max_running":
		return s.MaxRunning
	case "sessions.spare_clis":
		return s.SpareCLIs
	case "sessions.spare_lifetime":
		return s.SpareLifetime
	case "sessions.cli_scheduling":
		return s.CLIScheduling
	case "store.url":
		return s.StoreURL
	case "store.daemon_name":
		return s.DaemonName
	case "store.lease_ttl":
		return s.LeaseTTL
	case "store.retention":
		return s.Retention
	case "workers.token_file":
		return s.WorkerTokenFile
	case "workers.enabled":
		return s.WorkersEnabled
	case "auth.oidc.issuer":
		return s.OIDC.Issuer
	case "auth.oidc.client_id":
		return s.OIDC.ClientID
	case "auth.oidc.client_secret_file":
		return s.OIDCClientSecretFile
	case "auth.oidc.redirect_url":
		return s.OIDC.RedirectURL
	case "auth.oidc.scopes":
		return s.OIDC.Scopes
	case "auth.oidc.groups_claim":
		return s.OIDC.GroupsClaim
	case "auth.oidc.roles":
		return s.OIDC.Roles
	case "auth.oidc.session_ttl":
		return s.OIDC.SessionTTL
	case "workers.wait_timeout":
		return s.WorkerWait
	case "workers.max_connections":
		return s.WorkerMaxConnections
	case "budgets.session_usd":
		return s.Budgets.SessionUSD
	case "budgets.directory_usd_per_day":
		return s.Budgets.DirectoryUSDPerDay
	case "budgets.daemon_usd_per_day":
		return s.Budgets.DaemonUSDPerDay
	case "sessions.worktree_root":
		return s.WorktreeRoot
	case "sessions.limits.memory_max":
		return s.Limits.MemoryMax
	case "sessions.limits.cpu_max":
		return s.Limits.CPUMax
	case "sessions.limits.pids_max":
		return s.Limits.PIDsMax
	case "sessions.sandbox":
		return string(s.Sandbox)
	case "notify.webhooks":
		return s.Notify.Webhooks
	case "notify.allow_private_targets":
		return s.Notify.AllowPrivateTargets
	case "notify.push_subject":
		return s.Notify.PushSubject
	case "notify.page_url":
		return s.Notify.PageURL
	case "permissions.routes":
		return s.Routes
	case "permissions.groups":
		return s.Groups
	}
	panic("serve: settingOf: unknown key " + key)
}

// A ReloadReport says what a reload did.
type ReloadReport struct {
	// File is the settings file read ("" when there was none: every
	// setting at its default, as the daemon's flags leave them).
	File string `json:"file"`
	// Applied are the settings that changed and took effect.
	Applied []string `json:"applied"`
	// Restart are the settings that changed and take effect only when
	// the daemon restarts; until then the daemon keeps their old values.
	Restart []string `json:"restart"`
}

// ErrNoReload is Reload's error for a daemon started without Options.Load.
var ErrNoReload = errors.New("this daemon was not started by claudectl serve with a settings file to read again")

// Reload reads the settings again (Options.Load: the file, then the
// command's flags over it) and applies what changed that a running daemon
// can take. A file that does not parse or check changes nothing: the
// error says why (a *SettingsError with its line and column). Reloads run
// one at a time.
func (srv *Server) Reload(ctx context.Context) (*ReloadReport, error) {
	if srv.load == nil {
		return nil, ErrNoReload
	}
	srv.reloading.Lock()
	defer srv.reloading.Unlock()
	next, err := srv.load()
	if err != nil {
		srv.Log.Error("reload: the settings were not changed", "err", err)
		return nil, err
	}
	cur := srv.Settings()
	rep := &ReloadReport{File: next.File, Applied: []string{}, Restart: []string{}}
	merged := *cur // what is in force after: the live keys' new values
	merged.File = next.File
	for _, key := range Keys() {
		if reflect.DeepEqual(settingOf(cur, key), settingOf(next, key)) {
			continue
		}
		if _, ok := liveKeys[key]; ok {
			rep.Applied = append(rep.Applied, key)
			continue
		}
		rep.Restart = append(rep.Restart, key)
	}
	// Copy the live keys' values, then apply each once.
	merged.LogLevel = next.LogLevel
	merged.WatchedTimeout, merged.UnwatchedTimeout = next.WatchedTimeout, next.UnwatchedTimeout
	merged.IdleTimeout, merged.MaxRunning = next.IdleTimeout, next.MaxRunning
	merged.SpareCLIs, merged.SpareLifetime = next.SpareCLIs, next.SpareLifetime
	merged.MaxStreams, merged.StreamWriteTimeout, merged.StreamUnsentBytes = next.MaxStreams, next.StreamWriteTimeout, next.StreamUnsentBytes
	merged.Retention = next.Retention
	applied := map[uintptr]bool{}
	for _, key := range rep.Applied {
		f := liveKeys[key]
		if p := reflect.ValueOf(f).Pointer(); !applied[p] {
			applied[p] = true
			f(srv, &merged)
		}
	}
	srv.settings.Store(&merged)
	srv.Log.Info("reloaded the settings", "file", orNone(next.File), "applied", strings.Join(rep.Applied, ","),
		"restart_needed", strings.Join(rep.Restart, ","))
	if len(rep.Restart) > 0 {
		srv.Log.Warn("reload: these settings changed but take effect only when the daemon restarts; the old values stay in force until then",
			"settings", strings.Join(rep.Restart, ","))
	}
	return rep, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (srv *Server) handleReload(w http.ResponseWriter, r *http.Request) {
	rep, err := srv.Reload(r.Context())
	var se *SettingsError
	switch {
	case errors.As(err, &se):
		adminError(w, http.StatusBadRequest, "invalid_argument", fmt.Sprintf("the settings were not changed: %v", err))
	case errors.Is(err, ErrNoReload):
		adminError(w, http.StatusConflict, "failed_precondition", err.Error())
	case err != nil:
		adminError(w, http.StatusBadRequest, "invalid_argument", fmt.Sprintf("the settings were not changed: %v", err))
	default:
		writeAdminJSON(w, rep)
	}
}

// keysCovered reports the keys neither live nor restart (for the test).
func keysCovered() []string {
	var missing []string
	for _, k := range Keys() {
		if _, ok := liveKeys[k]; !ok && !slices.Contains(restartKeys, k) {
			missing = append(missing, k)
		}
	}
	return missing
}
