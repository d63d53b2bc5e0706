package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/internal/serve"
)

// ServeCommand is "claudectl serve": the daemon, serving the claudectl.v1
// API (gRPC, gRPC-Web and Connect on one port) until SIGINT or SIGTERM.
type ServeCommand struct {
	Env *Env
}

// Name implements Command.
func (*ServeCommand) Name() string { return "serve" }

// serve handles Ctrl-C itself: the first one shuts down, a second one
// exits at once.
func (*ServeCommand) handlesInterrupts() {}

// serve handles SIGHUP itself: it reloads the settings.
func (*ServeCommand) handlesHangups() {}

// Summary implements Command.
func (*ServeCommand) Summary() string { return "run the daemon that hosts sessions (gRPC/Connect API)" }

const serveUsage = `Usage: claudectl serve [flags]

Runs the claudectl daemon: it hosts Claude Code sessions, keeps their event
logs in DATA-DIR/claudectl.db and serves the claudectl.v1 API over gRPC,
gRPC-Web and Connect on one port, until SIGINT or SIGTERM.

Settings come from a settings file (below); every flag overrides the
setting of the same name.

Listening beyond loopback requires a token file: clients then send
"Authorization: Bearer TOKEN".

With --demo the sessions talk to a scripted model instead of Claude: no
API key is needed and nothing leaves the machine. The banner it prints
lists the prompts to try. It reads no settings file unless --config is
given, and keeps its data in a temporary directory unless --data-dir is.

Exit status: 0 after a clean shutdown, 1 any other failure, 2 bad usage
or a bad settings file, and as claudectl doctor: 69 the CLI does not run
or prints no version, 72 the CLI is not installed, 78 the CLI is too old;
130 stopped at once by a second Ctrl-C.
`

