package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/internal/credentials"
	"github.com/claudectl/claudectl/internal/relay"
	"github.com/claudectl/claudectl/internal/serve"
)

// RunCommand is "claudectl run": it runs one prompt through Claude Code and
// streams the reply to the terminal.
type RunCommand struct {
	Env *Env
}

// Name implements Command.
func (*RunCommand) Name() string { return "run" }

// Summary implements Command.
func (*RunCommand) Summary() string { return "run one prompt through Claude Code and stream the reply" }

func (*RunCommand) handlesInterrupts() {}

const runUsage = `Usage: claudectl run [flags] PROMPT

Runs PROMPT through the Claude Code CLI and streams the reply as it arrives,
with Claude's thinking dimmed (--hide-thinking hides it), a line per tool
call and per result. With PROMPT "-" the prompt is read from stdin.

When a tool needs permission, claudectl asks on the terminal:
  y = allow once, n = deny (the default), a = allow and remember the rule.
When stdin is not a terminal it cannot ask, so such tools are denied unless
--allow or --permission-mode allows them.

Ctrl-C interrupts the turn and exits once Claude Code has stopped; a second
Ctrl-C quits at once.

With --server URL (or CLAUDECTL_SERVER set) the prompt runs in a new
session of the claudectl daemon instead of a local CLI: in the current
directory (or --cwd), with --model, --permission-mode, --allow, --deny,
--add-dir, --max-turns, --max-budget-usd and the system prompt flags.
The session's id is printed on stderr; the session is closed when the
turn ends, unless --keep leaves it open for "claudectl attach ID" or
"claudectl send ID TEXT" (a kept session costs nothing while idle: the
daemon suspends its CLI and resumes it on the next prompt). Permissions
the daemon's rules do not settle are asked on the terminal as above (and
denied without one), with the request's id: another client of the daemon
may answer first (claudectl approve ID or deny ID from another terminal).
Ctrl-C interrupts the turn through the daemon; a second Ctrl-C leaves
the session to the daemon (kept). A session beyond the daemon's
sessions.max_running waits, queued, for a free slot: run says so, and
Ctrl-C then gives it up (the daemon closes it). An interrupt from another
client ends the run with "interrupted by <client>" and status 130.
--resume, --continue, --fork, --cli and --max-payload-bytes do not go
with --server.

Exit status: 0 success, 1 the turn ended in an error or the CLI (or the
daemon) failed, 2 bad usage, 130 interrupted (Ctrl-C, or another client),
143 stopped by SIGTERM or SIGHUP; without --server, as
claudectl doctor: 69 the CLI does not run or prints no version, 72 the CLI
is not installed, 78 the CLI is too old.
`

// Output formats of run.
const (
	formatText       = "text"
	formatStreamJSON = "stream-json"
)

// runConfig is run's command line, parsed.
type runConfig struct {
	model              string
	permissionMode     string
	allow, deny        []string
	cwd                string
	resume             string
	cont               bool
	fork               bool
	maxTurns           int
	maxBudgetUSD       float64
	systemPrompt       string
	appendSystemPrompt string
	addDirs            []string
	outputFormat       string
	cliPath            string
	maxPayloadBytes    int
	verbose            bool
	hideThinking       bool
	timeout            time.Duration
	server             clientFlags       // --server, --token-file
	keep               bool              // --keep: leave the daemon session open
	worker             string            // --worker: where the daemon runs the CLI
	workerLabels       map[string]string // --worker-label
	worktree           worktreeFlag      // --worktree[=BRANCH]

	prompt          string
	promptFromStdin bool
}

