package cli

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/internal/serve"
)

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serving is "claudectl serve" running in-process.
type serving struct {
	addr   string // from the "serving" log line
	stderr *lockedBuffer
	stop   func() int // cancels and returns the exit status
}

// startServe runs "claudectl serve args..." with claudectl's environment
// getenv until it logs that it serves, or fails the test.
func startServe(t *testing.T, getenv map[string]string, args ...string) *serving {
	t.Helper()
	return startServeTerm(t, getenv, false, args...)
}

// startServeTerm is startServe with a stderr that claims to be a terminal
// when tty is set.
func startServeTerm(t *testing.T, getenv map[string]string, tty bool, args ...string) *serving {
	t.Helper()
	return startServeWith(t, getenv, tty, nil, args...)
}

// startServeWith is startServeTerm with SIGHUPs delivered on hangups.
func startServeWith(t *testing.T, getenv map[string]string, tty bool, hangups <-chan os.Signal, args ...string) *serving {
	t.Helper()
	var stdout, stderr lockedBuffer
	env := &Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string { return getenv[k] },
		StderrIsTerminal: func() bool { return tty }, Hangups: hangups}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() { code <- Main(ctx, env, append([]string{"serve"}, args...)) }()
	stop := sync.OnceValue(func() int {
		cancel()
		select {
		case c := <-code:
			return c
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop; stderr:\n%s", stderr.String())
			return -1
		}
	})
	served := regexp.MustCompile(`msg=serving addr=(\S+)|"msg":"serving","addr":"([^"]+)"`) // text or JSON
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := served.FindStringSubmatch(stderr.String()); m != nil {
			t.Cleanup(func() { stop() })
			return &serving{addr: m[1] + m[2], stderr: &stderr, stop: stop}
		}
		select {
		case c := <-code:
			cancel()
			code <- c // for stop
			t.Fatalf("serve exited with %d before serving; stderr:\n%s", c, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("serve did not start; stderr:\n%s", stderr.String())
		}
	}
}

