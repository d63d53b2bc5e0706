package daemon

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/claudectl/claudectl/store"
)

// Spend caps that pause (the budgets.* settings). The spend comes from the
// usage ledger: a session's own total, a directory's and the daemon's
// since the day began (the daemon's local midnight), counted in memory
// from the ledger as the daemon starts and from each turn's record after.
//
// The cap is checked before a turn starts, never during one: the turn in
// flight finishes. A session at a cap is held: its status is budget, with
// a detail saying which cap; prompts sent to it meanwhile are kept in the
// store (QueuePrompt), in order, and run once an approver raises the cap
// or allows it one more turn (RaiseBudget). While caps are set, a session
// runs one turn at a time: a prompt sent during a turn waits in the same
// queue and starts once the turn ends and the caps allow it, so that no
// turn starts past a cap (the CLI would otherwise run it after the one in
// flight). Who is held is the store's (status budget): a restarted daemon
// knows it; what is kept in memory only is since when.

// Budgets are the spend caps, in USD; zero fields are no cap.
type Budgets struct {
	SessionUSD         float64 // a session's whole spend
	DirectoryUSDPerDay float64 // a directory's (Session.Cwd) since the day began
	DaemonUSDPerDay    float64 // every session's since the day began
}

// on reports whether any cap is set.
func (b Budgets) on() bool { return b != Budgets{} }

// A BudgetHold is a session a cap holds.
type BudgetHold struct {
	SessionID string
	Cap       BudgetCap
	Detail    string
	Queued    int64 // prompts kept for it
	Since     time.Time
}

// A BudgetCap is spend against one cap.
type BudgetCap struct {
	Cap      string  // store.CapSession, CapDirectory or CapDaemon
	Scope    string  // the session's id, the directory, "" for the daemon
	SpentUSD float64 // a daily cap's since the day began
	LimitUSD float64 // 0: no cap
	Raised   bool    // by an approver (for today, for a daily cap)
}

// reached reports whether spend has reached the cap.
func (c BudgetCap) reached() bool { return c.LimitUSD > 0 && c.SpentUSD >= c.LimitUSD }

// detail is the budget status's: "waiting for budget: $5.00 of $5.00
// today for /srv/app".
func (c BudgetCap) detail() string {
	var of string
	switch c.Cap {
	case store.CapSession:
		of = "for this session"
	case store.CapDirectory:
		of = "today for " + c.Scope
	default:
		of = "today for the daemon"
	}
	return fmt.Sprintf("waiting for budget: %s of %s %s", usd(c.SpentUSD), usd(c.LimitUSD), of)
}