// Run implements Command.
func (c *ServeCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var configPath string
	var f serve.Settings // the flags' values
	var demoMode bool
	fs := serveFlags(&configPath, &f)
	fs.BoolVar(&demoMode, "demo", false, "try claudectl without an API key: sessions talk to a scripted model on 127.0.0.1 (listens on "+DemoListen+", data in a temporary directory unless --data-dir)")
	pos, err := parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(env.Stdout, serveUsage, fs)
		fmt.Fprint(env.Stdout, "\n"+serve.Usage)
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: serve takes no arguments", pos[0])
	}
	if flagGiven(fs, "config") && strings.TrimSpace(configPath) == "" {
		return badValue("config", configPath, "must be the path of a settings file")
	}
	cfg := &serve.Settings{} // a demo reads no settings file unless --config names one
	if !demoMode || configPath != "" {
		cfg, err = loadSettings(configPath, env.Getenv)
	}
	if ce := (*serve.SettingsError)(nil); errors.As(err, &ce) {
		return &usageError{msg: ce.Error()}
	}
	if err != nil {
		return err
	}
	// Where the address comes from, to say what changes it when it is in use.
	listenFrom := listenDefault
	switch {
	case flagGiven(fs, "listen"):
		listenFrom = listenFlag
	case demoMode: // its own address, whatever a settings file says
		listenFrom = listenDemo
	case cfg.Listen != "":
		listenFrom = listenSettings
	}
	if err := applyServeFlags(cfg, &f, fs); err != nil {
		return err
	}

	cfg.Env = withCLIEnv(cfg.Env, env.CLIEnv)
	var dm *demo
	if demoMode {
		if dm, err = startDemo(cfg, flagGiven(fs, "listen")); err != nil {
			return err
		}
		defer dm.close()
	}
	if cfg.TokenFile != "" {
		cfg.Token, err = readSecret(cfg.TokenFile, "token-file", "token_file", flagGiven(fs, "token-file"), cfg.File)
		if err != nil {
			return err
		}
	}
	if cfg.WorkerTokenFile != "" {
		cfg.WorkerToken, err = readSecret(cfg.WorkerTokenFile, "worker-token-file", "workers.token_file",
			flagGiven(fs, "worker-token-file"), cfg.File)
		if err != nil {
			return err
		}
	}
	if cfg.OIDCClientSecretFile != "" {
		cfg.OIDC.ClientSecret, err = readSecret(cfg.OIDCClientSecretFile, "", "auth.oidc.client_secret_file", false, cfg.File)
		if err != nil {
			return err
		}
	}
	for i := range cfg.Notify.Webhooks {
		w := &cfg.Notify.Webhooks[i]
		if w.SecretFile == "" {
			continue
		}
		secret, err := readSecret(w.SecretFile, "", fmt.Sprintf("notify.webhooks[%d].secret_file", i), false, cfg.File)
		if err != nil {
			return err
		}
		w.Secret = []byte(secret)
	}
	// The web page's address carries the token only to a terminal: in a
	// log (a journal, serve > file 2>&1) it would put the token there.
	// StderrIsTerminal, not isTerminal(env.Stderr): withDefaults wrapped
	// that stream, which is then never an *os.File.
	tokenInURL := env.StderrIsTerminal()
	// A reload reads the file again and applies the same flags over it.
	var load func() (*serve.Settings, error)
	if !demoMode {
		load = func() (*serve.Settings, error) {
			next, err := loadSettings(configPath, env.Getenv)
			if err != nil {
				return nil, err
			}
			if err := applyServeFlags(next, &f, fs); err != nil {
				return nil, err
			}
			next.Env = withCLIEnv(next.Env, env.CLIEnv)
			return next, nil
		}
	}
	srv, err := serve.Start(ctx, cfg, &serve.Options{Getenv: env.Getenv, Stderr: env.Stderr, NoClientsNotice: dm != nil,
		TokenInPageURL: tokenInURL, Load: load,
		ClientFlags: func(url, token, tokenFile string) string { return clientFlagsFor(env.Getenv, url, token, tokenFile) }})
	if err != nil {
		var se *serve.StartError
		if errors.As(err, &se) {
			return exitWith(se.Code, "%v", se.Err)
		}
		var se2 *serve.SettingsError
		if errors.Is(err, apiserver.ErrTokenRequired) || errors.Is(err, apiserver.ErrCleartext) || errors.As(err, &se2) {
			return usagef("%v", err)
		}
		if le := (*serve.ListenError)(nil); errors.As(err, &le) && le.InUse {
			return exitWith(ExitFailure, "%v", listenInUse(le, listenFrom, cfg.File, serve.DefaultPath(env.Getenv)))
		}
		return err
	}
	switch {
	case dm == nil:
	case cfg.LogFormat == "json": // every line a JSON object, the banner's too
		dm.logBanner(srv, cfg.DataDir, cfg.TokenFile)
	default:
		dm.banner(env.Stderr, srv, cfg.DataDir, tokenInURL)
	}
	stopping := "SIGTERM"
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case <-env.Interrupts:
			stopping = "Ctrl-C"
			break wait
		case <-env.Hangups:
			// A bad file changes nothing; Reload logs why (and what needs
			// a restart).
			srv.Reload(ctx)
		}
	}
	return shutdown(srv, env, stopping, ShutdownBound)
}

// Where serve's address came from.
const (
	listenDefault  = iota // serve.DefaultListen
	listenFlag            // --listen
	listenSettings        // "listen" in the settings file
	listenDemo            // the demo's DemoListen
)

// listenInUse says that the address is in use, by whom when claudectl can
// tell, and what serves this daemon elsewhere, as it was set: the flag,
// the settings file's key (settingsFile; defaultFile is where one would
// go) or the demo's own default.
func listenInUse(le *serve.ListenError, from int, settingsFile, defaultFile string) error {
	msg := le.Error()
	if le.Daemon {
		msg += fmt.Sprintf(" (claudectl sessions --server http://%s lists its sessions): stop it, or", le.Addr)
	} else {
		msg += ": stop it, or"
	}
	switch from {
	case listenFlag:
		msg += " give --listen another HOST:PORT"
	case listenSettings:
		msg += fmt.Sprintf(" set \"listen\" in %s to another HOST:PORT (or override it with --listen HOST:PORT)", settingsFile)
	case listenDemo:
		msg += fmt.Sprintf(" give the demo another address with --listen 127.0.0.1:PORT (%s is its own default", le.Addr)
		if le.Daemon {
			msg += "; another serve --demo may be running"
		}
		msg += ")"
	default:
		msg += fmt.Sprintf(" serve elsewhere with --listen HOST:PORT, or \"listen\" in %s (%s is the default)", defaultFile, le.Addr)
	}
	return errors.New(msg)
}