func (c *RunCommand) flagSet(cfg *runConfig) *flag.FlagSet {
	fs := newFlagSet("run")
	modes := make([]string, len(claude.PermissionModes))
	for i, m := range claude.PermissionModes {
		modes[i] = string(m)
	}
	cfg.outputFormat = formatText
	fs.StringVar(&cfg.model, "model", "", "use `MODEL`: sonnet, opus or a full model name (default: the CLI's)")
	fs.Func("permission-mode", "how tools get permission, `MODE` one of: "+strings.Join(modes, ", "), parseChoice(&cfg.permissionMode, modes...))
	fs.Var(stringList{"allow", &cfg.allow}, "allow", "allow `TOOL` without asking, e.g. Read or 'Bash(git status:*)' (repeatable)")
	fs.Var(stringList{"deny", &cfg.deny}, "deny", "never allow `TOOL`, e.g. WebFetch or 'Bash(rm:*)' (repeatable)")
	fs.StringVar(&cfg.cwd, "cwd", "", "run Claude Code in `DIR` (default: the current directory)")
	fs.StringVar(&cfg.resume, "resume", "", "continue the session with this `ID`")
	fs.BoolVar(&cfg.cont, "continue", false, "continue the most recent session in the working directory")
	fs.BoolVar(&cfg.fork, "fork", false, "with --resume or --continue: continue as a new session, leaving the old one as it was")
	fs.Func("max-turns", "stop after `N` agentic turns (0: no limit)", parseNonNegInt(&cfg.maxTurns, "0 means no limit"))
	fs.Func("max-budget-usd", "stop once the session has cost `USD` dollars (0: no limit)", parseNonNegFloat(&cfg.maxBudgetUSD, "0 means no limit"))
	fs.StringVar(&cfg.systemPrompt, "system-prompt", "", "replace the default system prompt with `TEXT`")
	fs.StringVar(&cfg.appendSystemPrompt, "append-system-prompt", "", "add `TEXT` to the default system prompt")
	fs.Var(stringList{"add-dir", &cfg.addDirs}, "add-dir", "let tools use this `DIR` too (repeatable)")
	fs.Func("output-format", "output `FORMAT`: text (the reply, tool calls and results; the default) or stream-json (each message as an NDJSON line)", parseChoice(&cfg.outputFormat, formatText, formatStreamJSON))
	fs.StringVar(&cfg.cliPath, "cli", "", "the claude executable at `PATH` (default: the daemon's: the settings file's \"cli\", else $CLAUDE_BIN, the CLI make installed, ~/.claude/local/claude, /usr/local/bin/claude, then claude on $PATH)")
	fs.Func("max-payload-bytes", "deliver CLI output lines up to `N` bytes whole, truncate longer ones (0: 10 MiB; else at least 1024)", func(s string) error {
		var n int
		if err := parseNonNegInt(&n, "0 means 10 MiB, otherwise at least 1024")(s); err != nil {
			return err
		}
		if n != 0 && n < 1024 {
			return errors.New("must be 0 (10 MiB) or at least 1024")
		}
		cfg.maxPayloadBytes = n
		return nil
	})
	fs.BoolVar(&cfg.verbose, "verbose", false, "print the CLI's stderr, and cost, tokens, duration and session id at the end (on stderr)")
	fs.BoolVar(&cfg.hideThinking, "hide-thinking", false, "do not show Claude's thinking (shown dimmed by default)")
	fs.Func("timeout", "give up after `DURATION`, e.g. 90s or 10m (0: no limit)", parseNonNegDuration(&cfg.timeout, "0 means no limit"))
	fs.StringVar(&cfg.server.server, "server", "", "run in a session of the claudectl daemon at `URL` (default $CLAUDECTL_SERVER; none: a local CLI)")
	fs.StringVar(&cfg.server.tokenFile, "token-file", "", "with --server: send the bearer token read from `FILE` "+tokenDefaultHelp)
	fs.BoolVar(&cfg.keep, "keep", false, "with --server: keep the daemon session open after the turn (default: closed)")
	fs.StringVar(&cfg.worker, "worker", "", "with --server: run the CLI on the remote worker `NAME` (claudectl workers lists them), or on any with remote")
	fs.Var(&cfg.worktree, "worktree", "with --server: run the session in a git worktree of its own, on a new branch claudectl/<short id>, or `BRANCH` with --worktree=BRANCH (claudectl diff, merge and discard then act on it)")
	fs.Func("worker-label", "with --server: run the CLI on a remote worker with the label `KEY=VALUE` (repeatable)", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return errors.New("must be KEY=VALUE")
		}
		if err := relay.ValidLabel(k, v); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "worker "))
		}
		if cfg.workerLabels == nil {
			cfg.workerLabels = map[string]string{}
		}
		cfg.workerLabels[k] = v
		return nil
	})
	return fs
}

