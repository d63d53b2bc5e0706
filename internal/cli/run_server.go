package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
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

	session, gaveUp, err := r.create(fctx, dc, &v1.CreateSessionRequest{
		Options: cfg.sessionOptions(cwd),
		Prompt:  cfg.prompt,
	})
	if err != nil && !gaveUp {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return exitWith(ExitFailure, "timed out after %s (--timeout)", cfg.timeout)
		}
		return dc.explain(err, "starting a session in the daemon")
	}
	if session == nil { // given up while queued: the daemon closes it
		return exitSilently(ExitInterrupted)
	}
	id := session.Id
	if cfg.keep {
		fmt.Fprintf(stderr, "claudectl: daemon session %s (claudectl attach %s)\n", id, id)
	} else {
		fmt.Fprintf(stderr, "claudectl: daemon session %s (closed after the turn; --keep keeps it)\n", id)
	}
	if wt := session.GetWorktree(); wt != nil {
		base := wt.BaseBranch
		if base == "" {
			base = fmt.Sprintf("commit %.12s", wt.BaseCommit)
		}
		fmt.Fprintf(stderr, "claudectl: it works in the worktree %s, on branch %s from %s: claudectl diff %s shows its changes, merge %s brings them into %s, discard %s removes them\n",
			wt.Path, wt.Branch, base, id, id, base, id)
	}
	client := clientName("run")
	// closeSession closes the session once the run is over, unless it is
	// kept (--keep, or left to the daemon by a second Ctrl-C once it runs).
	closeSession := func() {
		if cfg.keep || (r.interrupts.Load() > 1 && !gaveUp) {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := dc.sessions.CloseSession(cctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: id, Client: client})); err != nil {
			fmt.Fprintf(stderr, "claudectl: %v\n", dc.explain(err, "closing the daemon session "+id))
		}
	}
	defer closeSession()
	if gaveUp { // it started as the call was given up: nobody follows it
		return exitSilently(ExitInterrupted)
	}

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
		f.render = newTranscript(env, f.tools, status, cfg.hideThinking)
	}
	if env.StdinIsTerminal() {
		ask := newAsker(stderr, env.Stdin, f.tools)
		ask.pal = colorFor(env, env.StderrIsTerminal)
		ask.requestIDs = true
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
		if f.hint != "" { // the daemon's, on the turn's error event
			fmt.Fprintf(stderr, "claudectl run: hint: %s\n", f.hint)
		}
		return exitSilently(ExitFailure)
	}
	return nil
}

// watchInterrupts handles Ctrl-C while the turn runs: the first asks the
// daemon to stop the turn (its result then ends the run), the second stops
// following at once. A Ctrl-C pressed while the session started (create)
// counts as the first. The returned function stops watching and waits.
func (r *serverRunner) watchInterrupts(ctx context.Context, dc *daemonClient, id, client string, detach context.CancelFunc) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	interrupt := func() {
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
	if r.interrupts.Load() > 0 {
		interrupt()
	}
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
			interrupt()
		}
	})
	return func() {
		close(stop)
		detach() // ends an Interrupt still waiting for its answer
		wg.Wait()
	}
}

// queuedProbeAfter is how long run --server waits for the daemon to
// answer CreateSession before it looks whether the session is queued: a
// session given a slot at once is answered well before.
const queuedProbeAfter = time.Second

