package apiserver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// TestAddRuleScopes: a rule whose scope cannot match (a relative project
// directory, a session rule without a session) or whose scope value would
// be dropped (a global rule with one) is refused naming rule.scope_value
// and the value, and nothing is stored; a project directory is stored
// cleaned.
func TestAddRuleScopes(t *testing.T) {
	c := start(t)
	for _, tc := range []struct {
		name  string
		scope v1.RuleScope
		value string
		says  string
	}{
		{"relative project", v1.RuleScope_RULE_SCOPE_PROJECT, "tmp/x", `"tmp/x": must be an absolute directory path`},
		{"dot project", v1.RuleScope_RULE_SCOPE_PROJECT, ".", `".": must be an absolute directory path`},
		{"empty project", v1.RuleScope_RULE_SCOPE_PROJECT, "", `"": must be an absolute directory path`},
		{"global with a value", v1.RuleScope_RULE_SCOPE_GLOBAL, "/srv/app", `"/srv/app": must be empty for a global rule`},
		{"unspecified with a value", v1.RuleScope_RULE_SCOPE_UNSPECIFIED, "/srv/app", `"/srv/app": must be empty for a global rule`},
		{"empty session", v1.RuleScope_RULE_SCOPE_SESSION, "", `"": must be a session id`},
	} {
		_, err := c.perms.AddRule(c.ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{
			Pattern: "Bash(ls:*)", Behavior: v1.Behavior_BEHAVIOR_ALLOW, Scope: tc.scope, ScopeValue: tc.value}}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "rule.scope_value "+tc.says) {
			t.Errorf("%s: %v; want InvalidArgument saying rule.scope_value %s", tc.name, err, tc.says)
		}
	}
	list, err := c.perms.ListRules(c.ctx, connect.NewRequest(&v1.ListRulesRequest{}))
	if err != nil || len(list.Msg.Rules) != 0 {
		t.Fatalf("rules stored for refused requests: %v, %v", list.Msg.GetRules(), err)
	}

	res, err := c.perms.AddRule(c.ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{
		Pattern: "Bash(ls:*)", Behavior: v1.Behavior_BEHAVIOR_ALLOW, Scope: v1.RuleScope_RULE_SCOPE_PROJECT, ScopeValue: "/srv/./app/../app/"}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Msg.Rule.ScopeValue; got != "/srv/app" {
		t.Errorf("project rule stored for %q, want /srv/app", got)
	}
	res, err = c.perms.AddRule(c.ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{
		Pattern: "Bash(ls:*)", Behavior: v1.Behavior_BEHAVIOR_DENY, Scope: v1.RuleScope_RULE_SCOPE_GLOBAL}}))
	if err != nil || res.Msg.Rule.Scope != v1.RuleScope_RULE_SCOPE_GLOBAL {
		t.Errorf("global rule: %v, %v", res.Msg.GetRule(), err)
	}
}

// TestRuleNotFoundInUsersWords: an unknown rule or session is NotFound,
// said in the client's words without the store's internals.
func TestRuleNotFoundInUsersWords(t *testing.T) {
	c := start(t)
	_, err := c.perms.RemoveRule(c.ctx, connect.NewRequest(&v1.RemoveRuleRequest{RuleId: "12345"}))
	if msg := connectMessage(err); connect.CodeOf(err) != connect.CodeNotFound ||
		msg != "no rule with id 12345 (claudectl rules list shows the rules)" {
		t.Errorf("RemoveRule(12345): %v; want NotFound in the user's words", err)
	}
	_, err = c.perms.AddRule(c.ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{
		Pattern: "Bash(ls:*)", Behavior: v1.Behavior_BEHAVIOR_ALLOW, Scope: v1.RuleScope_RULE_SCOPE_SESSION, ScopeValue: "nope"}}))
	if msg := connectMessage(err); connect.CodeOf(err) != connect.CodeNotFound ||
		msg != `no session "nope" (claudectl sessions lists them)` {
		t.Errorf("AddRule for session nope: %v; want NotFound in the user's words", err)
	}

	// Listing or watching what waits in an unknown session says so, as
	// Subscribe does, rather than an empty list.
	const noSession = `no session "nope" (claudectl sessions lists them)`
	_, err = c.perms.ListPending(c.ctx, connect.NewRequest(&v1.ListPendingRequest{SessionId: "nope"}))
	if msg := connectMessage(err); connect.CodeOf(err) != connect.CodeNotFound || msg != noSession {
		t.Errorf("ListPending(nope): %v; want NotFound in the user's words", err)
	}
	_, err = c.perms.ListDecisions(c.ctx, connect.NewRequest(&v1.ListDecisionsRequest{SessionId: "nope"}))
	if msg := connectMessage(err); connect.CodeOf(err) != connect.CodeNotFound || msg != noSession {
		t.Errorf("ListDecisions(nope): %v; want NotFound in the user's words", err)
	}
	w, err := c.perms.WatchPending(c.ctx, connect.NewRequest(&v1.WatchPendingRequest{SessionId: "nope"}))
	if err == nil {
		for w.Receive() {
		}
		err = w.Err()
		w.Close()
	}
	if msg := connectMessage(err); connect.CodeOf(err) != connect.CodeNotFound || msg != noSession {
		t.Errorf("WatchPending(nope): %v; want NotFound in the user's words", err)
	}

	// A rule that exists is removed once; the second time it is not found.
	res, err := c.perms.AddRule(c.ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{
		Pattern: "Bash(ls:*)", Behavior: v1.Behavior_BEHAVIOR_ALLOW}}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.Rule.Id
	if _, err := c.perms.RemoveRule(c.ctx, connect.NewRequest(&v1.RemoveRuleRequest{RuleId: id})); err != nil {
		t.Fatal(err)
	}
	_, err = c.perms.RemoveRule(c.ctx, connect.NewRequest(&v1.RemoveRuleRequest{RuleId: id}))
	if connect.CodeOf(err) != connect.CodeNotFound || !strings.HasPrefix(connectMessage(err), "no rule with id "+id+" ") {
		t.Errorf("RemoveRule(%s) twice: %v; want NotFound", id, err)
	}
}

