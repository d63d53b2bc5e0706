package cli

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// parse parses a settings file held in memory, as if it were
// /etc/cc/settings.json, with HOME=/home/u.
func parse(t *testing.T, text string) (*serveConfig, error) {
	t.Helper()
	getenv := func(k string) string { return map[string]string{"HOME": "/home/u"}[k] }
	return parseServeConfig("settings.json", "/etc/cc", []byte(text), getenv)
}

func TestConfigParse(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       serveConfig
	}{
		{"empty", "", serveConfig{}},
		{"blank", " \n", serveConfig{}},
		{"empty object", "{}", serveConfig{}},
		{"everything", `{
			"listen": "127.0.0.1:9000",
			"data_dir": "data",
			"cli": "/opt/claude/bin/claude",
			"token_file": "~/secret/token",
			"env": {"A": "1", "B": ""},
			"log_level": "debug",
			"daemon": {"max_payload_bytes": 2048, "full_sync": true, "subscriber_buffer": 16},
			"permissions": {"watched_timeout": "90s", "unwatched_timeout": "1h30m"}
		}`, serveConfig{
			Listen: "127.0.0.1:9000", DataDir: "/etc/cc/data", CLI: "/opt/claude/bin/claude",
			TokenFile: "/home/u/secret/token", Env: map[string]string{"A": "1", "B": ""},
			LogLevel: slog.LevelDebug, MaxPayloadBytes: 2048, FullSync: true, SubscriberBuffer: 16,
			WatchedTimeout: 90 * time.Second, UnwatchedTimeout: 90 * time.Minute,
		}},
		{"dotted keys", `{"daemon.full_sync": true, "permissions.watched_timeout": "1m", "daemon.max_payload_bytes": -1}`,
			serveConfig{FullSync: true, WatchedTimeout: time.Minute, MaxPayloadBytes: -1}},
		{"relative paths", `{"cli": "../bin/claude", "token_file": "tok", "data_dir": "./d/"}`,
			serveConfig{CLI: "/etc/bin/claude", TokenFile: "/etc/cc/tok", DataDir: "/etc/cc/d"}},
		{"null is the default", `{"listen": null, "daemon": null, "permissions": {"watched_timeout": null}}`, serveConfig{}},
		{"exponent", `{"daemon": {"max_payload_bytes": 1e6}}`, serveConfig{MaxPayloadBytes: 1000000}},
		{"log levels", `{"log_level": "error"}`, serveConfig{LogLevel: slog.LevelError}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(t, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.File = "settings.json"
			if diff := cmp.Diff(tc.want, *got, cmpopts.IgnoreUnexported(serveConfig{})); diff != "" {
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

		// Wrong types and values.
		{"listen type", `{"listen": 7777}`, `settings.json:1:12: invalid value 7777 for listen: must be an address "host:port" such as "127.0.0.1:7777"`},
		{"listen port", `{"listen": "127.0.0.1:http"}`, `invalid value "127.0.0.1:http" for listen: must be an address "host:port"`},
		{"empty path", `{"data_dir": ""}`, `settings.json:1:14: invalid value "" for data_dir: must be a directory path (relative to the settings file's directory)`},
		{"cli type", `{"cli": ["claude"]}`, `invalid value ["claude"] for cli: must be the path of the claude executable`},
		{"token_file type", `{"token_file": true}`, `invalid value true for token_file: must be the path of a file holding the bearer token`},
		{"env type", `{"env": ["A=1"]}`, `invalid value ["A=1"] for env: must be an object of environment variables with string values`},
		{"env value", `{"env": {"A": 1}}`, `settings.json:1:9: invalid value 1 for env.A: must be a string ("" removes the variable)`},
		{"env name", `{"env": {"A=B": "1"}}`, `invalid variable name "A=B" in env: must be non-empty, without '=' or NUL`},
		{"log level", `{"log_level": "verbose"}`, `settings.json:1:15: invalid value "verbose" for log_level: must be one of "debug", "info", "warn", "error"`},
		{"payload fraction", `{"daemon": {"max_payload_bytes": 1.5}}`, `settings.json:1:34: invalid value 1.5 for daemon.max_payload_bytes: must be a whole number of bytes >= 1024, or -1 for no limit`},
		{"payload small", `{"daemon": {"max_payload_bytes": 10}}`, `invalid value 10 for daemon.max_payload_bytes`},
		{"payload string", `{"daemon": {"max_payload_bytes": "10MiB"}}`, `invalid value "10MiB" for daemon.max_payload_bytes`},
		{"full_sync", "{\n\"daemon\": {\"full_sync\": \"yes\"}}", `settings.json:2:25: invalid value "yes" for daemon.full_sync: must be true or false`},
		{"subscriber_buffer", `{"daemon": {"subscriber_buffer": 0}}`, `invalid value 0 for daemon.subscriber_buffer: must be a whole number of events from 1 to 1048576`},
		{"duration number", `{"permissions": {"watched_timeout": 300}}`, `settings.json:1:37: invalid value 300 for permissions.watched_timeout: must be a duration > 0 such as "90s", "5m" or "1h30m"`},
		{"duration unit", `{"permissions": {"unwatched_timeout": "1d"}}`, `invalid value "1d" for permissions.unwatched_timeout: must be a duration > 0 such as "30m", "24h" or "72h"`},
		{"duration zero", `{"permissions": {"watched_timeout": "0s"}}`, `invalid value "0s" for permissions.watched_timeout`},
		{"section type", `{"permissions": "5m"}`, `settings.json:1:17: invalid value "5m" for permissions: must be an object with the keys watched_timeout, unwatched_timeout`},
		{"set twice", "{\"daemon\": {\"full_sync\": true},\n \"daemon.full_sync\": false}", `settings.json:2:22: daemon.full_sync is set twice (first on line 1)`},
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

func TestConfigLocation(t *testing.T) {
	xdg, home := t.TempDir(), t.TempDir()
	write := func(dir, text string) string {
		t.Helper()
		p := filepath.Join(dir, "settings.json")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := map[string]string{"HOME": home}
	getenv := func(k string) string { return env[k] }

	// No file at the default location: all defaults.
	c, err := loadServeConfig("", getenv)
	if err != nil || c.File != "" || c.Listen != "" {
		t.Fatalf("no file: %+v, %v", c, err)
	}

	// ~/.config/claudectl/settings.json.
	homeFile := write(filepath.Join(home, ".config", "claudectl"), `{"listen": "127.0.0.1:1", "data_dir": "d"}`)
	c, err = loadServeConfig("", getenv)
	if err != nil || c.File != homeFile || c.Listen != "127.0.0.1:1" || c.DataDir != filepath.Join(home, ".config", "claudectl", "d") {
		t.Fatalf("home file: %+v, %v", c, err)
	}

	// $XDG_CONFIG_HOME wins over ~/.config, even when it has no file.
	env["XDG_CONFIG_HOME"] = xdg
	c, err = loadServeConfig("", getenv)
	if err != nil || c.File != "" {
		t.Fatalf("empty XDG_CONFIG_HOME: %+v, %v", c, err)
	}
	xdgFile := write(filepath.Join(xdg, "claudectl"), `{"listen": "127.0.0.1:2"}`)
	c, err = loadServeConfig("", getenv)
	if err != nil || c.File != xdgFile || c.Listen != "127.0.0.1:2" {
		t.Fatalf("XDG file: %+v, %v", c, err)
	}

	// --config wins over both, and must exist.
	own := write(t.TempDir(), `{"listen": "127.0.0.1:3"}`)
	c, err = loadServeConfig(own, getenv)
	if err != nil || c.File != own || c.Listen != "127.0.0.1:3" {
		t.Fatalf("--config: %+v, %v", c, err)
	}
	missing := filepath.Join(t.TempDir(), "nope.json")
	_, err = loadServeConfig(missing, getenv)
	if want := `invalid value "` + missing + `" for --config: no such file`; err == nil || err.Error() != want {
		t.Errorf("missing --config: %v, want %s", err, want)
	}
	_, err = loadServeConfig(t.TempDir(), getenv)
	if err == nil || !strings.Contains(err.Error(), "for --config: is a directory") {
		t.Errorf("--config DIR: %v", err)
	}

	// A bad default file is an error too, naming it.
	write(filepath.Join(xdg, "claudectl"), `{"listen": 1}`)
	_, err = loadServeConfig("", getenv)
	if err == nil || !strings.HasPrefix(err.Error(), xdgFile+":1:12: invalid value 1 for listen") {
		t.Errorf("bad default file: %v", err)
	}
}

// TestConfigFlagsOverride checks file < flags, one key at a time.
func TestConfigFlagsOverride(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "settings.json")
	text := `{"listen": "127.0.0.1:1", "data_dir": "fd", "cli": "fcli", "token_file": "ftok", "log_level": "warn",
		"env": {"A": "file", "B": "file"}, "daemon": {"full_sync": true}}`
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) *serveConfig {
		t.Helper()
		cfg, err := loadServeConfig(file, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		var f serveConfig
		var configPath string
		fs := serveFlags(&configPath, &f)
		if _, err := parseFlags(fs, args); err != nil {
			t.Fatal(err)
		}
		if err := applyServeFlags(cfg, &f, fs); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	c := run()
	want := serveConfig{Listen: "127.0.0.1:1", DataDir: filepath.Join(dir, "fd"), CLI: filepath.Join(dir, "fcli"),
		TokenFile: filepath.Join(dir, "ftok"), LogLevel: slog.LevelWarn, Env: map[string]string{"A": "file", "B": "file"},
		FullSync: true, File: file}
	if diff := cmp.Diff(want, *c, cmpopts.IgnoreUnexported(serveConfig{})); diff != "" {
		t.Errorf("file only (-want +got)\n%s", diff)
	}
	c = run("--listen", "127.0.0.1:2", "--data-dir", "rel", "--cli", "/x/claude", "--token-file", "t", "--log-level", "debug")
	want.Listen, want.DataDir, want.CLI, want.TokenFile, want.LogLevel = "127.0.0.1:2", "rel", "/x/claude", "t", slog.LevelDebug
	if diff := cmp.Diff(want, *c, cmpopts.IgnoreUnexported(serveConfig{})); diff != "" {
		t.Errorf("flags (-want +got)\n%s", diff)
	}
	if !c.tokenFromFlag {
		t.Error("tokenFromFlag not set")
	}

	// Env.CLIEnv goes over the file's env.
	m := newServeMain()
	c.apply(m, map[string]string{"B": "inv"})
	if diff := cmp.Diff(map[string]string{"A": "file", "B": "inv"}, m.Env); diff != "" {
		t.Errorf("env (-want +got)\n%s", diff)
	}
	if !m.FullSync || m.Listen != "127.0.0.1:2" || m.LogLevel != slog.LevelDebug || m.SettingsFile != file {
		t.Errorf("apply: %+v", m)
	}
}

// TestServeConfigUsageErrors runs claudectl serve with bad settings: each
// stops before the daemon starts, with exit status 2 and the message.
func TestServeConfigUsageErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.json", "{\n  \"permissions\": {\"watched_timeout\": \"5 minutes\"}\n}\n")
	notok := write("notok.json", `{"token_file": "missing-token"}`)
	empty := write("empty.json", `{"token_file": "empty-token"}`)
	write("empty-token", "\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", bad}, bad + `:2:38: invalid value "5 minutes" for permissions.watched_timeout: must be a duration > 0`},
		{[]string{"--config", filepath.Join(dir, "nope.json")}, `for --config: no such file`},
		{[]string{"--config", ""}, `invalid value "" for --config: must be the path of a settings file`},
		{[]string{"--config", notok}, notok + `: invalid value "` + filepath.Join(dir, "missing-token") + `" for token_file: no such file or directory`},
		{[]string{"--config", empty}, `for token_file: the file is empty`},
		{[]string{"--config", empty, "--token-file", filepath.Join(dir, "nope")}, `for --token-file: no such file or directory`},
		{[]string{"--log-level", "loud"}, `invalid value "loud" for --log-level: must be one of debug, info, warn, error`},
		{[]string{"--listen", "7777"}, `invalid value "7777" for --listen: must be "host:port"`},
		{[]string{"--data-dir", ""}, `invalid value "" for --data-dir: must not be empty`},
	} {
		inv := invocation{getenv: map[string]string{"XDG_CONFIG_HOME": t.TempDir()}}
		o := claudectl(t, inv, append([]string{"serve"}, tc.args...)...)
		if o.code != ExitUsage || !strings.Contains(o.stderr, tc.want) {
			t.Errorf("serve %q: exit %d, stderr %q; want exit 2 and %q", tc.args, o.code, o.stderr, tc.want)
		}
	}
}

func TestServeUsageListsKeys(t *testing.T) {
	o := claudectl(t, invocation{}, "serve", "-h")
	if o.code != 0 {
		t.Fatalf("exit %d", o.code)
	}
	for _, k := range configKeys {
		if !strings.Contains(o.stdout, "\n  "+k.name+" ") {
			t.Errorf("usage does not document %s", k.name)
		}
	}
	for _, f := range []string{"--config", "--listen", "--data-dir", "--cli", "--token-file", "--log-level"} {
		if !strings.Contains(o.stdout, "  "+f+" ") {
			t.Errorf("usage does not list %s", f)
		}
	}
}
