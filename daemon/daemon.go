// Package daemon hosts Claude Code sessions for claudectl serve: one actor per
// session owns its *claude.Session, every line the CLI prints is appended to
// the store before any subscriber sees it, and permission prompts go through
// the rule engine first and to a person (the broker) second.
//
// The API server (package apiserver) is a thin translation of these methods
// into the connect handlers of api/claudectl/v1; package internal/serve
// assembles the process.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/credentials"
	"github.com/claudectl/claudectl/internal/worktree"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// Errors of the Daemon. Store errors (store.ErrNotFound, store.ErrUnavailable,
// store.ErrInvalid) are passed through wrapped.
var (
	// ErrNotRunning means the session exists but has no CLI process.
	ErrNotRunning = errors.New("daemon: session is not running")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("daemon: closed")
	// ErrAlreadyRunning means a session to resume still has its CLI.
	ErrAlreadyRunning = errors.New("daemon: session is already running")
	// ErrSlowSubscriber ended a subscription that fell too far behind.
	//
	// Deprecated: Subscribe no longer returns it: a subscriber that falls
	// behind reads the events it missed from the store. Clients that
	// resubscribe on it (or on its API code, ResourceExhausted) keep
	// working against older daemons.
	ErrSlowSubscriber = errors.New("daemon: subscriber too slow, dropped")
)

// InvalidArgumentError names a request field and the value refused.
type InvalidArgumentError struct {
	Field, Value, Reason string
}

func (e *InvalidArgumentError) Error() string {
	return fmt.Sprintf("daemon: invalid %s %q: %s", e.Field, clipValue(e.Value), e.Reason) // Value is the client's: up to 128 KiB
}

// StateError says why a session cannot do what was asked in its state
// (errors.Is ErrNotRunning).
type StateError struct {
	SessionID string
	Status    store.SessionStatus
	Msg       string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("daemon: session %s is %s: %s", e.SessionID, e.Status, e.Msg)
}

// Is makes errors.Is(err, ErrNotRunning) hold.
func (e *StateError) Is(target error) bool { return target == ErrNotRunning }

// Options configures New. DB, Engine and Broker are required; the caller
// owns them and closes them after Daemon.Close.
type Options struct {
	DB     store.Store
	Engine *permission.Engine
	Broker *permission.Broker
	// CLIPath is the claude executable; empty means claude.FindBinary.
	CLIPath string
	// Env is added to every session's environment (claude.Options.Env).
	Env map[string]string
	// Logger receives the daemon's logs; nil means slog.Default().
	Logger *slog.Logger
	// SubscriberBuffer is how many of a session's recent events are kept
	// in memory for its subscribers (at most 256 KiB of them), while it has
	// any; a subscriber further behind reads the store. Zero means 8192.
	SubscriberBuffer int
	// Workers, if set, hosts sessions whose options ask for a remote
	// worker ("claudectl worker" on another machine); the API serves it at
	// api.WorkerPath. The caller closes it after Daemon.Close. New sets
	// its Adopt: a worker coming back for a session another daemon ran
	// (it died) is taken over here (takeover.go).
	Workers *claude.WorkerListener
	// MaxPayloadBytes is the longest CLI line delivered whole
	// (claude.Options.MaxPayloadBytes); longer lines arrive truncated. Zero
	// means 10 MiB, negative no limit. Give the store the same limit.
	MaxPayloadBytes int
	// Policy is what clients may ask of a session (extra CLI flags,
	// bypassPermissions, directories); the zero value is the least
	// privilege.
	Policy SessionPolicy
	// Transport, if set, runs the CLIs of local sessions instead of a
	// claude.ProcessTransport (tests run in-process stand-ins with it).
	Transport claude.Transport
	// ReadBufferSize is each CLI's stdout read buffer
	// (claude.ProcessTransport.ReadBufferSize), kept for the session's
	// life. Zero means 64 KiB: a daemon hosts many mostly idle sessions.
	ReadBufferSize int
	// CLIScheduling is how the kernel schedules local sessions' CLIs and
	// their tools (claude.ProcessTransport.Scheduling); "" as any process.
	CLIScheduling claude.Scheduling
	// IdleTimeout is how long a session's CLI may wait for a prompt before
	// the daemon closes it: the session is suspended, and its next prompt
	// resumes it (claude --resume) as if it had never stopped. Zero means
	// never.
	IdleTimeout time.Duration
	// MaxRunning caps the sessions with a live CLI. A launch beyond it
	// queues (status queued) while idle sessions are suspended to make
	// room. Zero means no limit.
	MaxRunning int
	// StoreRetryInterval is how often the daemon tries the store again
	// after it failed to write (to record what was lost); zero means 1s.
	StoreRetryInterval time.Duration
	// LeaseTTL is how long a session's lease lasts unless renewed, when
	// the store is shared by several daemons (a store.Leaser). Zero means
	// DefaultLeaseTTL; negative turns leases off.
	LeaseTTL time.Duration
	// LoginHint is what to do when a turn of a local session fails for
	// lack of credentials (login.go): attached to its error event, and
	// to Send's answer while the daemon expects such failures. Empty
	// means credentials.Hint for a daemon, without its settings file.
	LoginHint string
	// NoCredentials says that none were found for the local CLIs as the
	// daemon started (credentials.Find): Send warns from the first
	// prompt, until a turn gets through.
	NoCredentials bool
	// WorktreeRoot is the directory under which sessions that ask for a
	// worktree of their own get one (WORKTREE_ROOT/<session id>). Empty:
	// worktrees are refused.
	WorktreeRoot string
	// Git is the git executable worktrees run; "" means git on PATH.
	Git string
	// Budgets are the spend caps (budget.go); the zero value has none.
	Budgets Budgets
	// Notifier is told of what people may want to hear of (reach.go):
	// requests waiting, questions, escalations, budgets spent, turns that
	// finished or failed. Nil tells nobody.
	Notifier Notifier
	// Router says who is asked for what (permission routes); nil routes
	// nothing: whoever may decide, decides.
	Router *permission.Router
	// Groups returns the groups a user is in, for routes that ask
	// groups; nil means none.
	Groups func(user string) []string
	// Spares is how many spare CLIs the daemon keeps started ahead of
	// need for sessions created with the options of recent ones (pool.go),
	// and SpareLifetime how long one waits before it is closed (at most
	// IdleTimeout). Zero Spares or SpareLifetime: no spares.
	Spares        int
	SpareLifetime time.Duration
}

