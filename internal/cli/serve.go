package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/api"
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

Listening beyond loopback requires --token-file: clients then send
"Authorization: Bearer TOKEN".

Exit status: 0 after a clean shutdown, 72 the CLI is not installed,
78 the CLI is too old, 2 bad usage, 1 any other failure.
`

// Run implements Command.
func (c *ServeCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	m := &daemon.Main{Getenv: env.Getenv, Stderr: env.Stderr, Env: env.CLIEnv,
		NewHandler: func(d *daemon.Daemon) http.Handler { return api.NewHandler(&api.Service{D: d}) },
		NewServer:  api.NewServer}
	var tokenFile string
	fs := newFlagSet("serve")
	fs.StringVar(&m.Listen, "listen", "127.0.0.1:7777", "serve on `ADDR` (host:port)")
	fs.StringVar(&m.DataDir, "data-dir", "", "keep the database in `DIR` (default $XDG_DATA_HOME/claudectl or ~/.local/share/claudectl)")
	fs.StringVar(&m.CLIPath, "cli", "", "run the claude executable at `PATH` instead of searching for one")
	fs.StringVar(&tokenFile, "token-file", "", "require the bearer token read from `FILE` of every client")
	pos, err := parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(env.Stdout, serveUsage, fs)
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: serve takes no arguments", pos[0])
	}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return fmt.Errorf("reading --token-file: %w", err)
		}
		m.Token = strings.TrimSpace(string(b))
		if m.Token == "" {
			return usagef("--token-file %s is empty", tokenFile)
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
