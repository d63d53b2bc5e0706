package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/claudectl/claudectl/claude"
)

// The pool of spare CLIs (sessions.spare_clis). Most of the time from a
// new session's prompt to its first token is its CLI starting (node
// loading Claude Code, about a second); a spare is a CLI started ahead of
// need with the options a session was created with recently, its
// initialize request answered, that the next session created with the
// same options takes instead of starting one.
//
// Matching. A CLI's flags, working directory, environment and resource
// limits are fixed when it starts, so a spare matches only a session whose
// options are the same in everything ClaudeOptions turns into a flag or
// the process's setting: its key is the whole SessionOptions message
// (deterministic proto bytes). What the daemon adds is the daemon's for
// every session (its env, CLI path, sandbox, scheduling); a reload that
// changes the pool's settings drops every spare. Only new sessions take
// spares: a resume or fork starts its CLI with --resume, and a worktree
// session runs in a directory made for it.
//
// Remote workers. A worker's CLI runs on someone else's machine, with its
// login: a spare runs only on a registered worker whose operator opted in
// (claudectl worker --spares, relay.Registration.Spares) and that matches
// the options' worker and labels, and it holds one of that worker's
// capacity slots. Its relay session is tagged with the id the session
// that takes it will have (spare.id, given to that session by Create), so
// that a daemon taking the session over after this one died finds it by
// the relay session's tag, as any worker session's (takeover.go); a spare
// nobody took is unknown to every daemon, and a worker that comes back for
// it is told to stop its CLI. A session that finds every matching worker
// full closes the remote spares and tries again (actor.start).
//
// Cost and credentials. A spare is a CLI process like a session's: it
// takes one of the sessions.max_running slots (started only when one is
// free, and the first to go when a launch queues for one), and it holds
// what a live session holds, the daemon's environment and the CLI's login.
// It lives sessions.spare_lifetime, never longer than an idle session keeps
// its CLI (sessions.idle_timeout), and is then closed; a pool whose
// spares go unused is empty after that long. Daemon.Close closes them.

// pool holds the spares; its zero value has none (size 0).
type pool struct {
	mu     sync.Mutex
	size   int           // most spares at once; 0: off
	ttl    time.Duration // a spare's life
	spares []*spare      // starting or ready, oldest first
	closed bool
	wg     sync.WaitGroup // spares' start goroutines and closes
	taken  int64          // spares taken by sessions, for tests and metrics
}

// A spare is a CLI started for options key, waiting for a session.
type spare struct {
	key string
	// id is the id of the session that takes a remote spare, its relay
	// session's tag; "" for a local spare (the store gives the session one).
	id     string
	opts   *SessionOptions
	tap    *tapTransport
	ctx    context.Context    // the CLI's: the daemon's, ended by cancel
	cancel context.CancelFunc // ends the CLI's context (the actor's cancelCLI once taken)
	sess   *claude.Session    // set once started (under pool.mu)
	ready  bool               // initialized (under pool.mu)
	gone   bool               // dropped from the pool (under pool.mu)
	// evicted: dropped while starting to make room for a queued launch
	// (under pool.mu).
	evicted bool
	timer   *time.Timer // its lifetime, once ready

	// bound is closed when a session takes the spare; a is that session's
	// actor. The CLI's requests before then (none are expected before a
	// prompt) wait for it.
	bound chan struct{}
	a     *actor
}

