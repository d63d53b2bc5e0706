package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/api"
	"github.com/claudectl/claudectl/permission"
)

// ServeCommand is "claudectl serve": the daemon, serving the claudectl.v1
// API (gRPC, gRPC-Web and Connect on one port) until SIGINT or SIGTERM.
type ServeCommand struct {
	Env *Env
}

// Name implements Command.
func (*ServeCommand) Name() string { return "serve" }

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

Exit status: 0 after a clean shutdown, 72 the CLI is not installed,
78 the CLI is too old, 2 bad usage or a bad settings file, 1 any other
failure.
`

// Run implements Command.
func (c *ServeCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var configPath string
	var f serveConfig // the flags' values
	fs := serveFlags(&configPath, &f)
	pos, err := parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(env.Stdout, serveUsage, fs)
		fmt.Fprint(env.Stdout, "\n"+configUsage)
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
	cfg, err := loadServeConfig(configPath, env.Getenv)
	if ce := (*configError)(nil); errors.As(err, &ce) {
		return &usageError{msg: ce.Error()}
	}
	if err != nil {
		return err
	}
	if err := applyServeFlags(cfg, &f, fs); err != nil {
		return err
	}

	m := newServeMain()
	m.Getenv, m.Stderr = env.Getenv, env.Stderr
	cfg.apply(m, env.CLIEnv)
	if cfg.TokenFile != "" {
		m.Token, err = readSecret(cfg.TokenFile, "token-file", "token_file", cfg.tokenFromFlag, cfg.File)
		if err != nil {
			return err
		}
	}
	if cfg.WorkerTokenFile != "" {
		m.WorkerToken, err = readSecret(cfg.WorkerTokenFile, "worker-token-file", "workers.token_file", cfg.workerTokenFromFlag, cfg.File)
		if err != nil {
			return err
		}
	}
	if err := m.Run(ctx); err != nil {
		var ee *daemon.ExitError
		if errors.As(err, &ee) {
			return exitWith(ee.Code, "%v", ee.Err)
		}
		if errors.Is(err, api.ErrTokenRequired) {
			return usagef("%v", err)
		}
		return err
	}
	<-ctx.Done()
	return m.Close()
}

// serveFlags returns serve's flags, stored in configPath and f.
func serveFlags(configPath *string, f *serveConfig) *flag.FlagSet {
	fs := newFlagSet("serve")
	fs.StringVar(configPath, "config", "", "read the settings from `FILE` (default: see Settings file below)")
	fs.StringVar(&f.Listen, "listen", "", "serve on `ADDR` (host:port; default 127.0.0.1:7777)")
	fs.StringVar(&f.DataDir, "data-dir", "", "keep the database in `DIR` (default $XDG_DATA_HOME/claudectl or ~/.local/share/claudectl)")
	fs.StringVar(&f.CLI, "cli", "", "run the claude executable at `PATH` instead of searching for one")
	fs.StringVar(&f.TokenFile, "token-file", "", "require the bearer token read from `FILE` of every client")
	fs.StringVar(&f.WorkerTokenFile, "worker-token-file", "", "accept remote workers presenting the token read from `FILE`")
	fs.Func("log-level", "log at `LEVEL` and above: debug, info, warn or error (default info)", func(s string) error {
		l, ok := parseLogLevel(s)
		if !ok {
			return errors.New("must be one of debug, info, warn, error")
		}
		f.LogLevel = l
		return nil
	})
	return fs
}

// newServeMain returns the daemon with the API handler and server.
func newServeMain() *daemon.Main {
	return &daemon.Main{
		NewHandler: func(d *daemon.Daemon) http.Handler { return api.NewHandler(&api.Service{D: d}) },
		NewServer:  api.NewServer,
	}
}

// flagGiven reports whether the flag name was given on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// applyServeFlags overrides cfg with every flag that was given.
func applyServeFlags(cfg *serveConfig, f *serveConfig, fs *flag.FlagSet) error {
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
		if s.flag == "token-file" {
			cfg.tokenFromFlag = true
		}
		if s.flag == "worker-token-file" {
			cfg.workerTokenFromFlag = true
		}
	}
	if flagGiven(fs, "listen") {
		if host, port, err := net.SplitHostPort(f.Listen); err != nil || !validPort(port) || strings.ContainsAny(host, " \t") {
			return badValue("listen", f.Listen, `must be "host:port" such as 127.0.0.1:7777`)
		}
	}
	if flagGiven(fs, "log-level") {
		cfg.LogLevel = f.LogLevel
	}
	return nil
}

// apply copies the configuration into m; cliEnv (Env.CLIEnv) is added
// over the settings' env.
func (cfg *serveConfig) apply(m *daemon.Main, cliEnv map[string]string) {
	m.Listen = cfg.Listen
	m.DataDir = cfg.DataDir
	m.CLIPath = cfg.CLI
	if len(cfg.Env) > 0 || len(cliEnv) > 0 {
		m.Env = make(map[string]string, len(cfg.Env)+len(cliEnv))
		maps.Copy(m.Env, cfg.Env)
		maps.Copy(m.Env, cliEnv)
	}
	m.LogLevel = cfg.LogLevel
	m.MaxPayloadBytes = cfg.MaxPayloadBytes
	m.FullSync = cfg.FullSync
	m.SubscriberBuffer = cfg.SubscriberBuffer
	if cfg.WatchedTimeout > 0 || cfg.UnwatchedTimeout > 0 {
		m.BrokerOptions = &permission.BrokerOptions{WatchedTimeout: cfg.WatchedTimeout, UnwatchedTimeout: cfg.UnwatchedTimeout}
	}
	m.WorkerWait = cfg.WorkerWait
	m.SettingsFile = cfg.File
}

// readSecret reads a token from path (from --flag, or key of the settings
// file). Errors name the file, never its contents.
func readSecret(path, flag, key string, fromFlag bool, settings string) (string, error) {
	b, err := os.ReadFile(path)
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
