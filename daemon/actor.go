package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/credentials"
	"github.com/claudectl/claudectl/internal/relay"
	"github.com/claudectl/claudectl/store"
)

// An actor runs one session's CLI process. Its goroutine (run) alone owns
// the session's state (actorState): other goroutines — the reader of the
// CLI's output, permission callbacks, API calls — change or read it only
// through do, which runs a function on that goroutine. Calls into the SDK
// that may block (a prompt, an interrupt, a model switch) run on the
// caller's goroutine, never on run's, and are cancelled when the session
// closes, so a Close never waits behind them.
//
// Every event of the session goes through record: stored first, published
// from the store's commit callback.
type actor struct {
	d      *Daemon
	id     string
	opts   *SessionOptions
	launch launch
	hub    *hub // the session's (Daemon.hubs), set by launch

	// Set by start, before run; read-only after.
	sess    *claude.Session
	process int64 // CLI process generation (store.NewProcess)

	ctx    context.Context // done once the session begins to close
	cancel context.CancelFunc
	// cancelCLI ends the context the CLI was started with (set by start):
	// the daemon's, or the start's abort when a.ctx ends while it runs.
	cancelCLI context.CancelFunc
	// closedBy is who closed the session while its launch was under way
	// (queued, or its CLI starting): "client:alice".
	closedBy atomic.Pointer[string]

	compat sessionCompat // its CLI's version and what its init lacked (health.go)

	ops    chan func(*actorState)
	closeQ chan struct{} // capacity 1: a close was asked
	ready  chan struct{} // closed when the launch is over: the CLI runs, or it never will
	done   chan struct{} // closed when run (or a failed launch) is over

	// Turn accounting, kept by atomics so that the reader pays no round
	// trip to run for it. inflight counts the prompts sent whose turn has
	// not ended; idleSince is when inflight last fell to zero (unix ns),
	// 0 while a turn runs. The idle timer (idleTimeout) and the eviction
	// of idle sessions for a queued one read them.
	inflight  atomic.Int64
	idleSince atomic.Int64
	// interrupted is set when a client interrupts a running turn (the
	// interrupted event, naming it, is logged then) and cleared by the
	// main thread's next result: the CLI ends an interrupted turn with an
	// error_during_execution result holding its own diagnostic, which is
	// then not reported as the turn's failure.
	interrupted atomic.Bool
	idleTimer   *time.Timer // made and reset by the reader (and by itself when it fires early); stopped by end

	hasSlot bool        // a slot was taken for it (set before start, read after done)
	evicted atomic.Bool // suspended to make room for a queued session
	// launching is set until its launch is done (its loop runs and the
	// launch's prompt, if any, is sent): no eviction picks it before, as
	// a session launched for a prompt must get to send it, and one
	// suspended before its loop ran would wait for it for ever.
	launching atomic.Bool
	live      atomic.Bool // its CLI runs
	released  sync.Once
	// wantSpare asks, once, for a spare CLI with the session's options
	// (pool.go): when its first turn ends, so that the spare's start
	// (a second of CPU) does not slow that turn down.
	wantSpare sync.Once
	// storeFailed is set when an event of the session could not be stored:
	// the session is being stopped (storefail.go).
	storeFailed atomic.Bool
	// takenOver is set when another daemon took the session over (its
	// lease passed): the CLI stops here without writing.
	takenOver atomic.Bool
	// sent counts, when the CLI runs on a worker, the lines written to it
	// over the relay (store.Relay.Sent).
	sent atomic.Int64

	// modeMu guards mode, the permission mode in effect as last recorded
	// (stored, with a permission_mode event), and switching, how many
	// SetPermissionMode calls are under way: the reader leaves the CLI's
	// report of a mode to them meanwhile (noteMode).
	modeMu    sync.Mutex
	mode      string
	switching int

	// startupFailure is the result of a CLI that refused to start (its
	// StartupFailureReason set), written by the reader and read by end
	// once the reader is done (startup.go).
	startupFailure *claude.ResultMessage
	// memoryKills is how many of its processes the CLI's memory limit
	// killed, as last reported (owned by the reader).
	memoryKills int64
}

// actorState is what run owns.
type actorState struct {
	waiting int    // permission requests waiting for a person
	stopMsg string // why the daemon stopped the session itself (budget)
	// suspendMsg says why the daemon closes the CLI of a session that
	// goes on (idle, room for another, the store failing).
	suspendMsg string
	shutdown   bool   // the daemon is stopping: the session is interrupted, not closed
	closing    bool   // the CLI is being closed
	closedBy   string // who closed the session ("closed by client:…")
}

func newActor(d *Daemon, id string, o *SessionOptions, l launch) *actor {
	a := &actor{
		d: d, id: id, opts: o, launch: l,
		ops:    make(chan func(*actorState)),
		closeQ: make(chan struct{}, 1),
		ready:  make(chan struct{}),
		done:   make(chan struct{}),
	}
	a.ctx, a.cancel = context.WithCancel(d.ctx)
	a.launching.Store(true)
	a.mode = modeName(o.GetPermissionMode()) // as launched: asked, or stored by the last CLI
	return a
}

