package daemon

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// canUseTool is the session's permission callback: rules first (an allow
// or deny settles it, audited), then a person through the broker.
// AskUserQuestion always goes to a person, who answers it.
func (a *actor) canUseTool(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
	bg := context.WithoutCancel(ctx)
	requested := time.Now()
	at := permission.Scope{ProjectDir: a.opts.Cwd, SessionID: a.id}
	if req.ToolName != "AskUserQuestion" {
		switch dec := a.d.engine.Evaluate(inProject(req, a.launch.worktree), at); dec.Behavior {
		case permission.Allow:
			a.d.log.Debug("permission decided", "session", a.id, "request", req.RequestID, "tool", req.ToolName,
				"allow", true, "by", "rule", "rule", dec.Rule.String(), "rule_id", dec.Rule.ID)
			if err := a.audit(bg, req, requested, time.Time{}, claude.Allow(), "allow", "rule", dec.Rule, nil); err != nil {
				return unaudited(err), nil
			}
			return claude.Allow(), nil
		case permission.Deny:
			a.d.log.Info("permission decided", "session", a.id, "request", req.RequestID, "tool", req.ToolName,
				"allow", false, "by", "rule", "rule", dec.Rule.String(), "rule_id", dec.Rule.ID)
			res := claude.Deny("Denied by rule " + dec.Rule.String())
			_ = a.audit(bg, req, requested, time.Time{}, res, "deny", "rule", dec.Rule, nil) // denied either way
			return res, nil
		}
	}
	// Its audit's outcome, for the Decide that settles it, from before any
	// client can see it until the audit is written.
	outcome := &auditOutcome{done: make(chan struct{})}
	a.d.audits.Store(req.RequestID, outcome)
	defer a.d.audits.CompareAndDelete(req.RequestID, outcome)
	// Held first, logged second: a client that sees the event can decide
	// at once. The resolution is logged by this goroutine after <-ch, so
	// it always follows the request in the log.
	routing := a.d.router.Route(req, at)
	ch, err := a.d.broker.SubmitRouted(ctx, a.id, req, routing)
	if err != nil {
		a.logError(bg, "holding a permission request: "+err.Error(), "")
		return claude.PermissionResult{}, err
	}
	always := a.d.alwaysOf(req, a.opts.Cwd, a.id)
	ev := &PermissionRequest{RequestID: req.RequestID, ToolName: req.ToolName, ToolUseID: req.ToolUseID,
		Input: req.Input, Suggestions: req.Suggestions, Description: req.Description, Reason: req.DecisionReason,
		AlwaysRules: ruleSpecs(always.Rules), AlwaysSession: always.SessionText}
	if routing != nil {
		ev.Route, ev.Asked = routing.Route, routing.Asked(false)
	}
	a.log(bg, ev)
	a.do(func(st *actorState) {
		if st.waiting++; st.waiting == 1 {
			a.status(bg, store.StatusWaiting, req.ToolName)
		}
	})
	r := <-ch
	defer a.do(func(st *actorState) { // after the resolution is logged
		if st.waiting--; st.waiting == 0 {
			a.status(bg, store.StatusRunning, "")
		}
	})
	attrs := []any{"session", a.id, "request", req.RequestID, "tool", req.ToolName}
	if answers := permission.Answers(r.Result.UpdatedInput); answers != nil {
		// A question is answered, not allowed: the log says with what.
		attrs = append(attrs, "outcome", "answered", "answer", answerText(req, answers))
	} else {
		attrs = append(attrs, "outcome", r.Outcome.String(), "allow", r.Result.Allow)
	}
	a.d.log.Info("permission decided", append(attrs, "by", r.By)...)
	if r.Outcome == permission.Withdrawn {
		_ = a.audit(bg, req, requested, r.At, claude.PermissionResult{}, "withdrawn", r.By, nil, &r)
		return claude.PermissionResult{}, fmt.Errorf("daemon: permission request withdrawn by %s", r.By)
	}
	behavior := "deny"
	if r.Result.Allow {
		behavior = "allow"
	}
	err = a.audit(bg, req, requested, r.At, r.Result, behavior, r.By, nil, &r)
	outcome.err = err
	close(outcome.done) // the Decide that settled it answers its client now
	if err != nil && r.Result.Allow {
		return unaudited(err), nil
	}
	return a.toCLI(req, r), nil
}