// sessionOptions are the session options the flags ask for, with the
// working directory cwd: one mapping for a local CLI (through
// daemon.ClaudeOptions, as the daemon does) and for a daemon session.
func (cfg *runConfig) sessionOptions(cwd string) *daemon.SessionOptions {
	return &daemon.SessionOptions{
		Cwd: cwd, Model: cfg.model, PermissionMode: cfg.permissionMode,
		AllowedTools: cfg.allow, DisallowedTools: cfg.deny, AddDirs: cfg.addDirs,
		SystemPrompt: cfg.systemPrompt, AppendSystemPrompt: cfg.appendSystemPrompt,
		MaxTurns: int32(cfg.maxTurns), MaxBudgetUsd: cfg.maxBudgetUSD,
		IncludePartialMessages: true,
		Worker:                 cfg.worker, WorkerLabels: cfg.workerLabels, Worktree: string(cfg.worktree),
	}
}

// worktreeFlag is --worktree (a new branch named by the daemon: "auto")
// or --worktree=BRANCH; --worktree=false is none.
type worktreeFlag string

func (w *worktreeFlag) String() string   { return string(*w) }
func (w *worktreeFlag) IsBoolFlag() bool { return true } // --worktree alone
func (w *worktreeFlag) Set(v string) error {
	switch v {
	case "true":
		*w = "auto"
	case "false", "":
		*w = ""
	default:
		*w = worktreeFlag(v)
	}
	return nil
}

// parse parses and checks the command line; the prompt is not read yet.
func (c *RunCommand) parse(args []string) (*runConfig, *flag.FlagSet, error) {
	cfg := &runConfig{}
	fs := c.flagSet(cfg)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, fs, err
	}
	switch {
	case len(pos) == 0:
		return nil, fs, usagef("missing PROMPT: give the prompt as an argument, or - to read it from stdin")
	case len(pos) == 1 && pos[0] == "-":
		cfg.promptFromStdin = true
	default:
		cfg.prompt = strings.Join(pos, " ")
		if strings.TrimSpace(cfg.prompt) == "" {
			return nil, fs, usagef("the PROMPT is empty")
		}
	}
	if cfg.cwd != "" {
		if cfg.cwd, err = checkDir("cwd", cfg.cwd); err != nil {
			return nil, fs, err
		}
	}
	for i, d := range cfg.addDirs {
		if cfg.addDirs[i], err = checkDir("add-dir", d); err != nil {
			return nil, fs, err
		}
	}
	if cfg.resume != "" && cfg.cont {
		return nil, fs, usagef("--resume and --continue cannot be used together: --resume continues the session you name, --continue the most recent one")
	}
	if cfg.fork && cfg.resume == "" && !cfg.cont {
		return nil, fs, usagef("--fork needs --resume ID or --continue: it forks the session being continued")
	}
	if cfg.cliPath != "" {
		p, err := claude.FindBinary(&claude.FindOptions{Path: cfg.cliPath})
		if err != nil {
			reason := err.Error()
			var nf *claude.NotFoundError
			if errors.As(err, &nf) && len(nf.Tried) == 1 {
				reason = nf.Tried[0].Reason
			}
			return nil, fs, badValue("cli", cfg.cliPath, reason+" (it must be the claude executable)")
		}
		cfg.cliPath = p
	}
	return cfg, fs, nil
}

