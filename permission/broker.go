package permission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/claudectl/claudectl/claude"
)

// Errors of the Broker.
var (
	// ErrNotPending means no request with that id is pending, nor was one
	// resolved recently.
	ErrNotPending = errors.New("permission: no such pending request")
	// ErrAlreadyResolved is wrapped by the *ResolvedError of a decision
	// that came after another one won.
	ErrAlreadyResolved = errors.New("permission: request already resolved")
	// ErrInvalidDecision means a decision was refused and the request
	// stays pending (an AskUserQuestion allowed without answers, an
	// input that is not an object, no decider named).
	ErrInvalidDecision = errors.New("permission: invalid decision")
	// ErrDuplicate means a request with that id is already pending.
	ErrDuplicate = errors.New("permission: request already pending")
	// ErrBrokerClosed is returned after Close.
	ErrBrokerClosed = errors.New("permission: broker closed")
	// ErrDropped is what Subscription.Err returns once the subscriber fell
	// too far behind and was dropped.
	ErrDropped = errors.New("permission: subscriber too slow, dropped")
)

// ResolvedError is the error of a decision on a request that another
// decision, an expiry or a withdrawal already settled. It names who won.
type ResolvedError struct {
	RequestID string
	By        string
	At        time.Time
	Outcome   Outcome
	// Route and ApprovedBy are the Resolution's.
	Route      string
	ApprovedBy []string
}