// start launches the CLI. On failure the session is marked failed and the
// actor is over.
func (a *actor) start(ctx context.Context) error {
	held := a.d.heldDetail(ctx, a.id) // a CLI started for a held session leaves it held
	if a.launch.takeover != nil {
		a.process = a.launch.process // the same CLI process
	} else {
		a.status(ctx, store.StatusStarting, "")
		gen, err := a.d.db.NewProcess(ctx, a.id)
		switch {
		case errors.Is(err, store.ErrWriteFailed):
			return a.fail(ctx, fmt.Errorf("daemon: session %s could not start: %w", a.id, storeError(err)))
		case err != nil:
			return a.fail(ctx, fmt.Errorf("daemon: new process: %w", err))
		}
		a.process = gen
	}
	if sp := a.launch.spare; sp != nil {
		return a.startSpare(ctx, sp, held)
	}
	tr := a.d.localTransport(a.opts)
	if a.remote() {
		if a.d.workers == nil {
			return a.fail(ctx, &InvalidArgumentError{Field: "options.worker", Value: a.opts.GetWorker(),
				Reason: "this daemon accepts no remote workers now"})
		}
		sel, _ := workerSelector(a.opts)
		if last := a.d.workerOf(a.id); last != "" && a.launch.resume != "" {
			// The conversation's transcript is on the worker that ran it
			// (a fork's: the worker of the session it copies, see Fork).
			sel.Name = last
		}
		// Hold: a line stays on the worker until it is stored (record
		// releases it), so that another daemon can take the CLI over
		// when this one dies (takeover.go).
		tr = &claude.WorkerTransport{Listener: a.d.workers, Name: sel.Name, Labels: sel.Labels, Tag: a.id,
			Hold: true, Resume: a.launch.takeover}
	}
	co := a.d.cliOptions(a.opts, &tapTransport{Transport: tr, a: a}, a.canUseTool, a.skillShellCommand)
	if a.launch.dir != "" {
		co.Cwd = a.launch.dir // its worktree
	}
	co.Resume, co.ForkSession = a.launch.resume, a.launch.fork
	// The CLI lives as long as the daemon, or until the session closes it
	// (gracefully: Close); but a close while it starts (a client's, the
	// daemon stopping) ends the start at once, which may otherwise wait
	// minutes for a remote worker to connect.
	cliCtx, cancelCLI := context.WithCancel(a.d.ctx)
	a.cancelCLI = cancelCLI
	stopAbort := context.AfterFunc(a.ctx, cancelCLI)
	s, err := claude.Start(cliCtx, &co)
	if err != nil && a.remote() && errors.Is(err, claude.ErrWorkersBusy) && cliCtx.Err() == nil && a.d.dropRemoteSpares() {
		s, err = claude.Start(cliCtx, &co) // the spares' slots are free
	}
	aborted := !stopAbort()
	if err != nil && aborted {
		return a.closedWhileStarting(ctx)
	}
	if err != nil {
		return a.fail(ctx, fmt.Errorf("daemon: starting the CLI: %w", err))
	}
	return a.started(ctx, s, held)
}

// started goes on from a CLI that runs for the session (started for it,
// or a spare taken from the pool): it is live, and idle.
func (a *actor) started(ctx context.Context, s *claude.Session, held string) error {
	a.sess = s
	a.live.Store(true)
	if t := a.launch.takeover; t != nil {
		a.d.log.Info("CLI taken over on its worker", "session", a.id, "worker", a.d.workerOf(a.id),
			"relay", t.Session, "from_frame", t.Received, "mid_turn", a.launch.midTurn)
	} else {
		a.d.log.Info("CLI started", "session", a.id, "pid", s.PID(), "resume", a.launch.resume != "", "fork", a.launch.fork)
	}
	if _, err := a.d.db.UpdateSession(ctx, a.id, store.SessionUpdate{Error: new(string)}); err != nil {
		a.d.log.Error("clearing the session's last error", "session", a.id, "err", err)
	}
	if a.launch.midTurn {
		a.inflight.Store(1) // its result ends the turn
		a.status(ctx, store.StatusRunning, "taken over by daemon "+a.d.name()+" mid-turn")
		return nil
	}
	if held != "" {
		a.status(ctx, store.StatusBudget, held)
	} else {
		a.status(ctx, store.StatusIdle, "")
	}
	a.becameIdle()
	return nil
}

// closedWhileStarting ends an actor whose start was given up because the
// session was closed meanwhile: closed, as the client asked, or suspended
// when the daemon stops (the next prompt starts it again).
func (a *actor) closedWhileStarting(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	final, detail := store.StatusClosed, a.closedWhile("its CLI started")
	if a.d.isClosed() {
		final, detail = store.StatusSuspended, "the daemon stopped while the session's CLI started; the next prompt starts it again"
	}
	a.d.log.Info("session's CLI start given up", "session", a.id, "status", final, "detail", detail)
	a.status(ctx, final, detail)
	a.abandon(final == store.StatusClosed)
	return fmt.Errorf("%w: session %s: %s", ErrNotRunning, a.id, detail)
}