// Run implements Command.
func (c *RunCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	cfg, fs, err := c.parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(env.Stdout, runUsage, fs)
		return nil
	}
	if err != nil {
		return err
	}
	viaServer := cfg.server.server != "" || strings.TrimSpace(env.Getenv("CLAUDECTL_SERVER")) != ""
	if viaServer {
		if err := cfg.checkServer(); err != nil {
			return err
		}
	} else if cfg.server.tokenFile != "" {
		return usagef("--token-file goes with --server (or CLAUDECTL_SERVER)")
	} else if cfg.worker != "" || len(cfg.workerLabels) > 0 {
		return usagef("--worker and --worker-label go with --server (or CLAUDECTL_SERVER): a remote worker serves the daemon")
	} else if cfg.worktree != "" {
		return usagef("--worktree goes with --server (or CLAUDECTL_SERVER): the daemon makes the worktree and keeps it for claudectl diff, merge and discard")
	} else if cfg.keep {
		return usagef("--keep goes with --server (or CLAUDECTL_SERVER): only a daemon keeps a session open after the turn")
	}
	if cfg.promptFromStdin {
		if env.StdinIsTerminal() {
			fmt.Fprintln(env.Stderr, "claudectl: reading the prompt from stdin; end it with Ctrl-D")
		}
		b, err := io.ReadAll(env.Stdin)
		if err != nil {
			return exitWith(ExitFailure, "reading the prompt from stdin: %v", err)
		}
		cfg.prompt = strings.TrimRight(string(b), "\r\n")
		if strings.TrimSpace(cfg.prompt) == "" {
			return usagef("the prompt read from stdin is empty")
		}
	}
	if viaServer {
		return (&serverRunner{env: env, cfg: cfg}).run(ctx)
	}
	if cfg.cliPath == "" {
		// The CLI the daemon would run: the settings file's "cli", else the
		// same search.
		p, err := claude.FindBinary(&claude.FindOptions{Path: settingsCLI(env), Env: env.Getenv})
		if err != nil {
			return exitWith(ExitNotFound, "%v", serve.CLINotFound(err))
		}
		cfg.cliPath = p
	}
	// As claudectl serve and doctor do: a CLI too old, or no Claude Code
	// at all, would otherwise fail on its first line.
	rep, err := serve.CheckCLI(ctx, cfg.cliPath)
	if se := (*serve.StartError)(nil); errors.As(err, &se) {
		return exitWith(se.Code, "%v (claudectl doctor --cli %s says more)", se.Err, cfg.cliPath)
	}
	if rep.Level == claude.Degraded {
		fmt.Fprintf(env.Stderr, "claudectl: warning: %s\n", rep.Message)
	}
	return (&runner{env: env, cfg: cfg}).run(ctx)
}

// runner is one execution of run.
type runner struct {
	env *Env
	cfg *runConfig

	interrupts atomic.Int32
}