// health calls the Health RPC at addr with the bearer token (if not "").
func health(t *testing.T, addr, token string) error {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := claudectlv1connect.NewHealthServiceClient(&http.Client{Transport: tr}, "http://"+addr)
	req := connect.NewRequest(&v1.HealthRequest{})
	if token != "" {
		req.Header().Set("Authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := hc.Health(ctx, req)
	return err
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestServeSettingsFile starts the daemon from the settings file at the
// XDG location: the address, data directory, CLI, token (relative to the
// file), log level and timeouts come from it; then flags override it.
func TestServeSettingsFile(t *testing.T) {
	cli, err := filepath.Abs(claudetest.CLIPath(t))
	if err != nil {
		t.Fatal(err)
	}
	xdg := t.TempDir()
	dir := filepath.Join(xdg, "claudectl")
	addr := freeAddr(t)
	writeFile(t, filepath.Join(dir, "token"), "s3cret-token\n")
	writeFile(t, filepath.Join(dir, "settings.json"), `{
  "listen": "`+addr+`",
  "data_dir": "data",
  "cli": "`+cli+`",
  "token_file": "token",
  "log_level": "debug",
  "daemon": {"max_payload_bytes": 65536, "full_sync": true, "subscriber_buffer": 8},
  "permissions": {"watched_timeout": "2m", "unwatched_timeout": "3h"}
}`)
	getenv := map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": t.TempDir()}

	s := startServe(t, getenv)
	if s.addr != addr {
		t.Errorf("serving on %s, want %s from the settings file", s.addr, addr)
	}
	if !fileExists(filepath.Join(dir, "data", "claudectl.db")) {
		t.Errorf("no claudectl.db in data_dir %s", filepath.Join(dir, "data"))
	}
	if err := health(t, s.addr, "s3cret-token"); err != nil {
		t.Errorf("Health with the token: %v", err)
	}
	if err := health(t, s.addr, ""); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("Health without the token: %v, want unauthenticated", err)
	}
	if code := s.stop(); code != 0 {
		t.Errorf("serve exited with %d", code)
	}
	log := s.stderr.String()
	for _, want := range []string{
		"settings=" + filepath.Join(dir, "settings.json"),
		"cli=" + cli,
		"level=DEBUG msg=configuration max_payload_bytes=65536 full_sync=true subscriber_buffer=8 watched_timeout=2m0s unwatched_timeout=3h0m0s token=true",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "s3cret") {
		t.Errorf("the token was logged:\n%s", log)
	}

	// Flags override the file; the flag's data dir is not relative to it.
	addr2 := freeAddr(t)
	data2 := filepath.Join(t.TempDir(), "d2")
	s = startServe(t, getenv, "--listen", addr2, "--data-dir", data2, "--log-level", "info")
	if s.addr != addr2 {
		t.Errorf("serving on %s, want %s from --listen", s.addr, addr2)
	}
	if !fileExists(filepath.Join(data2, "claudectl.db")) {
		t.Errorf("no claudectl.db in --data-dir %s", data2)
	}
	if err := health(t, s.addr, "s3cret-token"); err != nil {
		t.Errorf("Health with the file's token: %v", err)
	}
	if code := s.stop(); code != 0 {
		t.Errorf("serve exited with %d", code)
	}
	if log := s.stderr.String(); strings.Contains(log, "level=DEBUG") {
		t.Errorf("--log-level info still logs debug:\n%s", log)
	}
}

// TestServeConfigFlag starts the daemon with --config; a default settings
// file that would fail is not read.
func TestServeConfigFlag(t *testing.T) {
	cli := claudetest.CLIPath(t)
	xdg := t.TempDir()
	writeFile(t, filepath.Join(xdg, "claudectl", "settings.json"), `{"listen": 1}`)
	own := filepath.Join(t.TempDir(), "conf", "mine.json")
	addr := freeAddr(t)
	writeFile(t, own, `{"listen": "`+addr+`", "data_dir": "../state"}`)
	s := startServe(t, map[string]string{"XDG_CONFIG_HOME": xdg}, "--config", own, "--cli", cli)
	if s.addr != addr {
		t.Errorf("serving on %s, want %s", s.addr, addr)
	}
	if db := filepath.Join(filepath.Dir(own), "..", "state", "claudectl.db"); !fileExists(db) {
		t.Errorf("no %s", db)
	}
	// No token_file: the daemon generates a token, private to its user.
	tokenFile := filepath.Join(filepath.Dir(own), "..", "state", "token")
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v, %v", fi.Mode(), err)
	}
	// The banner follows the "serving" line startServe waited for.
	waitFor(t, "the banner", func() bool { return strings.Contains(s.stderr.String(), "Web page: ") })
	if !strings.Contains(s.stderr.String(), "the token is in "+filepath.Clean(tokenFile)) {
		t.Errorf("serve does not say where the token is:\n%s", s.stderr.String())
	}
	// Its stderr is no terminal (a log, say): the page's address without the token.
	if !strings.Contains(s.stderr.String(), "Web page: http://"+s.addr+"/ (log in with the token in ") ||
		strings.Contains(s.stderr.String(), strings.TrimSpace(string(b))) {
		t.Errorf("the web page's address: want it without the token when stderr is no terminal:\n%s", s.stderr.String())
	}
	if err := health(t, s.addr, ""); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("Health without the token on loopback: %v, want Unauthenticated", err)
	}
	if err := health(t, s.addr, strings.TrimSpace(string(b))); err != nil {
		t.Errorf("Health: %v", err)
	}
	if code := s.stop(); code != 0 {
		t.Errorf("serve exited with %d", code)
	}
}