func (e *ResolvedError) Error() string {
	return fmt.Sprintf("permission: request %s was already %s by %s at %s", e.RequestID, e.Outcome, e.By, e.At.Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrAlreadyResolved) true.
func (e *ResolvedError) Is(target error) bool { return target == ErrAlreadyResolved }

// Outcome is how a pending request ended.
type Outcome int

// The outcomes.
const (
	Decided   Outcome = iota + 1 // someone decided (Resolve)
	Expired                      // nobody decided in time: denied
	Withdrawn                    // the CLI took the request back, or its session ended
)

func (o Outcome) String() string {
	switch o {
	case Decided:
		return "decided"
	case Expired:
		return "expired"
	case Withdrawn:
		return "withdrawn"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// A Pending is a request waiting for a person.
type Pending struct {
	SessionID string
	// Request is the request as submitted; Request.RequestID is the key.
	// It is shared with every subscriber: nobody may modify it.
	Request *claude.PermissionRequest
	Created time.Time
	// Routing is the route the request follows (who is asked, how many
	// must allow), nil when none applies.
	Routing *Routing
	// Approvals are the allows so far of a request that needs more than
	// one person's; Escalated is set once its route asked EscalateTo too.
	// Each change publishes the request again (a Notice without a
	// Resolution), in a new Pending.
	Approvals []Approval
	Escalated bool
	// ExpiresAt is when a routed request with ExpireAfter expires; zero
	// for the others, whose expiry moves with who watches.
	ExpiresAt time.Time
}

// A Resolution ends a pending request.
type Resolution struct {
	Outcome Outcome
	// Result is the answer to send to the CLI: the decision, or for
	// Expired a denial whose message says the request expired and after
	// how long. Zero for Withdrawn: the CLI expects no answer.
	Result claude.PermissionResult
	// By names who decided ("client:alice"); "timeout" for Expired; for
	// Withdrawn "cli", "context" or "broker".
	By string
	At time.Time
	// ApprovedBy names, for a request that needed more than one allow,
	// everyone who allowed it, By last.
	ApprovedBy []string
	// Route names the route the request followed, "" for none.
	Route string
}

// A Notice tells a subscriber that a request is pending (Resolution nil)
// or was resolved.
type Notice struct {
	Pending    Pending
	Resolution *Resolution
}

// BrokerOptions configures NewBroker. A nil *BrokerOptions is the same as
// a zero one.
type BrokerOptions struct {
	// WatchedTimeout is how long a request waits while a subscriber is
	// watching its session. Zero means 5 minutes.
	WatchedTimeout time.Duration
	// UnwatchedTimeout is how long a request waits while nobody watches
	// its session. Zero means 24 hours.
	UnwatchedTimeout time.Duration
	// SubscriberBuffer is how many notices a subscriber may fall behind
	// before it is dropped. Zero means 64.
	SubscriberBuffer int
	// Remember is how many resolved requests are remembered, so that a
	// late decision learns who won rather than ErrNotPending. Zero means
	// 4096.
	Remember int
}

// A Broker holds the requests no rule settled until a person decides
// them, they expire, or the CLI withdraws them. It fans them out to
// subscribers (the clients watching a session) and takes the first valid
// decision.
//
// Expiry has two tiers. A request expires once it has waited
// WatchedTimeout while someone subscribed to its session, or
// UnwatchedTimeout while nobody did; each time its session changes between
// watched and unwatched, the clock of the new tier starts from zero. An
// expired request is denied with a message that says so.
//
// A Broker is safe for concurrent use. It starts no goroutine of its own;
// timers and context callbacks run briefly on the runtime's.
type Broker struct {
	watched, unwatched time.Duration
	subBuffer          int
	remember           int

	mu       sync.Mutex
	closed   bool
	pending  map[string]*entry    // by request id
	resolved map[string]tombstone // recently resolved requests
	order    []tombstone          // the same, oldest first
	nextTomb uint64
	subs     map[*Subscription]struct{}
	watchers map[string]int // session → subscriptions to it; "" → to all
}

// A tombstone remembers who resolved a request. n tells apart two
// resolutions of the same id (a request the CLI sent again).
type tombstone struct {
	err *ResolvedError
	n   uint64
}

// entry is a pending request with its bookkeeping; guarded by Broker.mu.
type entry struct {
	p        Pending
	ch       chan Resolution // buffered 1
	timer    *time.Timer
	gen      int  // bumps on every timer reset, to ignore stale firings
	watched  bool // the tier the timer runs for
	stopCtx  func() bool
	escalate *time.Timer // the route's escalation, nil for none
}

// NewBroker returns an empty broker.
func NewBroker(opts *BrokerOptions) *Broker {
	var o BrokerOptions
	if opts != nil {
		o = *opts
	}
	b := &Broker{
		watched:   cmpOr(o.WatchedTimeout, 5*time.Minute),
		unwatched: cmpOr(o.UnwatchedTimeout, 24*time.Hour),
		subBuffer: cmpOr(o.SubscriberBuffer, 64),
		remember:  cmpOr(o.Remember, 4096),
		pending:   make(map[string]*entry),
		resolved:  make(map[string]tombstone),
		subs:      make(map[*Subscription]struct{}),
		watchers:  make(map[string]int),
	}
	return b
}

// MaxWait is the longest a request waits in one tier before it expires:
// the larger of WatchedTimeout and UnwatchedTimeout. (A request whose
// session changes tiers can wait longer.)
func (b *Broker) MaxWait() time.Duration { return max(b.watched, b.unwatched) }

func cmpOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Submit makes req (whose RequestID is the key) pending for sessionID,
// tells the subscribers, and returns the channel on which its one
// Resolution will arrive; the channel is then closed.
//
// ctx is the life of the request, not of the call: when it ends (the CLI
// sent control_cancel_request, or the session is over) the request is
// withdrawn. Errors: ErrDuplicate if the id is pending already,
// ErrInvalidDecision for an empty id, ErrBrokerClosed.
func (b *Broker) Submit(ctx context.Context, sessionID string, req *claude.PermissionRequest) (<-chan Resolution, error) {
	return b.SubmitRouted(ctx, sessionID, req, nil)
}

// SubmitRouted is Submit for a request that follows routing r (nil for
// none): it needs r.Approvals allows from different people, r.EscalateTo
// are asked too after r.EscalateAfter (the request is published again,
// Escalated), and it expires after r.ExpireAfter, whoever watches, with
// r's message.
func (b *Broker) SubmitRouted(ctx context.Context, sessionID string, req *claude.PermissionRequest, r *Routing) (<-chan Resolution, error) {
	if req.RequestID == "" {
		return nil, fmt.Errorf("%w: request without id", ErrInvalidDecision)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrBrokerClosed
	}
	id := req.RequestID
	if _, ok := b.pending[id]; ok {
		return nil, fmt.Errorf("%w: %s", ErrDuplicate, id)
	}
	delete(b.resolved, id) // an id may come back (a replayed request); the old tombstone no longer applies
	e := &entry{p: Pending{SessionID: sessionID, Request: req, Created: time.Now(), Routing: r}, ch: make(chan Resolution, 1)}
	b.pending[id] = e
	b.arm(e, b.isWatched(sessionID))
	if r != nil && r.EscalateAfter > 0 {
		e.escalate = time.AfterFunc(r.EscalateAfter, func() { b.escalate(e) })
	}
	e.stopCtx = context.AfterFunc(ctx, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.pending[id] == e { // not settled meanwhile, nor replaced by a new request with the same id
			b.finish(e, Resolution{Outcome: Withdrawn, By: "context", At: time.Now()})
		}
	})
	b.publish(Notice{Pending: e.p})
	return e.ch, nil
}

// Resolve decides the pending request id with res, naming the decider in
// by ("client:alice"). The first valid decision wins; the request's
// channel receives it and subscribers are told.
//
// Errors: a *ResolvedError (errors.Is ErrAlreadyResolved) naming the
// winner if the request was settled already; ErrNotPending for an unknown
// id; ErrInvalidDecision, leaving the request pending, when by is empty,
// res.UpdatedInput is not a JSON object, or an AskUserQuestion is allowed
// without answers in UpdatedInput (build those with [Answer]).
//
// An allow of a request whose routing needs more than one person's is
// counted: until the last one needed, the request stays pending, is
// published again with its Approvals, and Resolve returns an
// *ApprovalsNeededError; the same person allowing twice is refused
// (ErrInvalidDecision). A denial settles it at once.
func (b *Broker) Resolve(id string, res claude.PermissionResult, by string) error {
	if by == "" {
		return fmt.Errorf("%w: no decider named", ErrInvalidDecision)
	}
	return b.end(id, Decided, res, by)
}

// An ApprovalsNeededError is what an allow of a request that needs more
// allows returns: the request stays pending.
type ApprovalsNeededError struct {
	RequestID string
	Approvals []Approval
	Need      int
}

// ErrApprovalsNeeded is what an *ApprovalsNeededError is (errors.Is).
var ErrApprovalsNeeded = errors.New("permission: more allows needed")

// Is makes errors.Is(err, ErrApprovalsNeeded) hold.
func (e *ApprovalsNeededError) Is(target error) bool { return target == ErrApprovalsNeeded }

func (e *ApprovalsNeededError) Error() string {
	return fmt.Sprintf("permission: request %s has %d of the %d allows it needs", e.RequestID, len(e.Approvals), e.Need)
}

// escalate asks a routed request's EscalateTo too, if it still waits.
func (b *Broker) escalate(e *entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending[e.p.Request.RequestID] != e || e.p.Escalated {
		return
	}
	e.p.Approvals = slices.Clone(e.p.Approvals) // a new Pending: subscribers hold the old one
	e.p.Escalated = true
	b.publish(Notice{Pending: e.p})
}

// SettledAt returns when request id was settled, while the broker
// remembers it (the time of the Resolution its waiter got); else now.
func (b *Broker) SettledAt(id string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t, ok := b.resolved[id]; ok {
		return t.err.At
	}
	return time.Now()
}

// Settled returns how request id was settled, while the broker remembers
// it: who, when, the route and who allowed under it.
func (b *Broker) Settled(id string) (ResolvedError, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t, ok := b.resolved[id]; ok {
		return *t.err, true
	}
	return ResolvedError{}, false
}

// Withdraw removes the pending request id without an answer, as the CLI's
// control_cancel_request asks; waiters get a Withdrawn resolution.
// Errors as for Resolve.
func (b *Broker) Withdraw(id string) error {
	return b.end(id, Withdrawn, claude.PermissionResult{}, "cli")
}

// end settles request id, if it is still pending.
func (b *Broker) end(id string, o Outcome, res claude.PermissionResult, by string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.pending[id]
	if !ok {
		if t, ok := b.resolved[id]; ok {
			return t.err
		}
		if b.closed {
			return ErrBrokerClosed
		}
		return fmt.Errorf("%w: %s", ErrNotPending, id)
	}
	r := Resolution{Outcome: o, Result: res, By: by, At: time.Now()}
	if o == Decided {
		if err := validDecision(e.p.Request, res); err != nil {
			return err
		}
		if need := e.need(); res.Allow && need > 1 {
			if slices.ContainsFunc(e.p.Approvals, func(a Approval) bool { return a.By == by }) {
				return fmt.Errorf("%w: %s allowed it already; %d different people must allow it", ErrInvalidDecision, by, need)
			}
			approvals := append(slices.Clone(e.p.Approvals), Approval{By: by, At: r.At})
			if len(approvals) < need {
				e.p.Approvals = approvals // a new slice: subscribers hold the old Pending
				b.publish(Notice{Pending: e.p})
				return &ApprovalsNeededError{RequestID: id, Approvals: slices.Clone(approvals), Need: need}
			}
			for _, a := range approvals {
				r.ApprovedBy = append(r.ApprovedBy, a.By)
			}
		}
	}
	b.finish(e, r)
	return nil
}

// need is how many allows e needs.
func (e *entry) need() int {
	if e.p.Routing == nil {
		return 1
	}
	return max(e.p.Routing.Approvals, 1)
}

// finish resolves e; b.mu is held.
func (b *Broker) finish(e *entry, r Resolution) {
	id := e.p.Request.RequestID
	if e.p.Routing != nil {
		r.Route = e.p.Routing.Route
	}
	delete(b.pending, id)
	e.timer.Stop()
	if e.escalate != nil {
		e.escalate.Stop()
	}
	e.stopCtx()
	e.ch <- r
	close(e.ch)
	b.nextTomb++
	t := tombstone{&ResolvedError{RequestID: id, By: r.By, At: r.At, Outcome: r.Outcome, Route: r.Route, ApprovedBy: r.ApprovedBy}, b.nextTomb}
	b.resolved[id] = t
	b.order = append(b.order, t)
	if len(b.order) > b.remember {
		old := b.order[0]
		b.order = slices.Delete(b.order, 0, 1)
		if cur, ok := b.resolved[old.err.RequestID]; ok && cur.n == old.n {
			delete(b.resolved, old.err.RequestID)
		}
	}
	b.publish(Notice{Pending: e.p, Resolution: &r})
}

// arm (re)starts e's expiry timer for the given tier; b.mu is held.
func (b *Broker) arm(e *entry, watched bool) {
	if e.timer != nil {
		e.timer.Stop()
	}
	e.gen++
	e.watched = watched
	gen := e.gen
	d := b.unwatched
	if watched {
		d = b.watched
	}
	if r := e.p.Routing; r != nil && r.ExpireAfter > 0 {
		// The route's, whoever watches: from when it was asked.
		d = r.ExpireAfter - time.Since(e.p.Created)
		e.p.ExpiresAt = e.p.Created.Add(r.ExpireAfter)
		after := r.ExpireAfter
		e.timer = time.AfterFunc(d, func() { b.expire(e, gen, after) })
		return
	}
	e.timer = time.AfterFunc(d, func() { b.expire(e, gen, d) })
}

func (b *Broker) expire(e *entry, gen int, after time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending[e.p.Request.RequestID] != e || e.gen != gen {
		return // settled, or re-armed for the other tier meanwhile
	}
	who := "nobody was watching the session"
	if e.watched {
		who = "a client was watching the session"
	}
	msg := fmt.Sprintf("Permission request expired: no decision within %s (%s), so %s was denied.",
		after, who, e.p.Request.ToolName)
	if r := e.p.Routing; r != nil && r.ExpireAfter > 0 {
		msg = r.expiryMessage(e.p.Request.ToolName, after, e.p.Escalated)
	}
	b.finish(e, Resolution{Outcome: Expired, Result: claude.Deny(msg), By: "timeout", At: time.Now()})
}

// Pending returns the requests pending for sessionID ("" for all
// sessions), oldest first.
func (b *Broker) Pending(sessionID string) []Pending {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pendingLocked(sessionID)
}

func (b *Broker) pendingLocked(sessionID string) []Pending {
	var ps []Pending
	for _, e := range b.pending {
		if sessionID == "" || e.p.SessionID == sessionID {
			ps = append(ps, e.p)
		}
	}
	slices.SortFunc(ps, func(x, y Pending) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		return compareStrings(x.Request.RequestID, y.Request.RequestID)
	})
	return ps
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Close withdraws every pending request (By "broker") and closes every
// subscription. Later calls return ErrBrokerClosed. Idempotent.
func (b *Broker) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	for _, e := range b.pending {
		b.finish(e, Resolution{Outcome: Withdrawn, By: "broker", At: time.Now()})
	}
	for s := range b.subs {
		b.dropLocked(s, ErrBrokerClosed)
	}
	b.closed = true
}

// isWatched reports whether anyone subscribes to sessionID; b.mu is held.
func (b *Broker) isWatched(sessionID string) bool {
	return b.watchers[sessionID] > 0 || b.watchers[""] > 0
}

// rearm moves the pending requests whose tier changed to the other
// timeout; b.mu is held.
func (b *Broker) rearm() {
	for _, e := range b.pending {
		if r := e.p.Routing; r != nil && r.ExpireAfter > 0 {
			continue // its route's expiry, whoever watches
		}
		if w := b.isWatched(e.p.SessionID); w != e.watched {
			b.arm(e, w)
		}
	}
}

// Validation of decisions.

func validDecision(req *claude.PermissionRequest, res claude.PermissionResult) error {
	if !res.Allow {
		return nil
	}
	var in map[string]json.RawMessage
	if len(res.UpdatedInput) > 0 {
		if err := json.Unmarshal(res.UpdatedInput, &in); err != nil || in == nil {
			return fmt.Errorf("%w: updated input is not a JSON object", ErrInvalidDecision)
		}
	}
	if req.ToolName == "AskUserQuestion" {
		var answers map[string]json.RawMessage
		if json.Unmarshal(in["answers"], &answers) != nil || len(answers) == 0 {
			return fmt.Errorf("%w: AskUserQuestion is allowed with the person's answers in updatedInput.answers", ErrInvalidDecision)
		}
	}
	return nil
}

// Answers returns the answers an AskUserQuestion's updated input carries
// (as Answer puts them: question text to answer), nil when it carries
// none: the decision of any other tool, a denial.
func Answers(updatedInput json.RawMessage) map[string]string {
	var in struct {
		Answers map[string]string `json:"answers"`
	}
	if len(updatedInput) == 0 || json.Unmarshal(updatedInput, &in) != nil || len(in.Answers) == 0 {
		return nil
	}
	return in.Answers
}

// Answer returns the decision that answers an AskUserQuestion request:
// an allow whose updated input is the request's input plus "answers", a map
// from each question's text to the chosen label (several labels joined by
// ", "), which is how the CLI takes a person's answers.
func Answer(req *claude.PermissionRequest, answers map[string]string) (claude.PermissionResult, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(req.Input, &in); err != nil || in == nil {
		return claude.PermissionResult{}, fmt.Errorf("permission: Answer: input of %s is not a JSON object", req.ToolName)
	}
	var qs struct {
		Questions []claude.Question `json:"questions"`
	}
	if err := json.Unmarshal(req.Input, &qs); err != nil {
		return claude.PermissionResult{}, fmt.Errorf("permission: Answer: questions of %s: %v", req.ToolName, err)
	}
	asked := make(map[string]bool, len(qs.Questions))
	for _, q := range qs.Questions {
		asked[q.Question] = true
		if _, ok := answers[q.Question]; !ok {
			return claude.PermissionResult{}, fmt.Errorf("question %q has no answer", q.Question)
		}
	}
	for q := range answers {
		if !asked[q] {
			return claude.PermissionResult{}, fmt.Errorf("%q is not one of the questions asked", q)
		}
	}
	a, err := json.Marshal(answers)
	if err != nil {
		return claude.PermissionResult{}, err
	}
	in["answers"] = a
	b, err := json.Marshal(in)
	if err != nil {
		return claude.PermissionResult{}, err
	}
	return claude.PermissionResult{Allow: true, UpdatedInput: b}, nil
}

// Dismiss returns the answer that says an AskUserQuestion request's
// questions went unanswered because a person dismissed them, text saying
// so to Claude: an allow whose input has each question's answer set to
// text and its annotation's "unanswered" to "dismissed". Only a CLI that
// lists claude.CapabilityAskUserQuestionUnanswered takes it; to another,
// refuse the request (a denial) instead.
func Dismiss(req *claude.PermissionRequest, text string) (claude.PermissionResult, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(req.Input, &in); err != nil || in == nil {
		return claude.PermissionResult{}, fmt.Errorf("permission: Dismiss: input of %s is not a JSON object", req.ToolName)
	}
	var qs struct {
		Questions []claude.Question `json:"questions"`
	}
	if err := json.Unmarshal(req.Input, &qs); err != nil || len(qs.Questions) == 0 {
		return claude.PermissionResult{}, fmt.Errorf("permission: Dismiss: %s asks no questions", req.ToolName)
	}
	answers := make(map[string]string, len(qs.Questions))
	notes := make(map[string]any, len(qs.Questions))
	for _, q := range qs.Questions {
		answers[q.Question] = text
		notes[q.Question] = map[string]string{"unanswered": "dismissed"}
	}
	var err error
	if in["answers"], err = json.Marshal(answers); err != nil {
		return claude.PermissionResult{}, err
	}
	if in["annotations"], err = json.Marshal(notes); err != nil {
		return claude.PermissionResult{}, err
	}
	b, err := json.Marshal(in)
	if err != nil {
		return claude.PermissionResult{}, err
	}
	return claude.PermissionResult{Allow: true, UpdatedInput: b}, nil
}