func (r *runner) options() *claude.Options {
	cfg := r.cfg
	mode := claude.PermissionMode(cfg.permissionMode)
	level := slog.LevelWarn
	if cfg.verbose {
		level = slog.LevelDebug
	}
	opts := new(daemon.ClaudeOptions(cfg.sessionOptions(cfg.cwd)))
	opts.CLIPath = cfg.cliPath
	opts.Env = r.env.CLIEnv
	opts.AllowDangerouslySkipPermissions = mode == claude.PermissionBypassPermissions
	opts.Resume, opts.Continue, opts.ForkSession = cfg.resume, cfg.cont, cfg.fork
	opts.MaxPayloadBytes = cfg.maxPayloadBytes
	opts.Logger = slog.New(slog.NewTextHandler(r.env.Stderr, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	if cfg.verbose {
		stderr := r.env.Stderr
		opts.Stderr = func(line string) { fmt.Fprintf(stderr, "claude: %s\n", line) }
	}
	return opts
}

func (r *runner) run(ctx context.Context) error {
	env, cfg := r.env, r.cfg
	if cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
	}
	// sctx is the session's life: a second Ctrl-C ends it at once.
	sctx, closeSession := context.WithCancel(ctx)
	defer closeSession()

	var tools *toolLog
	var render *renderer
	// The status line, and colour, only with the transcript.
	env, status := withStatusLine(env, cfg.outputFormat == formatText)
	defer status.close()
	r.env = env
	stderr := env.Stderr
	if cfg.outputFormat == formatText {
		tools = newToolLog()
		render = newTranscript(env, tools, status, cfg.hideThinking)
	}
	opts := r.options()
	if env.StdinIsTerminal() {
		ask := newAsker(stderr, env.Stdin, tools)
		ask.pal = colorFor(env, env.StderrIsTerminal)
		defer ask.close()
		opts.CanUseTool = claude.AnswerQuestions(ask.answer, ask.canUseTool)
	} else {
		opts.CanUseTool = denyNoTerminal(stderr)
	}

	s, err := claude.Start(sctx, opts)
	if err != nil {
		var oe *claude.OptionError
		if errors.As(err, &oe) {
			return usagef("%v", err)
		}
		return exitWith(ExitFailure, "cannot start Claude Code: %v", err)
	}
	defer closeSDKSession(s)
	if cfg.verbose {
		fmt.Fprintf(stderr, "claudectl: running %s\n", cfg.cliPath)
	}

	stopWatching := r.watchInterrupts(sctx, s, closeSession)
	defer stopWatching()

	out := &turnOutput{stdout: env.Stdout, render: render}
	t := r.turn(sctx, s, out)
	var closeErr error
	if t.res != nil {
		closeErr = r.finish(sctx, s, out)
	}
	if sctx.Err() != nil {
		// The CLI is being terminated (Ctrl-C twice, --timeout). Let that
		// finish before Close, which would otherwise first grant it a grace
		// period to exit on its own.
		select {
		case <-s.Done():
		case <-time.After(15 * time.Second):
		}
		closeSDKSession(s)
	}
	if render != nil {
		render.finish()
	}
	return r.report(ctx, s, t, closeErr)
}

// turnOutput prints messages: as a transcript, or raw for stream-json.
type turnOutput struct {
	stdout io.Writer
	render *renderer // nil for stream-json
	buf    []byte
}

func (o *turnOutput) print(m claude.Message) {
	if o.render != nil {
		o.render.handle(m)
		return
	}
	o.raw(m)
}

// raw prints the message's line as the CLI wrote it.
func (o *turnOutput) raw(m claude.Message) {
	o.buf = append(append(o.buf[:0], m.Raw()...), '\n') // never append to Raw itself
	o.stdout.Write(o.buf)
}

// turnResult is how the turn went.
type turnResult struct {
	res     *claude.ResultMessage // nil if the session ended first
	refused bool                  // the last failed API call lacked credentials (credentials.Refused)
	endErr  error                 // why the session ended without a result
}

// turn sends the prompt and prints the messages up to the result.
func (r *runner) turn(ctx context.Context, s *claude.Session, out *turnOutput) turnResult {
	var t turnResult
	if err := s.SendText(ctx, r.cfg.prompt); err != nil {
		// Most likely the CLI has exited already: prefer how it ended,
		// which carries its stderr, to the failed write.
		select {
		case <-s.Done():
		case <-time.After(2 * time.Second):
		}
		if t.endErr = s.Err(); t.endErr == nil {
			t.endErr = err
		}
		return t
	}
	stderr, verbose := r.env.Stderr, r.cfg.verbose
	for {
		m, err := s.Next(ctx)
		if err != nil {
			t.endErr = err
			return t
		}
		out.print(m)
		switch m := m.(type) {
		case *claude.ResultMessage:
			t.res = m
			return t
		case *claude.AssistantMessage:
			if m.Error != "" && m.ParentToolUseID == "" {
				t.refused = credentials.Refused(m)
			}
		case *claude.SystemInit:
			if verbose {
				fmt.Fprintf(stderr, "claudectl: session %s, model %s, permission mode %s, in %s\n", m.SessionID, m.Model, m.PermissionMode, m.CWD)
			}
		case *claude.APIRetry:
			// Always shown: without it a long retry loop looks like a hang.
			what := fmt.Sprintf("API error %d (%s)", m.ErrorStatus, m.Error)
			if m.ErrorStatus == 0 {
				what = "could not reach the API (is ANTHROPIC_BASE_URL right? is the network up?)"
			}
			fmt.Fprintf(stderr, "claudectl: %s, retrying in %.1fs (attempt %d of %d)\n", what, float64(m.RetryDelayMS)/1000, m.Attempt, m.MaxRetries)
		}
	}
}

// finish lets the CLI end after the result: it exits once its input ends.
// What it prints meanwhile is still output in stream-json.
func (r *runner) finish(ctx context.Context, s *claude.Session, out *turnOutput) error {
	_ = s.CloseInput()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		m, err := s.Next(ctx)
		if err != nil {
			break
		}
		if out.render == nil {
			out.raw(m)
		}
	}
	return closeSDKSession(s)
}

// report prints how the run ended and returns its exit status as an error.
func (r *runner) report(ctx context.Context, s *claude.Session, t turnResult, closeErr error) error {
	stderr, cfg := r.env.Stderr, r.cfg
	switch {
	case r.interrupts.Load() > 0 || errors.Is(ctx.Err(), context.Canceled):
		fmt.Fprintln(stderr, "claudectl: interrupted")
		if t.res != nil && cfg.verbose {
			r.printStats(t.res)
		}
		return exitSilently(ExitInterrupted)
	case t.res == nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return exitWith(ExitFailure, "timed out after %s (--timeout)", cfg.timeout)
	case t.res == nil && errors.Is(t.endErr, io.EOF):
		tail := strings.TrimSpace(s.StderrTail())
		if tail == "" {
			tail = "(empty)"
		}
		return exitWith(ExitFailure, "Claude Code exited without a result; its stderr: %s", tail)
	case t.res == nil:
		return exitWith(ExitFailure, "%s", userMessage(t.endErr.Error()))
	}
	if cfg.verbose {
		r.printStats(t.res)
	}
	if t.res.Err() != nil {
		fmt.Fprintf(stderr, "claudectl run: %s\n", colorFor(r.env, r.env.StderrIsTerminal).err(describeResultError(t.res)))
		if t.refused {
			fmt.Fprintln(stderr, "claudectl run: hint: "+credentials.Hint(credentials.Where{}))
		}
		return exitSilently(ExitFailure)
	}
	if closeErr != nil && cfg.verbose {
		fmt.Fprintf(stderr, "claudectl: warning: %v\n", closeErr)
	}
	return nil
}