// closedWhile is the closed status's detail of a session closed while its
// launch was at stage ("queued", "its CLI started"), naming who closed it
// when a client did.
func (a *actor) closedWhile(stage string) string {
	if by := a.closedBy.Load(); by != nil {
		return "closed by " + *by + " while " + stage
	}
	return "closed while " + stage
}

func (a *actor) fail(ctx context.Context, err error) error {
	a.d.log.Error("session failed to start", "session", a.id, "err", err)
	a.logError(ctx, err.Error(), "")
	a.status(ctx, store.StatusFailed, err.Error())
	a.abandon(true)
	return err
}

// abandon ends an actor whose run never started; ended says whether its
// session ended for good (closed or failed), ending its subscriptions.
func (a *actor) abandon(ended bool) {
	if ended {
		a.d.endHub(a.hub)
	}
	a.cancel()
	if a.cancelCLI != nil {
		a.cancelCLI()
	}
	a.d.release(a)
	close(a.ready)
	close(a.done)
}

// run is the actor's goroutine: it owns actorState and ends the session.
func (a *actor) run() {
	// In this order: whoever waits for done finds the daemon without the
	// actor (its health, its slot).
	defer close(a.done)
	defer a.d.release(a)
	defer a.cancel()
	defer a.cancelCLI() // the CLI is gone: this frees its context
	var st actorState
	readerDone := make(chan error, 1)
	go func() { readerDone <- a.read() }()
	closeQ := a.closeQ
	for {
		select {
		case op := <-a.ops:
			op(&st)
		case <-closeQ:
			closeQ = nil
			a.beginClose(&st)
		case err := <-readerDone:
			exit := a.closeServing(&st)
			a.live.Store(false)
			a.logExit(err, exit)
			a.end(&st, err)
			return
		}
	}
}

// closeServing closes the session once the CLI's output has ended and
// returns what Close returns (the CLI's exit), serving the actor's ops
// meanwhile: Close waits for the handlers of the CLI's requests to return,
// and a handler may be waiting in do (a permission request withdrawn by
// the end, its "no longer waiting" to record). Were run not serving them,
// the handler would wait for run and run for the handler, and whoever
// asks the actor anything next (a list of sessions) would wait for both.
func (a *actor) closeServing(st *actorState) error {
	closed := make(chan error, 1)
	go func() { closed <- a.sess.Close() }() // returns once the CLI is gone
	for {
		select {
		case op := <-a.ops:
			op(st)
		case exit := <-closed:
			return exit
		}
	}
}

// beginClose cancels the calls in flight and starts closing the CLI; its
// output then ends, and run ends the session. The SDK's Close waits for
// the CLI to exit (closing its input, then signals), so it runs apart
// from run, which goes on serving the reader until the output ends.
func (a *actor) beginClose(st *actorState) {
	if st.closing {
		return
	}
	st.closing = true
	a.cancel()
	go a.sess.Close()
}

// do runs fn on the actor's goroutine and waits for it. It reports false,
// without running fn, when the actor is over.
func (a *actor) do(fn func(*actorState)) bool {
	ran := make(chan struct{})
	select {
	case a.ops <- func(st *actorState) { fn(st); close(ran) }:
		<-ran
		return true
	case <-a.done:
		return false
	}
}

// end records how the session ended and, when it ended for good (closed
// or failed), ends its subscriptions; otherwise they wait for its next CLI.
func (a *actor) end(st *actorState, err error) {
	ctx := context.WithoutCancel(a.d.ctx)
	if a.idleTimer != nil {
		a.idleTimer.Stop()
	}
	final, detail := store.StatusClosed, st.closedBy
	held := a.d.heldDetail(ctx, a.id)
	switch {
	case st.stopMsg != "":
		detail = st.stopMsg
	case held != "" && (st.closedBy == "" || st.shutdown) && (st.suspendMsg != "" || st.shutdown):
		// Suspended or stopped while a spend cap holds it: still held.
		final, detail = store.StatusBudget, held
	case st.closedBy != "" && !st.shutdown:
		// A client closed it while it was being suspended: closed is
		// what the client asked for.
	case st.suspendMsg != "":
		final, detail = store.StatusSuspended, st.suspendMsg
	case st.shutdown && a.inflight.Load() > 0:
		final, detail = store.StatusInterrupted, "the daemon stopped during a turn; the next prompt resumes the session"
	case st.shutdown:
		final, detail = store.StatusSuspended, "the daemon stopped; the next prompt resumes the session"
	case a.startupFailure != nil && !st.closing:
		// Said already, in the person's words, as the result's error
		// event; failed (whatever the exit), so that no prompt starts it
		// again.
		detail, final = startupFailureText(a.startupFailure), store.StatusFailed
	case st.closing || err == nil:
	default:
		tail := a.sess.StderrTail()
		detail = err.Error()
		var ee *claude.ExitError
		if errors.As(err, &ee) && ee.MemoryLimit > 0 {
			detail = "the CLI was killed: " + a.memoryLimitReached(ee.MemoryLimit)
		}
		a.logError(ctx, detail, tail)
		if t := strings.TrimSpace(tail); t != "" && !strings.Contains(detail, t) {
			detail += "\n" + t
		}
		final = store.StatusFailed
		a.tellFailed(detail)
	}
	a.clearRelay(ctx)
	a.status(ctx, final, detail)
	a.d.engine.RemoveSession(a.id)
	if terminal(final) {
		a.d.endHub(a.hub)
	}
	a.d.log.Info("session's CLI ended", "session", a.id, "status", final, "detail", detail)
}

