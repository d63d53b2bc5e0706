package claude

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/claudectl/claudectl/internal/relay"
)

// This file holds the registered workers of a WorkerListener: their control
// connections, the registry the listener keeps of them, and placement.

// maxRegistered bounds the registry: a full registry forgets its lost
// workers first, and refuses new names when none is lost.
const maxRegistered = 1024

// openTimeout bounds how long a placement waits for the worker to dial the
// session's link after the open frame.
var openTimeout = 30 * time.Second

// A WorkerState is where a registered worker stands.
type WorkerState int

const (
	// WorkerConnected: its control connection is up.
	WorkerConnected WorkerState = iota + 1
	// WorkerReconnecting: its control connection dropped less than its
	// grace period ago; its sessions wait for it.
	WorkerReconnecting
	// WorkerLost: it has been gone for longer than its grace period; its
	// sessions failed with a *WorkerLostError.
	WorkerLost
)

func (s WorkerState) String() string {
	switch s {
	case WorkerConnected:
		return "connected"
	case WorkerReconnecting:
		return "reconnecting"
	case WorkerLost:
		return "lost"
	}
	return fmt.Sprintf("WorkerState(%d)", int(s))
}

// WorkerInfo describes a registered worker ([WorkerListener.Workers]).
type WorkerInfo struct {
	Name     string
	Labels   map[string]string
	Capacity int
	// Sessions are the sessions it runs: their WorkerTransport.Tag, or the
	// relay's session id when there is none.
	Sessions   []string
	CLIVersion string
	Host       string
	PID        int
	State      WorkerState
	// Since is when it entered State (connected, or lost its link).
	Since time.Time
	// LastSeen is now for a connected worker, else when its link dropped.
	LastSeen time.Time
	// Addr is the remote address of its control connection.
	Addr  string
	Grace time.Duration
	// Spares: it takes spare CLIs (WorkerTransport.Spare).
	Spares bool
}

// A WorkerSelector says which registered worker may run a session: the one
// named Name (if set) and with every label of Labels.
type WorkerSelector struct {
	Name   string
	Labels map[string]string
	// Spares picks only a worker that takes spare CLIs
	// (its registration's Spares).
	Spares bool
}

func (s WorkerSelector) String() string {
	var parts []string
	if s.Name != "" {
		parts = append(parts, "name "+s.Name)
	}
	if len(s.Labels) > 0 {
		parts = append(parts, "labels "+formatLabels(s.Labels))
	}
	if s.Spares {
		parts = append(parts, "taking spare CLIs (claudectl worker --spares)")
	}
	if len(parts) == 0 {
		return "any worker"
	}
	return strings.Join(parts, " and ")
}

func formatLabels(labels map[string]string) string {
	kv := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kv = append(kv, k+"="+labels[k])
	}
	return strings.Join(kv, ",")
}