// A Daemon hosts sessions. It is safe for concurrent use.
type Daemon struct {
	db           store.Store
	engine       *permission.Engine
	broker       *permission.Broker
	cliPath      string
	env          map[string]string
	log          *slog.Logger
	subBuf       int
	readBuf      int
	scheduling   claude.Scheduling
	maxPayload   int
	transport    claude.Transport
	policy       SessionPolicy
	workers      *claude.WorkerListener
	started      time.Time
	compat       *compatTracker
	idleTimeout  atomic.Int64 // nanoseconds, 0: never; SetIdleTimeout changes it (reload.go)
	slots        *slots
	failures     storeFailures
	storeProbe   time.Duration // how often the store is tried again after it failed
	audits       sync.Map      // request id → *auditOutcome, while its session's callback holds it
	login        loginState
	git          *worktree.Git
	worktreeRoot string
	spares       spares         // worktrees made ahead (worktree.go)
	pool         pool           // spare CLIs (pool.go)
	typing       sync.WaitGroup // resumes for someone typing (typing.go)
	budget       budgeter
	counts       counters // decisions and cost, for Stats (metrics.go)
	notifier     Notifier
	router       *permission.Router
	groups       func(user string) []string
	reachDone    chan struct{} // reach ended (nil: not started)

	lease         store.Leaser // nil: the store has no leases (one daemon)
	leaseTTL      time.Duration
	heartbeatDone chan struct{}
	commandsDone  chan struct{}  // serveCommands ended (nil: not started)
	rulesDone     chan struct{}  // syncRules ended (nil: not started)
	pendingDone   chan struct{}  // publishPending ended (nil: not started)
	feedDone      chan struct{}  // pumpSessions ended
	tail          *tailer        // follows other daemons' sessions (nil: not shared)
	commands      sync.WaitGroup // commands of other daemons being carried out

	ctx    context.Context // the life of every session's CLI
	cancel context.CancelFunc

	mu     sync.Mutex
	actors map[string]*actor // guarded by mu; only sessions with a live CLI
	hubs   map[string]*hub   // guarded by mu; sessions with an actor or a subscriber (subscribe.go)
	feed   sessionFeed       // tells session watchers what changed (watch.go)
	// workerNames is the remote worker each session's CLI ran on last, by
	// session id; guarded by mu (workers.go).
	workerNames map[string]string
	closed      bool // guarded by mu
}