// logExit logs the end of the CLI process: its pid, and its exit code or
// signal (exit is what closing the session returned: the CLI's exit).
func (a *actor) logExit(readErr, exit error) {
	args := []any{"session", a.id, "pid", a.sess.PID()}
	var ee *claude.ExitError
	switch {
	case errors.As(exit, &ee) && ee.Signal != "":
		args = append(args, "signal", ee.Signal)
	case errors.As(exit, &ee):
		args = append(args, "exit_code", ee.Code)
	case exit == nil && a.sess.PID() > 0:
		args = append(args, "exit_code", 0)
	}
	if readErr != nil && !errors.Is(readErr, claude.ErrClosed) {
		args = append(args, "err", readErr)
	}
	a.d.log.Info("CLI exited", args...)
}

// foreignConversation returns why the CLI conversation id its system/init
// reports must not become the session's ("" when it may): it is another
// session's. A CLI on a worker says what it likes; a resume or fork of this
// session would then run claude --resume on that session's conversation,
// reading and extending it. A conversation this session had already (a
// resume) is its own. When the store cannot say, the id is not taken
// either.
func (a *actor) foreignConversation(ctx context.Context, conversation string) string {
	ss, err := a.d.db.Sessions(ctx, store.SessionFilter{ClaudeSessionID: conversation, Limit: 2})
	if err != nil {
		return "which could not be checked against the other sessions' (" + storeError(err).Error() + ")"
	}
	for _, s := range ss {
		if s.ID != a.id {
			return "which is session " + s.ID + "'s"
		}
	}
	return ""
}