func (s WorkerSelector) matches(r *relay.Registration) bool {
	if s.Name != "" && s.Name != r.Name || s.Spares && !r.Spares {
		return false
	}
	for k, v := range s.Labels {
		if got, ok := r.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ErrNoWorker is matched (errors.Is) by *NoWorkerError.
var ErrNoWorker = errors.New("claude: no matching worker")

// ErrWorkersBusy is matched (errors.Is) by *WorkersBusyError.
var ErrWorkersBusy = errors.New("claude: every matching worker is at capacity")

// NoWorkerError reports that no connected worker matches a selector.
type NoWorkerError struct {
	Selector WorkerSelector
	// Known lists the registered workers, as "name (labels, state)".
	Known []string
}

func (e *NoWorkerError) Error() string {
	known := "none is registered"
	if len(e.Known) > 0 {
		known = "registered: " + strings.Join(e.Known, "; ")
	}
	return fmt.Sprintf("claude: no connected worker matches %v (%s); start one with claudectl worker --name/--label, or ask for another", e.Selector, known)
}

// Is matches ErrNoWorker.
func (e *NoWorkerError) Is(target error) bool { return target == ErrNoWorker }

// WorkersBusyError reports that every worker matching a selector runs as
// many sessions as its capacity.
type WorkersBusyError struct {
	Selector WorkerSelector
	// Workers lists the matching workers, as "name (running/capacity)".
	Workers []string
}

func (e *WorkersBusyError) Error() string {
	return fmt.Sprintf("claude: every worker matching %v is at capacity (%s); close a session, or start a worker with more --capacity", e.Selector, strings.Join(e.Workers, "; "))
}

// Is matches ErrWorkersBusy.
func (e *WorkersBusyError) Is(target error) bool { return target == ErrWorkersBusy }

// registered is one entry of the registry; guarded by the listener's mu.
type registered struct {
	reg relay.Registration
	ctl *websocket.Conn // the control connection; nil while it is down
	// joining is a control connection of this worker being welcomed: it
	// holds the name against other workers, but nothing is placed on it
	// (it is not ctl) before its welcome frame is written, which must be
	// the first frame the worker reads.
	joining         *websocket.Conn
	joiningInstance string // its registration's Instance
	addr            string
	since           time.Time // when ctl was set or cleared
}

// welcomed reports whether the worker was ever registered: an entry made
// for a worker being welcomed for the first time is not, until then.
func (e *registered) welcomed() bool { return e.ctl != nil || !e.since.IsZero() }

func (e *registered) state(now time.Time) WorkerState {
	switch {
	case e.ctl != nil:
		return WorkerConnected
	case now.Sub(e.since) <= e.reg.Grace():
		return WorkerReconnecting
	}
	return WorkerLost
}

// claim is a session placed on a registered worker, waiting for the link
// the worker dials for it.
type claim struct {
	worker   string
	secret   string           // sent in the open frame, presented by the link's hello
	link     chan *workerLink // buffered 1
	declined chan string      // buffered 1
}

// loadLocked returns, per worker name, the sessions placed on it that are
// not over; l.mu is held.
func (l *WorkerListener) loadLocked() map[string][]*workerConn {
	load := map[string][]*workerConn{}
	for _, rc := range l.sessions {
		if rc.placed && !rc.over() {
			load[rc.worker] = append(load[rc.worker], rc)
		}
	}
	return load
}

// Workers returns the registered workers, sorted by name.
func (l *WorkerListener) Workers() []WorkerInfo {
	l.init()
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	load := l.loadLocked()
	out := make([]WorkerInfo, 0, len(l.registry))
	for _, name := range slices.Sorted(maps.Keys(l.registry)) {
		e := l.registry[name]
		if !e.welcomed() {
			continue
		}
		wi := WorkerInfo{Name: name, Labels: maps.Clone(e.reg.Labels), Capacity: e.reg.Capacity,
			CLIVersion: e.reg.CLIVersion, Host: e.reg.Host, PID: e.reg.PID, State: e.state(now),
			Since: e.since, LastSeen: e.since, Addr: e.addr, Grace: e.reg.Grace(), Spares: e.reg.Spares}
		if wi.State == WorkerConnected {
			wi.LastSeen = now
		}
		for _, rc := range load[name] {
			wi.Sessions = append(wi.Sessions, cmp.Or(rc.tag, rc.id))
		}
		slices.Sort(wi.Sessions)
		out = append(out, wi)
	}
	return out
}

// CheckPlacement reports whether a session could be placed on a worker
// matching sel now: nil, a *NoWorkerError or a *WorkersBusyError. An empty
// sel is what Start does: nil when no registered worker is connected (Start
// then waits for a one-session worker).
func (l *WorkerListener) CheckPlacement(sel WorkerSelector) error {
	l.init()
	l.mu.Lock()
	defer l.mu.Unlock()
	if sel.Name == "" && len(sel.Labels) == 0 && !sel.Spares && !l.anyConnectedLocked() {
		return nil
	}
	_, err := l.pickLocked(sel)
	return err
}

// anyConnectedLocked reports whether a registered worker is connected;
// l.mu is held.
func (l *WorkerListener) anyConnectedLocked() bool {
	for _, e := range l.registry {
		if e.ctl != nil {
			return true
		}
	}
	return false
}

// pickLocked chooses the worker for a session: among the connected
// workers matching sel and below their capacity, the least loaded (fewest
// sessions for its capacity, then fewest sessions, then by name). l.mu is
// held.
func (l *WorkerListener) pickLocked(sel WorkerSelector) (*registered, error) {
	now := time.Now()
	load := l.loadLocked()
	var best *registered
	var bestN int
	var full []string
	for _, name := range slices.Sorted(maps.Keys(l.registry)) {
		e := l.registry[name]
		if e.ctl == nil || !sel.matches(&e.reg) {
			continue
		}
		n := len(load[name])
		if n >= e.reg.Capacity {
			full = append(full, fmt.Sprintf("%s (%d/%d)", name, n, e.reg.Capacity))
			continue
		}
		// n/cap < bestN/bestCap, without floats
		if best == nil || n*best.reg.Capacity < bestN*e.reg.Capacity || (n*best.reg.Capacity == bestN*e.reg.Capacity && n < bestN) {
			best, bestN = e, n
		}
	}
	if best != nil {
		return best, nil
	}
	if len(full) > 0 {
		return nil, &WorkersBusyError{Selector: sel, Workers: full}
	}
	var known []string
	for _, name := range slices.Sorted(maps.Keys(l.registry)) {
		e := l.registry[name]
		if !e.welcomed() {
			continue
		}
		desc := name + " (" + e.state(now).String()
		if len(e.reg.Labels) > 0 {
			desc += ", " + formatLabels(e.reg.Labels)
		}
		known = append(known, desc+")")
	}
	return nil, &NoWorkerError{Selector: sel, Known: known}
}

// serveControl runs a registered worker's control connection: it checks
// the registration, enters it in the registry and keeps the connection
// until it ends. Only decline frames are read from it.
func (l *WorkerListener) serveControl(c *websocket.Conn, reg *relay.Registration, remote string) {
	refuse := func(why string) {
		l.logger().Warn("claude: worker registration refused", "remote", remote, "name", relay.Clip(reg.Name), "reason", why)
		ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
		relay.WriteFrame(ctx, c, &relay.Header{Type: relay.TypeReject, Error: why}, nil)
		cancel()
		c.Close(websocket.StatusPolicyViolation, "registration refused")
	}
	if err := reg.Validate(); err != nil {
		refuse(err.Error())
		return
	}
	now := time.Now()
	l.mu.Lock()
	e := l.registry[reg.Name]
	if e != nil && e.ctl != nil && e.reg.Instance != reg.Instance {
		l.mu.Unlock()
		refuse(fmt.Sprintf("worker name %q is taken by a connected worker (host %s, pid %d, from %s, since %s): give this one another --name, or stop that one",
			reg.Name, cmp.Or(e.reg.Host, "?"), e.reg.PID, e.addr, e.since.Format(time.RFC3339)))
		return
	}
	if e != nil && e.joining != nil && e.joiningInstance != reg.Instance {
		l.mu.Unlock()
		refuse(fmt.Sprintf("worker name %q is being registered by another worker: give this one another --name, or stop that one", reg.Name))
		return
	}
	if e == nil {
		if len(l.registry) >= maxRegistered {
			for name, old := range l.registry {
				if old.joining == nil && old.state(now) == WorkerLost && len(l.loadLocked()[name]) == 0 {
					delete(l.registry, name)
				}
			}
		}
		if len(l.registry) >= maxRegistered {
			l.mu.Unlock()
			refuse(fmt.Sprintf("this controller already has %d workers registered", maxRegistered))
			return
		}
		e = &registered{reg: *reg}
		l.registry[reg.Name] = e
	}
	e.joining, e.joiningInstance = c, reg.Instance
	l.mu.Unlock()
	ctx, cancel := context.WithCancelCause(l.ctx)
	defer cancel(nil)
	if l.beforeWelcome != nil {
		l.beforeWelcome(reg.Name)
	}
	// The welcome goes out before the worker is placeable: a placement
	// writes its open frame on ctl, and a worker that read an open frame
	// first would take the link for broken and dial again, the placement
	// left waiting for a link that never comes.
	err := relay.WriteFrame(ctx, c, &relay.Header{Type: relay.TypeWelcome}, nil)
	l.mu.Lock()
	if e.joining != c { // the same worker came back on another connection meanwhile
		l.mu.Unlock()
		c.CloseNow()
		return
	}
	e.joining = nil
	if err != nil {
		if !e.welcomed() && l.registry[reg.Name] == e {
			delete(l.registry, reg.Name) // never registered
		}
		l.mu.Unlock()
		return
	}
	old := e.ctl
	e.reg, e.ctl, e.addr, e.since = *reg, c, remote, now
	l.mu.Unlock()
	if old != nil {
		old.CloseNow() // the same worker, back on a new connection
	}
	l.logger().Info("claude: worker registered", "name", reg.Name, "remote", remote, "labels", formatLabels(reg.Labels),
		"capacity", reg.Capacity, "cli_version", reg.CLIVersion, "replaces", old != nil)
	defer func() {
		l.mu.Lock()
		if e.ctl == c {
			e.ctl, e.since = nil, time.Now()
		}
		l.mu.Unlock()
	}()
	c.SetReadLimit(64 << 10)
	link := &relay.Link{Conn: c, PingInterval: l.pingInterval, PingTimeout: l.pingTimeout,
		Handle: func(f *relay.Frame) error {
			if f.Type == relay.TypeDecline {
				why := f.Error
				if len(why) > 256 {
					why = why[:256] + "…"
				}
				l.decline(reg.Name, f.Session, why)
			}
			return nil
		}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := link.PingLoop(ctx); err != nil {
			cancel(err)
			c.CloseNow()
		}
	}()
	err = link.ReadLoop(ctx)
	cancel(err)
	c.CloseNow()
	<-done
	if l.ctx.Err() == nil {
		l.logger().Warn("claude: worker's control link lost", "name", reg.Name, "remote", remote, "err", context.Cause(ctx), "grace", reg.Grace())
	}
}

// decline hands a worker's refusal to the placement waiting for it.
func (l *WorkerListener) decline(worker, session, why string) {
	l.mu.Lock()
	cl := l.claims[session]
	l.mu.Unlock()
	if cl == nil || cl.worker != worker {
		return
	}
	select {
	case cl.declined <- why:
	default:
	}
}

// claimed delivers the link a worker dialed for session to its placement;
// it reports false when no placement waits for it from that worker, or the
// link lacks the open frame's secret (another holder of the token, not the
// worker that read the open frame). The send happens under l.mu, so that
// unclaim never misses a link.
func (l *WorkerListener) claimed(session, worker, secret string, wl *workerLink) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	cl := l.claims[session]
	if cl == nil || cl.worker != worker || subtle.ConstantTimeCompare([]byte(secret), []byte(cl.secret)) != 1 {
		return false
	}
	select {
	case cl.link <- wl:
		return true
	default:
		return false
	}
}

// unclaim ends the wait for session's link; a link that came all the same
// is dropped (its worker dials again, is refused, and stops).
func (l *WorkerListener) unclaim(session string, cl *claim) {
	l.mu.Lock()
	delete(l.claims, session)
	l.mu.Unlock()
	select {
	case wl := <-cl.link:
		wl.c.CloseNow()
	default:
	}
}

// WorkerTransport is a [Transport] that runs each session on a registered
// worker of Listener ("claudectl worker --name N --label k=v --capacity C",
// connected and staying connected): the one named Name if set, among those
// having every label of Labels, the least loaded (fewest sessions for its
// capacity), never above its capacity. Start fails with a *NoWorkerError
// when none matches and a *WorkersBusyError when all are full.
//
// With neither Name nor Labels, Start is the listener's own: a registered
// worker if one is connected, else the next one-session worker.
//
// The chosen worker gets an open frame on its control connection and dials
// a link of its own for the session, which then runs as any session of the
// listener (same replay, same *WorkerLostError after the worker's grace
// period). The returned Conn has a WorkerName() string method.
type WorkerTransport struct {
	Listener *WorkerListener
	Name     string
	Labels   map[string]string
	// Tag names the session in WorkerInfo.Sessions; empty means the
	// relay's session id.
	Tag string
	// Hold keeps each line of the CLI's output on the worker until
	// [Session.Release] covers it, instead of until it is read, so that
	// whoever takes the session over after this process dies (Resume)
	// gets again every line whose effects were not stored. The caller
	// must release what it has stored, or the worker's buffer fills and
	// the CLI pauses.
	Hold bool
	// Resume, if set, takes over a session whose CLI already runs on a
	// worker, started by another controller (or by this process before
	// it restarted), instead of starting a CLI: it is only valid inside
	// [WorkerListener].Adopt, for the session the worker came back for.
	// The session is not initialised again; the worker sends again the
	// frames after Resume.Received, and the lines to the CLI go on after
	// those the worker has.
	Resume *WorkerResume
	// Spare starts a CLI ahead of need, on a registered worker whose
	// registration allows it (relay's Registration.Spares) and that
	// matches Name and Labels; never on a one-session worker.
	Spare bool
}

// WorkerResume names a relay session to take over and how many of the
// worker's frames the caller has (stored) already.
type WorkerResume struct {
	Session string
	// SecretHash is the session's RelaySecretHash, stored by the
	// controller that started it: the take-over is refused unless the
	// worker that came back presented that secret (WorkerReturn.Proves).
	SecretHash string
	Received   uint64
	// Unsent are lines the previous controller wrote to the CLI that the
	// worker did not receive (WorkerReturn.WorkerHas says how many it
	// did): they are written first, in order.
	Unsent [][]byte
}

// Start implements [Transport].
func (t *WorkerTransport) Start(ctx context.Context, c *Command) (Conn, error) {
	if t.Resume != nil {
		return t.Listener.adopt(ctx, c, t)
	}
	if t.Name == "" && len(t.Labels) == 0 && !t.Spare {
		return t.Listener.start(ctx, c, t)
	}
	return t.Listener.startPlaced(ctx, c, WorkerSelector{Name: t.Name, Labels: t.Labels, Spares: t.Spare}, t)
}

// startPlaced places a session on a registered worker matching sel and
// waits for its link.
func (l *WorkerListener) startPlaced(ctx context.Context, c *Command, sel WorkerSelector, t *WorkerTransport) (Conn, error) {
	l.init()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rc := l.newConn(ctx, c, t)
	cl := &claim{secret: randomHex(32), link: make(chan *workerLink, 1), declined: make(chan string, 1)}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrListenerClosed
	}
	e, err := l.pickLocked(sel)
	if err != nil {
		l.mu.Unlock()
		return nil, err
	}
	ctl := e.ctl
	rc.worker, rc.placed, rc.grace = e.reg.Name, true, e.reg.Grace()
	cl.worker = e.reg.Name
	l.sessions[rc.id] = rc // counts in the worker's load from now on
	l.claims[rc.id] = cl
	l.mu.Unlock()
	fail := func(err error) (Conn, error) {
		l.unclaim(rc.id, cl)
		l.forget(rc)
		return nil, &StartError{Path: "worker " + rc.worker, Err: err}
	}
	wctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	if err := relay.WriteFrame(wctx, ctl, &relay.Header{Type: relay.TypeOpen, Session: rc.id, Secret: cl.secret}, nil); err != nil {
		return fail(fmt.Errorf("asking the worker to open the session: %w", err))
	}
	var wl *workerLink
	select {
	case wl = <-cl.link:
	case why := <-cl.declined:
		l.unclaim(rc.id, cl)
		l.forget(rc)
		return nil, &WorkersBusyError{Selector: sel, Workers: []string{rc.worker + ": " + why}}
	case <-wctx.Done():
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		return fail(fmt.Errorf("the worker did not open the session's link within %v", openTimeout))
	case <-l.ctx.Done():
		return fail(ErrListenerClosed)
	}
	l.unclaim(rc.id, cl)
	if err := l.handOver(wl, rc); err != nil {
		return fail(fmt.Errorf("the worker's link dropped before the session started: %w", err))
	}
	rc.bg.Add(1)
	go rc.watch()
	return rc, nil
}