// New returns a daemon. It loads the stored rules into the engine and
// marks the sessions that a killed daemon left running as interrupted.
func New(ctx context.Context, opts *Options) (*Daemon, error) {
	if opts == nil || opts.DB == nil || opts.Engine == nil || opts.Broker == nil {
		panic("daemon.New: DB, Engine and Broker are required")
	}
	if err := opts.CLIScheduling.Validate(); err != nil {
		return nil, fmt.Errorf("daemon: CLIScheduling: %w", err)
	}
	d := &Daemon{
		db: opts.DB, engine: opts.Engine, broker: opts.Broker,
		cliPath: opts.CLIPath, env: opts.Env, log: opts.Logger,
		subBuf: opts.SubscriberBuffer, readBuf: opts.ReadBufferSize, scheduling: opts.CLIScheduling, maxPayload: opts.MaxPayloadBytes,
		transport: opts.Transport, policy: opts.Policy, workers: opts.Workers, started: time.Now(), compat: newCompatTracker(),
		actors: map[string]*actor{}, hubs: map[string]*hub{}, slots: &slots{max: max(opts.MaxRunning, 0)},
		storeProbe: cmp.Or(opts.StoreRetryInterval, time.Second),
		git:        &worktree.Git{Path: opts.Git}, worktreeRoot: opts.WorktreeRoot,
		notifier: opts.Notifier, router: opts.Router, groups: opts.Groups,
	}
	if d.worktreeRoot != "" {
		d.spares = spares{root: filepath.Join(d.worktreeRoot, ".spares"), busy: map[string]bool{}}
	}
	d.budget = budgeter{caps: opts.Budgets, now: time.Now, spentDir: map[string]float64{}, raised: map[string]float64{},
		oneTurn: map[string]bool{}, turning: map[string]bool{}, since: map[string]time.Time{}}
	d.idleTimeout.Store(int64(max(opts.IdleTimeout, 0)))
	d.pool.size, d.pool.ttl = max(opts.Spares, 0), max(opts.SpareLifetime, 0)
	if d.log == nil {
		d.log = slog.Default()
	}
	d.login.hint = cmp.Or(opts.LoginHint, credentials.Hint(credentials.Where{Daemon: true}))
	d.login.refused.Store(opts.NoCredentials)
	if d.subBuf <= 0 {
		d.subBuf = 8192
	}
	if d.readBuf <= 0 {
		d.readBuf = 64 << 10
	}
	if err := d.loadRules(ctx, func(*store.Rule) bool { return true }); err != nil {
		return nil, err
	}
	if err := d.markInterrupted(ctx); err != nil {
		return nil, err
	}
	if d.budget.caps.on() {
		if err := d.loadBudgets(ctx); err != nil {
			return nil, err
		}
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	if d.budget.caps.on() {
		d.armMidnight()
	}
	// Sessions held before this start that no cap holds now (a day began
	// while no daemon ran, a cap was raised in the settings or removed)
	// go on: released, their kept prompts run.
	d.budget.wg.Go(func() { d.releaseStale(context.WithoutCancel(d.ctx)) })
	d.feed.init()
	d.feedDone = make(chan struct{})
	go d.pumpSessions()
	if l, ok := d.db.(store.Leaser); ok && opts.LeaseTTL >= 0 {
		d.lease, d.leaseTTL, d.heartbeatDone = l, cmp.Or(opts.LeaseTTL, DefaultLeaseTTL), make(chan struct{})
		go d.heartbeat()
		if d.commander() != nil {
			d.commandsDone = make(chan struct{})
			go d.serveCommands()
		}
	}
	if w, ok := d.db.(store.Watcher); ok {
		d.rulesDone = make(chan struct{})
		go d.syncRules(w)
	}
	if b := d.board(); b != nil {
		d.pendingDone = make(chan struct{})
		go d.publishPending(b)
	}
	if d.notifier != nil {
		d.reachDone = make(chan struct{})
		go d.reach()
	}
	if t, ok := d.db.(store.Tailer); ok && d.lease != nil {
		d.tail = newTailer(d, t)
	}
	if d.workers != nil {
		d.workers.Adopt = d.adopt // takeover.go
	}
	return d, nil
}

// markInterrupted marks the sessions a previous daemon left starting or
// running (it was killed) as interrupted, and logs that in each one's log.
func (d *Daemon) markInterrupted(ctx context.Context) error {
	ids, err := d.db.MarkRunningInterrupted(ctx)
	if err != nil {
		return fmt.Errorf("daemon: marking interrupted sessions: %w", err)
	}
	for _, id := range ids {
		ev, _ := newEvent(id, &StatusChange{Status: store.StatusInterrupted,
			Detail: "the daemon stopped while the session ran; the next prompt resumes it"})
		if _, err := d.db.Append(ctx, &ev.Event); err != nil {
			return fmt.Errorf("daemon: logging the interruption of %s: %w", id, err)
		}
	}
	if len(ids) > 0 {
		d.log.Info("sessions interrupted by the last daemon's end", "sessions", strings.Join(ids, ","))
	}
	return nil
}

// Started returns when the daemon was made.
func (d *Daemon) Started() time.Time { return d.started }

// Workers returns the listener of remote workers, nil if there is none.
func (d *Daemon) Workers() *claude.WorkerListener { return d.workers }

// CLIPath returns the configured CLI path ("" when searched for).
func (d *Daemon) CLIPath() string { return d.cliPath }

// Create stores a new session, starts its CLI and, when prompt is not
// empty, sends it. It returns the session as stored once the CLI runs.
func (d *Daemon) Create(ctx context.Context, o *SessionOptions, prompt string) (*store.Session, error) {
	if o == nil {
		return nil, &InvalidArgumentError{Field: "options", Value: "", Reason: "required"}
	}
	if err := d.validateOptions(o); err != nil {
		return nil, err
	}
	raw, err := encodeOptions(o)
	if err != nil {
		return nil, err
	}
	if d.isClosed() {
		return nil, ErrClosed
	}
	worker := o.GetWorker()
	switch {
	case worker == WorkerLocal:
		worker = ""
	case worker == "" && len(o.GetWorkerLabels()) > 0:
		worker = WorkerRemote // the labels pick one
	}
	s := &store.Session{Cwd: o.GetCwd(), Model: o.GetModel(), PermissionMode: o.GetPermissionMode(),
		Status: store.StatusStarting, Options: raw, BudgetUSD: o.GetMaxBudgetUsd(), Worker: worker}
	var sp *spare
	if o.GetWorktree() != "" {
		s.ID = newSessionID()
		if s.Worktree, err = d.makeWorktree(ctx, s.ID, o); err != nil {
			return nil, err
		}
	} else if sp = d.takeSpare(o); sp != nil && sp.id != "" {
		s.ID = sp.id // a remote spare's relay is tagged with it (pool.go)
	}
	if err := d.db.CreateSession(ctx, s); err != nil {
		d.removeWorktree(s.Worktree)
		d.discardSpare(sp)
		return nil, fmt.Errorf("daemon: creating session: %w", err)
	}
	d.log.Info("session created", "session", s.ID, "cwd", s.Cwd, "model", s.Model, "worker", cmp.Or(s.Worker, "local"))
	created, err := d.launch(ctx, s, o, launch{new: true, spare: sp}, prompt)
	if err == nil && prompt == "" {
		// The next session like this one takes a spare (pool.go); with a
		// prompt, once its turn has ended (actor.turnEnded).
		d.wantSpare(o)
	}
	return created, err
}

// Resume starts a new CLI process for a session that has none (closed,
// failed, interrupted by a daemon restart, or idle since one) with
// claude --resume, so that the conversation goes on where it stopped, and
// sends prompt when it is not empty. Errors: store.ErrNotFound,
// ErrAlreadyRunning, *StateError when the session cannot be resumed.
func (d *Daemon) Resume(ctx context.Context, id, prompt string) (*store.Session, error) {
	s, err := d.stored(ctx, id)
	if err != nil {
		return nil, err
	}
	return d.resume(ctx, d.orphaned(ctx, s), prompt, false)
}

// resume starts a new CLI for s. quiet is a resume the client did not ask
// for (a prompt to a suspended session): a session whose CLI never began
// a conversation then starts a new one, since there is nothing to lose.
func (d *Daemon) resume(ctx context.Context, s *store.Session, prompt string, quiet bool) (*store.Session, error) {
	o, err := resumable(s, "resume")
	var se *StateError
	fresh := quiet && s.ClaudeSessionID == "" && errors.As(err, &se) && !s.BudgetExceeded()
	if err != nil && !fresh {
		return nil, err
	}
	if err := d.checkPolicy(o); err != nil { // the settings may have tightened since
		return nil, err
	}
	// A prompt resuming the session quietly comes from Send, which
	// admitted it already under the spend caps.
	return d.launch(ctx, s, o, launch{resume: s.ClaudeSessionID, continues: s.ID, admitted: quiet}, prompt)
}

// Fork starts a new session that begins with a copy of session id's
// conversation (claude --resume --fork-session) and goes on apart from it;
// the original is left as it is, running or not. prompt, if not empty, is
// the fork's first message.
func (d *Daemon) Fork(ctx context.Context, id, prompt string) (*store.Session, error) {
	src, err := d.stored(ctx, id)
	if err != nil {
		return nil, err
	}
	o, err := resumable(src, "fork")
	if err != nil {
		return nil, err
	}
	if err := d.checkPolicy(o); err != nil { // the settings may have tightened since
		return nil, err
	}
	if d.isClosed() {
		return nil, ErrClosed
	}
	s := &store.Session{Cwd: src.Cwd, Model: src.Model, PermissionMode: src.PermissionMode,
		Status: store.StatusStarting, Options: src.Options, BudgetUSD: src.BudgetUSD, ParentID: src.ID, Worker: src.Worker}
	if src.Worktree.Path != "" { // its own, as its source is now
		s.ID = newSessionID()
		if s.Worktree, err = d.forkWorktree(ctx, s.ID, src); err != nil {
			return nil, err
		}
	}
	if err := d.db.CreateSession(ctx, s); err != nil {
		d.removeWorktree(s.Worktree)
		return nil, fmt.Errorf("daemon: creating the fork of %s: %w", id, err)
	}
	// The conversation's transcript is on the worker that ran it.
	d.setWorkerOf(s.ID, cmp.Or(d.workerOf(src.ID), src.Relay.Worker))
	return d.launch(ctx, s, o, launch{resume: src.ClaudeSessionID, fork: true, continues: src.ID}, prompt)
}

// resumable returns the launch options of a stored session that a new CLI
// process may continue (op is "resume" or "fork", for the error).
func resumable(s *store.Session, op string) (*SessionOptions, error) {
	if _, ok := TerminalOf(s); ok {
		return nil, &StateError{SessionID: s.ID, Status: s.Status,
			Msg: "cannot " + op + " it: " + ErrTerminalSession.Error() + " (started by hand, through claudectl's hook): it is driven from there"}
	}
	o, err := decodeOptions(s.ID, s.Options)
	if err != nil {
		return nil, err
	}
	if o.Cwd == "" {
		o.Cwd = s.Cwd
	}
	o.Model, o.PermissionMode = s.Model, s.PermissionMode // as last switched
	if s.ClaudeSessionID == "" {
		return o, &StateError{SessionID: s.ID, Status: s.Status,
			Msg: "cannot " + op + " it: its CLI never started a conversation (no session id was reported); create a new session"}
	}
	if s.Worktree.Discarded {
		return o, &StateError{SessionID: s.ID, Status: s.Status,
			Msg: "cannot " + op + " it: its worktree was discarded (claudectl discard)"}
	}
	if s.BudgetExceeded() {
		return o, &StateError{SessionID: s.ID, Status: s.Status,
			Msg: fmt.Sprintf("cannot %s it: its budget of $%.4f is spent ($%.4f used)", op, s.BudgetUSD, s.Totals.CostUSD)}
	}
	if s.BudgetUSD > 0 {
		// What is left: a resumed CLI restores its totals, but counts its
		// budget from what it spends itself (TestBudgetAcrossResumes).
		o.MaxBudgetUsd = s.BudgetUSD - s.Totals.CostUSD
	}
	return o, nil
}

// launch says how a session's CLI process starts.
type launch struct {
	resume string // the CLI session id to continue, "" for a new conversation
	fork   bool   // continue a copy of resume under a new id
	// continues is the session whose conversation resume is: the CLI may
	// restore the totals its last process saved and count on from them
	// (store.UsageInput.Continues).
	continues string
	// takeover, when set, takes over the CLI another daemon (or this one,
	// before it restarted) ran on a remote worker instead of starting one
	// (takeover.go); process is the stored CLI process generation and
	// midTurn whether a turn was under way.
	takeover *claude.WorkerResume
	process  int64
	midTurn  bool
	sent     int64 // lines written to the CLI over the relay so far
	// dir is the directory the CLI runs in, when not the session's cwd
	// (its worktree's: set by launch), and worktree that worktree.
	dir      string
	worktree store.Worktree
	// admitted: the launch's prompt was admitted under the spend caps
	// (Send); else launch admits it.
	admitted bool
	// new: a new session (Create); spare is the spare CLI it took
	// (pool.go), with its slot, or nil. A launch that fails before the
	// actor has it closes it.
	new   bool
	spare *spare
}

// launch starts a CLI process for stored session s, registers its actor
// and sends prompt when not empty. It fails with ErrAlreadyRunning when s
// has a live actor.
func (d *Daemon) launch(ctx context.Context, s *store.Session, o *SessionOptions, l launch, prompt string) (*store.Session, error) {
	if err := d.acquire(ctx, s.ID); err != nil {
		d.discardSpare(l.spare)
		return nil, err
	}
	if d.workerOf(s.ID) == "" {
		d.setWorkerOf(s.ID, s.Relay.Worker) // stored: it ran there before this daemon started
	}
	if s.Worktree.Path != "" {
		l.dir, l.worktree = cliDir(s, o.GetCwd()), s.Worktree
	}
	a := newActor(d, s.ID, o, l)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		d.discardSpare(l.spare)
		return nil, ErrClosed
	}
	if old := d.actors[s.ID]; old != nil {
		d.mu.Unlock()
		d.discardSpare(l.spare)
		return nil, fmt.Errorf("%w: session %s", ErrAlreadyRunning, s.ID)
	}
	d.actors[s.ID] = a // reserved: a second launch now fails
	a.hub = d.acquireHubLocked(s.ID, false)
	d.mu.Unlock()
	if l.takeover != nil {
		d.slots.force() // its CLI runs already
		a.hasSlot = true
	} else if a.launch.spare != nil {
		a.hasSlot = true // the spare's
	} else if err := d.takeSlot(ctx, a, s); err != nil {
		return nil, err
	}
	if (l.resume != "" && !l.fork) || l.takeover != nil {
		// The engine forgot the session's rules when its last CLI ended.
		if err := d.loadRules(ctx, func(r *store.Rule) bool { return r.SessionID == s.ID }); err != nil {
			d.log.Error("loading the session's rules", "session", s.ID, "err", err)
		}
	}
	if err := a.start(ctx); err != nil {
		return nil, err
	}
	close(a.ready)
	go a.run()
	if a.ctx.Err() != nil {
		// Closed while its CLI started (a client's close, the daemon
		// stopping): close waits for the end, which run brings once
		// asked; a client's close closes it, a shutdown leaves it
		// resumable.
		if d.isClosed() {
			a.askCloseAs(true, "")
		} else {
			a.askCloseAs(false, a.closedWhile("its CLI started"))
		}
	}
	defer func() {
		a.launching.Store(false)
		d.evictIdle() // a launch may wait for this session's room
	}()
	admitted := false // here, under the spend caps
	if prompt != "" && d.budget.caps.on() && !l.admitted {
		cur, err := d.stored(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		now, err := d.admit(ctx, cur, prompt)
		if err != nil {
			return nil, err
		}
		if !now { // kept: it runs when its turn comes
			return d.Session(ctx, s.ID)
		}
		admitted = true
	}
	if prompt != "" {
		err := a.send(ctx, prompt)
		if admitted {
			d.sent(s.ID, err)
		}
		switch {
		case errors.Is(err, errSuspending) && a.storeFailed.Load():
			// Resumed while the store wrote a little (a full disk with room
			// left in the WAL), stopped again by the first events it could
			// not store: the store is the cause, not the session.
			err = fmt.Errorf("%w: session %s was stopped again before the prompt could be sent: %s", store.ErrWriteFailed, s.ID, d.lostReason(s.ID))
		case errors.Is(err, errSuspending):
			err = fmt.Errorf("%w: session %s's CLI ended before the prompt could be sent", ErrNotRunning, s.ID)
		}
		if err != nil {
			return nil, err
		}
	}
	return d.Session(ctx, s.ID)
}

// takeSlot takes one of the MaxRunning slots for a's launch, queueing
// (status queued, idle sessions suspended to make room) when none is free.
// When the launch gives up first (ctx, the session closed, the daemon
// stopping) the actor is over and the session goes back to where it was.
func (d *Daemon) takeSlot(ctx context.Context, a *actor, s *store.Session) error {
	if d.slots.take() {
		a.hasSlot = true
		return nil
	}
	w, ahead := d.slots.enqueue()
	d.evictIdle()
	bg := context.WithoutCancel(ctx)
	a.status(bg, store.StatusQueued, fmt.Sprintf("waiting for one of %d running sessions to become idle (sessions.max_running); %d ahead", d.slots.limit(), ahead))
	d.log.Info("session queued", "session", a.id, "ahead", ahead, "max_running", d.slots.limit())
	err := d.slots.wait(ctx, a.ctx.Done(), w)
	if err == nil {
		a.hasSlot = true
		return nil
	}
	back := s.Status
	switch {
	case a.closedBy.Load() != nil && !d.isClosed(): // a client closed it: closed, whatever it was
		back = store.StatusClosed
		a.status(bg, back, a.closedWhile("queued"))
	case s.Status == store.StatusStarting: // a new session: it never ran
		back = store.StatusClosed
		a.status(bg, back, "closed while queued: "+err.Error())
	case s.Status == store.StatusIdle || s.Status == store.StatusRunning:
		back = store.StatusSuspended
		a.status(bg, back, "still suspended: "+err.Error())
	default:
		a.status(bg, back, "still "+string(back)+": "+err.Error())
	}
	a.abandon(terminal(back))
	return fmt.Errorf("daemon: session %s gave up its place in the queue: %w", a.id, err)
}

// evictIdle suspends the session idle the longest when a launch waits for
// a slot and no eviction is already under way for it.
func (d *Daemon) evictIdle() {
	if d.slots.limit() <= 0 {
		return
	}
	for d.slots.wantEviction() {
		if !d.suspendOldestIdle() {
			d.slots.evictionDropped()
			return
		}
	}
}

func (d *Daemon) suspendOldestIdle() bool {
	if d.dropSpare() { // a spare is the cheapest room (pool.go)
		return true
	}
	for range 3 { // a candidate may start a turn under us: try the next
		d.mu.Lock()
		var oldest *actor
		for _, a := range d.actors {
			since := a.idleSince.Load()
			if since == 0 || !a.live.Load() || a.evicted.Load() || a.launching.Load() {
				continue
			}
			if oldest == nil || since < oldest.idleSince.Load() {
				oldest = a
			}
		}
		d.mu.Unlock()
		if oldest == nil {
			return false
		}
		oldest.evicted.Store(true)
		if oldest.suspend(fmt.Sprintf("suspended to make room for a queued session (sessions.max_running %d); the next prompt resumes it", d.slots.limit())) {
			return true
		}
		oldest.evicted.Store(false)
	}
	return false
}

// release forgets a, whose CLI is gone: the session is then only rows,
// and its slot goes to the next launch.
func (d *Daemon) release(a *actor) {
	a.released.Do(func() {
		d.mu.Lock()
		if d.actors[a.id] == a {
			delete(d.actors, a.id)
			d.releaseHubLocked(a.hub, false)
		}
		d.mu.Unlock()
		// Its live status changes (a session the store stopped shows
		// suspended only now) even when no event of its end was stored.
		d.feed.changed(a.id)
		if a.hasSlot {
			d.slots.release(a.evicted.Load())
		}
		if !a.takenOver.Load() {
			d.releaseLease(a.id)
		}
	})
}

func (d *Daemon) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// stored reads session id from the store; an unknown id is a
// *SessionNotFoundError (errors.Is store.ErrNotFound).
func (d *Daemon) stored(ctx context.Context, id string) (*store.Session, error) {
	s, err := d.db.Session(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &SessionNotFoundError{ID: id}
	}
	return s, err
}

// SessionNotFoundError names a session id the daemon does not have.
type SessionNotFoundError struct{ ID string }

func (e *SessionNotFoundError) Error() string {
	return fmt.Sprintf("daemon: no session %q (claudectl sessions lists them)", clipValue(e.ID))
}

// Is makes errors.Is(err, store.ErrNotFound) hold.
func (e *SessionNotFoundError) Is(target error) bool { return target == store.ErrNotFound }

// Session returns the stored session with its live status: waiting while
// a permission request of its CLI waits for a person.
func (d *Daemon) Session(ctx context.Context, id string) (*store.Session, error) {
	s, err := d.stored(ctx, id)
	if err != nil {
		return nil, err
	}
	d.overlay(s)
	return s, nil
}

// Sessions returns the stored sessions f selects, with their live status.
func (d *Daemon) Sessions(ctx context.Context, f store.SessionFilter) ([]*store.Session, error) {
	ss, err := d.db.Sessions(ctx, f)
	if err != nil {
		return nil, err
	}
	for _, s := range ss {
		d.overlay(s)
	}
	return ss, nil
}

func (d *Daemon) overlay(s *store.Session) {
	d.mu.Lock()
	a := d.actors[s.ID]
	d.mu.Unlock()
	if a == nil || a.storeFailed.Load() {
		// Stopped because its events could not be stored: its stored
		// status (running, idle, starting) is the last the store took,
		// and the suspension could not be recorded until it writes again.
		if why := d.stoppedByStore(s.ID); why != "" {
			s.Status, s.Error = store.StatusSuspended, why
			return
		}
	}
	switch {
	case a == nil && s.Status == store.StatusIdle && !d.runsElsewhere(s):
		s.Status = store.StatusSuspended // idle when a killed daemon left it: its CLI is gone
	case a != nil && s.Status == store.StatusRunning && a.live.Load() && a.waiting():
		s.Status = store.StatusWaiting
	}
}

// actor returns the live actor of session id, or an error: store.ErrNotFound
// for an unknown session, ErrNotRunning for one without a CLI.
func (d *Daemon) actor(ctx context.Context, id string) (*actor, error) {
	d.mu.Lock()
	a := d.actors[id]
	d.mu.Unlock()
	if a != nil {
		select { // a launch may be queued: wait for its CLI
		case <-a.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !a.ended() {
			return a, nil
		}
	}
	if err := d.ownedElsewhere(ctx, id); err != nil {
		return nil, err
	}
	s, err := d.stored(ctx, id)
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: session %s is %s", ErrNotRunning, id, s.Status)
}

// Send writes a prompt to the session (a new turn, or queued behind the
// running one). A session left without a CLI by a daemon restart (idle or
// interrupted) is resumed first; a closed or failed one is not: Resume
// says so explicitly.
func (d *Daemon) Send(ctx context.Context, id, text string) error {
	if text == "" {
		return &InvalidArgumentError{Field: "text", Value: "", Reason: "required"}
	}
	if d.budget.caps.on() {
		s, err := d.stored(ctx, id)
		if err != nil {
			return err
		}
		if !terminal(s.Status) {
			now, err := d.admit(ctx, s, text)
			if err != nil || !now {
				return err // kept: it runs when its turn comes
			}
			err = d.sendNow(ctx, id, text)
			d.sent(id, err)
			return err
		}
	}
	return d.sendNow(ctx, id, text)
}

// sendNow is Send without the spend caps: the prompt goes to the CLI (a
// new turn, or queued behind the running one).
func (d *Daemon) sendNow(ctx context.Context, id, text string) error {
	for {
		a, err := d.actor(ctx, id)
		if _, ok, rerr := d.routed(ctx, err, id, cmdSend, commandArgs{Text: text}); ok {
			return rerr
		}
		if errors.Is(err, ErrNotRunning) {
			if err := d.settleLost(id); err != nil {
				return err
			}
			s, serr := d.stored(ctx, id)
			if serr != nil {
				return serr
			}
			s = d.orphaned(ctx, s)
			if !s.Status.Resumable() {
				return &StateError{SessionID: id, Status: s.Status, Msg: noCLI(s)}
			}
			_, err = d.resume(ctx, s, text, true)
			if errors.Is(err, ErrAlreadyRunning) {
				continue // another prompt resumed it first: join that CLI
			}
			return err
		}
		if err != nil {
			return err
		}
		err = a.send(ctx, text)
		if !errors.Is(err, errSuspending) {
			return err
		}
		select { // the CLI is going: the prompt resumes the session
		case <-a.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// noCLI is why a prompt cannot go to s, which has no CLI and is not
// resumed by one, with the advice that applies: resume it, unless a resume
// would be refused too (its CLI never began a conversation, its budget is
// spent), in which case the resume's reason.
func noCLI(s *store.Session) string {
	var se *StateError
	if _, err := resumable(s, "resume"); errors.As(err, &se) {
		return "it has no CLI process, and " + strings.Replace(se.Msg, "cannot resume it", "it cannot be resumed", 1)
	}
	return "it has no CLI process; ResumeSession (claudectl resume) starts one"
}

// Interrupt stops the session's running turn; by names the client, for
// the session's watchers ("interrupted by client:alice"). A session
// without a CLI (suspended, say) has no turn to stop: that is no error.
func (d *Daemon) Interrupt(ctx context.Context, id, by string) error {
	a, err := d.actor(ctx, id)
	if _, ok, rerr := d.routed(ctx, err, id, cmdInterrupt, commandArgs{By: by}); ok {
		return rerr
	}
	if d.suspendedSession(ctx, err, id) {
		return nil
	}
	if err != nil {
		return err
	}
	by = clientName(by)
	if a.inflight.Load() > 0 {
		a.interrupted.Store(true)
	}
	a.log(context.WithoutCancel(ctx), &Interrupted{By: by})
	d.log.Info("interrupting session", "session", id, "by", by)
	return a.call(ctx, func(ctx context.Context, s *claude.Session) error { return s.Interrupt(ctx) })
}

// clientName is how a client is named in the log: "client:<name>", or
// "user:<name>" for a name from VerifiedBy.
func clientName(name string) string {
	if user, ok := strings.CutPrefix(name, verifiedMark); ok {
		return "user:" + user
	}
	if name == "" {
		return "client:anonymous"
	}
	return "client:" + name
}

// verifiedMark starts a client name that VerifiedBy made: a character
// that is not printable, so that no name a client gives itself (the API
// refuses those that are not) can pass for it.
const verifiedMark = "\u2063"

// VerifiedBy returns what to pass as a client name (Interrupt's and
// CloseSession's by, Decision.Client) for a person the API verified (a
// token's user): the session's log, the audit trail and every client then
// name them "user:<name>", not "client:<name>".
func VerifiedBy(user string) string { return verifiedMark + user }

// SetModel switches the session's model ("" for the default).
func (d *Daemon) SetModel(ctx context.Context, id, model string) error {
	if err := checkModel("model", model); err != nil {
		return err
	}
	a, err := d.actor(ctx, id)
	if _, ok, rerr := d.routed(ctx, err, id, cmdModel, commandArgs{Model: model}); ok {
		return rerr
	}
	if d.suspendedSession(ctx, err, id) { // taken by the next resume
		_, err = d.db.UpdateSession(ctx, id, store.SessionUpdate{Model: &model})
		d.feed.changed(id)
		return err
	}
	if err != nil {
		return err
	}
	err = a.call(ctx, func(ctx context.Context, s *claude.Session) error { return s.SetModel(ctx, model) })
	if err != nil {
		return err
	}
	_, err = d.db.UpdateSession(ctx, id, store.SessionUpdate{Model: &model})
	d.feed.changed(id)
	return err
}

// SetPermissionMode switches the session's permission mode and returns the
// mode now in effect: the CLI may make another mode than mode the one in
// effect, and that is what the session stores and shows (with a
// permission_mode event, mode.go). A mode the CLI refuses is its error (a
// *claude.ControlError saying why) and changes nothing. A session without
// a CLI (suspended) keeps mode for its next resume and returns it.
func (d *Daemon) SetPermissionMode(ctx context.Context, id, mode string) (string, error) {
	if !slices.Contains(claude.PermissionModes, claude.PermissionMode(mode)) {
		return "", &InvalidArgumentError{Field: "mode", Value: mode, Reason: fmt.Sprintf("must be one of %v", claude.PermissionModes)}
	}
	if err := d.policy.checkMode("mode", mode); err != nil {
		return "", err
	}
	a, err := d.actor(ctx, id)
	if res, ok, rerr := d.routed(ctx, err, id, cmdMode, commandArgs{Mode: mode}); ok {
		if rerr != nil {
			return "", rerr
		}
		return cmp.Or(res.Mode, mode), nil // a daemon older than Mode does not say
	}
	if d.suspendedSession(ctx, err, id) { // taken by the next resume
		_, err = d.db.UpdateSession(ctx, id, store.SessionUpdate{PermissionMode: &mode})
		d.feed.changed(id)
		if err != nil {
			return "", err
		}
		return mode, nil
	}
	if err != nil {
		return "", err
	}
	return a.setMode(ctx, mode)
}

// suspendedSession reports whether err, from d.actor, is about a session
// without a CLI that its next prompt resumes.
func (d *Daemon) suspendedSession(ctx context.Context, err error, id string) bool {
	if !errors.Is(err, ErrNotRunning) {
		return false
	}
	s, serr := d.stored(ctx, id)
	return serr == nil && (s.Status.Resumable() || s.Status == store.StatusBudget)
}

// CloseSession ends the session's CLI and marks it closed; by names the
// client, for the session's watchers. A session without a CLI (suspended,
// interrupted) is marked closed too, so that a prompt no longer resumes
// it; closing a closed or failed one is not an error.
func (d *Daemon) CloseSession(ctx context.Context, id, by string) error {
	d.mu.Lock()
	a := d.actors[id]
	d.mu.Unlock()
	if a != nil {
		d.log.Info("closing session", "session", id, "by", clientName(by))
		if a.close(false, clientName(by)) {
			d.dropKept(ctx, id)
			return nil
		}
		// Its CLI ended first (suspended meanwhile): close what is stored.
	}
	if err := d.ownedElsewhere(ctx, id); err != nil {
		_, _, err = d.routed(ctx, err, id, cmdClose, commandArgs{By: by})
		return err
	}
	s, err := d.stored(ctx, id)
	if err != nil || (!s.Status.Resumable() && s.Status != store.StatusBudget) {
		return err
	}
	d.dropKept(ctx, id)
	st := store.StatusClosed
	ev, err := newEvent(id, &StatusChange{Status: st, Detail: "closed by " + clientName(by)})
	if err != nil {
		return err
	}
	if err := appendUpdate(ctx, d.db, &ev.Event, store.SessionUpdate{Status: &st}); err != nil {
		return err
	}
	// Its subscribers wait on its hub, which no CLI feeds now (and the
	// embedded store sends no notifications): they get the closed event
	// from here, and end; the session lists see it too.
	d.mu.Lock()
	h := d.hubs[id]
	d.mu.Unlock()
	if h != nil {
		h.publish(ev)
		d.endHub(h)
	}
	d.feed.changed(id)
	return nil
}

// Running returns how many sessions have a live CLI.
func (d *Daemon) Running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, a := range d.actors {
		if a.live.Load() {
			n++
		}
	}
	return n
}

// Queued returns how many sessions wait for a slot (Options.MaxRunning).
func (d *Daemon) Queued() int { return d.slots.queued() }

// MaxRunning returns the cap on sessions with a live CLI, 0 for none.
func (d *Daemon) MaxRunning() int { return d.slots.limit() }

// Close ends every session's CLI and waits for them; the sessions become
// interrupted (a later prompt or Resume continues them), not closed. It
// ends every subscription. It leaves the DB, engine and broker open.
// Idempotent.
func (d *Daemon) Close() error {
	d.mu.Lock()
	d.closed = true
	actors := make([]*actor, 0, len(d.actors))
	for _, a := range d.actors {
		actors = append(actors, a)
	}
	d.mu.Unlock()
	d.slots.close() // queued launches give up
	d.closePool()
	var wg sync.WaitGroup
	for _, a := range actors {
		wg.Go(func() { a.close(true, "") })
	}
	wg.Wait()
	d.typing.Wait()  // a resume that began after the close fails with ErrClosed
	d.closeBudgets() // before the hubs end: a kept prompt being sent logs
	d.endHubs()
	d.cancel()
	d.spares.close()
	<-d.feedDone
	if d.heartbeatDone != nil {
		<-d.heartbeatDone
	}
	if d.commandsDone != nil {
		<-d.commandsDone
	}
	if d.rulesDone != nil {
		<-d.rulesDone
	}
	if d.pendingDone != nil {
		<-d.pendingDone // the broker closes after the daemon: d.ctx ends it
	}
	if d.reachDone != nil {
		<-d.reachDone
	}
	if d.tail != nil {
		<-d.tail.done
	}
	d.commands.Wait()
	return nil
}

// loadRules enables the stored rules that keep selects (replacing any copy
// the engine has), in one change of the engine's set: one at a time, each
// would copy the set, and a daemon with 20,000 rules took a minute to
// start. A rule that does not compile is skipped with a warning.
func (d *Daemon) loadRules(ctx context.Context, keep func(*store.Rule) bool) error {
	rules, err := d.db.Rules(ctx)
	if err != nil {
		return fmt.Errorf("daemon: loading rules: %w", err)
	}
	var prs []permission.Rule
	for _, r := range rules {
		if !keep(r) {
			continue
		}
		pr, err := RuleFromStore(r)
		if err != nil {
			d.log.Warn("skipping stored rule", "id", r.ID, "spec", r.Spec, "err", err)
			continue
		}
		prs = append(prs, pr)
	}
	if err := d.engine.Put(prs...); err != nil { // RuleFromStore checked each
		return fmt.Errorf("daemon: loading rules: %w", err)
	}
	return nil
}

// RuleFromStore compiles a stored rule for the engine.
func RuleFromStore(r *store.Rule) (permission.Rule, error) {
	pr, err := permission.NewRule(r.Spec, permission.Behavior(r.Behavior),
		permission.Scope{ProjectDir: r.ProjectDir, SessionID: r.SessionID})
	if err != nil {
		return pr, err
	}
	pr.ID = r.ID
	return pr, nil
}