// TestClientsFindTheTokenOfTheSettings: with a data_dir or a token_file in
// claudectl serve's settings file, the client commands of the same user
// look for the token where that daemon keeps it (relative paths taken from
// the settings file's directory, as serve takes them), and at its listen
// address without --server.
func TestClientsFindTheTokenOfTheSettings(t *testing.T) {
	cli := claudetest.CLIPath(t)
	for _, tc := range []struct{ name, settings, tokenFile string }{
		{"data_dir", `"data_dir": "data"`, ""},
		{"token_file", `"token_file": "secret/tok"`, "secret/tok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			xdg := t.TempDir()
			dir := filepath.Join(xdg, "claudectl")
			if tc.tokenFile != "" {
				writeFile(t, filepath.Join(dir, tc.tokenFile), "s3cret-of-the-settings\n")
			}
			addr := freeAddr(t)
			writeFile(t, filepath.Join(dir, "settings.json"), `{"listen": "`+addr+`", `+tc.settings+`}`)
			getenv := map[string]string{"XDG_CONFIG_HOME": xdg, "XDG_DATA_HOME": t.TempDir(), "HOME": t.TempDir()}
			s := startServe(t, getenv, "--cli", cli)
			if o := claudectl(t, invocation{getenv: getenv}, "sessions", "--server", "http://"+addr); o.code != 0 || !strings.Contains(o.stdout, "No sessions.") {
				t.Errorf("sessions with the settings' token: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
			}
			// Nor the address: the settings' listen is the default one.
			if o := claudectl(t, invocation{getenv: getenv}, "sessions"); o.code != 0 || !strings.Contains(o.stdout, "No sessions.") {
				t.Errorf("sessions at the settings' listen address: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
			}
			if code := s.stop(); code != 0 {
				t.Errorf("serve exited with %d", code)
			}
		})
	}
}

// TestClientTokenFileUnusable: a token file the client finds but may not
// use (other users can read it) is left alone, and when the daemon then
// refuses the request the client says why it did not use the file. Other
// errors say nothing of token files.
func TestClientTokenFileUnusable(t *testing.T) {
	data := t.TempDir()
	getenv := map[string]string{"XDG_DATA_HOME": data, "XDG_CONFIG_HOME": t.TempDir(), "HOME": t.TempDir()}
	addr := freeAddr(t)
	s := startServe(t, getenv, "--listen", addr, "--cli", claudetest.CLIPath(t))
	tokenFile := filepath.Join(data, "claudectl", "token")
	if err := os.Chmod(tokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	o := claudectl(t, invocation{getenv: getenv}, "sessions", "--server", "http://"+addr)
	want := "the token file " + tokenFile + " was not used: other users can read it (mode 0644): make it private with chmod 600 " + tokenFile
	if o.code != ExitFailure || !strings.Contains(o.stderr, "bearer token") || !strings.Contains(o.stderr, want) {
		t.Errorf("sessions with a token file others can read: exit %d, stderr %q; want 1 and %q", o.code, o.stderr, want)
	}
	if code := s.stop(); code != 0 {
		t.Errorf("serve exited with %d", code)
	}
	// Nothing listens now: the unusable file is not the cause.
	if o := claudectl(t, invocation{getenv: getenv}, "sessions", "--server", "http://"+addr); o.code != ExitFailure || strings.Contains(o.stderr, "token file") {
		t.Errorf("sessions with no daemon: exit %d, stderr %q; want 1, not naming the token file", o.code, o.stderr)
	}
}

// TestClientsFindTheToken: the daemon makes a token at its first start;
// the client commands of the same user on the same machine find it without
// a flag, and never send it to a daemon elsewhere.
func TestClientsFindTheToken(t *testing.T) {
	data := t.TempDir()
	getenv := map[string]string{"XDG_DATA_HOME": data, "XDG_CONFIG_HOME": t.TempDir()}
	addr := freeAddr(t)
	s := startServe(t, getenv, "--listen", addr, "--cli", claudetest.CLIPath(t))
	inv := invocation{getenv: map[string]string{"XDG_DATA_HOME": data, "CLAUDECTL_SERVER": "http://" + addr}}
	if o := claudectl(t, inv, "sessions"); o.code != 0 || !strings.Contains(o.stdout, "No sessions.") {
		t.Errorf("sessions with the token found: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	inv.getenv["XDG_DATA_HOME"] = t.TempDir() // another user's view: no token
	if o := claudectl(t, inv, "sessions"); o.code == 0 || !strings.Contains(o.stderr, "bearer token") {
		t.Errorf("sessions without the token: exit %d, stderr %q", o.code, o.stderr)
	}
	if code := s.stop(); code != 0 {
		t.Errorf("serve exited with %d", code)
	}
}

// TestServeClientsNotice: the start-up notice says the client command
// that reaches the daemon, with only the flags it needs; the command it
// prints works as printed.
func TestServeClientsNotice(t *testing.T) {
	cli := claudetest.CLIPath(t)
	clients := regexp.MustCompile(`Clients: (.*)`)
	for _, tc := range []struct {
		name     string
		settings string // listen is added
		args     []string
		want     string // in the notice
	}{
		{"defaults", "", nil, "by themselves: claudectl sessions"},
		{"data dir flag", "", []string{"--data-dir", "DATA"}, "claudectl sessions --token-file DATA/token,"},
		{"listen flag", "", []string{"--listen", "ADDR"}, "claudectl sessions --server http://ADDR,"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			xdg, data, addr := t.TempDir(), t.TempDir(), freeAddr(t)
			writeFile(t, filepath.Join(xdg, "claudectl", "settings.json"), `{"listen": "`+freeAddr(t)+`"}`)
			args := []string{"--cli", cli}
			for _, a := range tc.args {
				args = append(args, strings.NewReplacer("DATA", data, "ADDR", addr).Replace(a))
			}
			if len(tc.args) == 0 || tc.args[0] != "--listen" {
				writeFile(t, filepath.Join(xdg, "claudectl", "settings.json"), `{"listen": "`+addr+`"}`)
			}
			getenv := map[string]string{"XDG_CONFIG_HOME": xdg, "XDG_DATA_HOME": t.TempDir(), "HOME": t.TempDir()}
			s := startServe(t, getenv, args...)
			// The notice follows the "serving" log line startServe waits for.
			waitFor(t, "the Clients: line", func() bool { return clients.MatchString(s.stderr.String()) })
			m := clients.FindStringSubmatch(s.stderr.String())
			if m == nil {
				t.Fatalf("no Clients: line in\n%s", s.stderr.String())
			}
			want := strings.NewReplacer("DATA", data, "ADDR", addr).Replace(tc.want)
			if !strings.Contains(m[1], want) {
				t.Errorf("notice %q does not say %q", m[1], want)
			}
			// The command as printed.
			cmd := m[1][strings.Index(m[1], "claudectl sessions"):]
			cmd, _, _ = strings.Cut(cmd, ",")
			if o := claudectl(t, invocation{getenv: getenv}, strings.Fields(cmd)[1:]...); o.code != 0 || !strings.Contains(o.stdout, "No sessions.") {
				t.Errorf("%s: exit %d, stdout %q, stderr %q", cmd, o.code, o.stdout, o.stderr)
			}
			if code := s.stop(); code != 0 {
				t.Errorf("serve exited with %d", code)
			}
		})
	}
}

// TestServeAddressInUse: an address another program holds is said so,
// with what serves the daemon elsewhere as the address was set (the flag,
// the settings file, the demo's own default, the default), not as a bare
// "bind: address already in use"; and a claudectl daemon there is named.
func TestServeAddressInUse(t *testing.T) {
	foreign := httptest.NewServer(http.NotFoundHandler())
	defer foreign.Close()
	addr := strings.TrimPrefix(foreign.URL, "http://")
	cli := claudetest.CLIPath(t)
	env := func() map[string]string {
		return map[string]string{"HOME": t.TempDir(), "XDG_CONFIG_HOME": t.TempDir(), "PATH": os.Getenv("PATH")}
	}
	check := func(t *testing.T, o outcome, want string) {
		t.Helper()
		if o.code != 1 || !strings.Contains(o.stderr, "claudectl serve: "+want+"\n") || strings.Contains(o.stderr, "bind:") {
			t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and:\nclaudectl serve: %s", o.code, o.stderr, want)
		}
	}
	t.Run("flag", func(t *testing.T) {
		o := claudectl(t, invocation{getenv: env()}, "serve", "--listen", addr, "--data-dir", t.TempDir(), "--cli", cli)
		check(t, o, addr+" is in use by another program: stop it, or give --listen another HOST:PORT")
	})
	t.Run("settings", func(t *testing.T) {
		e := env()
		file := filepath.Join(e["XDG_CONFIG_HOME"], "claudectl", "settings.json")
		writeFile(t, file, `{"listen": "`+addr+`", "data_dir": "data"}`)
		o := claudectl(t, invocation{getenv: e}, "serve", "--cli", cli)
		check(t, o, addr+` is in use by another program: stop it, or set "listen" in `+file+` to another HOST:PORT (or override it with --listen HOST:PORT)`)
	})
	t.Run("demo", func(t *testing.T) {
		old := demoListen
		demoListen = addr
		defer func() { demoListen = old }()
		o := claudectl(t, invocation{getenv: env()}, "serve", "--demo", "--cli", cli)
		check(t, o, addr+" is in use by another program: stop it, or give the demo another address with --listen 127.0.0.1:PORT ("+addr+" is its own default)")
	})
	t.Run("daemon", func(t *testing.T) {
		s := startServe(t, env(), "--listen", freeAddr(t), "--data-dir", t.TempDir(), "--cli", cli)
		o := claudectl(t, invocation{getenv: env()}, "serve", "--listen", s.addr, "--data-dir", t.TempDir(), "--cli", cli)
		check(t, o, s.addr+" is in use: another claudectl daemon serves there (claudectl sessions --server http://"+s.addr+
			" lists its sessions): stop it, or give --listen another HOST:PORT")
	})
	t.Run("default", func(t *testing.T) { // not bound here: 7777 may be in use on this machine for real
		le := &serve.ListenError{Addr: serve.DefaultListen, InUse: true}
		want := serve.DefaultListen + ` is in use by another program: stop it, or serve elsewhere with --listen HOST:PORT, or "listen" in /home/me/.config/claudectl/settings.json (` +
			serve.DefaultListen + " is the default)"
		if got := listenInUse(le, listenDefault, "", "/home/me/.config/claudectl/settings.json").Error(); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
}

// TestServeWarnsWithoutCredentials: serve warns as it starts when its
// Claude Code has no credentials (every turn would fail with the CLI's
// bare "Not logged in"), naming where it looked, where the key goes and
// that the demo needs none; not when a key is in its environment or its
// settings' env, nor in the demo (its own key).
func TestServeWarnsWithoutCredentials(t *testing.T) {
	cli := claudetest.CLIPath(t)
	const warning = "WARNING: Claude Code has no credentials here"
	for _, tc := range []struct {
		name     string
		env      map[string]string
		settings string
		args     []string
		warned   bool
	}{
		{"none", nil, "", nil, true},
		{"none, JSON log", nil, "", []string{"--log-format", "json"}, true},
		{"a key in the environment", map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x"}, "", nil, false},
		{"a key in the settings' env", nil, `"env": {"ANTHROPIC_API_KEY": "sk-ant-x"}, `, nil, false},
		{"a login", map[string]string{"HOME": "LOGGED-IN"}, "", nil, false},
		{"the demo", nil, "", []string{"--demo"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			xdg, home := t.TempDir(), t.TempDir()
			settings := filepath.Join(xdg, "claudectl", "settings.json")
			writeFile(t, settings, `{`+tc.settings+`"listen": "`+freeAddr(t)+`"}`)
			getenv := map[string]string{"XDG_CONFIG_HOME": xdg, "XDG_DATA_HOME": t.TempDir(), "HOME": home}
			for k, v := range tc.env {
				getenv[k] = v
			}
			if getenv["HOME"] == "LOGGED-IN" {
				getenv["HOME"] = home
				writeFile(t, filepath.Join(home, ".claude", ".credentials.json"), `{"claudeAiOauth":{}}`)
			}
			args := append([]string{"--cli", cli}, tc.args...)
			if slices.Contains(tc.args, "--demo") {
				args = append(args, "--listen", freeAddr(t))
			}
			s := startServe(t, getenv, args...)
			out := s.stderr.String()
			if tc.name == "none, JSON log" {
				if !strings.Contains(out, `"level":"WARN","msg":"Claude Code has no credentials: every turn will fail with \"Not logged in\""`) ||
					!strings.Contains(out, `"looked":"ANTHROPIC_API_KEY, `) {
					t.Errorf("no JSON warning in:\n%s", out)
				}
				return
			}
			if got := strings.Contains(out, warning); got != tc.warned {
				t.Fatalf("warned %v, want %v; stderr:\n%s", got, tc.warned, out)
			}
			if !tc.warned {
				return
			}
			for _, want := range []string{"Looked in: ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN, CLAUDE_CODE_USE_BEDROCK",
				"(the daemon's environment and the settings' env), " + filepath.Join(home, ".claude", ".credentials.json") + ", " + filepath.Join(home, ".claude.json"),
				"To fix: set ANTHROPIC_API_KEY in the daemon's environment (ANTHROPIC_API_KEY=sk-ant-… make run) or in \"env\" of the settings file (" + settings + ")",
				"log in once with `claude /login` as this user (HOME " + home + ")", "claudectl serve --demo (make demo) needs no key"} {
				if !strings.Contains(out, want) {
					t.Errorf("the warning lacks %q:\n%s", want, out)
				}
			}
		})
	}
}