// toCLI is how a person's decision reaches the CLI. A refused
// AskUserQuestion is, to a CLI that lists ask_user_question_unanswered_v1,
// its questions dismissed, the refusal's message as what Claude reads for
// each (the transcript marks them unanswered), rather than a failed tool
// call; a CLI without the capability may refuse such an answer whole, so
// it gets the denial. The audit keeps the person's decision either way.
func (a *actor) toCLI(req *claude.PermissionRequest, r permission.Resolution) claude.PermissionResult {
	if req.ToolName != "AskUserQuestion" || r.Result.Allow || r.Outcome != permission.Decided ||
		!a.hasCapability(claude.CapabilityAskUserQuestionUnanswered) {
		return r.Result
	}
	res, err := permission.Dismiss(req, "Not answered: "+r.Result.Message)
	if err != nil {
		return r.Result
	}
	return res
}

// hooks are the hooks the daemon registers with every CLI: the permission
// engine decides the shell commands that skills' and commands' text runs
// as they load (PreSkillShellCommand, 2.1.332), which reach no
// can_use_tool: the CLI runs a read-only one without asking anyone.
// Rules and people decide them as a Bash call of the same command; a hook
// that fails (the request withdrawn, the daemon stopping) or times out
// keeps the command from running. The hook waits as long as a request
// may wait for a person, and a minute more. A CLI older than the event
// ignores the hook. skillShellCommand decides (a session's, or a spare's
// that passes it to the session that takes it: pool.go).
func (d *Daemon) hooks(skillShellCommand func(context.Context, *claude.PreSkillShellCommandInput) (*claude.HookOutput, error)) map[claude.HookEventName][]claude.HookMatcher {
	return map[claude.HookEventName][]claude.HookMatcher{
		claude.HookPreSkillShellCommand: {{
			Hooks:     []claude.HookFunc{claude.HookFor(skillShellCommand)},
			Timeout:   d.broker.MaxWait() + time.Minute,
			OnFailure: claude.HookFailureBlock,
		}},
	}
}

// skillShellCommand decides a skill's shell command as canUseTool decides
// a Bash call of it: rules first, then a person, audited and logged the
// same way. Only an allow lets it run (and the CLI's own checks still
// apply); "always" stores a rule for the exact command in the project.
func (a *actor) skillShellCommand(ctx context.Context, in *claude.PreSkillShellCommandInput) (*claude.HookOutput, error) {
	cmd := in.Command()
	who := map[string]string{"user": "a person", "claude": "Claude"}[in.InvokedBy]
	if who == "" {
		who = "something else (a sub-agent, a channel)"
	}
	req := &claude.PermissionRequest{
		RequestID: newRequestID(),
		ToolName:  cmp.Or(in.ToolName, "Bash"),
		Input:     in.ToolInput,
		ToolUseID: in.ToolUseID,
		Description: fmt.Sprintf("a shell command in the text of skill %s, which %s loaded; it runs before the skill's text reaches Claude",
			in.CommandName, who),
		DecisionReason: "skill " + in.CommandName + " runs a shell command as it loads",
		Suggestions: []claude.PermissionUpdate{{Type: "addRules", Behavior: "allow", Destination: "localSettings",
			Rules: []claude.PermissionRule{{ToolName: cmp.Or(in.ToolName, "Bash"), RuleContent: cmd}}}},
	}
	res, err := a.canUseTool(ctx, req)
	if err != nil {
		return nil, err // the hook fails: the command does not run
	}
	if !res.Allow {
		return claude.DenyTool(res.Message), nil
	}
	return &claude.HookOutput{Specific: &claude.HookSpecific{PermissionDecision: claude.HookAllow}}, nil
}

// newRequestID makes the id of a request the daemon asks of a person
// itself (a skill's shell command): a random UUID, as the CLI's are.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// An auditOutcome is whether a request's decision reached the audit trail:
// err is set before done is closed.
type auditOutcome struct {
	done chan struct{}
	err  error
}