// usd writes dollars as the caps are read: "$5.00", "$0.0123".
func usd(v float64) string {
	if v != 0 && math.Abs(v) < 0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// budgetHintText ends a held session's detail: what an approver does.
const budgetHintText = "; the prompt waits until an approver raises the cap or allows one more turn (claudectl budget)"

// budgeter keeps the spend against the caps and who is held.
type budgeter struct {
	caps Budgets
	now  func() time.Time // time.Now; tests move the day

	mu          sync.Mutex
	day         string // the local day the counts are of ("2006-01-02")
	spentDaemon float64
	spentDir    map[string]float64
	raised      map[string]float64 // capKey → limit an approver set (today's for daily caps)
	oneTurn     map[string]bool    // sessions allowed one more turn over their cap
	turning     map[string]bool    // sessions whose turn started and has not ended
	since       map[string]time.Time
	closed      bool

	wg    sync.WaitGroup // drains under way
	timer *time.Timer    // releases the daily caps' holds at midnight
}

func capKey(cap, scope string) string { return cap + "\x00" + scope }

// dayOf is the local day of t and when it began.
func dayOf(t time.Time) (string, time.Time) {
	y, m, d := t.Date()
	start := time.Date(y, m, d, 0, 0, 0, 0, t.Location())
	return start.Format(time.DateOnly), start
}

// loadBudgets reads the day's spend and raises from the store.
func (d *Daemon) loadBudgets(ctx context.Context) error {
	b := &d.budget
	day, start := dayOf(b.now())
	sp, err := d.db.SpendSince(ctx, start)
	if err != nil {
		return fmt.Errorf("daemon: reading today's spend for the budgets: %w", err)
	}
	rs, err := d.db.BudgetRaises(ctx, day)
	if err != nil {
		return fmt.Errorf("daemon: reading the raised budgets: %w", err)
	}
	raised := map[string]float64{}
	for _, r := range rs {
		raised[capKey(r.Cap, r.Scope)] = r.LimitUSD
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.day, b.spentDaemon, b.spentDir, b.raised = day, sp.TotalUSD, sp.ByDir, raised
	return nil
}

// newDay starts the counts of a new day when the day changed, releasing
// the sessions the daily caps held. It reports whether it did.
func (d *Daemon) newDay(ctx context.Context) bool {
	b := &d.budget
	day, _ := dayOf(b.now())
	b.mu.Lock()
	same := day == b.day
	b.mu.Unlock()
	if same {
		return false
	}
	if err := d.loadBudgets(ctx); err != nil {
		d.log.Error("starting the budgets of a new day", "err", err)
		return false
	}
	d.log.Info("a new day for the budgets", "day", day)
	d.releaseHeld(ctx, "a new day began")
	return true
}

// armMidnight has the holds of the daily caps released when the next day
// begins, even if nothing else happens.
func (d *Daemon) armMidnight() {
	b := &d.budget
	_, start := dayOf(b.now())
	next := start.AddDate(0, 0, 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.timer = time.AfterFunc(time.Until(next)+time.Second, func() {
		d.newDay(context.WithoutCancel(d.ctx))
		d.armMidnight()
	})
}

// capsOf returns the caps of session s, each with its spend; the caller
// holds b.mu.
func (b *budgeter) capsOfLocked(s *store.Session) []BudgetCap {
	limit := func(cap, scope string, setting float64) (float64, bool) {
		if v, ok := b.raised[capKey(cap, scope)]; ok {
			return v, true
		}
		return setting, false
	}
	var cs []BudgetCap
	if l, r := limit(store.CapSession, s.ID, b.caps.SessionUSD); l > 0 {
		cs = append(cs, BudgetCap{Cap: store.CapSession, Scope: s.ID, SpentUSD: s.Totals.CostUSD, LimitUSD: l, Raised: r})
	}
	if l, r := limit(store.CapDirectory, s.Cwd, b.caps.DirectoryUSDPerDay); l > 0 {
		cs = append(cs, BudgetCap{Cap: store.CapDirectory, Scope: s.Cwd, SpentUSD: b.spentDir[s.Cwd], LimitUSD: l, Raised: r})
	}
	if l, r := limit(store.CapDaemon, "", b.caps.DaemonUSDPerDay); l > 0 {
		cs = append(cs, BudgetCap{Cap: store.CapDaemon, SpentUSD: b.spentDaemon, LimitUSD: l, Raised: r})
	}
	return cs
}

// overLocked returns the first cap s has reached (session, directory,
// daemon), if any; the caller holds b.mu.
func (b *budgeter) overLocked(s *store.Session) (BudgetCap, bool) {
	for _, c := range b.capsOfLocked(s) {
		if c.reached() {
			return c, true
		}
	}
	return BudgetCap{}, false
}

// gateLocked says whether a turn of s may start now, using up a one-turn
// allowance when a cap is reached; the cap that holds it otherwise.
func (b *budgeter) gateLocked(s *store.Session) (BudgetCap, bool) {
	c, over := b.overLocked(s)
	if over && b.oneTurn[s.ID] {
		delete(b.oneTurn, s.ID)
		return BudgetCap{}, true
	}
	return c, !over
}

// admit decides a prompt to session s while caps are set: it may start a
// turn now (true: the session is marked as in a turn), or it is kept in
// the session's queue (false): a turn runs, prompts wait ahead of it, or
// a cap holds the session, which is then held.
func (d *Daemon) admit(ctx context.Context, s *store.Session, text string) (bool, error) {
	d.newDay(ctx)
	b := &d.budget
	b.mu.Lock()
	busy := b.turning[s.ID] || s.QueuedPrompts > 0 || s.Status == store.StatusBudget
	var held BudgetCap
	pass := false
	if !busy {
		held, pass = b.gateLocked(s)
		if pass {
			b.turning[s.ID] = true
		}
	}
	b.mu.Unlock()
	if pass {
		return true, nil
	}
	if _, err := d.db.QueuePrompt(ctx, s.ID, text); err != nil {
		return false, fmt.Errorf("daemon: keeping the prompt for session %s: %w", s.ID, err)
	}
	d.feed.changed(s.ID)
	if held.Cap != "" {
		d.hold(ctx, s.ID, held)
	}
	d.log.Info("prompt kept", "session", s.ID, "held", held.Cap != "" || s.Status == store.StatusBudget, "queued_before", s.QueuedPrompts)
	return false, nil
}

// sent is told whether an admitted prompt reached the CLI: a turn started,
// or not (its session is no longer in a turn).
func (d *Daemon) sent(id string, err error) {
	if err == nil {
		return
	}
	b := &d.budget
	b.mu.Lock()
	delete(b.turning, id)
	b.mu.Unlock()
}

// hold holds session id at cap c: its status is budget, saying so.
func (d *Daemon) hold(ctx context.Context, id string, c BudgetCap) {
	b := &d.budget
	b.mu.Lock()
	if _, ok := b.since[id]; !ok {
		b.since[id] = time.Now()
	}
	b.mu.Unlock()
	d.log.Info("session held at a spend cap", "session", id, "cap", c.Cap, "scope", c.Scope,
		"spent_usd", c.SpentUSD, "limit_usd", c.LimitUSD)
	d.setStatus(ctx, id, store.StatusBudget, c.detail()+budgetHintText)
}

// setStatus stores a status change of session id and tells its watchers:
// through its actor when its CLI runs (after anything it logged), else
// directly.
func (d *Daemon) setStatus(ctx context.Context, id string, st store.SessionStatus, detail string) {
	d.mu.Lock()
	a := d.actors[id]
	d.mu.Unlock()
	if a != nil && a.live.Load() && a.do(func(*actorState) { a.status(ctx, st, detail) }) {
		return
	}
	ev, err := newEvent(id, &StatusChange{Status: st, Detail: detail})
	if err == nil {
		err = appendUpdate(ctx, d.db, &ev.Event, store.SessionUpdate{Status: &st})
	}
	if err != nil {
		d.log.Error("updating status", "session", id, "status", st, "err", err)
		return
	}
	d.mu.Lock()
	h := d.hubs[id]
	d.mu.Unlock()
	if h != nil {
		h.publish(ev)
	}
	d.feed.changed(id)
}

// turnDone counts a turn's spend (the cost of its ledger record) and, once
// the turn is over, holds the session if it reached a cap, or starts its
// next kept prompt. It runs on the actor's reader: the rest is done
// apart, since sending a prompt waits for the CLI to read it.
func (a *actor) turnDone(cost float64, main bool) {
	d := a.d
	b := &d.budget
	b.mu.Lock()
	b.spentDaemon += cost
	b.spentDir[a.opts.GetCwd()] += cost
	if !main { // a sub-agent's result: the turn goes on
		b.mu.Unlock()
		return
	}
	delete(b.turning, a.id)
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		d.next(context.WithoutCancel(d.ctx), a.id)
	}()
}

// next holds session id if it has reached a cap, or else starts the first
// of its kept prompts; nothing when a turn runs or none is kept.
func (d *Daemon) next(ctx context.Context, id string) {
	d.newDay(ctx)
	s, err := d.stored(ctx, id)
	if err != nil {
		d.log.Error("reading a session after its turn", "session", id, "err", err)
		return
	}
	if terminal(s.Status) {
		return
	}
	b := &d.budget
	b.mu.Lock()
	if b.turning[id] {
		b.mu.Unlock()
		return
	}
	var c BudgetCap
	pass := false
	if s.QueuedPrompts > 0 {
		if c, pass = b.gateLocked(s); pass {
			b.turning[id] = true
		}
	} else if over, reached := b.overLocked(s); reached && !b.oneTurn[id] {
		c = over
	}
	b.mu.Unlock()
	switch {
	case c.Cap != "" && s.Status != store.StatusBudget:
		d.hold(ctx, id, c)
	case pass:
		d.runKept(ctx, s)
	}
}

// runKept sends the first prompt session s keeps, admitted already (in a
// turn); the prompt is forgotten once sent.
func (d *Daemon) runKept(ctx context.Context, s *store.Session) {
	qs, err := d.db.QueuedPrompts(ctx, s.ID)
	if err != nil || len(qs) == 0 {
		d.sent(s.ID, errors.Join(err, errors.New("no prompt kept")))
		if err != nil {
			d.log.Error("reading the prompts kept for a session", "session", s.ID, "err", err)
		}
		return
	}
	q := qs[0]
	err = d.sendNow(ctx, s.ID, q.Text)
	d.sent(s.ID, err)
	if err != nil {
		d.log.Error("sending a kept prompt", "session", s.ID, "seq", q.Seq, "err", err)
		return
	}
	if err := d.db.DropQueuedPrompt(ctx, s.ID, q.Seq); err != nil {
		d.log.Error("forgetting a kept prompt once sent", "session", s.ID, "seq", q.Seq, "err", err)
	}
	d.feed.changed(s.ID)
	d.log.Info("kept prompt sent", "session", s.ID, "seq", q.Seq, "left", len(qs)-1)
}

// release ends session s's hold (by names why) and starts its next kept
// prompt, if the caps now let it.
func (d *Daemon) releaseHold(ctx context.Context, s *store.Session, by string) {
	b := &d.budget
	b.mu.Lock()
	delete(b.since, s.ID)
	b.mu.Unlock()
	st := store.StatusSuspended
	d.mu.Lock()
	a := d.actors[s.ID]
	d.mu.Unlock()
	if a != nil && a.live.Load() {
		st = store.StatusIdle
	}
	d.setStatus(ctx, s.ID, st, "released: "+by)
	s.Status = st
	d.log.Info("session released from its spend cap", "session", s.ID, "by", by)
	d.next(ctx, s.ID)
}

// releaseHeld releases the held sessions that no cap holds any more (or
// that may run one more turn); by says why.
func (d *Daemon) releaseHeld(ctx context.Context, by string) []string {
	held, err := d.db.Sessions(ctx, store.SessionFilter{Status: store.StatusBudget})
	if err != nil {
		d.log.Error("listing the held sessions", "err", err)
		return nil
	}
	var released []string
	for _, s := range held {
		b := &d.budget
		b.mu.Lock()
		_, over := b.overLocked(s)
		allowed := b.oneTurn[s.ID]
		b.mu.Unlock()
		if over && !allowed {
			continue // still at a cap
		}
		d.releaseHold(ctx, s, by)
		released = append(released, s.ID)
	}
	return released
}

// BudgetCaps returns the spend against every cap: the daemon's, each
// directory's with spend today or a raised cap, each session's that is
// live or held; and the held sessions. Nil without caps.
func (d *Daemon) BudgetCaps(ctx context.Context) ([]BudgetCap, []BudgetHold, time.Time, error) {
	if !d.budget.caps.on() {
		return nil, nil, time.Time{}, nil
	}
	d.newDay(ctx)
	held, err := d.db.Sessions(ctx, store.SessionFilter{Status: store.StatusBudget})
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	d.mu.Lock()
	live := make([]string, 0, len(d.actors))
	for id := range d.actors {
		live = append(live, id)
	}
	d.mu.Unlock()
	var sessions []*store.Session
	seen := map[string]bool{}
	for _, s := range held {
		sessions, seen[s.ID] = append(sessions, s), true
	}
	for _, id := range live {
		if s, err := d.stored(ctx, id); err == nil && !seen[id] {
			sessions, seen[id] = append(sessions, s), true
		}
	}
	b := &d.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	_, dayStart := dayOf(b.now())
	var caps []BudgetCap
	if l, r := b.raisedOr(store.CapDaemon, "", b.caps.DaemonUSDPerDay); l > 0 || b.spentDaemon > 0 {
		caps = append(caps, BudgetCap{Cap: store.CapDaemon, SpentUSD: b.spentDaemon, LimitUSD: l, Raised: r})
	}
	dirs := map[string]bool{}
	for dir := range b.spentDir {
		dirs[dir] = true
	}
	for _, s := range sessions {
		dirs[s.Cwd] = true
	}
	for _, dir := range sortedKeys(dirs) {
		l, r := b.raisedOr(store.CapDirectory, dir, b.caps.DirectoryUSDPerDay)
		caps = append(caps, BudgetCap{Cap: store.CapDirectory, Scope: dir, SpentUSD: b.spentDir[dir], LimitUSD: l, Raised: r})
	}
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].ID < sessions[j].ID })
	for _, s := range sessions {
		l, r := b.raisedOr(store.CapSession, s.ID, b.caps.SessionUSD)
		caps = append(caps, BudgetCap{Cap: store.CapSession, Scope: s.ID, SpentUSD: s.Totals.CostUSD, LimitUSD: l, Raised: r})
	}
	var holds []BudgetHold
	for _, s := range held {
		c, over := b.overLocked(s)
		h := BudgetHold{SessionID: s.ID, Cap: c, Queued: s.QueuedPrompts, Since: b.since[s.ID]}
		if h.Since.IsZero() {
			h.Since = s.UpdatedAt
		}
		if over {
			h.Detail = c.detail()
		} else {
			h.Detail = "held, though no cap holds it now: its next prompt runs"
		}
		holds = append(holds, h)
	}
	return caps, holds, dayStart, nil
}