func connectMessage(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	return ce.Message()
}

// rulesCapped is a store that holds max rules at most, refusing one more
// as a store at its MaxRules does, error and all (the stores' own limit is
// tested by their conformance suite, storetest's RuleLimit).
type rulesCapped struct {
	store.Store
	max int
}

func (s rulesCapped) CreateRule(ctx context.Context, r *store.Rule) error {
	rules, err := s.Store.Rules(ctx)
	if err != nil {
		return err
	}
	if len(rules) >= s.max {
		return fmt.Errorf("sqlite: CreateRule %q: %w", r.Spec, &store.LimitError{What: "rules", Max: s.max})
	}
	return s.Store.CreateRule(ctx, r)
}

// TestRuleLimitInUsersWords: when the store holds all the rules it takes,
// AddRule is ResourceExhausted and says what to do, in the client's words;
// an "always" decision that would store a rule is refused the same way and
// leaves the request pending, so that it can be allowed once.
func TestRuleLimitInUsersWords(t *testing.T) {
	c := startWith(t, &daemontest.Options{WrapStore: func(s store.Store) store.Store { return rulesCapped{s, 2} }}, touchScript...)
	add := func(pattern string) error {
		_, err := c.perms.AddRule(c.ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{
			Pattern: pattern, Behavior: v1.Behavior_BEHAVIOR_ALLOW}}))
		return err
	}
	for _, p := range []string{"Bash(ls:*)", "Bash(pwd)"} {
		if err := add(p); err != nil {
			t.Fatal(err)
		}
	}
	const full = "there are 2 rules already, the most the store keeps: remove some first"
	err := add("Bash(date)")
	if msg := connectMessage(err); connect.CodeOf(err) != connect.CodeResourceExhausted ||
		msg != full+" (claudectl rules list shows them, claudectl rules rm ID removes one)" {
		t.Errorf("AddRule past the limit: %v; want ResourceExhausted saying what to do", err)
	}

	dir := t.TempDir()
	res, err := c.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: dir}, Prompt: "Create x"}))
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	c.untilIdle(t, res.Msg.Session.Id, 0, func(ev *v1.Event) {
		pr := ev.GetPermissionRequest()
		if pr == nil {
			return
		}
		asked++
		_, err := c.perms.Decide(c.ctx, connect.NewRequest(&v1.DecideRequest{RequestId: pr.RequestId,
			Behavior: v1.Behavior_BEHAVIOR_ALLOW, Always: true, Client: "alice"}))
		if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), full) {
			t.Errorf("Decide always past the rule limit: %v; want ResourceExhausted saying %q", err, full)
		}
		pend, err := c.perms.ListPending(c.ctx, connect.NewRequest(&v1.ListPendingRequest{}))
		if err != nil || len(pend.Msg.Requests) != 1 {
			t.Errorf("after the refused always: pending %v, %v; want the request still pending", pend, err)
		}
		if _, err := c.perms.Decide(c.ctx, connect.NewRequest(&v1.DecideRequest{RequestId: pr.RequestId,
			Behavior: v1.Behavior_BEHAVIOR_ALLOW, Client: "alice"})); err != nil {
			t.Errorf("Decide once after the refused always: %v", err)
		}
	})
	if asked != 1 {
		t.Fatalf("saw %d permission requests, want 1", asked)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err != nil {
		t.Errorf("x was not created after the allow: %v", err)
	}
	list, err := c.perms.ListRules(c.ctx, connect.NewRequest(&v1.ListRulesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Msg.Rules) != 2 {
		t.Errorf("rules after the refusals: %v; want the 2 added first", list.Msg.Rules)
	}
}