// auditWait bounds how long Decide waits for the session to record its
// decision (one write; a session whose CLI went away may never).
const auditWait = 30 * time.Second

// audit writes the decision to the audit trail and logs it as an event.
// It returns an error when the trail cannot hold it: the decision must not
// take effect. decided is when the broker settled it (zero: now), the time
// Decide answered its client with. A person's decision comes with the
// broker's resolution (nil for a rule's), which says the route that
// applied and who allowed under it.
func (a *actor) audit(ctx context.Context, req *claude.PermissionRequest, requested, decided time.Time,
	res claude.PermissionResult, behavior, by string, rule *permission.Rule, r *permission.Resolution) error {
	d := decisionRecord(a.id, req, requested, decided, res, behavior, by, rule, r)
	if err := a.d.db.AddDecision(ctx, d); err != nil {
		a.d.log.Error("auditing a decision", "session", a.id, "request", req.RequestID, "err", err)
		if writeFailed(err) {
			a.lost(err)
		}
		return err
	}
	a.d.counts.decided(behavior, by)
	a.log(ctx, &PermissionResolved{RequestID: req.RequestID, ToolName: req.ToolName, Behavior: behavior, By: by,
		RuleID: d.RuleID, Message: res.Message, Answers: permission.Answers(res.UpdatedInput), Route: d.Route,
		ApprovedBy: d.ApprovedBy})
	return nil
}

// decisionRecord is the audit trail's record of a decision on req.
func decisionRecord(sessionID string, req *claude.PermissionRequest, requested, decided time.Time,
	res claude.PermissionResult, behavior, by string, rule *permission.Rule, r *permission.Resolution) *store.Decision {
	d := &store.Decision{SessionID: sessionID, RequestID: req.RequestID, ToolName: req.ToolName,
		Input: req.Input, Behavior: behavior, By: by, Message: res.Message,
		UpdatedInput: res.UpdatedInput, RequestedAt: requested, DecidedAt: decided}
	if rule != nil {
		d.RuleID = rule.ID
		d.RuleSpec = rule.String()
	}
	if r != nil {
		d.Route, d.ApprovedBy = r.Route, r.ApprovedBy
	}
	return d
}

// answerText is an AskUserQuestion's answers in one line for the log, in
// the order the questions were asked ("Files; 2 hours" for two), clipped
// as clipValue clips: whoever answers writes what they like.
func answerText(req *claude.PermissionRequest, answers map[string]string) string {
	var in struct {
		Questions []claude.Question `json:"questions"`
	}
	_ = json.Unmarshal(req.Input, &in)
	parts := make([]string, 0, len(answers))
	for _, q := range in.Questions {
		if a, ok := answers[q.Question]; ok {
			parts = append(parts, a)
		}
	}
	if len(parts) < len(answers) { // not the questions asked: by question
		parts = parts[:0]
		for _, q := range slices.Sorted(maps.Keys(answers)) {
			parts = append(parts, answers[q])
		}
	}
	return clipValue(strings.Join(parts, "; "))
}

// unaudited is what the CLI gets for a decision the audit trail could not
// hold: a denial saying so.
func unaudited(err error) claude.PermissionResult {
	return claude.Deny("The daemon could not record the permission decision (" + err.Error() + "), so the tool was not allowed.")
}

// Decision is a person's answer to a pending request.
type Decision struct {
	RequestID string
	Allow     bool
	Message   string // the deny message
	// Always stores the request's suggestions as rules (allow only).
	Always bool
	// Answers answers an AskUserQuestion: question text to chosen label.
	Answers map[string]string
	// Client names who decides, for the audit trail: a client's own name,
	// or VerifiedBy's for a verified person.
	Client string
}

