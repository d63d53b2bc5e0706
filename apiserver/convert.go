package apiserver

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// The mappings between the daemon's types and the API's, in one place.

var statusToProto = map[store.SessionStatus]v1.SessionStatus{
	store.StatusStarting:    v1.SessionStatus_SESSION_STATUS_STARTING,
	store.StatusRunning:     v1.SessionStatus_SESSION_STATUS_RUNNING,
	store.StatusIdle:        v1.SessionStatus_SESSION_STATUS_IDLE,
	store.StatusInterrupted: v1.SessionStatus_SESSION_STATUS_INTERRUPTED,
	store.StatusClosed:      v1.SessionStatus_SESSION_STATUS_CLOSED,
	store.StatusFailed:      v1.SessionStatus_SESSION_STATUS_FAILED,
	store.StatusWaiting:     v1.SessionStatus_SESSION_STATUS_WAITING,
	store.StatusSuspended:   v1.SessionStatus_SESSION_STATUS_SUSPENDED,
	store.StatusQueued:      v1.SessionStatus_SESSION_STATUS_QUEUED,
	store.StatusBudget:      v1.SessionStatus_SESSION_STATUS_BUDGET,
}

// sessionToProto maps a stored session, with the worker that runs it.
func (svc *Service) sessionToProto(s *store.Session) *v1.Session {
	worker := s.Worker
	if worker == "" {
		worker = "local"
	}
	daemonName := ""
	if s.Owner != "" && s.LeaseUntil.After(time.Now()) {
		daemonName = s.Owner
	}
	_, term := daemon.TerminalOf(s)
	if term {
		worker = "terminal"
	}
	return &v1.Session{WorkerName: cmp.Or(svc.D.WorkerOf(s.ID), s.Relay.Worker), Daemon: daemonName, Terminal: term,
		Id: s.ID, ClaudeSessionId: s.ClaudeSessionID, Cwd: s.Cwd, Model: s.Model,
		PermissionMode: s.PermissionMode, Status: statusToProto[s.Status],
		CreatedAt: timestamppb.New(s.CreatedAt), UpdatedAt: timestamppb.New(s.UpdatedAt),
		LastSeq: s.LastSeq, BudgetUsd: s.BudgetUSD, Worker: worker, Error: s.Error, ParentId: s.ParentID,
		Totals: totalsToProto(s.Totals), Limits: limitsToProto(svc.D.Limits(s)),
		Worktree: worktreeToProto(s.Worktree), QueuedPrompts: int32(min(s.QueuedPrompts, 1<<31-1)),
		Title: s.Title, FirstPrompt: s.FirstPrompt,
	}
}

// limitsToProto maps resource limits; nil for none.
func limitsToProto(l claude.ResourceLimits) *v1.ResourceLimits {
	if l.IsZero() {
		return nil
	}
	return &v1.ResourceLimits{MemoryMax: l.MemoryMax, CpuMax: l.CPUMax, PidsMax: l.PIDsMax}
}

func totalsToProto(t store.Totals) *v1.Usage {
	return &v1.Usage{CostUsd: t.CostUSD, InputTokens: t.InputTokens,
		OutputTokens: t.OutputTokens, CacheReadInputTokens: t.CacheReadTokens,
		CacheCreationInputTokens: t.CacheWriteTokens}
}

// turnUsageToProto returns a turn's usage, by model too.
func turnUsageToProto(r *store.UsageRecord) *v1.Usage {
	u := &v1.Usage{CostUsd: r.CostUSD, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
		CacheReadInputTokens: r.CacheReadTokens, CacheCreationInputTokens: r.CacheWriteTokens}
	if len(r.Models) > 0 {
		u.ByModel = make(map[string]*v1.ModelUsage, len(r.Models))
		for name, m := range r.Models {
			u.ByModel[name] = &v1.ModelUsage{CostUsd: m.CostUSD, InputTokens: m.InputTokens, OutputTokens: m.OutputTokens,
				CacheReadInputTokens: m.CacheReadTokens, CacheCreationInputTokens: m.CacheWriteTokens}
		}
	}
	return u
}

func parseRuleID(field, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, invalid(field, s, "not a rule id")
	}
	return id, nil
}

func behaviorToProto(b string) v1.Behavior {
	switch b {
	case "allow":
		return v1.Behavior_BEHAVIOR_ALLOW
	case "deny":
		return v1.Behavior_BEHAVIOR_DENY
	case "ask":
		return v1.Behavior_BEHAVIOR_ASK
	}
	return v1.Behavior_BEHAVIOR_UNSPECIFIED
}

func behaviorFromProto(b v1.Behavior) (string, error) {
	switch b {
	case v1.Behavior_BEHAVIOR_ALLOW:
		return "allow", nil
	case v1.Behavior_BEHAVIOR_DENY:
		return "deny", nil
	case v1.Behavior_BEHAVIOR_ASK:
		return "ask", nil
	}
	return "", invalid("behavior", b.String(), "must be allow, deny or ask")
}