// clientFlagsFor returns the flags a client command of this user (whose
// environment getenv is taken to be) needs to reach a daemon at url with
// token, kept in tokenFile: "" when it finds both as dial does (the
// address is its default one, and the first token it finds is token).
func clientFlagsFor(getenv func(string) string, url, token, tokenFile string) string {
	s, err := loadSettings("", getenv)
	server := strings.TrimSpace(getenv("CLAUDECTL_SERVER"))
	if server == "" {
		server = settingsServer(s)
	}
	var flags []string
	if strings.TrimRight(server, "/") != url {
		flags = append(flags, "--server "+url)
	}
	found := strings.TrimSpace(getenv("CLAUDECTL_TOKEN"))
	if found == "" {
		found, _ = localToken(getenv, s, err)
	}
	if found != token || !apiserver.IsLoopback(strings.TrimPrefix(strings.TrimPrefix(url, "http://"), "https://")) {
		flags = append(flags, "--token-file "+tokenFile)
	}
	return strings.Join(flags, " ")
}

// ShutdownBound is the longest "claudectl serve" takes to stop: after it
// the process exits whatever is left (the CLIs die with it).
var ShutdownBound = 30 * time.Second

// shutdown closes srv within bound; a second Ctrl-C ends it at once (a
// second SIGTERM does too: main restores the signal's default action).
func shutdown(srv *serve.Server, env *Env, signal string, bound time.Duration) error {
	srv.Log.Info("shutting down: sessions are suspended for resume (signal again to exit at once)", "signal", signal)
	done := make(chan error, 1)
	go func() { done <- srv.Close() }()
	select {
	case err := <-done:
		if err != nil {
			return err
		}
		srv.Log.Info("stopped")
		return nil
	case <-env.Interrupts:
		return exitWith(ExitInterrupted, "stopped at once by a second Ctrl-C; sessions still closing were cut off")
	case <-time.After(bound):
		return exitWith(ExitFailure, "shutdown took longer than %s; exiting with sessions still closing", bound)
	}
}

// serveFlags returns serve's flags, stored in configPath and f.
func serveFlags(configPath *string, f *serve.Settings) *flag.FlagSet {
	fs := newFlagSet("serve")
	fs.StringVar(configPath, "config", "", "read the settings from `FILE` (default: see Settings file below)")
	fs.StringVar(&f.Listen, "listen", "", "serve on `ADDR` (host:port; default 127.0.0.1:7777)")
	fs.StringVar(&f.DataDir, "data-dir", "", "keep the database in `DIR` (default $XDG_DATA_HOME/claudectl or ~/.local/share/claudectl)")
	fs.StringVar(&f.CLI, "cli", "", "run the claude executable at `PATH` instead of searching for one")
	fs.StringVar(&f.TokenFile, "token-file", "", "require the bearer token read from `FILE` of every client")
	fs.StringVar(&f.StoreURL, "store", "", "keep sessions and events in `URL`: sqlite:PATH or postgres://USER@HOST:PORT/DATABASE (default sqlite in the data dir; put a password in PGPASSFILE, not on the command line)")
	fs.StringVar(&f.WorkerTokenFile, "worker-token-file", "", "accept remote workers presenting the token read from `FILE`")
	fs.Func("log-level", "log at `LEVEL` and above: debug, info, warn or error (default info)", func(s string) error {
		l, ok := serve.ParseLogLevel(s)
		if !ok {
			return errors.New("must be one of debug, info, warn, error")
		}
		f.LogLevel = l
		return nil
	})
	fs.Func("log-format", "write logs as `FORMAT`: text or json, one object per line (default text)", func(s string) error {
		if s != "text" && s != "json" {
			return errors.New("must be text or json")
		}
		f.LogFormat = s
		return nil
	})
	return fs
}