func (b *budgeter) raisedOr(cap, scope string, setting float64) (float64, bool) {
	if v, ok := b.raised[capKey(cap, scope)]; ok {
		return v, true
	}
	return setting, false
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// BudgetHint says why a prompt just sent to session id waits, "" when it
// does not: the session is held at a cap.
func (d *Daemon) BudgetHint(ctx context.Context, id string) string {
	if !d.budget.caps.on() {
		return ""
	}
	s, err := d.db.Session(ctx, id)
	if err != nil || s.Status != store.StatusBudget {
		return ""
	}
	b := &d.budget
	b.mu.Lock()
	c, over := b.overLocked(s)
	b.mu.Unlock()
	if !over {
		return ""
	}
	return c.detail() + budgetHintText
}

// RaiseBudget releases session id, held at a cap: with oneTurn it may run
// one more turn over it; else the cap that holds it is raised to limitUSD
// (a daily cap for today, for every session under it), which must be
// above what was spent. by names the approver. It returns the cap after
// the raise and the sessions released.
func (d *Daemon) RaiseBudget(ctx context.Context, id string, limitUSD float64, oneTurn bool, by string) (BudgetCap, []string, error) {
	if !d.budget.caps.on() {
		return BudgetCap{}, nil, &InvalidArgumentError{Field: "session_id", Value: id,
			Reason: "this daemon has no spend caps (budgets.* in its settings.json)"}
	}
	if !oneTurn && (limitUSD <= 0 || math.IsNaN(limitUSD) || math.IsInf(limitUSD, 0)) {
		return BudgetCap{}, nil, &InvalidArgumentError{Field: "limit_usd", Value: fmt.Sprint(limitUSD),
			Reason: "must be a number of dollars above what was spent (or one_turn)"}
	}
	d.newDay(ctx)
	s, err := d.stored(ctx, id)
	if err != nil {
		return BudgetCap{}, nil, err
	}
	if s.Status != store.StatusBudget {
		return BudgetCap{}, nil, &StateError{SessionID: id, Status: s.Status, Msg: "it is not waiting for budget"}
	}
	by = clientName(by)
	b := &d.budget
	b.mu.Lock()
	c, over := b.overLocked(s)
	b.mu.Unlock()
	if oneTurn {
		b.mu.Lock()
		b.oneTurn[id] = true
		b.mu.Unlock()
		d.log.Info("one more turn allowed over a spend cap", "session", id, "cap", c.Cap, "by", by)
		d.releaseHold(ctx, s, by+" allowed one more turn")
		return c, []string{id}, nil
	}
	if !over { // the day changed, or another raise released it meanwhile
		d.releaseHold(ctx, s, by)
		return c, []string{id}, nil
	}
	if limitUSD <= c.SpentUSD {
		return BudgetCap{}, nil, &InvalidArgumentError{Field: "limit_usd", Value: fmt.Sprint(limitUSD),
			Reason: fmt.Sprintf("must be above the %s already spent against the %s cap", usd(c.SpentUSD), c.Cap)}
	}
	r := &store.BudgetRaise{Cap: c.Cap, Scope: c.Scope, LimitUSD: limitUSD, By: by}
	if c.Cap != store.CapSession {
		r.Day, _ = dayOf(b.now())
	}
	if err := d.db.RaiseBudget(ctx, r); err != nil {
		return BudgetCap{}, nil, err
	}
	b.mu.Lock()
	b.raised[capKey(c.Cap, c.Scope)] = limitUSD
	b.mu.Unlock()
	c.LimitUSD, c.Raised = limitUSD, true
	d.log.Info("spend cap raised", "cap", c.Cap, "scope", c.Scope, "limit_usd", limitUSD, "by", by)
	released := d.releaseHeld(ctx, fmt.Sprintf("%s raised the %s cap to %s", by, c.Cap, usd(limitUSD)))
	return c, released, nil
}

// closeBudgets stops the midnight timer and waits for the kept prompts
// being started.
func (d *Daemon) closeBudgets() {
	b := &d.budget
	b.mu.Lock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// heldDetail returns the detail of session id's budget status when it is
// held, "" when not: a CLI that ends then leaves it held. Its turn is over
// whatever it was.
func (d *Daemon) heldDetail(ctx context.Context, id string) string {
	b := &d.budget
	if !b.caps.on() {
		return ""
	}
	b.mu.Lock()
	delete(b.turning, id)
	b.mu.Unlock()
	s, err := d.db.Session(ctx, id)
	if err != nil || s.Status != store.StatusBudget {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, over := b.overLocked(s); over {
		return c.detail() + budgetHintText
	}
	return ""
}

// dropKept forgets the prompts session id keeps: it was closed, and a
// closed session runs no more turns.
func (d *Daemon) dropKept(ctx context.Context, id string) {
	if !d.budget.caps.on() {
		return
	}
	d.dropKeptAlways(ctx, id)
}

// dropKeptAlways is dropKept, caps or not.
func (d *Daemon) dropKeptAlways(ctx context.Context, id string) {
	qs, err := d.db.QueuedPrompts(ctx, id)
	for _, q := range qs {
		err = errors.Join(err, d.db.DropQueuedPrompt(ctx, id, q.Seq))
	}
	if err != nil {
		d.log.Error("forgetting the prompts a closed session kept", "session", id, "err", err)
	}
	if len(qs) > 0 {
		d.log.Info("prompts kept for a closed session dropped", "session", id, "prompts", len(qs))
	}
}

// releaseStale releases, as the daemon starts, the sessions held before it
// that no cap holds now. Without caps they are released all the same, and
// what they kept is dropped: nothing runs it one turn at a time any more.
func (d *Daemon) releaseStale(ctx context.Context) {
	if d.budget.caps.on() {
		if ids := d.releaseHeld(ctx, "no spend cap holds it since the daemon started"); len(ids) > 0 {
			d.log.Info("held sessions released as the daemon started", "sessions", len(ids))
		}
		return
	}
	held, err := d.db.Sessions(ctx, store.SessionFilter{Status: store.StatusBudget})
	if err != nil {
		d.log.Error("listing the sessions held by a former daemon", "err", err)
		return
	}
	for _, s := range held {
		if s.QueuedPrompts > 0 {
			d.log.Warn("a held session's kept prompts dropped: the daemon has no spend caps any more", "session", s.ID, "prompts", s.QueuedPrompts)
		}
		d.dropKeptAlways(ctx, s.ID)
		d.setStatus(ctx, s.ID, store.StatusSuspended, "released: the daemon has no spend caps any more; its next prompt resumes it")
	}
}