func ruleToProto(r *store.Rule) *v1.Rule {
	p := &v1.Rule{Pattern: r.Spec, Behavior: behaviorToProto(r.Behavior)}
	if r.ID != 0 { // a rule "always" would store has none yet
		p.Id, p.CreatedAt = strconv.FormatInt(r.ID, 10), timestamppb.New(r.CreatedAt)
	}
	switch r.Scope() {
	case "session":
		p.Scope, p.ScopeValue = v1.RuleScope_RULE_SCOPE_SESSION, r.SessionID
	case "project":
		p.Scope, p.ScopeValue = v1.RuleScope_RULE_SCOPE_PROJECT, r.ProjectDir
	default:
		p.Scope = v1.RuleScope_RULE_SCOPE_GLOBAL
	}
	return p
}

func decisionToProto(d *store.Decision) *v1.Decision {
	by := d.By
	if by == "rule" {
		by = fmt.Sprintf("rule:%d", d.RuleID)
	}
	return &v1.Decision{RequestId: d.RequestID, Behavior: behaviorToProto(d.Behavior), DecidedBy: by,
		Message: d.Message, DecidedAt: timestamppb.New(d.DecidedAt), ToolName: d.ToolName, SessionId: d.SessionID,
		Answers: permission.Answers(d.UpdatedInput), Route: d.Route, ApprovedBy: d.ApprovedBy}
}

func pendingToProto(p permission.Pending, always daemon.Always) *v1.PermissionRequest {
	r := p.Request
	sugs, _ := json.Marshal(r.Suggestions)
	out := &v1.PermissionRequest{RequestId: r.RequestID, SessionId: p.SessionID, ToolName: r.ToolName,
		Input: r.Input, ToolUseId: r.ToolUseID, Description: r.Description, DecisionReason: r.DecisionReason,
		Suggestions: sugs, Questions: questionsOf(r.ToolName, r.Input), AlwaysSession: always.SessionText}
	for _, rule := range always.Rules {
		out.AlwaysRules = append(out.AlwaysRules, ruleToProto(rule))
	}
	if !p.ExpiresAt.IsZero() {
		out.ExpiresAt = timestamppb.New(p.ExpiresAt)
	}
	if rt := p.Routing; rt != nil {
		pr := &v1.Routing{Route: rt.Route, Asked: rt.Asked(p.Escalated), ApprovalsNeeded: int32(rt.Approvals),
			EscalateTo: rt.EscalateTo, Escalated: p.Escalated, OnExpiry: rt.OnExpiry}
		for _, a := range p.Approvals {
			pr.ApprovedBy = append(pr.ApprovedBy, a.By)
		}
		if rt.EscalateAfter > 0 {
			pr.EscalatesAt = timestamppb.New(p.Created.Add(rt.EscalateAfter))
		}
		out.Routing = pr
	}
	return out
}

// questionsOf returns the questions of an AskUserQuestion input.
func questionsOf(toolName string, input json.RawMessage) []*v1.Question {
	if toolName != "AskUserQuestion" {
		return nil
	}
	var in struct {
		Questions []claude.Question `json:"questions"`
	}
	if json.Unmarshal(input, &in) != nil {
		return nil
	}
	var out []*v1.Question
	for _, q := range in.Questions {
		pq := &v1.Question{Question: q.Question, Header: q.Header, MultiSelect: q.MultiSelect}
		for _, o := range q.Options {
			pq.Options = append(pq.Options, o.Label)
		}
		out = append(out, pq)
	}
	return out
}

// reasonToProto is one cause of a CLI version's level.
func reasonToProto(version string, r daemon.CompatReason) *v1.CompatibilityReason {
	return &v1.CompatibilityReason{Kind: r.Kind, Subject: r.Subject, Level: levelToProto[r.Level], Message: r.Message,
		Count: r.Count, FirstSeen: timestamppb.New(r.FirstSeen), LastSeen: timestamppb.New(r.LastSeen),
		Example: r.Example, SessionId: r.SessionID, ClaudeCodeVersion: version}
}

