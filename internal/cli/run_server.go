package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claude"
)

// serverRunner is one execution of run --server: the prompt runs in a new
// session of the daemon, followed as attach follows one.
type serverRunner struct {
	env *Env
	cfg *runConfig

	interrupts atomic.Int32
}

// checkServer refuses the flags that only mean something for a local CLI.
func (cfg *runConfig) checkServer() error {
	for _, c := range []struct {
		set  bool
		flag string
	}{
		{cfg.resume != "", "--resume"},
		{cfg.cont, "--continue"},
		{cfg.fork, "--fork"},
		{cfg.cliPath != "", "--cli"},
		{cfg.maxPayloadBytes != 0, "--max-payload-bytes"},
	} {
		if c.set {
			return usagef("%s does not go with --server (or CLAUDECTL_SERVER): the daemon runs the CLI", c.flag)
		}
	}
	return nil
}

func (r *serverRunner) run(ctx context.Context) error {
	env, cfg := r.env, r.cfg
	stderr := env.Stderr
	dc, err := cfg.server.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	cwd := cfg.cwd
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return exitWith(ExitFailure, "finding the current directory: %v", err)
		}
	}
	if cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
	}
	// fctx is how long we follow the session: a second Ctrl-C ends it.
	fctx, detach := context.WithCancel(ctx)
	defer detach()

	res, err := dc.sessions.CreateSession(fctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: cfg.sessionOptions(cwd),
		Prompt:  cfg.prompt,
	}))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return exitWith(ExitFailure, "timed out after %s (--timeout)", cfg.timeout)
		}
		return dc.explain(err, "starting a session in the daemon")
	}
	id := res.Msg.Session.Id
	if cfg.keep {
		fmt.Fprintf(stderr, "claudectl: daemon session %s (claudectl attach %s)\n", id, id)
	} else {
		fmt.Fprintf(stderr, "claudectl: daemon session %s (closed after the turn; --keep keeps it)\n", id)
	}
	client := clientName("run")
	// closeSession closes the session once the run is over, unless it is
	// kept (--keep, or left to the daemon by a second Ctrl-C).
	closeSession := func() {
		if cfg.keep || r.interrupts.Load() > 1 {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := dc.sessions.CloseSession(cctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: id, Client: client})); err != nil {
			fmt.Fprintf(stderr, "claudectl: %v\n", dc.explain(err, "closing the daemon session "+id))
		}
	}
	defer closeSession()

	env, status := withStatusLine(env, cfg.outputFormat == formatText)
	defer status.close()
	stderr = env.Stderr
	status.set("starting Claude Code")

	var result *claude.ResultMessage
	f := &follower{env: env, dc: dc, id: id, raw: cfg.outputFormat == formatStreamJSON,
		verbose: cfg.verbose, client: client,
		onMessage: func(m claude.Message) bool {
			switch m := m.(type) {
			case *claude.ResultMessage:
				if claude.ThreadOf(m).IsMain() {
					result = m
					return true
				}
			case *claude.SystemInit:
				if cfg.verbose {
					fmt.Fprintf(stderr, "claudectl: session %s, model %s, permission mode %s, in %s\n", m.SessionID, m.Model, m.PermissionMode, m.CWD)
				}
			}
			return false
		}}
	if cfg.outputFormat == formatText {
		f.tools = newToolLog()
		f.render = newTranscript(env, f.tools, status, cfg.verbose)
	}
	if env.StdinIsTerminal() {
		ask := newAsker(stderr, env.Stdin, f.tools)
		ask.pal = colorFor(env, env.StderrIsTerminal)
		defer ask.close()
		f.decide = claude.AnswerQuestions(ask.answer, ask.canUseTool)
	} else {
		f.decide = denyNoTerminal(stderr)
	}

	stopWatching := r.watchInterrupts(fctx, dc, id, client, detach)
	err = f.follow(fctx)
	stopWatching()
	f.stopAsking()
	if f.render != nil {
		f.render.finish()
	}

	switch {
	case r.interrupts.Load() == 0 && f.interruptedBy != "" && ctx.Err() == nil:
		fmt.Fprintf(stderr, "claudectl: the turn was interrupted by %s\n", f.interruptedBy)
		if result != nil && cfg.verbose {
			(&runner{env: env, cfg: cfg}).printStats(result)
		}
		return exitSilently(ExitInterrupted)
	case r.interrupts.Load() > 0 || errors.Is(ctx.Err(), context.Canceled):
		fmt.Fprintln(stderr, "claudectl: interrupted")
		if result != nil && cfg.verbose {
			(&runner{env: env, cfg: cfg}).printStats(result)
		}
		return exitSilently(ExitInterrupted)
	case result == nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		// Stop the turn, as a local run ends its CLI.
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = dc.sessions.Interrupt(ictx, connect.NewRequest(&v1.InterruptRequest{SessionId: id, Client: client}))
		return exitWith(ExitFailure, "timed out after %s (--timeout)", cfg.timeout)
	case result == nil && errors.Is(err, errStreamEnded):
		st, detail := f.finalStatus(ctx)
		if detail != "" {
			return exitWith(ExitFailure, "the daemon session %s ended without a result (%s): %s", id, statusName(st), detail)
		}
		return exitWith(ExitFailure, "the daemon session %s ended without a result (%s)", id, statusName(st))
	case result == nil:
		return err
	}
	if cfg.verbose {
		(&runner{env: env, cfg: cfg}).printStats(result)
	}
	if result.Err() != nil {
		fmt.Fprintf(stderr, "claudectl run: %s\n", colorFor(env, env.StderrIsTerminal).err(describeResultError(result)))
		return exitSilently(ExitFailure)
	}
	return nil
}

// watchInterrupts handles Ctrl-C while the turn runs: the first asks the
// daemon to stop the turn (its result then ends the run), the second stops
// following at once. The returned function stops watching and waits.
func (r *serverRunner) watchInterrupts(ctx context.Context, dc *daemonClient, id, client string, detach context.CancelFunc) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-r.env.Interrupts:
			}
			if r.interrupts.Add(1) > 1 {
				fmt.Fprintf(r.env.Stderr, "claudectl: leaving the turn to the daemon (claudectl attach %s)\n", id)
				detach()
				continue
			}
			fmt.Fprintln(r.env.Stderr, "\nclaudectl: interrupting the turn (press Ctrl-C again to quit at once)")
			wg.Go(func() {
				ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				_, err := dc.sessions.Interrupt(ictx, connect.NewRequest(&v1.InterruptRequest{SessionId: id, Client: client}))
				if err != nil && ctx.Err() == nil {
					fmt.Fprintf(r.env.Stderr, "claudectl: %v\n", dc.explain(err, "interrupting the turn"))
					detach()
				}
			})
		}
	})
	return func() {
		close(stop)
		detach() // ends an Interrupt still waiting for its answer
		wg.Wait()
	}
}