// Decide settles a pending request. It returns the decision as the audit
// trail stores it (without the input), and the rules an "always" stored.
// A request whose route needs more allows than it has is not settled by
// an allow: Decide returns the decision so far (its ApprovedBy) with a
// *permission.ApprovalsNeededError, and stores no rule. A decision by
// someone the request's route does not ask is refused with a
// *NotAskedError.
// An "always" that does not take effect (an error, or another decision
// first) leaves none of the rules it created.
// Errors: permission.ErrNotPending, a *permission.ResolvedError
// (errors.Is permission.ErrAlreadyResolved), permission.ErrInvalidDecision,
// *InvalidArgumentError: a message with an allow (only a denial tells the
// model why), answers to a request that is not an AskUserQuestion.
func (d *Daemon) Decide(ctx context.Context, dec Decision) (*store.Decision, []*store.Rule, error) {
	if dec.RequestID == "" {
		return nil, nil, &InvalidArgumentError{Field: "request_id", Value: "", Reason: "required"}
	}
	if dec.Allow && dec.Message != "" {
		return nil, nil, &InvalidArgumentError{Field: "message", Value: clipValue(dec.Message),
			Reason: "only a deny carries a message (it tells Claude why); an allow has none"}
	}
	var p *permission.Pending
	for _, q := range d.broker.Pending("") {
		if q.Request.RequestID == dec.RequestID {
			p = &q
			break
		}
	}
	by := clientName(dec.Client)
	if p == nil {
		// Let the broker say who won, or that there is no such request.
		err := d.broker.Resolve(dec.RequestID, claude.Deny("late"), by)
		if err == nil {
			err = permission.ErrNotPending
		}
		if errors.Is(err, permission.ErrNotPending) && d.commander() != nil {
			// Another daemon sharing the store may hold it.
			got, err := d.remoteDecide(ctx, dec)
			return got, nil, err
		}
		return nil, nil, err
	}
	if err := d.checkAsked(p, dec.Client); err != nil {
		return nil, nil, err
	}
	if len(dec.Answers) > 0 && p.Request.ToolName != "AskUserQuestion" {
		return nil, nil, &InvalidArgumentError{Field: "answers", Value: clipValue(fmt.Sprint(dec.Answers)),
			Reason: fmt.Sprintf("only an AskUserQuestion request takes answers; this one is for %s", p.Request.ToolName)}
	}
	// A decision the audit trail cannot hold does not reach the CLI.
	if err := d.storeWrites(ctx, p.SessionID); err != nil {
		return nil, nil, fmt.Errorf("daemon: the decision was not sent: it cannot be recorded: %w", err)
	}
	var res claude.PermissionResult
	var err error
	switch {
	case !dec.Allow:
		msg := dec.Message
		if msg == "" {
			msg = "Denied by " + by
		}
		res = claude.Deny(msg)
	case p.Request.ToolName == "AskUserQuestion":
		if len(dec.Answers) == 0 {
			return nil, nil, &InvalidArgumentError{Field: "answers", Value: "", Reason: "AskUserQuestion needs answers"}
		}
		res, err = permission.Answer(p.Request, dec.Answers)
		if err != nil {
			return nil, nil, &InvalidArgumentError{Field: "answers", Value: clipValue(fmt.Sprint(dec.Answers)), Reason: err.Error()}
		}
	default:
		res = claude.Allow()
	}
	var stored, created []*store.Rule
	// undo removes the rules this decision created when it does not take
	// effect: an "always" that failed leaves no rule nobody agreed to.
	undo := func() {
		for _, r := range created {
			if err := d.RemoveRule(context.WithoutCancel(ctx), r.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				d.log.Error("removing a rule of an always that did not take effect", "request", dec.RequestID,
					"rule", r.Spec, "rule_id", r.ID, "err", err)
			}
		}
	}
	if dec.Allow && dec.Always {
		// The daemon keeps the rules, so that "claudectl rules rm" revokes
		// them, in running sessions too, and its audit sees every use; the
		// CLI gets only what no rule can say, for this process only.
		// The project is the session's directory, as shown with the
		// request: unknown, a project rule would be a global one.
		cwd, err := d.sessionCwd(ctx, p.SessionID)
		if err != nil {
			return nil, nil, fmt.Errorf("daemon: nothing was decided: the session's directory, which scopes the rules always stores, cannot be read: %w", err)
		}
		always := d.alwaysOf(p.Request, cwd, p.SessionID)
		// The rules there already (an equal rule is not stored twice)
		// are not this decision's to undo.
		had := map[int64]bool{}
		if len(always.Rules) > 0 {
			rules, err := d.db.Rules(ctx)
			if err != nil {
				return nil, nil, fmt.Errorf("daemon: nothing was decided: reading the rules: %w", err)
			}
			for _, r := range rules {
				had[r.ID] = true
			}
		}
		for _, sr := range always.Rules {
			sr.CreatedBy = "always:" + by
			if err := d.AddRule(ctx, sr); err != nil {
				undo()
				if le := (*store.LimitError)(nil); errors.As(err, &le) {
					return nil, nil, fmt.Errorf("nothing was decided: always would store the rule %s, and %w; allow once instead, or remove rules first (claudectl rules rm ID)", sr.Spec, le)
				}
				return nil, nil, fmt.Errorf("daemon: nothing was decided: storing rule %s: %w", sr.Spec, err)
			}
			if !had[sr.ID] {
				created = append(created, sr)
			}
			stored = append(stored, sr)
		}
		res.UpdatedPermissions = always.Session
	}
	// The client hears the decision once the audit trail holds it: one it
	// cannot hold (the store failed after the check above) does not take
	// effect (an allow is a denial to the CLI), and the client is told so,
	// not "allowed".
	// Looked up before Resolve: the session's callback, once it has the
	// decision, may write the audit and let go of the request before this
	// goroutine runs again. Concurrent Decides find the same one; the one
	// whose Resolve wins waits on it.
	var audited *auditOutcome
	if o, ok := d.audits.Load(dec.RequestID); ok {
		audited = o.(*auditOutcome)
	}
	if err := d.broker.Resolve(dec.RequestID, res, by); err != nil {
		undo() // decided by someone else, expired or withdrawn meanwhile; or allowed by too few yet
		var more *permission.ApprovalsNeededError
		if errors.As(err, &more) {
			// Counted, not settled: the decision so far, and the error
			// that says how many more must allow.
			so := decided(p, res, by, time.Now())
			so.Route = p.Routing.Route
			for _, a := range more.Approvals {
				so.ApprovedBy = append(so.ApprovedBy, a.By)
			}
			d.log.Info("permission allowed, more allows needed", "session", p.SessionID, "request", dec.RequestID,
				"tool", p.Request.ToolName, "by", by, "route", so.Route, "allowed", len(more.Approvals), "needed", more.Need)
			return so, nil, more
		}
		return nil, nil, err
	}
	if audited != nil {
		select {
		case <-audited.done:
			if err := audited.err; err != nil {
				undo() // the CLI was denied: the always did not take effect
				return nil, nil, fmt.Errorf("daemon: the decision was not sent: it could not be recorded: %w", storeError(err))
			}
		case <-time.After(auditWait):
		case <-ctx.Done():
		}
	}
	for _, sr := range stored {
		d.log.Info("rule stored for always", "request", dec.RequestID, "rule", sr.Spec, "rule_id", sr.ID, "by", by)
	}
	out := decided(p, res, by, d.broker.SettledAt(dec.RequestID))
	if st, ok := d.broker.Settled(dec.RequestID); ok {
		out.Route, out.ApprovedBy = st.Route, st.ApprovedBy
	}
	return out, stored, nil
}