// flagGiven reports whether the flag name was given on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// applyServeFlags overrides cfg with every flag that was given.
func applyServeFlags(cfg, f *serve.Settings, fs *flag.FlagSet) error {
	for _, s := range []struct {
		flag     string
		from     string
		to       *string
		relative bool // a path, relative to the working directory
	}{
		{"listen", f.Listen, &cfg.Listen, false},
		{"data-dir", f.DataDir, &cfg.DataDir, true},
		{"cli", f.CLI, &cfg.CLI, true},
		{"token-file", f.TokenFile, &cfg.TokenFile, true},
		{"worker-token-file", f.WorkerTokenFile, &cfg.WorkerTokenFile, true},
	} {
		if !flagGiven(fs, s.flag) {
			continue
		}
		if strings.TrimSpace(s.from) == "" {
			return badValue(s.flag, s.from, "must not be empty")
		}
		*s.to = s.from
	}
	if flagGiven(fs, "listen") {
		if host, port, err := net.SplitHostPort(f.Listen); err != nil || !serve.ValidPort(port) || strings.ContainsAny(host, " \t") {
			return badValue("listen", f.Listen, `must be "host:port" such as 127.0.0.1:7777`)
		}
	}
	if flagGiven(fs, "log-level") {
		cfg.LogLevel = f.LogLevel
	}
	if flagGiven(fs, "log-format") {
		cfg.LogFormat = f.LogFormat
	}
	if flagGiven(fs, "store") {
		u := f.StoreURL
		if path, ok := strings.CutPrefix(u, "sqlite:"); ok && path != "" {
			if abs, err := filepath.Abs(path); err == nil {
				u = "sqlite:" + abs
			}
		}
		if err := serve.CheckStoreURL(u); err != nil {
			// Not badValue: it would repeat the URL, password and all.
			return usagef("invalid value for --store: %v", err)
		}
		cfg.StoreURL = u
	}
	return nil
}

// withCLIEnv returns the settings' env with cliEnv (Env.CLIEnv) over it.
func withCLIEnv(env, cliEnv map[string]string) map[string]string {
	if len(cliEnv) == 0 {
		return env
	}
	out := make(map[string]string, len(env)+len(cliEnv))
	maps.Copy(out, env)
	maps.Copy(out, cliEnv)
	return out
}

// loadSettings reads the settings file: path when it is set (then the
// file must exist), else the default location, where a missing file means
// all defaults.
func loadSettings(path string, getenv func(string) string) (*serve.Settings, error) {
	explicit := path != ""
	if !explicit {
		path = serve.DefaultPath(getenv)
	}
	data, err := os.ReadFile(path)
	switch {
	case !explicit && errors.Is(err, fs.ErrNotExist):
		return &serve.Settings{}, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, badValue("config", path, "no such file")
	case err != nil:
		if explicit {
			return nil, badValue("config", path, describeIOError(err))
		}
		return nil, usagef("settings file %s: %s", path, describeIOError(err))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return serve.Parse(path, filepath.Dir(abs), data, getenv)
}

// readPrivateFile reads a file that holds a secret. One that other users
// can read (or write) is refused: whoever reads the token drives the
// daemon, which runs commands as its user.
func readPrivateFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, errors.New("it is a directory, not a file")
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return nil, fmt.Errorf("other users can read it (mode %04o): make it private with chmod 600 %s", m, path)
	}
	return io.ReadAll(io.LimitReader(f, 64<<10))
}

// describeIOError is err without the path the message already names.
func describeIOError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if errors.Is(pe.Err, fs.ErrPermission) {
			return "permission denied"
		}
		return pe.Err.Error()
	}
	return err.Error()
}

// readSecret reads a token from path (from --flag, or key of the settings
// file). Errors name the file, never its contents.
func readSecret(path, flag, key string, fromFlag bool, settings string) (string, error) {
	b, err := readPrivateFile(path)
	if err == nil && strings.TrimSpace(string(b)) == "" {
		err = errors.New("the file is empty")
	}
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if fromFlag {
		return "", badValue(flag, path, describeIOError(err))
	}
	return "", usagef("%s: invalid value %q for %s: %s", settings, path, key, describeIOError(err))
}