// spareKey is what a spare must have been started with for o's session to
// take it, and false when o's session takes no spare.
func spareKey(o *SessionOptions) (string, bool) {
	if o.GetWorktree() != "" {
		return "", false
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(o)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// SetSpares changes sessions.spare_clis (n spares at most, 0: none) and
// sessions.spare_lifetime (ttl): every spare running is closed, and the
// next sessions created start spares under the new settings.
func (d *Daemon) SetSpares(n int, ttl time.Duration) {
	p := &d.pool
	p.mu.Lock()
	p.size, p.ttl = max(n, 0), ttl
	old := p.spares
	p.spares = nil
	for _, sp := range old {
		sp.gone = true
	}
	p.wg.Add(len(old)) // their closes, before closePool can wait (closeSpare)
	p.mu.Unlock()
	for _, sp := range old {
		d.closeSpare(sp, false)
	}
}

// Spares returns how many spare CLIs are ready to be taken, and how many
// sessions took one since the daemon started.
func (d *Daemon) Spares() (ready int, taken int64) {
	p := &d.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sp := range p.spares {
		if sp.ready {
			ready++
		}
	}
	return ready, p.taken
}

// SparesFor returns how many spare CLIs for sessions created with o are
// in the pool: ready to be taken, and starting.
func (d *Daemon) SparesFor(o *SessionOptions) (ready, starting int) {
	key, ok := spareKey(o)
	if !ok {
		return 0, 0
	}
	p := &d.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sp := range p.spares {
		switch {
		case sp.key != key:
		case sp.ready:
			ready++
		default:
			starting++
		}
	}
	return ready, starting
}

// spareLife is how long a spare may wait: sessions.spare_lifetime, at
// most sessions.idle_timeout.
func (d *Daemon) spareLife() time.Duration {
	t := d.pool.ttl
	if idle := d.idle(); idle > 0 && (t <= 0 || idle < t) {
		t = idle
	}
	return t
}

// wantSpare starts a spare for sessions created with o, unless one is
// there already: a session was just created with o. With the pool full,
// the oldest spare of other options gives way.
func (d *Daemon) wantSpare(o *SessionOptions) {
	key, ok := spareKey(o)
	remote := remoteOptions(o)
	if !ok || remote && d.workers == nil {
		return
	}
	if remote {
		// No worker that takes spares matches, or all are full: a spare
		// could not start, and it would make another give way for nothing.
		sel, _ := workerSelector(o)
		sel.Spares = true
		if err := d.workers.CheckPlacement(sel); err != nil {
			d.log.Debug("no spare CLI for a remote session's options", "why", err)
			return
		}
	}
	p := &d.pool
	p.mu.Lock()
	if p.closed || p.size <= 0 || d.spareLife() <= 0 || slices.ContainsFunc(p.spares, func(sp *spare) bool { return sp.key == key }) {
		p.mu.Unlock()
		return
	}
	var drop *spare
	if len(p.spares) >= p.size {
		drop, p.spares = p.spares[0], p.spares[1:]
		drop.gone = true
		p.wg.Add(1) // its close (closeSpare)
	}
	if !d.slots.take() { // no room: sessions come first
		p.mu.Unlock()
		if drop != nil {
			d.closeSpare(drop, false)
		}
		return
	}
	sp := &spare{key: key, opts: proto.Clone(o).(*SessionOptions), bound: make(chan struct{})}
	if remote {
		sp.id = newSessionID()
	}
	sp.ctx, sp.cancel = context.WithCancel(d.ctx)
	p.spares = append(p.spares, sp)
	p.wg.Add(1)
	p.mu.Unlock()
	if drop != nil {
		d.closeSpare(drop, false)
	}
	go func() {
		defer p.wg.Done()
		d.startSpare(sp)
	}()
}

// startSpare starts sp's CLI and waits for its initialize answer; a spare
// that fails is dropped (logged: the next session starts its own CLI).
func (d *Daemon) startSpare(sp *spare) {
	var tr claude.Transport
	if sp.id != "" {
		// Held, as a session's: a daemon taking it over gets again what
		// was not stored (takeover.go).
		sel, _ := workerSelector(sp.opts)
		tr = &claude.WorkerTransport{Listener: d.workers, Name: sel.Name, Labels: sel.Labels, Tag: sp.id, Hold: true, Spare: true}
	} else {
		tr = d.localTransport(sp.opts)
	}
	sp.tap = &tapTransport{Transport: tr}
	co := d.cliOptions(sp.opts, sp.tap, sp.canUseTool, sp.skillShellCommand)
	ctx, cancel := sp.ctx, sp.cancel
	s, err := claude.Start(ctx, &co)
	if err == nil {
		ictx, icancel := context.WithTimeout(ctx, time.Minute)
		_, err = s.Initialize(ictx)
		icancel()
		if err != nil {
			s.Close()
		}
	}
	p := &d.pool
	p.mu.Lock()
	if err != nil || sp.gone {
		dropped, evicted := sp.gone, sp.evicted
		if !sp.gone {
			sp.gone = true
			p.spares = slices.DeleteFunc(p.spares, func(x *spare) bool { return x == sp })
		}
		p.mu.Unlock()
		switch {
		case err != nil && dropped && ctx.Err() != nil: // closed while it started
		case errors.Is(err, claude.ErrNoWorker) || errors.Is(err, claude.ErrWorkersBusy):
			d.log.Info("no spare CLI on a remote worker: none with room takes spares; sessions start their own", "cwd", sp.opts.GetCwd(), "why", err)
		case err != nil:
			d.log.Warn("a spare CLI did not start; sessions start their own", "cwd", sp.opts.GetCwd(), "err", err)
		default:
			s.Close()
		}
		cancel()
		d.slots.release(evicted)
		return
	}
	sp.sess, sp.ready = s, true
	sp.timer = time.AfterFunc(d.spareLife(), func() { d.expireSpare(sp) })
	p.mu.Unlock()
	d.log.Info("spare CLI ready", "cwd", sp.opts.GetCwd(), "pid", s.PID(), "worker", sp.tap.conn.worker)
}

// expireSpare closes sp when its lifetime is over and no session took it.
func (d *Daemon) expireSpare(sp *spare) {
	p := &d.pool
	p.mu.Lock()
	if sp.gone {
		p.mu.Unlock()
		return
	}
	sp.gone = true
	p.spares = slices.DeleteFunc(p.spares, func(x *spare) bool { return x == sp })
	p.wg.Add(1) // its close (closeSpare)
	p.mu.Unlock()
	d.log.Info("spare CLI unused for its lifetime (sessions.spare_lifetime); closing it", "cwd", sp.opts.GetCwd())
	d.closeSpare(sp, false)
}

// takeSpare returns a ready spare for o's session, taken out of the pool
// with its slot, or nil.
func (d *Daemon) takeSpare(o *SessionOptions) *spare {
	key, ok := spareKey(o)
	if !ok {
		return nil
	}
	p := &d.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, sp := range p.spares {
		if sp.key != key || !sp.ready {
			continue
		}
		select {
		case <-sp.sess.Done(): // its CLI died waiting: let it go
			continue
		default:
		}
		sp.gone = true
		sp.timer.Stop()
		p.spares = slices.Delete(p.spares, i, i+1)
		p.taken++
		return sp
	}
	return nil
}

// discardSpare closes sp, taken by a session that could not use it (its
// store write or launch failed), and gives its slot back.
func (d *Daemon) discardSpare(sp *spare) {
	if sp == nil {
		return
	}
	p := &d.pool
	p.mu.Lock()
	p.wg.Add(1) // its close (closeSpare)
	p.mu.Unlock()
	d.log.Info("a spare CLI taken by a session that did not start is closed", "cwd", sp.opts.GetCwd())
	d.closeSpare(sp, false)
}

// dropRemoteSpares closes the spares that run on remote workers, for a
// session that found every matching worker full, and returns once their
// CLIs have ended (their workers' slots free); it reports whether there
// were any.
func (d *Daemon) dropRemoteSpares() bool {
	p := &d.pool
	p.mu.Lock()
	var drop []*spare
	p.spares = slices.DeleteFunc(p.spares, func(sp *spare) bool {
		if sp.id == "" {
			return false
		}
		sp.gone = true
		drop = append(drop, sp)
		return true
	})
	p.wg.Add(len(drop)) // their closes (closeSpare)
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, sp := range drop {
		wg.Go(func() { d.closeSpareAs(sp, false, true) })
	}
	wg.Wait()
	if len(drop) > 0 {
		d.log.Info("closed the spare CLIs on remote workers to make room for a session", "spares", len(drop))
	}
	return len(drop) > 0
}

// spareIDs returns the relay tags of the remote spares in the pool.
func (d *Daemon) spareIDs() map[string]bool {
	p := &d.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := map[string]bool{}
	for _, sp := range p.spares {
		if sp.id != "" {
			ids[sp.id] = true
		}
	}
	return ids
}

// dropSpare closes the oldest spare to give its slot to a launch that
// queues for one (evictIdle); it reports false when there is none.
func (d *Daemon) dropSpare() bool {
	p := &d.pool
	p.mu.Lock()
	if len(p.spares) == 0 {
		p.mu.Unlock()
		return false
	}
	sp := p.spares[0]
	p.spares = p.spares[1:]
	sp.gone = true
	p.wg.Add(1) // its close (closeSpare)
	p.mu.Unlock()
	d.closeSpare(sp, true)
	return true
}

// closeSpare closes a spare dropped from the pool (gone) and gives its
// slot back (evicted: to make room for a queued launch). A spare still
// starting is closed by startSpare, which finds it gone. The caller added
// one to p.wg for it under p.mu, where it dropped sp: a count that goes up
// after closePool has begun to wait is a race (and a CLI Close would not
// wait for), as a spare's expiry timer racing Close showed under -race.
func (d *Daemon) closeSpare(sp *spare, evicted bool) { d.closeSpareAs(sp, evicted, false) }

// closeSpareAs is closeSpare; wait: returns once the spare's CLI has ended
// (a spare still starting is closed by startSpare, not waited for).
func (d *Daemon) closeSpareAs(sp *spare, evicted, wait bool) {
	p := &d.pool
	p.mu.Lock()
	s := sp.sess
	if s != nil {
		sp.timer.Stop()
	} else {
		sp.evicted = evicted // startSpare closes it, and gives its slot back so
	}
	p.mu.Unlock()
	if s == nil {
		sp.cancel() // a start or an initialize under way ends now
		p.wg.Done()
		return
	}
	end := func() {
		defer p.wg.Done()
		s.Close()
		sp.cancel()
		d.slots.release(evicted)
	}
	if wait {
		end()
	} else {
		go end()
	}
}

// closePool closes every spare and waits until their CLIs are gone.
func (d *Daemon) closePool() {
	p := &d.pool
	p.mu.Lock()
	p.closed = true
	old := p.spares
	p.spares = nil
	for _, sp := range old {
		sp.gone = true
	}
	p.wg.Add(len(old))
	p.mu.Unlock()
	for _, sp := range old {
		d.closeSpare(sp, false)
	}
	p.wg.Wait()
}

// canUseTool and skillShellCommand pass the CLI's requests to the session
// that takes the spare, waiting for one.
func (sp *spare) canUseTool(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
	select {
	case <-sp.bound:
		return sp.a.canUseTool(ctx, req)
	case <-ctx.Done():
		return claude.PermissionResult{}, ctx.Err()
	}
}

func (sp *spare) skillShellCommand(ctx context.Context, in *claude.PreSkillShellCommandInput) (*claude.HookOutput, error) {
	select {
	case <-sp.bound:
		return sp.a.skillShellCommand(ctx, in)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startSpare makes the spare sp a's CLI: what was written to it is stored
// as the session's first lines, its requests go to a, and it goes on as a
// CLI started for a.
func (a *actor) startSpare(ctx context.Context, sp *spare, held string) error {
	if sp.id != "" {
		// As tapTransport.Start does for a CLI started on a worker for
		// the session: stored before the lines bind stores, which the
		// relay counts from.
		if err := a.recordWorkerLink(ctx, sp.tap.conn.Conn); err != nil {
			sp.sess.Close()
			sp.cancel()
			return a.fail(ctx, fmt.Errorf("daemon: session %s could not start: %w", a.id, storeError(err)))
		}
	}
	if err := sp.tap.conn.bind(ctx, a); err != nil {
		sp.sess.Close()
		sp.cancel()
		return a.fail(ctx, fmt.Errorf("daemon: session %s could not start: %w", a.id, storeError(err)))
	}
	a.cancelCLI = sp.cancel
	sp.a = a
	close(sp.bound)
	a.d.log.Info("session took a spare CLI", "session", a.id, "pid", sp.sess.PID(), "worker", sp.tap.conn.worker)
	return a.started(ctx, sp.sess, held)
}

// cliOptions are the SDK's options of a local or remote CLI for a session
// with options o: everything but resume, fork and a worktree's directory.
// A spare's are the same (pool.go), so that the CLI it starts is the one
// the session would have started.
func (d *Daemon) cliOptions(o *SessionOptions, tr claude.Transport, canUseTool claude.CanUseToolFunc,
	skillShellCommand func(context.Context, *claude.PreSkillShellCommandInput) (*claude.HookOutput, error)) claude.Options {
	co := ClaudeOptions(o)
	co.CLIPath = d.cliPath
	co.Transport = tr
	co.Env = d.env
	co.MaxPayloadBytes = d.maxPayload
	co.CanUseTool = canUseTool
	co.Hooks = d.hooks(skillShellCommand)
	co.Sandbox = d.policy.Sandbox // the daemon's, whatever the session asked
	co.Logger = d.log
	return co
}

// localTransport runs a local session's CLI with options o.
func (d *Daemon) localTransport(o *SessionOptions) claude.Transport {
	if d.transport != nil {
		return d.transport
	}
	return &claude.ProcessTransport{ReadBufferSize: d.readBuf, Scheduling: d.scheduling,
		Limits: d.policy.SessionLimits(o)}
}
