package serve

import (
	"encoding/json"
	"github.com/claudectl/claudectl/apiserver"
	"log/slog"

	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/notify"
	"github.com/claudectl/claudectl/permission"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// parse parses a settings file held in memory, as if it were
// /etc/cc/settings.json, with HOME=/home/u.
func parse(t *testing.T, text string) (*Settings, error) {
	t.Helper()
	getenv := func(k string) string { return map[string]string{"HOME": "/home/u"}[k] }
	return Parse("settings.json", "/etc/cc", []byte(text), getenv)
}

func TestConfigParse(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       Settings
	}{
		{"empty", "", Settings{}},
		{"blank", " \n", Settings{}},
		{"empty object", "{}", Settings{}},
		{"everything", `{
			"listen": "127.0.0.1:9000",
			"data_dir": "data",
			"cli": "/opt/claude/bin/claude",
			"token_file": "~/secret/token",
			"env": {"A": "1", "B": ""},
			"log_level": "debug",
			"daemon": {"max_payload_bytes": 2048, "full_sync": true, "subscriber_buffer": 16, "max_streams": 100, "max_unauthenticated_connections": 1000},
			"permissions": {"watched_timeout": "90s", "unwatched_timeout": "1h30m"}
		}`, Settings{
			Listen: "127.0.0.1:9000", DataDir: "/etc/cc/data", CLI: "/opt/claude/bin/claude",
			TokenFile: "/home/u/secret/token", Env: map[string]string{"A": "1", "B": ""},
			LogLevel: slog.LevelDebug, MaxPayloadBytes: 2048, FullSync: true, SubscriberBuffer: 16, MaxStreams: 100, MaxUnauthenticated: 1000,
			WatchedTimeout: 90 * time.Second, UnwatchedTimeout: 90 * time.Minute,
		}},
		{"dotted keys", `{"daemon.full_sync": true, "permissions.watched_timeout": "1m", "daemon.max_payload_bytes": -1}`,
			Settings{FullSync: true, WatchedTimeout: time.Minute, MaxPayloadBytes: -1}},
		{"relative paths", `{"cli": "../bin/claude", "token_file": "tok", "data_dir": "./d/"}`,
			Settings{CLI: "/etc/bin/claude", TokenFile: "/etc/cc/tok", DataDir: "/etc/cc/d"}},
		{"oidc", `{"auth": {"oidc": {"issuer": "https://id.example.com", "client_id": "cctl", "client_secret_file": "oidc-secret",
			"roles": [{"group": "ops", "role": "admin"}, {"email": "bob@example.com", "role": "approver"}], "session_ttl": "8h"}},
			"workers.enabled": true}`,
			Settings{OIDC: apiserver.OIDCOptions{Issuer: "https://id.example.com", ClientID: "cctl", SessionTTL: 8 * time.Hour,
				Roles: []apiserver.RoleMapping{{Group: "ops", Role: "admin"}, {Email: "bob@example.com", Role: "approver"}}},
				OIDCClientSecretFile: "/etc/cc/oidc-secret", WorkersEnabled: true}},
		{"oidc dotted", `{"auth.oidc.issuer": "http://127.0.0.1:4444", "auth.oidc.scopes": ["openid", "email"]}`,
			Settings{OIDC: apiserver.OIDCOptions{Issuer: "http://127.0.0.1:4444", Scopes: []string{"openid", "email"}}}},
		{"null is the default", `{"listen": null, "daemon": null, "permissions": {"watched_timeout": null}}`, Settings{}},
		{"exponent", `{"daemon": {"max_payload_bytes": 1e6}}`, Settings{MaxPayloadBytes: 1000000}},
		{"stalled streams", `{"daemon": {"stream_write_timeout": "2m", "stream_unsent_bytes": 1048576}}`,
			Settings{StreamWriteTimeout: 2 * time.Minute, StreamUnsentBytes: 1 << 20}},
		{"stalled streams never", `{"daemon.stream_write_timeout": "never"}`, Settings{StreamWriteTimeout: -1}},
		{"log levels", `{"log_level": "error"}`, Settings{LogLevel: slog.LevelError}},
		{"cli scheduling", `{"sessions": {"cli_scheduling": "normal"}}`, Settings{CLIScheduling: claude.SchedulingNormal}},
		{"cli scheduling batch", `{"sessions.cli_scheduling": "batch"}`, Settings{CLIScheduling: claude.SchedulingBatch}},
		{"store sqlite", `{"store": {"url": "sqlite:db/claudectl.db"}}`, Settings{StoreURL: "sqlite:/etc/cc/db/claudectl.db"}},
		{"store postgres", `{"store.url": "postgres://cc@db.internal:5433/claudectl?sslmode=verify-full"}`,
			Settings{StoreURL: "postgres://cc@db.internal:5433/claudectl?sslmode=verify-full"}},
		{"worker connections", `{"workers": {"max_connections": 64}}`, Settings{WorkerMaxConnections: 64}},
		{"limits", `{"sessions": {"limits": {"memory_max": "2GiB", "cpu_max": 1.5, "pids_max": 512}}}`,
			Settings{Limits: claude.ResourceLimits{MemoryMax: 2 << 30, CPUMax: 1.5, PIDsMax: 512}}},
		{"limits dotted", `{"sessions.limits.memory_max": 1073741824, "sessions": {"limits.pids_max": 64}}`,
			Settings{Limits: claude.ResourceLimits{MemoryMax: 1 << 30, PIDsMax: 64}}},
		{"budgets", `{"budgets": {"session_usd": 5, "directory_usd_per_day": 20.5, "daemon_usd_per_day": 100}}`,
			Settings{Budgets: daemon.Budgets{SessionUSD: 5, DirectoryUSDPerDay: 20.5, DaemonUSDPerDay: 100}}},
		{"worktree root", `{"sessions.worktree_root": "wt"}`, Settings{WorktreeRoot: "/etc/cc/wt"}},
		{"notify", `{"notify": {"webhooks": [{"name": "ops", "url": "https://hooks.example.com/c", "events": ["permission_request", "escalated"],
			"format": "slack", "secret_file": "hook-secret", "timeout": "5s", "attempts": 3}], "allow_private_targets": true,
			"push_subject": "mailto:ops@example.com", "page_url": "https://claude.example.com"}}`,
			Settings{Notify: NotifySettings{Webhooks: []Webhook{{Webhook: notify.Webhook{Name: "ops", URL: "https://hooks.example.com/c",
				Events: []string{"permission_request", "escalated"}, Format: "slack", Timeout: 5 * time.Second, Attempts: 3},
				SecretFile: "/etc/cc/hook-secret"}}, AllowPrivateTargets: true, PushSubject: "mailto:ops@example.com", PageURL: "https://claude.example.com"}}},
		{"routes", `{"permissions": {"routes": [{"name": "pushes", "tools": ["Bash(git push:*)"], "ask": ["group:ops"], "approvals": 2,
			"escalate_after": "10m", "escalate_to": ["carol"], "expire_after": "1h", "on_expiry": "ask in #ops"}], "groups": {"ops": ["alice", "bob"]}}}`,
			Settings{Routes: []permission.Route{{Name: "pushes", Tools: []string{"Bash(git push:*)"}, Ask: []string{"group:ops"}, Approvals: 2,
				EscalateAfter: 10 * time.Minute, EscalateTo: []string{"carol"}, ExpireAfter: time.Hour, OnExpiry: "ask in #ops"}},
				Groups: map[string][]string{"ops": {"alice", "bob"}}}},
		{"sandbox", `{"sessions": {"sandbox": {"enabled": true, "network": {"allowedDomains": ["github.com"]}}}}`,
			Settings{Sandbox: json.RawMessage(`{"enabled": true, "network": {"allowedDomains": ["github.com"]}}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(t, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.File = "settings.json"
			if diff := cmp.Diff(tc.want, *got, cmpopts.IgnoreUnexported(Settings{}, permission.Route{})); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestConfigErrors checks every kind of message: each names the file and
// where, the key, the value and what is allowed.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		// JSON syntax: line:column of the offending byte.
		{"trailing comma", "{\n  \"listen\": \"127.0.0.1:1\",\n}", `settings.json:3:1: invalid JSON: invalid character '}' looking for beginning of object key string`},
		{"missing comma", "{\n  \"listen\": \"127.0.0.1:1\" \"cli\": 2}", `settings.json:2:27: invalid JSON: invalid character '"' after object key:value pair`},
		{"bad literal", `{"daemon": {"full_sync": tru}}`, `settings.json:1:29: invalid JSON: invalid character '}' in literal true (expecting 'e')`},
		{"truncated", `{"listen": "127.0.0.1:1"`, `settings.json:1:25: invalid JSON: unexpected end of file`},
		{"comment", "{\n // no\n}", `settings.json:2:2: invalid JSON: invalid character '/' looking for beginning of object key string`},
		{"not an object", `["listen"]`, `settings.json:1:1: the settings must be a JSON object {...}, not an array`},
		{"two objects", `{} {}`, `settings.json:1:4: unexpected data after the settings object`},

		// Unknown keys, with a suggestion when one is close.
		{"typo", `{"lsten": "x"}`, `settings.json:1:2: unknown key "lsten" (did you mean "listen"?)`},
		{"wrong section", `{"max_payload_bytes": 5}`, `settings.json:1:2: unknown key "max_payload_bytes" (did you mean "daemon.max_payload_bytes"?)`},
		{"prefix", "{\"daemon\": {\n \"max_payload\": 5}}", `settings.json:2:2: unknown key "daemon.max_payload" (did you mean "daemon.max_payload_bytes"?)`},
		{"dashes", `{"data-dir": "x"}`, `settings.json:1:2: unknown key "data-dir" (did you mean "data_dir"?)`},
		{"no suggestion", `{"colour": "red"}`, `settings.json:1:2: unknown key "colour"`},
		{"section typo", `{"deamon": {"max_streams": 5}}`, `settings.json:1:2: unknown key "deamon" (did you mean "daemon"?)`},
		{"section singular", `{"permission": {"watched_timeout": "5m"}}`, `settings.json:1:2: unknown key "permission" (did you mean "permissions"?)`},
		{"section typo null", `{"sesions": null}`, `settings.json:1:2: unknown key "sesions" (did you mean "sessions"?)`},

		// Wrong types and values.
		{"too many spares", `{"sessions": {"spare_clis": 65}}`, `settings.json:1:29: invalid value 65 for sessions.spare_clis: must be a whole number of CLIs from 0 to 64, 0 for none (default 2)`},
		{"listen type", `{"listen": 7777}`, `settings.json:1:12: invalid value 7777 for listen: must be an address "host:port" such as "127.0.0.1:7777"`},
		{"listen port", `{"listen": "127.0.0.1:http"}`, `invalid value "127.0.0.1:http" for listen: must be an address "host:port"`},
		{"empty path", `{"data_dir": ""}`, `settings.json:1:14: invalid value "" for data_dir: must be a directory path (relative to the settings file's directory)`},
		{"cli type", `{"cli": ["claude"]}`, `invalid value ["claude"] for cli: must be the path of the claude executable`},
		{"token_file type", `{"token_file": true}`, `invalid value true for token_file: must be the path of a file holding the bearer token`},
		{"env type", `{"env": ["A=1"]}`, `invalid value ["A=1"] for env: must be an object of environment variables with string values`},
		{"env value", `{"env": {"A": 1}}`, `settings.json:1:9: invalid value 1 for env.A: must be a string ("" removes the variable)`},
		{"env name", `{"env": {"A=B": "1"}}`, `invalid variable name "A=B" in env: must be non-empty, without '=' or NUL`},
		{"webhook format", `{"notify": {"webhooks": [{"name": "ops", "url": "https://h.example.com", "format": "teams"}]}}`,
			`invalid notify.webhooks[0]: format "teams": "json", "slack" or "ntfy"`},
		{"webhook key", `{"notify.webhooks": [{"name": "ops", "url": "https://h.example.com", "secret": "x"}]}`,
			`(keys: name, url, events, format, secret_file, timeout, attempts)`},
		{"webhook event", `{"notify.webhooks": [{"name": "ops", "url": "https://h.example.com", "events": ["done"]}]}`,
			`invalid notify.webhooks[0]: event "done": one of permission_request, question, escalated, budget_stop, session_finished, session_failed`},
		{"webhook twice", `{"notify.webhooks": [{"name": "ops", "url": "https://a.example.com"}, {"name": "ops", "url": "https://b.example.com"}]}`,
			`invalid notify.webhooks[1]: name "ops" is used by an earlier webhook`},
		{"route escalation", `{"permissions.routes": [{"name": "r", "ask": ["alice"], "escalate_after": "soon"}]}`,
			`invalid permissions.routes[0]: escalate_after "soon": a duration > 0 such as "10m"`},
		{"log level", `{"log_level": "verbose"}`, `settings.json:1:15: invalid value "verbose" for log_level: must be one of "debug", "info", "warn", "error"`},
		{"payload fraction", `{"daemon": {"max_payload_bytes": 1.5}}`, `settings.json:1:34: invalid value 1.5 for daemon.max_payload_bytes: must be a whole number of bytes >= 1024, or -1 for no limit`},
		{"payload small", `{"daemon": {"max_payload_bytes": 10}}`, `invalid value 10 for daemon.max_payload_bytes`},
		{"payload string", `{"daemon": {"max_payload_bytes": "10MiB"}}`, `invalid value "10MiB" for daemon.max_payload_bytes`},
		{"full_sync", "{\n\"daemon\": {\"full_sync\": \"yes\"}}", `settings.json:2:25: invalid value "yes" for daemon.full_sync: must be true or false`},
		{"subscriber_buffer", `{"daemon": {"subscriber_buffer": 0}}`, `invalid value 0 for daemon.subscriber_buffer: must be a whole number of events from 1 to 1048576`},
		{"max_streams", `{"daemon": {"max_streams": 0}}`, `invalid value 0 for daemon.max_streams: must be a whole number of streams from 1 to 1048576 (default 4096)`},
		{"stream_unsent_bytes", `{"daemon": {"stream_unsent_bytes": 1024}}`, `invalid value 1024 for daemon.stream_unsent_bytes: must be a whole number of bytes from 16384 to 67108864 (default 262144)`},
		{"stream_write_timeout", `{"daemon": {"stream_write_timeout": "0s"}}`, `invalid value "0s" for daemon.stream_write_timeout: must be a duration > 0 such as "30s" or "2m", or "never"`},
		{"max_unauthenticated_connections", `{"daemon": {"max_unauthenticated_connections": 100000}}`, `invalid value 100000 for daemon.max_unauthenticated_connections: must be a whole number of connections from 1 to 65536 (default 256)`},
		{"duration number", `{"permissions": {"watched_timeout": 300}}`, `settings.json:1:37: invalid value 300 for permissions.watched_timeout: must be a duration > 0 such as "90s", "5m" or "1h30m"`},
		{"duration unit", `{"permissions": {"unwatched_timeout": "1d"}}`, `invalid value "1d" for permissions.unwatched_timeout: must be a duration > 0 such as "30m", "24h" or "72h"`},
		{"duration zero", `{"permissions": {"watched_timeout": "0s"}}`, `invalid value "0s" for permissions.watched_timeout`},
		{"section type", `{"permissions": "5m"}`, `settings.json:1:17: invalid value "5m" for permissions: must be an object with the keys watched_timeout, unwatched_timeout`},
		{"store scheme", `{"store": {"url": "mysql://db/cc"}}`, `invalid store.url: must be "sqlite:PATH" or "postgres://USER@HOST:PORT/DATABASE"`},
		{"store sqlite path", `{"store.url": "sqlite:"}`, `invalid value "sqlite:" for store.url: must be "sqlite:PATH"`},
		{"store bad postgres", `{"store.url": "postgres://u:hunter2@db:port/cc"}`, `invalid store.url: not a PostgreSQL URL`},
		{"worker connections", `{"workers.max_connections": 0}`, `invalid value 0 for workers.max_connections: must be a whole number of connections from 1 to 65536 (default 1024)`},
		{"oidc issuer", `{"auth": {"oidc": {"issuer": "id.example.com"}}}`, `invalid value "id.example.com" for auth.oidc.issuer: must be the identity provider's issuer URL`},
		{"oidc role", `{"auth.oidc.roles": [{"group": "ops", "role": "root"}]}`, `invalid value [{"group": "ops", "role": "root"}] for auth.oidc.roles`},
		{"oidc role both", `{"auth.oidc.roles": [{"group": "ops", "email": "a@b", "role": "admin"}]}`, `for auth.oidc.roles: must be an array mapping people to roles`},
		{"oidc role worker", `{"auth.oidc.roles": [{"group": "ops", "role": "worker"}]}`, `for auth.oidc.roles`},
		{"oidc role field", `{"auth.oidc.roles": [{"groups": "ops", "role": "admin"}]}`, `for auth.oidc.roles`},
		{"oidc scopes", `{"auth.oidc.scopes": ["email"]}`, `invalid value ["email"] for auth.oidc.scopes`},
		{"oidc redirect", `{"auth.oidc.redirect_url": "https://x.example.com/callback"}`, `for auth.oidc.redirect_url`},
		{"oidc unknown", `{"auth": {"oidc": {"isuer": "https://x"}}}`, `unknown key "auth.oidc.isuer" (did you mean "auth.oidc.issuer"?)`},
		{"cli scheduling", `{"sessions.cli_scheduling": "idle"}`, `invalid value "idle" for sessions.cli_scheduling: must be "batch" or "normal"`},
		{"cli scheduling type", `{"sessions.cli_scheduling": true}`, `invalid value true for sessions.cli_scheduling: must be "batch" or "normal"`},
		{"set twice", "{\"daemon\": {\"full_sync\": true},\n \"daemon.full_sync\": false}", `settings.json:2:22: daemon.full_sync is set twice (first on line 1)`},
		{"tls key alone", "{\n  \"tls_key_file\": \"x\"}", `settings.json:2:19: tls_key_file needs tls_cert_file: set both (a certificate and its private key), or neither`},
		{"tls cert alone", `{"tls_cert_file": "c.pem", "tls_key_file": null}`, `settings.json:1:19: tls_cert_file needs tls_key_file`},
		{"root missing", `{"sessions": {"allowed_roots": ["/", "nonexist"]}}`, `settings.json:1:32: invalid value "nonexist" for sessions.allowed_roots: /etc/cc/nonexist does not exist`},
		{"memory_max unit", `{"sessions": {"limits": {"memory_max": "2 parsecs"}}}`, `invalid value "2 parsecs" for sessions.limits.memory_max: must be a size such as "2GiB"`},
		{"memory_max small", `{"sessions.limits.memory_max": "1MiB"}`, `invalid value "1MiB" for sessions.limits.memory_max`},
		{"cpu_max", `{"sessions.limits.cpu_max": 0}`, `invalid value 0 for sessions.limits.cpu_max: must be a number of CPUs >= 0.01`},
		{"pids_max", `{"sessions.limits.pids_max": 2.5}`, `invalid value 2.5 for sessions.limits.pids_max: must be a whole number of processes >= 8`},
		{"limits typo", `{"sessions": {"limits": {"memory": "1GiB"}}}`, `unknown key "sessions.limits.memory" (did you mean "sessions.limits.memory_max"?)`},
		{"budget zero", `{"budgets.session_usd": 0}`, `invalid value 0 for budgets.session_usd: must be a number of dollars > 0`},
		{"budget string", `{"budgets": {"daemon_usd_per_day": "$5"}}`, `invalid value "$5" for budgets.daemon_usd_per_day`},
		{"budget typo", `{"budgets": {"session": 5}}`, `unknown key "budgets.session" (did you mean "budgets.session_usd"?)`},
		{"sandbox type", `{"sessions.sandbox": true}`, `invalid value true for sessions.sandbox: must be an object of Claude Code's sandbox settings`},
		{"root a file", `{"sessions.allowed_roots": ["/etc/passwd"]}`, `invalid value "/etc/passwd" for sessions.allowed_roots: /etc/passwd is not a directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.text)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n  %v\nwant it to contain\n  %s", err, tc.want)
			}
		})
	}
}

// TestStoreURLErrorKeepsThePasswordOut: a bad store.url is reported
// without the password it holds.
func TestStoreURLErrorKeepsThePasswordOut(t *testing.T) {
	_, err := parse(t, `{"store.url": "postgres://u:hunter2@db:port/cc"}`)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v", err)
	}
}
