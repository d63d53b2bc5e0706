package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/relay"
	"github.com/claudectl/claudectl/internal/serve"
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

Registers with a controller's worker endpoint (a claudectl daemon's
ws://HOST:PORT/v1/worker, or any claude.WorkerListener) under --name, with
its --label set and --capacity, and stays connected: the controller places
sessions here (by name, by labels, or on the least loaded worker), and this
machine's Claude Code CLI runs over stdio for each, its lines relayed both
ways. When a CLI ends, every process it started ends too, tools that
detached included.

If a link drops, the CLIs keep running and the worker reconnects with
backoff, trying each --connect address in turn; nothing is lost or repeated.
A daemon that has as many worker connections open as it allows
(workers.max_connections) turns the worker away with 503: the worker says
so, with the daemon's reason, and tries again.
The controller fails this worker's sessions (reason: the worker lost) when
it stays away longer than --grace, and so does the worker.

SIGTERM or Ctrl-C stops it: each CLI is closed (its input ended, then
SIGTERM, then SIGKILL), the controller hears of it, and the worker exits 0.

With --spares the controller may start CLIs here ahead of need (off by
default): its next session with the same options as a recent one takes a
CLI already started, and its first answer comes without the CLI's start
(about a second). A spare holds a slot of --capacity and this machine's
Claude Code login while it waits, never longer than the controller's
sessions.spare_lifetime; a controller that needs the slot for a session
closes its spares first.

With --once it runs one session and exits when it ends (the first protocol:
the controller gives it the next session that asks for worker "remote").