// eventToProto turns an event into its API form: the daemon's own events
// become typed kinds (from their Body, decoded once), the CLI's lines are
// passed raw.
func eventToProto(ev *daemon.Event) *v1.Event {
	out := &v1.Event{SessionId: ev.SessionID, Seq: ev.Seq, Time: timestamppb.New(ev.Time)}
	switch b := ev.Body.(type) {
	case *daemon.StatusChange:
		out.Kind = &v1.Event_StatusChange{StatusChange: &v1.StatusChange{Status: statusToProto[b.Status], Detail: b.Detail}}
	case *daemon.PermissionRequest:
		sugs, _ := json.Marshal(b.Suggestions)
		pr := &v1.PermissionRequest{
			RequestId: b.RequestID, SessionId: ev.SessionID, ToolName: b.ToolName, Input: b.Input,
			ToolUseId: b.ToolUseID, Description: b.Description, DecisionReason: b.Reason, Suggestions: sugs,
			Questions: questionsOf(b.ToolName, b.Input), AlwaysSession: b.AlwaysSession}
		for _, r := range b.AlwaysRules {
			pr.AlwaysRules = append(pr.AlwaysRules, ruleToProto(&store.Rule{Spec: r.Pattern, Behavior: r.Behavior,
				ProjectDir: r.ProjectDir, SessionID: r.SessionID}))
		}
		out.Kind = &v1.Event_PermissionRequest{PermissionRequest: pr}
	case *daemon.Interrupted:
		out.Kind = &v1.Event_Interrupted{Interrupted: &v1.Interrupted{By: b.By}}
	case *daemon.PermissionModeChange:
		out.Kind = &v1.Event_PermissionMode{PermissionMode: &v1.PermissionModeChange{Mode: b.Mode, Requested: b.Requested}}
	case *daemon.Gap:
		g := &v1.Gap{Lost: b.Lost, Reason: b.Reason}
		if !b.From.IsZero() { // zero: retention removed the events (no failure, no times)
			g.From, g.To = timestamppb.New(b.From), timestamppb.New(b.To)
		}
		out.Kind = &v1.Event_Gap{Gap: g}
	case *daemon.TextDelta:
		out.Kind = &v1.Event_TextDelta{TextDelta: &v1.TextDelta{Text: b.Text, ParentToolUseId: b.ParentToolUseID}}
	case *daemon.ToolUse:
		out.Kind = &v1.Event_ToolUse{ToolUse: &v1.ToolUse{ToolUseId: b.ToolUseID, Name: b.Name,
			Input: b.Input, ParentToolUseId: b.ParentToolUseID}}
	case *daemon.UsageReport:
		out.Kind = &v1.Event_UsageReport{UsageReport: &v1.UsageReport{
			Turn: turnUsageToProto(&b.Turn), SessionTotals: totalsToProto(b.Totals)}}
	case *daemon.ErrorReport:
		out.Kind = &v1.Event_Error{Error: &v1.Error{Message: b.Message, StderrTail: b.StderrTail, Hint: b.Hint}}
	case *daemon.Warning:
		out.Kind = &v1.Event_Warning{Warning: &v1.Warning{Kind: b.Kind, Level: levelToProto[b.Level],
			Message: b.Message, Items: b.Items, ClaudeCodeVersion: b.ClaudeCodeVersion}}
	case *daemon.PermissionResolved:
		d := &store.Decision{RequestID: b.RequestID, Behavior: b.Behavior, By: b.By, RuleID: b.RuleID,
			Message: b.Message, DecidedAt: ev.Time, ToolName: b.ToolName, SessionID: ev.SessionID}
		pd := decisionToProto(d)
		pd.Answers = b.Answers
		out.Kind = &v1.Event_PermissionResolved{PermissionResolved: &v1.PermissionResolved{
			RequestId: b.RequestID, Decision: pd}}
	default:
		m := &v1.Message{Type: ev.Type, Subtype: ev.Subtype, Raw: ev.Raw, ToCli: ev.Direction == store.ToCLI}
		if ev.Truncated() {
			m.OriginalSize = ev.OriginalSize
		}
		out.Kind = &v1.Event_Message{Message: m}
	}
	return out
}

var workerStateToProto = map[claude.WorkerState]v1.WorkerState{
	claude.WorkerConnected:    v1.WorkerState_WORKER_STATE_CONNECTED,
	claude.WorkerReconnecting: v1.WorkerState_WORKER_STATE_RECONNECTING,
	claude.WorkerLost:         v1.WorkerState_WORKER_STATE_LOST,
}

func workerToProto(w *daemon.WorkerStatus) *v1.Worker {
	return &v1.Worker{Name: w.Name, Labels: w.Labels, Capacity: int32(w.Capacity), SessionIds: w.Sessions,
		CliVersion: w.CLIVersion, State: workerStateToProto[w.State], StateSince: timestamppb.New(w.Since),
		LastSeen: timestamppb.New(w.LastSeen), Address: w.Addr, Host: w.Host, Pid: int32(w.PID),
		GraceSeconds: int64(w.Grace / time.Second), TakesSpares: w.Spares, Spares: int32(w.SpareCLIs)}
}

func workersToProto(ws []daemon.WorkerStatus) []*v1.Worker {
	out := make([]*v1.Worker, len(ws))
	for i := range ws {
		out[i] = workerToProto(&ws[i])
	}
	return out
}