// create asks the daemon for the session. The daemon answers once the
// session's CLI has started, and before that a session beyond
// sessions.max_running waits in a queue, for as long as the running ones
// take: create looks after queuedProbeAfter whether the session is queued
// and says so. A Ctrl-C while it is queued gives up: the call is
// cancelled and the daemon closes the session ("closed while queued");
// gaveUp is then set, with the session nil, or set when it started
// anyway. A Ctrl-C while its CLI starts is left to the turn, which it
// interrupts once it runs (a call cancelled then could leave the session
// half started); a second one gives up at once.
func (r *serverRunner) create(ctx context.Context, dc *daemonClient, req *v1.CreateSessionRequest) (s *v1.Session, gaveUp bool, err error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		s   *v1.Session
		err error
	}
	answered := make(chan answer, 1)
	since := time.Now()
	go func() {
		res, err := dc.sessions.CreateSession(cctx, connect.NewRequest(req))
		if err != nil {
			answered <- answer{err: err}
			return
		}
		answered <- answer{s: res.Msg.Session}
	}()
	probe := time.NewTimer(queuedProbeAfter)
	defer probe.Stop()
	next := 2 * queuedProbeAfter // then less and less often: a listing of every session each time
	queued := false
	giveUp := func(msg string) {
		fmt.Fprintln(r.env.Stderr, msg)
		gaveUp = true
		cancel()
	}
	for {
		select {
		case a := <-answered:
			return a.s, gaveUp, a.err
		case <-probe.C:
			var detail string
			if queued, detail = findQueued(cctx, dc, req.GetOptions().GetCwd(), since); queued {
				fmt.Fprintf(r.env.Stderr, "claudectl: queued: %s; Ctrl-C gives up\n", queueText(detail))
			} else { // its CLI is slow to start (a remote worker to wait for), or the probe was early
				probe.Reset(next)
				next = min(2*next, 30*time.Second)
			}
		case <-r.env.Interrupts:
			switch n := r.interrupts.Add(1); {
			case gaveUp:
			case n > 1:
				giveUp("claudectl: interrupted before the session started")
			case queued:
				giveUp("\nclaudectl: interrupted: the daemon closes the session that waited for a slot")
			default:
				if queued, _ = findQueued(cctx, dc, req.GetOptions().GetCwd(), since); queued {
					giveUp("\nclaudectl: interrupted: the daemon closes the session that waited for a slot")
					break
				}
				fmt.Fprintln(r.env.Stderr, "\nclaudectl: interrupting the turn once the session has started (press Ctrl-C again to give up at once)")
			}
		}
	}
}

// findQueued reports whether a session created since then in cwd waits
// for a slot, with the daemon's word on its place in the queue (its
// "queued" status change) when there is one such session (more are
// sessions of other runs in the same directory, queued as well). The
// daemon does not say which session a CreateSession still waiting is.
func findQueued(ctx context.Context, dc *daemonClient, cwd string, since time.Time) (queued bool, detail string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	res, err := dc.sessions.ListSessions(ctx, connect.NewRequest(&v1.ListSessionsRequest{
		Status: []v1.SessionStatus{v1.SessionStatus_SESSION_STATUS_QUEUED}}))
	if err != nil {
		return false, ""
	}
	var found []*v1.Session
	for _, s := range res.Msg.Sessions {
		// A few seconds of leeway: the daemon's clock may not be this one.
		if s.Cwd == cwd && !s.GetCreatedAt().AsTime().Before(since.Add(-5*time.Second)) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		return len(found) > 0, ""
	}
	return true, lastQueuedDetail(ctx, dc, found[0].Id, 0, found[0].GetLastSeq())
}

// lastQueuedDetail returns the daemon's word on session id's place in the
// queue: the detail of its latest "queued" status change among its events
// after after up to last, "" when there is none.
func lastQueuedDetail(ctx context.Context, dc *daemonClient, id string, after, last int64) (detail string) {
	if last <= after {
		return ""
	}
	stream, err := dc.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id, AfterSeq: after}))
	if err != nil {
		return ""
	}
	defer stream.Close()
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		if sc := ev.GetStatusChange(); sc.GetStatus() == v1.SessionStatus_SESSION_STATUS_QUEUED {
			detail = sc.GetDetail()
		}
		if ev.GetSeq() >= last {
			break
		}
	}
	return detail
}

// queueDetail matches the daemon's word on a queued session: "waiting for
// one of 2 running sessions to become idle (sessions.max_running); 1 ahead".
var queueDetail = regexp.MustCompile(`one of (\d+) running sessions.*; (\d+) ahead`)

// queueText says where a queued session is, from the daemon's detail.
func queueText(detail string) string {
	m := queueDetail.FindStringSubmatch(detail)
	if m == nil {
		return "waiting for a free session slot (sessions.max_running)"
	}
	ahead := m[2] + " sessions ahead"
	switch m[2] {
	case "0":
		ahead = "next in line"
	case "1":
		ahead = "1 session ahead"
	}
	return fmt.Sprintf("%s, waiting for a free session slot (sessions.max_running is %s)", ahead, m[1])
}
