package cli

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/claudectl/claudectl/internal/serve"
)

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
	c, err := loadSettings("", getenv)
	if err != nil || c.File != "" || c.Listen != "" {
		t.Fatalf("no file: %+v, %v", c, err)
	}

	// ~/.config/claudectl/settings.json.
	homeFile := write(filepath.Join(home, ".config", "claudectl"), `{"listen": "127.0.0.1:1", "data_dir": "d"}`)
	c, err = loadSettings("", getenv)
	if err != nil || c.File != homeFile || c.Listen != "127.0.0.1:1" || c.DataDir != filepath.Join(home, ".config", "claudectl", "d") {
		t.Fatalf("home file: %+v, %v", c, err)
	}

	// $XDG_CONFIG_HOME wins over ~/.config, even when it has no file.
	env["XDG_CONFIG_HOME"] = xdg
	c, err = loadSettings("", getenv)
	if err != nil || c.File != "" {
		t.Fatalf("empty XDG_CONFIG_HOME: %+v, %v", c, err)
	}
	xdgFile := write(filepath.Join(xdg, "claudectl"), `{"listen": "127.0.0.1:2"}`)
	c, err = loadSettings("", getenv)
	if err != nil || c.File != xdgFile || c.Listen != "127.0.0.1:2" {
		t.Fatalf("XDG file: %+v, %v", c, err)
	}

	// --config wins over both, and must exist.
	own := write(t.TempDir(), `{"listen": "127.0.0.1:3"}`)
	c, err = loadSettings(own, getenv)
	if err != nil || c.File != own || c.Listen != "127.0.0.1:3" {
		t.Fatalf("--config: %+v, %v", c, err)
	}
	missing := filepath.Join(t.TempDir(), "nope.json")
	_, err = loadSettings(missing, getenv)
	if want := `invalid value "` + missing + `" for --config: no such file`; err == nil || err.Error() != want {
		t.Errorf("missing --config: %v, want %s", err, want)
	}
	_, err = loadSettings(t.TempDir(), getenv)
	if err == nil || !strings.Contains(err.Error(), "for --config: is a directory") {
		t.Errorf("--config DIR: %v", err)
	}

	// A bad default file is an error too, naming it.
	write(filepath.Join(xdg, "claudectl"), `{"listen": 1}`)
	_, err = loadSettings("", getenv)
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
	run := func(args ...string) *serve.Settings {
		t.Helper()
		cfg, err := loadSettings(file, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		var f serve.Settings
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
	want := serve.Settings{Listen: "127.0.0.1:1", DataDir: filepath.Join(dir, "fd"), CLI: filepath.Join(dir, "fcli"),
		TokenFile: filepath.Join(dir, "ftok"), LogLevel: slog.LevelWarn, Env: map[string]string{"A": "file", "B": "file"},
		FullSync: true, File: file}
	if diff := cmp.Diff(want, *c, cmpopts.IgnoreUnexported(serve.Settings{})); diff != "" {
		t.Errorf("file only (-want +got)\n%s", diff)
	}
	c = run("--listen", "127.0.0.1:2", "--data-dir", "rel", "--cli", "/x/claude", "--token-file", "t", "--log-level", "debug")
	want.Listen, want.DataDir, want.CLI, want.TokenFile, want.LogLevel = "127.0.0.1:2", "rel", "/x/claude", "t", slog.LevelDebug
	if diff := cmp.Diff(want, *c, cmpopts.IgnoreUnexported(serve.Settings{})); diff != "" {
		t.Errorf("flags (-want +got)\n%s", diff)
	}

	// Env.CLIEnv goes over the file's env.
	if diff := cmp.Diff(map[string]string{"A": "file", "B": "inv"}, withCLIEnv(c.Env, map[string]string{"B": "inv"})); diff != "" {
		t.Errorf("env (-want +got)\n%s", diff)
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
	loose := write("loose-token", "s3cret\n")
	dirTok := write("dir.json", `{"token_file": "open"}`)
	open := filepath.Join(dir, "open") // as /tmp: others can read it, and it is no file
	if err := os.Mkdir(open, 0o777); err != nil || os.Chmod(open, 0o777) != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
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
		{[]string{"--config", empty, "--token-file", loose}, `for --token-file: other users can read it (mode 0644): make it private with chmod 600 ` + loose},
		{[]string{"--config", empty, "--token-file", open}, `invalid value "` + open + `" for --token-file: it is a directory, not a file`},
		{[]string{"--config", dirTok}, `for token_file: it is a directory, not a file`},
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
	for _, k := range serve.Keys() {
		if !strings.Contains(o.stdout, "\n  "+k+" ") && !strings.Contains(o.stdout, "\n  "+k+"\n") {
			t.Errorf("usage does not document %s", k)
		}
	}
	// The keys' descriptions start in one column.
	_, keys, _ := strings.Cut(o.stdout, "Keys:\n\n")
	keys, _, _ = strings.Cut(keys, "\n\n")
	for l := range strings.SplitSeq(keys, "\n") {
		if !strings.Contains(strings.TrimSpace(l), " ") {
			continue // a key too long for its column, its description below
		}
		if len(l) < 34 || l[31] != ' ' || l[32] != ' ' || l[33] == ' ' {
			t.Errorf("misaligned: %q", l)
		}
	}
	overrides := o.stdout[strings.Index(o.stdout, "The flags of the same name"):strings.Index(o.stdout, "Keys:")]
	for _, f := range []string{"--config", "--listen", "--data-dir", "--cli", "--token-file", "--log-level", "--log-format", "--store", "--worker-token-file"} {
		if !strings.Contains(o.stdout, "  "+f+" ") {
			t.Errorf("usage does not list %s", f)
		}
		if f != "--config" && !strings.Contains(overrides, f) {
			t.Errorf("the settings' usage does not say %s overrides them", f)
		}
	}
}