Exit status: 0 stopped (or, with --once, the session ended), 1 the
controller refused the worker (a wrong token, a name taken by a connected
worker, a daemon that accepts no workers: its workers.token_file is unset)
or, with --once, could not be reached or the link was lost for good, or
the claude executable was not found, 2 bad usage.
`

// Defaults of "claudectl worker".
const (
	defaultWorkerCapacity = 4
	maxWorkerAddresses    = 16
)

// Run implements Command.
func (c *WorkerCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var connect []string
	var tokenFile, cliPath, name string
	var verbose, once, spares bool
	labels := map[string]string{}
	capacity := defaultWorkerCapacity
	grace := relay.DefaultGrace
	reconnect := relay.DefaultReconnectTimeout
	fs := newFlagSet("worker")
	fs.Func("connect", "the controller's worker endpoint, `URL` ws://HOST/PATH or wss://HOST/PATH; several (repeated or comma-separated) are tried in turn", func(s string) error {
		for _, u := range strings.Split(s, ",") {
			u = strings.TrimSpace(u)
			if !strings.HasPrefix(u, "ws://") && !strings.HasPrefix(u, "wss://") {
				return fmt.Errorf("%q must be a ws:// or wss:// URL", u)
			}
			if !slices.Contains(connect, u) {
				connect = append(connect, u)
			}
		}
		if len(connect) > maxWorkerAddresses {
			return fmt.Errorf("at most %d addresses", maxWorkerAddresses)
		}
		return nil
	})
	fs.StringVar(&tokenFile, "token-file", "", "read the bearer token from `FILE`")
	fs.StringVar(&cliPath, "cli", "", "the claude executable at `PATH` (default: $CLAUDE_BIN, ~/.claude/local/claude, /usr/local/bin/claude, then claude on $PATH)")
	fs.StringVar(&name, "name", "", "the worker's `NAME`, unique among the controller's workers: letters, digits, '.', '_', '-' (default: the host name)")
	fs.Func("label", "a label `KEY=VALUE` sessions can ask for (repeatable)", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return errors.New("must be KEY=VALUE")
		}
		if err := relay.ValidLabel(k, v); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "worker "))
		}
		if len(labels) >= relay.MaxLabels {
			return fmt.Errorf("at most %d labels", relay.MaxLabels)
		}
		labels[k] = v
		return nil
	})
	fs.Func("capacity", "run at most `N` sessions at once (default 4)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > relay.MaxCapacity {
			return fmt.Errorf("must be a number from 1 to %d", relay.MaxCapacity)
		}
		capacity = n
		return nil
	})
	fs.Func("grace", "how long the controller keeps this worker's sessions while it is away, `DURATION` (default 2m)", func(s string) error {
		var d time.Duration
		if err := parseNonNegDuration(&d, "for example 2m")(s); err != nil {
			return err
		}
		if d < relay.MinGrace || d > relay.MaxGrace {
			return fmt.Errorf("must be from %v to %v", relay.MinGrace, relay.MaxGrace)
		}
		grace = d
		return nil
	})
	scheduling := serve.DefaultCLIScheduling
	fs.Func("cli-scheduling", "schedule the CLIs and their tools as `MODE` (Linux): \"batch\" (they never preempt this worker as they wake) or \"normal\" (default \"batch\")", func(s string) error {
		sc, err := claude.ParseScheduling(s)
		if err != nil {
			return errors.New(`must be "batch" or "normal"`)
		}
		scheduling = sc
		return nil
	})
	fs.BoolVar(&spares, "spares", false, "let the controller start CLIs here ahead of need (spare CLIs, its sessions.spare_clis), so that its next session like a recent one starts at once; each holds a slot of --capacity and this machine's Claude Code login while it waits, at most the controller's sessions.spare_lifetime")
	fs.BoolVar(&once, "once", false, "run one session, then exit")
	fs.Func("reconnect-timeout", "with --once: give up when the controller is out of reach for `DURATION` (default 2m)", func(s string) error {
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
	if len(connect) == 0 {
		return usagef("missing --connect URL")
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
	host, _ := os.Hostname()
	if name == "" {
		name = defaultWorkerName(host, once)
	}
	if err := relay.ValidName(name); err != nil { // the controller refuses it, --once or not
		return badValue("name", name, strings.TrimPrefix(err.Error(), fmt.Sprintf("worker name %q: ", name)))
	}
	if once && (len(labels) > 0 || capacity != defaultWorkerCapacity || grace != relay.DefaultGrace || spares) {
		return usagef("--label, --capacity, --grace and --spares are for a registered worker, not --once")
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
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	if once {
		w := &relay.Worker{
			URLs:             connect,
			Token:            token,
			Name:             name,
			ReconnectTimeout: reconnect,
			Logger:           logger,
			Start:            startLocalCLI(cliPath, scheduling, env.CLIEnv),
		}
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			return workerError(err)
		}
		return nil // stopped by Ctrl-C or SIGTERM, as a registered worker is
	}
	version := ""
	if v, err := claude.VersionOf(ctx, cliPath); err != nil {
		logger.Warn("claudectl worker: claude --version failed; registering without a CLI version", "cli", cliPath, "err", err)
	} else {
		version = v.String()
	}
	h := &relay.Host{
		URLs:  connect,
		Token: token,
		Registration: relay.Registration{Name: name, Labels: labels, Capacity: capacity, CLIVersion: version,
			Host: host, PID: os.Getpid(), GraceMillis: grace.Milliseconds(), Spares: spares},
		Logger: logger,
		Start:  startLocalCLI(cliPath, scheduling, env.CLIEnv),
	}
	if err := h.Run(ctx); err != nil {
		return workerError(err)
	}
	return nil
}

// workerError words the error that ended a worker (exit status 1): a
// refused handshake says what the daemon refused, and the relay's name
// is left out.
func workerError(err error) error {
	var re *relay.RefusedError
	if errors.As(err, &re) {
		switch re.Code {
		case http.StatusNotFound:
			return exitWith(ExitFailure, "the daemon at %s accepts no remote workers: it answered 404 (its workers.token_file is unset, or the URL's path is not %s)", re.URL, apiserver.WorkerPath)
		default:
			return exitWith(ExitFailure, "the daemon at %s refused the worker's token (answered %d): --token-file must hold the token of the daemon's workers.token_file", re.URL, re.Code)
		}
	}
	return exitWith(ExitFailure, "%s", strings.ReplaceAll(err.Error(), "relay: ", ""))
}

// defaultWorkerName is the host name made into a valid worker name (with
// the process id for a --once worker, which needs no unique name).
func defaultWorkerName(host string, once bool) string {
	var b strings.Builder
	for _, r := range host {
		if r < 0x80 && (r == '.' || r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')) {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	n := strings.TrimLeft(b.String(), "._-")
	if n == "" || n == "local" || n == "remote" {
		n = "worker-" + n
	}
	suffix := ""
	if once {
		suffix = fmt.Sprintf("-%d", os.Getpid())
	}
	return n[:min(len(n), relay.MaxNameLen-len(suffix))] + suffix
}

// startLocalCLI returns the worker's StartFunc: the CLI at path over stdio,
// scheduled as s says, in this process's environment changed as the
// controller asks (and by extra, for tests).
func startLocalCLI(path string, s claude.Scheduling, extra map[string]string) relay.StartFunc {
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
		t := &claude.ProcessTransport{Stderr: stderr, Scheduling: s}
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
		kept := (ee.KeptRunning + time.Millisecond - 1).Milliseconds() // rounded up: not 0 when set
		return &relay.Exit{Code: ee.Code, Signal: ee.Signal, Stderr: ee.Stderr, KeptRunningMS: kept}
	}
	return &relay.Exit{Code: -1, Error: err.Error(), Stderr: p.Conn.StderrTail()}
}