// read logs every message until the session ends; it returns nil for a
// clean end.
func (a *actor) read() error {
	ctx := context.WithoutCancel(a.d.ctx)
	recorded := false
	var acc claude.Accumulator
	watch := compatWatch{a: a}
	defer watch.end()
	for {
		m, err := a.sess.Next(a.d.ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		// The line's bytes are the message's own and read-only (see
		// claude.Message.Raw): stored and published as they are, with no
		// copy per line; what the daemon keeps of them (a hub's ring, at
		// most 256 KiB a session) pins about as much of the SDK's blocks.
		ev := &store.Event{SessionID: a.id, Direction: store.FromCLI, Type: m.Kind(),
			Subtype: claude.SubtypeOf(m), Raw: m.Raw(), RelayFrame: int64(claude.LineSeq(m))}
		if b, ok := m.(interface{ Truncated() (int64, bool) }); ok {
			if n, t := b.Truncated(); t {
				ev.OriginalSize = n
			}
		}
		update, hasUpdate := acc.Add(m)
		var usage usageOutcome
		switch m := m.(type) {
		case *claude.ResultMessage: // stored with its ledger entry and the turn's end, waited for
			if m.StartupFailureReason != "" {
				a.startupFailure = m // the CLI exits next: end says why
			}
			// Observed first: what the watch logs of the line (a warning)
			// must not land after the turn's end (the idle status), nor
			// what the turn's memory limit killed.
			watch.observe(m)
			if claude.ThreadOf(m).IsMain() {
				a.checkMemoryKills(ctx)
			}
			usage = a.logResult(ctx, ev, m)
		case *claude.SystemInit:
			if !recorded && m.SessionID != "" { // stored with the CLI's session id, if it is this session's
				recorded = true
				if why := a.foreignConversation(ctx, m.SessionID); why != "" {
					a.record(ctx, Event{Event: *ev}, nil, false)
					a.d.log.Warn("a CLI claimed a conversation that is not its session's; not recorded", "session", a.id,
						"worker", a.d.workerOf(a.id), "conversation", relay.Clip(m.SessionID), "reason", why)
					a.logError(ctx, "the CLI reported conversation "+relay.Clip(m.SessionID)+", "+why+
						": it was not recorded as this session's, so a resume or fork of this session will not continue it", "")
				} else {
					a.record(ctx, Event{Event: *ev}, &store.SessionUpdate{ClaudeSessionID: &m.SessionID}, false)
				}
			} else {
				a.record(ctx, Event{Event: *ev}, nil, false)
			}
		default:
			if hasUpdate { // stored with the line
				a.recordStreamLine(ctx, Event{Event: *ev}, update)
				hasUpdate = false
			} else {
				a.record(ctx, Event{Event: *ev}, nil, false)
			}
		}
		if init, ok := m.(*claude.SystemInit); ok {
			watch.init(init)
		}
		switch m := m.(type) { // the mode the CLI says is in effect
		case *claude.SystemInit:
			a.noteMode(ctx, m.PermissionMode, "", true)
		case *claude.SystemStatus:
			a.noteMode(ctx, m.PermissionMode, "", true)
		}
		if _, ok := m.(*claude.ResultMessage); !ok {
			watch.observe(m)
		}
		if hasUpdate {
			a.logStreamUpdate(ctx, update)
		}
		a.observeLogin(m)
		switch m := m.(type) {
		case *claude.AssistantMessage:
			if m.Error != "" {
				r := &ErrorReport{Message: apiFailure(m)}
				if credentials.Refused(m) {
					r.Hint = a.loginHint()
				}
				a.log(ctx, r)
			}
			if !a.opts.GetIncludePartialMessages() { // no stream: the whole message has the calls
				for _, b := range m.Message.Content {
					if tu, ok := b.(*claude.ToolUseBlock); ok {
						a.queue(ctx, &ToolUse{ToolUseID: tu.ID, Name: tu.Name, Input: tu.Input, ParentToolUseID: m.ParentToolUseID})
					}
				}
			}
		case *claude.ResultMessage:
			main := claude.ThreadOf(m).IsMain()
			if err := usage.err; err != nil {
				// Nothing of the turn's end is stored: what it would have
				// stored with the result goes in on its own.
				a.d.log.Error("recording usage", "session", a.id, "err", err)
				if m.IsError {
					a.logError(ctx, resultError(m), "")
				}
				if main {
					a.status(ctx, store.StatusIdle, "")
				}
			} else if sess := usage.sess; sess.BudgetExceeded() {
				reason := fmt.Sprintf("budget of $%.4f spent ($%.4f used); the session was stopped", sess.BudgetUSD, sess.Totals.CostUSD)
				a.stop(ctx, reason)
				a.tellBudget(reason) // rather than the turn's end
			} else if main {
				detail := m.Result
				if m.IsError {
					detail = resultError(m)
				}
				a.tellTurn(m.IsError, m.Subtype, detail)
			}
			if main {
				a.turnEnded()
			}
			if a.d.budget.caps.on() {
				var cost float64
				if usage.rec != nil {
					cost = usage.rec.CostUSD
				}
				a.turnDone(cost, main)
			}
		}
	}
}

// checkMemoryKills reports, at the end of a turn, the processes of the
// session's tree (a tool, or one it started) that its memory limit killed
// since the last turn: the CLI goes on, but the turn lost them.
func (a *actor) checkMemoryKills(ctx context.Context) {
	n := a.sess.MemoryKills()
	if n <= a.memoryKills {
		return
	}
	killed := n - a.memoryKills
	a.memoryKills = n
	what := "a process of the session was"
	if killed > 1 {
		what = fmt.Sprintf("%d processes of the session were", killed)
	}
	msg := what + " killed: " + a.memoryLimitReached(a.d.policy.SessionLimits(a.opts).MemoryMax)
	a.d.log.Warn("memory limit reached", "session", a.id, "killed", killed)
	a.logError(ctx, msg, "")
}

// memoryLimitReached says which memory limit was reached: "memory limit
// 2 GiB reached (sessions.limits.memory_max)".
func (a *actor) memoryLimitReached(limit int64) string {
	which := "sessions.limits.memory_max"
	if asked := a.opts.GetLimits().GetMemoryMax(); asked > 0 && asked == limit && asked != a.d.policy.Limits.MemoryMax {
		which = "the session's limits.memory_max"
	}
	return fmt.Sprintf("memory limit %s reached (%s)", claude.FormatBytes(limit), which)
}

// remote reports whether the session runs on a remote worker.
func (a *actor) remote() bool { return remoteOptions(a.opts) }

// remoteOptions reports whether a session with options o runs on a remote
// worker.
func remoteOptions(o *SessionOptions) bool {
	w := o.GetWorker()
	return (w != "" && w != WorkerLocal) || len(o.GetWorkerLabels()) > 0
}

// ctxNoCancel is the context the reader logs with: events are logged even
// while the session closes.
func (a *actor) ctxNoCancel() context.Context { return context.WithoutCancel(a.d.ctx) }

// recordStreamLine stores a stream line of the CLI's and the event the
// accumulator made of it (a text delta, a tool use) in one request, so that
// they commit together and the session's subscribers are woken once for
// both, not once each: with many subscribers, a wake is most of what a
// line costs. An accumulator error is logged after the line, on its own.
func (a *actor) recordStreamLine(ctx context.Context, line Event, u claude.StreamUpdate) {
	if u.Err == nil {
		if made, err := a.streamEvent(u); err == nil {
			a.recordWith(ctx, line, &made, nil, false)
			return
		}
	}
	a.record(ctx, line, nil, false)
	a.logStreamUpdate(ctx, u)
}

// streamEvent makes the daemon's event of a stream update that is not an
// error: a tool use whose input is whole, or a text delta. The one place
// that maps the one to the other.
func (a *actor) streamEvent(u claude.StreamUpdate) (Event, error) {
	if u.ToolUse != nil {
		return a.daemonEvent(&ToolUse{ToolUseID: u.ToolUse.ID, Name: u.ToolUse.Name,
			Input: u.ToolUse.Input, ParentToolUseID: u.Thread.ParentToolUseID})
	}
	return a.daemonEvent(&TextDelta{Text: u.Text, ParentToolUseID: u.Thread.ParentToolUseID})
}

// logStreamUpdate logs what the accumulator made of a message on its own
// (recordStreamLine pairs it with its line where it can).
func (a *actor) logStreamUpdate(ctx context.Context, u claude.StreamUpdate) {
	if u.Err != nil {
		a.d.log.Warn("rebuilding a streamed tool input", "session", a.id, "err", u.Err)
		a.logError(ctx, "rebuilding a streamed tool input: "+u.Err.Error(), "")
		return
	}
	ev, err := a.streamEvent(u)
	if err != nil {
		a.d.log.Error("logging the event of a stream line", "session", a.id, "err", err)
		return
	}
	a.record(ctx, ev, nil, false)
}

// record stores ev, with upd applied to its session in the same commit
// when not nil, and fans ev out once it is committed. Events are published
// from the store's in-order commit callbacks, so the live order is the seq
// order whichever goroutine logs. With wait, record returns after the
// commit with its outcome; without, the reader goes on while earlier lines
// commit (many per transaction) and failures are logged.
func (a *actor) record(ctx context.Context, ev Event, upd *store.SessionUpdate, wait bool) error {
	return a.recordWith(ctx, ev, nil, upd, wait)
}

// recordWith is record with, when made is not nil, the event the daemon
// made of ev stored right after it in the same request and published with
// it (upd must then be nil).
func (a *actor) recordWith(ctx context.Context, ev Event, made *Event, upd *store.SessionUpdate, wait bool) error {
	var done chan error
	if wait {
		done = make(chan error, 1)
	}
	se := &ev.Event
	committed := func(err error) {
		switch {
		case err == nil:
			a.stored(se)
			if made != nil {
				a.publish(ev, *made) // both carry their seqs now
			} else {
				a.publish(ev) // se is ev's own: its seq is set
			}
		case writeFailed(err), errors.Is(err, store.ErrNotOwner):
			a.lost(err)
		case !wait:
			a.d.log.Error("logging an event", "session", a.id, "type", se.Type, "err", err)
		}
		if wait {
			done <- err
		}
	}
	var err error
	switch {
	case upd != nil:
		err = a.d.db.AppendUpdateAsync(ctx, committed, se, *upd)
	case made != nil:
		err = a.d.db.AppendAsync(ctx, committed, se, &made.Event)
	default:
		err = a.d.db.AppendAsync(ctx, committed, se)
	}
	switch {
	case err == nil && wait:
		return <-done
	case err != nil && (writeFailed(err) || errors.Is(err, store.ErrNotOwner)):
		a.lost(err)
	case err != nil && !wait:
		a.d.log.Error("logging an event", "session", a.id, "type", se.Type, "err", err)
	}
	return err
}

// stored tells the worker, for a line of the CLI's that came over its relay,
// that the line is stored: it may forget it (claude.WorkerTransport.Hold).
func (a *actor) stored(ev *store.Event) {
	if ev.RelayFrame > 0 && ev.Direction == store.FromCLI {
		a.sess.Release(uint64(ev.RelayFrame))
	}
}

// publish fans evs out to the session's subscribers (one wake) and tells
// the session watchers that the session changed.
func (a *actor) publish(evs ...Event) {
	a.hub.publish(evs...)
	a.d.feed.changed(a.id)
}

// daemonEvent makes the stored form of b.
func (a *actor) daemonEvent(b Body) (Event, error) { return newEvent(a.id, b) }

// log logs an event the daemon made itself and waits for its commit.
func (a *actor) log(ctx context.Context, b Body) {
	ev, err := a.daemonEvent(b)
	if err == nil {
		err = a.record(ctx, ev, nil, true)
	}
	if err != nil {
		a.d.log.Error("logging a daemon event", "session", a.id, "type", b.EventType(), "err", err)
	}
}

// queue is log without waiting for the commit.
func (a *actor) queue(ctx context.Context, b Body) {
	ev, err := a.daemonEvent(b)
	if err != nil {
		a.d.log.Error("logging a daemon event", "session", a.id, "type", b.EventType(), "err", err)
		return
	}
	a.record(ctx, ev, nil, false)
}

// usageOutcome is what entering a result in the usage ledger gave.
type usageOutcome struct {
	rec  *store.UsageRecord
	sess *store.Session
	err  error
}

// logResult stores a result line and the turn's end in one commit, and
// waits for it: the usage ledger entry, then the daemon's events made of
// it (an error report for a result that is an error, the usage report)
// and, for a result of the main thread, the idle status with its session
// update.
func (a *actor) logResult(ctx context.Context, ev *store.Event, m *claude.ResultMessage) usageOutcome {
	main := claude.ThreadOf(m).IsMain()
	interrupted := main && a.interrupted.Swap(false)
	var made []Event // of the last call of Events: the ones stored
	follow := &store.ResultFollow{Events: func(rec *store.UsageRecord, sess *store.Session) ([]*store.Event, error) {
		var bodies []Body
		if m.IsError && !(interrupted && m.Subtype == "error_during_execution") {
			bodies = append(bodies, &ErrorReport{Message: resultError(m)})
		}
		bodies = append(bodies, &UsageReport{Turn: *rec, Totals: sess.Totals})
		if main && m.StartupFailureReason == "" { // a CLI that refused to start exits: end says failed
			bodies = append(bodies, &StatusChange{Status: store.StatusIdle})
		}
		made = make([]Event, len(bodies))
		evs := make([]*store.Event, len(bodies))
		for i, b := range bodies {
			ev, err := a.daemonEvent(b)
			if err != nil {
				return nil, err
			}
			made[i] = ev
			evs[i] = &made[i].Event
		}
		return evs, nil
	}}
	if main && m.StartupFailureReason == "" {
		idle := store.StatusIdle
		follow.Update = &store.SessionUpdate{Status: &idle}
	}
	done := make(chan usageOutcome, 1)
	err := a.d.db.AppendResultAsync(ctx, func(rec *store.UsageRecord, sess *store.Session, err error) {
		if err == nil {
			a.stored(ev)
			a.d.counts.turn(rec)
			a.publish(append([]Event{{Event: *ev}}, made...)...)
		} else if writeFailed(err) || errors.Is(err, store.ErrNotOwner) {
			a.lost(err)
		}
		done <- usageOutcome{rec, sess, err}
	}, ev, usageInput(a.id, a.process, a.launch.continues, m), follow)
	if err != nil {
		if writeFailed(err) || errors.Is(err, store.ErrNotOwner) {
			a.lost(err)
		}
		return usageOutcome{err: err}
	}
	return <-done
}

func (a *actor) logError(ctx context.Context, msg, stderrTail string) {
	a.log(ctx, &ErrorReport{Message: msg, StderrTail: stderrTail})
}

// resultError describes a result that is an error: what ended the turn
// and the CLI's detail. The CLI reports a failed API call (no credentials,
// a refused key, an API that stayed overloaded) as subtype "success" with
// is_error set: that is said as the API's failure, never as an error of
// subtype success.
func resultError(m *claude.ResultMessage) string {
	if m.StartupFailureReason != "" {
		return startupFailureText(m)
	}
	var msg string
	switch m.Subtype {
	case "", "success":
		msg = "the turn failed at the API"
	case "error_max_turns":
		msg = "the turn stopped at its limit of turns (max_turns)"
	case "error_max_budget_usd":
		msg = "the turn stopped at its budget (max_budget_usd)"
	case "error_during_execution":
		msg = "the turn failed"
	default:
		msg = "the turn ended with " + m.Subtype
	}
	if len(m.Errors) > 0 {
		msg += ": " + strings.Join(m.Errors, "; ")
	} else if m.Result != "" {
		msg += ": " + m.Result
	}
	return msg
}

// stop ends the session on the daemon's own decision (a spent budget):
// the reason is logged as an error and becomes the closed status's detail.
// It does not wait for the end: it runs on the reader goroutine.
func (a *actor) stop(ctx context.Context, reason string) {
	first := false
	a.do(func(st *actorState) {
		if st.stopMsg == "" {
			st.stopMsg, first = reason, true
		}
	})
	if !first {
		return
	}
	a.logError(ctx, reason, "")
	if _, err := a.d.db.UpdateSession(ctx, a.id, store.SessionUpdate{Error: &reason}); err != nil {
		a.d.log.Error("recording why the session stopped", "session", a.id, "err", err)
	}
	a.askClose()
}

// status stores a status transition and logs it as an event, in one
// commit. Waiting is stored as running (see store.StatusWaiting); failed
// stores detail as the session's error.
func (a *actor) status(ctx context.Context, st store.SessionStatus, detail string) {
	stored := st
	if st == store.StatusWaiting {
		stored = store.StatusRunning
	}
	var errText *string
	if st == store.StatusFailed {
		errText = &detail
	}
	ev, err := a.daemonEvent(&StatusChange{Status: st, Detail: detail})
	if err == nil {
		err = a.record(ctx, ev, &store.SessionUpdate{Status: &stored, Error: errText}, true)
	}
	if err != nil {
		a.d.log.Error("updating status", "session", a.id, "status", st, "err", err)
	}
}

// call runs fn, a call into the SDK that may block, on the caller's
// goroutine; it is cancelled when the session closes.
func (a *actor) call(ctx context.Context, fn func(context.Context, *claude.Session) error) error {
	if a.ended() {
		return a.storeCause(fmt.Errorf("%w: session %s ended", ErrNotRunning, a.id))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(a.ctx, cancel)()
	err := fn(ctx, a.sess)
	if err != nil && a.ctx.Err() != nil {
		err = fmt.Errorf("%w: session %s closed: %w", ErrNotRunning, a.id, err)
	}
	return a.storeCause(err)
}

// storeCause returns err, a call's failure, as the store's when the
// session is being stopped because its events could not be stored: the
// call then failed for that, whatever the SDK saw first (the session's
// end, a cancelled write, its line refused unrecorded), and the client is
// told so (Unavailable) in the store's words, not the layers' the failure
// went through (those are in the daemon's log).
func (a *actor) storeCause(err error) error {
	if err == nil || !a.storeFailed.Load() {
		return err
	}
	return a.d.stoppedError(a.id, err)
}

// errSuspending: the session's CLI is being suspended (or has just
// ended); the prompt goes to the next one (Daemon.Send waits for the end
// and resumes, or says why it cannot).
var errSuspending = errors.New("daemon: session is being suspended")

func (a *actor) send(ctx context.Context, text string) error {
	// The status goes through run, so that it can never land after the
	// session's final one (end, also on run), nor race a suspension.
	var suspending bool
	ok := a.do(func(st *actorState) {
		if st.closing && st.suspendMsg != "" {
			suspending = true
			return
		}
		a.inflight.Add(1)
		a.idleSince.Store(0)
		a.status(ctx, store.StatusRunning, "")
	})
	switch {
	case suspending:
		return errSuspending
	case !ok: // its CLI ended under us: Send goes on with the session as it is now
		return errSuspending
	}
	err := a.call(ctx, func(ctx context.Context, s *claude.Session) error { return s.SendText(ctx, text) })
	if err != nil { // the prompt never reached the CLI
		a.turnEnded()
	}
	return err
}

// turnEnded counts a turn as over; with none left the session is idle.
func (a *actor) turnEnded() {
	if a.inflight.Add(-1) <= 0 {
		a.inflight.Store(0)
		a.becameIdle()
		if a.launch.new {
			a.wantSpare.Do(func() { a.d.wantSpare(a.opts) })
		}
	}
}

// becameIdle notes that no turn runs: the idle timer starts, and a session
// queued for a slot may take this one's.
func (a *actor) becameIdle() {
	a.idleSince.Store(time.Now().UnixNano())
	if t := a.d.idle(); t > 0 {
		if a.idleTimer == nil {
			a.idleTimer = time.AfterFunc(t, a.idleFired)
		} else {
			a.idleTimer.Reset(t)
		}
	}
	a.d.evictIdle()
}

// idleFired suspends the session if it has been idle for the idle timeout.
func (a *actor) idleFired() {
	since := a.idleSince.Load()
	if since == 0 {
		return // a turn runs; its end starts the timer again
	}
	t := a.d.idle()
	if t <= 0 {
		return // sessions.idle_timeout became "never" (a reload)
	}
	if a.launching.Load() { // its launch's prompt is on its way
		a.idleTimer.Reset(t)
		return
	}
	if left := t - time.Since(time.Unix(0, since)); left > 0 {
		a.idleTimer.Reset(left)
		return
	}
	a.suspend(fmt.Sprintf("idle for %s (sessions.idle_timeout); the next prompt resumes it", t))
}

// suspend closes the CLI of an idle session, which goes on: its next
// prompt resumes it. It does nothing while a turn runs.
func (a *actor) suspend(reason string) bool {
	done := false
	a.do(func(st *actorState) {
		if st.closing || a.idleSince.Load() == 0 {
			return
		}
		st.suspendMsg, done = reason, true
		a.d.log.Info("suspending session", "session", a.id, "reason", reason)
		a.beginClose(st)
	})
	return done
}

// waiting reports whether a permission request of the session waits for a
// person.
func (a *actor) waiting() bool {
	w := false
	a.do(func(st *actorState) { w = st.waiting > 0 })
	return w
}

// ended reports whether the actor's CLI is gone (or never started).
func (a *actor) ended() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// askClose asks run to close the CLI, without waiting.
func (a *actor) askClose() {
	select {
	case a.closeQ <- struct{}{}:
	default: // already asked
	}
}

// close asks the actor to end and waits for it. With shutdown the session
// is left suspended or interrupted (the daemon stops), not closed; by
// names who closed it otherwise. An actor still queued for a slot gives
// up its place. It reports false when the CLI had ended before the close
// could be recorded (a suspension under way): the session then ended as
// that made it, not as the close asked.
func (a *actor) close(shutdown bool, by string) bool {
	select {
	case <-a.ready:
	default:
		if by != "" {
			a.closedBy.Store(&by)
		}
		a.cancel() // queued or starting: its launch ends
		<-a.done
		return true
	}
	closedBy := ""
	if by != "" {
		closedBy = "closed by " + by
	}
	recorded := a.askCloseAs(shutdown, closedBy)
	<-a.done
	return recorded
}

// askCloseAs records how the session is to end (shutdown: resumable;
// else closedBy says who closed it, "" for nobody in particular) and asks
// run to close the CLI, without waiting. It reports false when the actor
// had ended first.
func (a *actor) askCloseAs(shutdown bool, closedBy string) bool {
	recorded := a.do(func(st *actorState) {
		st.shutdown = shutdown
		if closedBy != "" {
			st.closedBy = closedBy
		}
	})
	a.askClose()
	return recorded
}

// hasCapability reports whether the session's CLI says it supports c
// (claude.Session.Capabilities): false before its CLI has said, and once
// it has ended. The daemon decides its optional behaviour by these, not by
// the CLI's version (docs/design.md lists which).
func (a *actor) hasCapability(c claude.Capability) bool {
	return a.live.Load() && a.sess.HasCapability(c) // live is set after sess
}