// closeSDKSession closes s once its initialize request has been settled:
// Close does not wait for the goroutine that sends it, and updates the
// *ExitError that goroutine may still be formatting (a data race in the SDK).
func closeSDKSession(s *claude.Session) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, _ = s.Initialize(ctx)
	cancel()
	return s.Close()
}

// watchInterrupts handles Ctrl-C while the session runs: the first asks the
// CLI to stop the turn (the result then ends the run), the second closes the
// session. The returned function stops watching and waits for the goroutines.
func (r *runner) watchInterrupts(sctx context.Context, s *claude.Session, closeSession context.CancelFunc) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-r.env.Interrupts:
			}
			if r.interrupts.Add(1) == 1 {
				fmt.Fprintln(r.env.Stderr, "\nclaudectl: interrupting the turn (press Ctrl-C again to quit at once)")
				wg.Add(1)
				go func() {
					defer wg.Done()
					ictx, cancel := context.WithTimeout(sctx, 10*time.Second)
					defer cancel()
					if err := s.Interrupt(ictx); err != nil && sctx.Err() == nil && !errors.Is(err, claude.ErrClosed) {
						fmt.Fprintf(r.env.Stderr, "claudectl: could not interrupt the turn (%v); closing the session\n", err)
						closeSession()
					}
				}()
				continue
			}
			fmt.Fprintln(r.env.Stderr, "claudectl: closing the session")
			closeSession()
		}
	}()
	return func() {
		close(stop)
		closeSession() // ends an Interrupt still waiting for its answer
		wg.Wait()
	}
}

func (r *runner) printStats(res *claude.ResultMessage) {
	var tokens string
	if u := res.Usage; u != nil {
		tokens = fmt.Sprintf(" · %d in, %d out tokens", u.InputTokens, u.OutputTokens)
		if u.CacheReadInputTokens > 0 || u.CacheCreationInputTokens > 0 {
			tokens += fmt.Sprintf(" (cache: %d read, %d written)", u.CacheReadInputTokens, u.CacheCreationInputTokens)
		}
	}
	fmt.Fprintf(r.env.Stderr, "claudectl: session %s · %d %s · %s (API %s) · $%.4f%s\n",
		res.SessionID, res.NumTurns, plural(res.NumTurns, "turn", "turns"),
		msDuration(res.DurationMS), msDuration(res.DurationAPIMS), res.TotalCostUSD, tokens)
}

func msDuration(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).Round(10 * time.Millisecond).String()
}

// describeResultError says why a turn failed, from its result.
func describeResultError(res *claude.ResultMessage) string {
	detail := strings.TrimSpace(strings.Join(res.Errors, "; "))
	if detail == "" {
		detail = strings.TrimSpace(res.Result)
	}
	var what string
	switch res.Subtype {
	case "", "success":
	case "error_max_turns":
		what = "stopped at the turn limit (--max-turns)"
	case "error_max_budget_usd":
		what = "stopped at the budget limit (--max-budget-usd)"
	case "error_during_execution":
		what = "the turn failed"
	default:
		what = "the turn ended with " + res.Subtype
	}
	switch {
	case what != "" && detail != "":
		return what + ": " + detail
	case what != "":
		return what
	case detail != "":
		return detail
	}
	return "the turn ended with an error (Claude Code gave no detail)"
}

// settingsCLI returns the "cli" of claudectl serve's default settings file
// ("" when there is none, or the file cannot be read: run then searches as
// the daemon would without it).
func settingsCLI(env *Env) string {
	s, err := loadSettings("", env.Getenv)
	if err != nil {
		return ""
	}
	return s.CLI
}