// decided is the decision of p as the session's actor stores it (audit):
// the result's message (a denial's, or none) and updated input (a
// question's answers), the broker's time.
func decided(p *permission.Pending, res claude.PermissionResult, by string, at time.Time) *store.Decision {
	b := "deny"
	if res.Allow {
		b = "allow"
	}
	return &store.Decision{SessionID: p.SessionID, RequestID: p.Request.RequestID, ToolName: p.Request.ToolName,
		Behavior: b, By: by, Message: res.Message, UpdatedInput: res.UpdatedInput, DecidedAt: at}
}

// Always is what "always allow" does for a request: the rules the daemon
// stores, and the changes only a rule cannot make (a permission mode, a
// directory), which go to the CLI for its process only.
type Always struct {
	Rules       []*store.Rule
	Session     []claude.PermissionUpdate // destination "session"
	SessionText []string                  // Session, in words
}

// AlwaysOf returns what "always allow" would do for pending request p.
func (d *Daemon) AlwaysOf(ctx context.Context, p permission.Pending) Always {
	return d.alwaysOf(p.Request, d.cwdOf(ctx, p.SessionID), p.SessionID)
}

// alwaysOf maps a request's suggestions to daemon rules (scoped as the
// suggestion's destination says: user settings global, project and local
// settings the project, the rest the session) and session-only updates.
// An update the session's policy would refuse (bypassPermissions without
// sessions.allow_bypass_permissions, a directory outside
// sessions.allowed_roots) is dropped.
func (d *Daemon) alwaysOf(req *claude.PermissionRequest, cwd, sessionID string) Always {
	var out Always
	rules, rest, err := permission.RulesFromSuggestions(req.Suggestions, permission.Scope{ProjectDir: cwd, SessionID: sessionID})
	if err != nil {
		d.log.Warn("some suggestions are not rules", "session", sessionID, "request", req.RequestID, "err", err)
	}
	for _, r := range rules {
		out.Rules = append(out.Rules, &store.Rule{Spec: r.String(), Behavior: string(r.Behavior),
			ProjectDir: r.Scope.ProjectDir, SessionID: r.Scope.SessionID})
	}
	for _, u := range rest {
		switch u.Type {
		case "setMode":
			if !slices.Contains(claude.PermissionModes, u.Mode) || d.policy.checkMode("mode", string(u.Mode)) != nil {
				continue
			}
			out.SessionText = append(out.SessionText, fmt.Sprintf("switch this session to permission mode %s", u.Mode))
		case "addDirectories":
			ok := len(u.Directories) > 0
			for _, dir := range u.Directories {
				ok = ok && filepath.IsAbs(dir) && d.policy.checkDir("directories", dir) == nil
			}
			if !ok {
				continue
			}
			out.SessionText = append(out.SessionText, "let this session use "+strings.Join(u.Directories, ", "))
		default:
			continue
		}
		u.Destination = "session"
		out.Session = append(out.Session, u)
	}
	return out
}

