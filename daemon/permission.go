package daemon

import (
	"context"
	"errors"
	"fmt"
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
		switch dec := a.d.engine.Evaluate(req, at); dec.Behavior {
		case permission.Allow:
			a.audit(bg, req, requested, claude.Allow(), "allow", "rule", dec.Rule)
			return claude.Allow(), nil
		case permission.Deny:
			res := claude.Deny("Denied by rule " + dec.Rule.String())
			a.audit(bg, req, requested, res, "deny", "rule", dec.Rule)
			return res, nil
		}
	}
	// Held first, logged second: a client that sees the event can decide
	// at once. The resolution is logged by this goroutine after <-ch, so
	// it always follows the request in the log.
	ch, err := a.d.broker.Submit(ctx, a.id, req)
	if err != nil {
		a.logError(bg, "holding a permission request: "+err.Error(), "")
		return claude.PermissionResult{}, err
	}
	a.log(bg, &PermissionRequest{RequestID: req.RequestID, ToolName: req.ToolName, ToolUseID: req.ToolUseID,
		Input: req.Input, Suggestions: req.Suggestions, Description: req.Description, Reason: req.DecisionReason})
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
	if r.Outcome == permission.Withdrawn {
		a.audit(bg, req, requested, claude.PermissionResult{}, "withdrawn", r.By, nil)
		return claude.PermissionResult{}, fmt.Errorf("daemon: permission request withdrawn by %s", r.By)
	}
	behavior := "deny"
	if r.Result.Allow {
		behavior = "allow"
	}
	a.audit(bg, req, requested, r.Result, behavior, r.By, nil)
	return r.Result, nil
}

// audit writes the decision to the audit trail and logs it as an event.
func (a *actor) audit(ctx context.Context, req *claude.PermissionRequest, requested time.Time,
	res claude.PermissionResult, behavior, by string, rule *permission.Rule) {
	d := &store.Decision{SessionID: a.id, RequestID: req.RequestID, ToolName: req.ToolName,
		Input: req.Input, Behavior: behavior, By: by, Message: res.Message,
		UpdatedInput: res.UpdatedInput, RequestedAt: requested}
	if rule != nil {
		d.RuleID = rule.ID
		d.RuleSpec = rule.String()
	}
	if err := a.d.db.AddDecision(ctx, d); err != nil {
		a.d.log.Error("auditing a decision", "session", a.id, "request", req.RequestID, "err", err)
	}
	a.log(ctx, &PermissionResolved{RequestID: req.RequestID, ToolName: req.ToolName, Behavior: behavior, By: by,
		RuleID: d.RuleID, Message: res.Message})
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
	// Client names who decides, for the audit trail.
	Client string
}

// Decide settles a pending request. Errors: permission.ErrNotPending,
// a *permission.ResolvedError (errors.Is permission.ErrAlreadyResolved),
// permission.ErrInvalidDecision, *InvalidArgumentError.
func (d *Daemon) Decide(ctx context.Context, dec Decision) (*permission.Pending, []*store.Rule, error) {
	if dec.RequestID == "" {
		return nil, nil, &InvalidArgumentError{Field: "request_id", Value: "", Reason: "required"}
	}
	var p *permission.Pending
	for _, q := range d.broker.Pending("") {
		if q.Request.RequestID == dec.RequestID {
			p = &q
			break
		}
	}
	by := "client:" + dec.Client
	if dec.Client == "" {
		by = "client:anonymous"
	}
	if p == nil {
		// Let the broker say who won, or that there is no such request.
		err := d.broker.Resolve(dec.RequestID, claude.Deny("late"), by)
		if err == nil {
			err = permission.ErrNotPending
		}
		return nil, nil, err
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
			return nil, nil, &InvalidArgumentError{Field: "answers", Value: fmt.Sprint(dec.Answers), Reason: err.Error()}
		}
	default:
		res = claude.Allow()
	}
	var stored []*store.Rule
	if dec.Allow && dec.Always {
		at := permission.Scope{ProjectDir: d.cwdOf(ctx, p.SessionID), SessionID: p.SessionID}
		rules, _, rerr := permission.RulesFromSuggestions(p.Request.Suggestions, at)
		if rerr != nil {
			d.log.Warn("some suggestions are not rules", "request", dec.RequestID, "err", rerr)
		}
		for _, r := range rules {
			sr := &store.Rule{Spec: r.String(), Behavior: string(r.Behavior), ProjectDir: r.Scope.ProjectDir,
				SessionID: r.Scope.SessionID, CreatedBy: "suggestion:" + by}
			if err := d.db.CreateRule(ctx, sr); err != nil {
				return nil, nil, fmt.Errorf("daemon: storing rule %s: %w", sr.Spec, err)
			}
			r.ID = sr.ID
			d.engine.Remove(sr.ID) // CreateRule dedups: keep one copy in the engine
			if err := d.engine.Add(r); err != nil {
				return nil, nil, err
			}
			stored = append(stored, sr)
		}
		res.UpdatedPermissions = p.Request.Suggestions
	}
	if err := d.broker.Resolve(dec.RequestID, res, by); err != nil {
		return nil, nil, err
	}
	return p, stored, nil
}

func (d *Daemon) cwdOf(ctx context.Context, id string) string {
	s, err := d.db.Session(ctx, id)
	if err != nil {
		return ""
	}
	return s.Cwd
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
	d.engine.Remove(r.ID)
	return d.engine.Add(pr)
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
func (d *Daemon) Pending(id string) []permission.Pending { return d.broker.Pending(id) }

// Rules returns the stored permission rules.
func (d *Daemon) Rules(ctx context.Context) ([]*store.Rule, error) { return d.db.Rules(ctx) }

// Decisions returns the audit trail of permission decisions f selects.
func (d *Daemon) Decisions(ctx context.Context, f store.DecisionFilter) ([]*store.Decision, error) {
	return d.db.Decisions(ctx, f)
}
