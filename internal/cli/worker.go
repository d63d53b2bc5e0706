package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/relay"
)

// WorkerCommand is "claudectl worker": it runs the Claude Code CLI of this
// machine for a controller elsewhere, relaying its NDJSON over a WebSocket
// (see claude.WorkerListener and the protocol in internal/relay).
type WorkerCommand struct {
	Env *Env
}

// Name implements Command.
func (*WorkerCommand) Name() string { return "worker" }

// Summary implements Command.
func (*WorkerCommand) Summary() string {
	return "run a session's Claude Code CLI here for a remote controller"
}

const workerUsage = `Usage: claudectl worker --connect URL --token-file FILE [flags]

Connects to a controller's worker endpoint (a claude.WorkerListener), waits
for a session, runs this machine's Claude Code CLI over stdio for it and
relays its lines both ways until the session ends; then exits 0. When the
CLI ends, every process it started ends too, tools that detached included.

If the link drops, the CLI keeps running and the worker reconnects with
backoff; nothing is lost or repeated. It gives up, stopping the CLI, when
the controller stays out of reach for --reconnect-timeout.

Exit status: 0 the session ended, 1 the controller refused the worker, could
not be reached or the link was lost for good, 2 bad usage.
`

// Run implements Command.
func (c *WorkerCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var connect, tokenFile, cliPath, name string
	var verbose bool
	reconnect := relay.DefaultReconnectTimeout
	fs := newFlagSet("worker")
	fs.StringVar(&connect, "connect", "", "the controller's worker endpoint, `URL` ws://HOST/PATH or wss://HOST/PATH")
	fs.StringVar(&tokenFile, "token-file", "", "read the bearer token from `FILE`")
	fs.StringVar(&cliPath, "cli", "", "the claude executable at `PATH` (default: $CLAUDE_BIN, ~/.claude/local/claude, /usr/local/bin/claude, then claude on $PATH)")
	fs.StringVar(&name, "name", "", "the worker's `NAME` in the controller's logs (default: host name and process id)")
	fs.Func("reconnect-timeout", "give up when the controller is out of reach for `DURATION` (default 2m)", func(s string) error {
		var d time.Duration
		if err := parseNonNegDuration(&d, "for example 2m")(s); err != nil {
			return err
		}
		if d == 0 {
			return errors.New("must be more than 0")
		}
		reconnect = d
		return nil
	})
	fs.BoolVar(&verbose, "verbose", false, "log every connection attempt")
	pos, err := parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(env.Stdout, workerUsage, fs)
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if connect == "" {
		return usagef("missing --connect URL")
	}
	if !strings.HasPrefix(connect, "ws://") && !strings.HasPrefix(connect, "wss://") {
		return badValue("connect", connect, "must be a ws:// or wss:// URL")
	}
	if tokenFile == "" {
		return usagef("missing --token-file FILE")
	}
	b, err := readPrivateFile(tokenFile)
	if err != nil {
		return badValue("token-file", tokenFile, describeIOError(err))
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return badValue("token-file", tokenFile, "the file is empty")
	}
	if cliPath != "" {
		p, err := claude.FindBinary(&claude.FindOptions{Path: cliPath})
		if err != nil {
			return badValue("cli", cliPath, err.Error())
		}
		cliPath = p
	} else {
		p, err := claude.FindBinary(&claude.FindOptions{Env: env.Getenv})
		if err != nil {
			return exitWith(ExitFailure, "%v", err)
		}
		cliPath = p
	}
	if name == "" {
		host, _ := os.Hostname()
		name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	w := &relay.Worker{
		URL:              connect,
		Token:            token,
		Name:             name,
		ReconnectTimeout: reconnect,
		Logger:           logger,
		Start:            startLocalCLI(cliPath, env.CLIEnv),
	}
	if err := w.Run(ctx); err != nil {
		if ctx.Err() != nil {
			return exitWith(ExitFailure, "stopped: %v", context.Cause(ctx))
		}
		return exitWith(ExitFailure, "%v", err)
	}
	return nil
}

// startLocalCLI returns the worker's StartFunc: the CLI at path over stdio,
// in this process's environment changed as the controller asks (and by
// extra, for tests).
func startLocalCLI(path string, extra map[string]string) relay.StartFunc {
	return func(ctx context.Context, cmd *relay.Command, stderr func(string)) (relay.Process, error) {
		env := cmd.Environ(os.Environ())
		if len(extra) > 0 {
			x := &relay.Command{SetEnv: map[string]string{}}
			for k, v := range extra {
				if v == "" {
					x.UnsetEnv = append(x.UnsetEnv, k)
				} else {
					x.SetEnv[k] = v
				}
			}
			env = x.Environ(env)
		}
		// KeepDetached stays false: whatever the CLI starts (tools in their
		// own sessions, daemons) ends with it, as in the controller's own
		// sessions.
		t := &claude.ProcessTransport{Stderr: stderr}
		conn, err := t.Start(ctx, &claude.Command{Path: path, Args: cmd.Args, Env: env, Dir: cmd.Dir, MaxLineBytes: cmd.MaxLineBytes})
		if err != nil {
			return nil, err
		}
		return &localCLI{conn}, nil
	}
}

// localCLI adapts a claude.Conn to relay.Process.
type localCLI struct{ claude.Conn }

func (p *localCLI) ReadLine() ([]byte, int64, error) {
	l, err := p.Conn.ReadLine()
	return l.Data, l.OriginalSize, err
}

func (p *localCLI) Wait() *relay.Exit {
	err := p.Conn.Wait()
	if err == nil {
		return &relay.Exit{}
	}
	var ee *claude.ExitError
	if errors.As(err, &ee) {
		return &relay.Exit{Code: ee.Code, Signal: ee.Signal, Stderr: ee.Stderr}
	}
	return &relay.Exit{Code: -1, Error: err.Error(), Stderr: p.Conn.StderrTail()}
}