// cwdOf returns session id's directory, "" when it cannot be read (for
// showing what always would do; Decide uses sessionCwd).
func (d *Daemon) cwdOf(ctx context.Context, id string) string {
	cwd, _ := d.sessionCwd(ctx, id)
	return cwd
}

// sessionCwd returns session id's directory, which scopes the project
// rules of an always.
func (d *Daemon) sessionCwd(ctx context.Context, id string) (string, error) {
	s, err := d.db.Session(ctx, id)
	if err != nil {
		return "", err
	}
	if s.Cwd == "" {
		return "", fmt.Errorf("session %s has no directory", id)
	}
	return s.Cwd, nil
}

// AddRule parses, stores and enables a rule.
func (d *Daemon) AddRule(ctx context.Context, r *store.Rule) error {
	pr, err := RuleFromStore(r)
	if err != nil {
		var se *permission.SyntaxError
		if errors.As(err, &se) {
			return &InvalidArgumentError{Field: "rule.pattern", Value: r.Spec, Reason: se.Msg}
		}
		return &InvalidArgumentError{Field: "rule.behavior", Value: r.Behavior, Reason: err.Error()}
	}
	if err := d.db.CreateRule(ctx, r); err != nil {
		return err
	}
	pr.ID = r.ID
	return d.engine.Put(pr) // the store returns the ID of an equal rule it has
}

// RemoveRule deletes a rule and disables it.
func (d *Daemon) RemoveRule(ctx context.Context, id int64) error {
	if err := d.db.DeleteRule(ctx, id); err != nil {
		return err
	}
	d.engine.Remove(id)
	return nil
}

// Pending returns the permission requests waiting for a person, of session
// id or of every session when id is "", oldest first.
func (d *Daemon) Pending(id string) []permission.Pending {
	ps := d.broker.Pending(id)
	if d.board() == nil {
		return ps
	}
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	return append(ps, d.othersPending(ctx, id)...)
}

// Rules returns the stored permission rules.
func (d *Daemon) Rules(ctx context.Context) ([]*store.Rule, error) { return d.db.Rules(ctx) }

// Decisions returns the audit trail of permission decisions f selects.
func (d *Daemon) Decisions(ctx context.Context, f store.DecisionFilter) ([]*store.Decision, error) {
	return d.db.Decisions(ctx, f)
}
