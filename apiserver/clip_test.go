package apiserver_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// TestErrorsClipClientValues: an error quotes what the client sent
// clipped, not whole: a 100,000-byte session id made GetSession answer a
// 100 KB error (and cwd, add_dirs, a rule's scope_value, a mode, a request
// id alike).
func TestErrorsClipClientValues(t *testing.T) {
	c := start(t)
	long := "/" + strings.Repeat("x", 100_000)
	s, err := c.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: t.TempDir()}}))
	if err != nil {
		t.Fatal(err)
	}
	id := s.Msg.Session.Id
	call := func(name string, f func(context.Context) error) {
		t.Helper()
		err := f(c.ctx)
		if err == nil {
			t.Errorf("%s: no error", name)
			return
		}
		if n := len(err.Error()); n > 1000 {
			t.Errorf("%s: an error of %d bytes: %.200s…", name, n, err)
		}
	}
	call("GetSession", func(ctx context.Context) error {
		_, err := c.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: long}))
		return err
	})
	call("Send", func(ctx context.Context) error {
		_, err := c.sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: long, Text: "hi"}))
		return err
	})
	call("Interrupt", func(ctx context.Context) error {
		_, err := c.sessions.Interrupt(ctx, connect.NewRequest(&v1.InterruptRequest{SessionId: long}))
		return err
	})
	call("SetModel", func(ctx context.Context) error {
		_, err := c.sessions.SetModel(ctx, connect.NewRequest(&v1.SetModelRequest{SessionId: long, Model: "opus"}))
		return err
	})
	call("SetModel model", func(ctx context.Context) error {
		_, err := c.sessions.SetModel(ctx, connect.NewRequest(&v1.SetModelRequest{SessionId: id, Model: long}))
		return err
	})
	call("SetPermissionMode mode", func(ctx context.Context) error {
		_, err := c.sessions.SetPermissionMode(ctx, connect.NewRequest(&v1.SetPermissionModeRequest{SessionId: id, Mode: long}))
		return err
	})
	call("CloseSession", func(ctx context.Context) error {
		_, err := c.sessions.CloseSession(ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: long}))
		return err
	})
	call("ResumeSession", func(ctx context.Context) error {
		_, err := c.sessions.ResumeSession(ctx, connect.NewRequest(&v1.ResumeSessionRequest{SessionId: long}))
		return err
	})
	call("ForkSession", func(ctx context.Context) error {
		_, err := c.sessions.ForkSession(ctx, connect.NewRequest(&v1.ForkSessionRequest{SessionId: long}))
		return err
	})
	call("Subscribe", func(ctx context.Context) error {
		st, err := c.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: long}))
		if err != nil {
			return err
		}
		defer st.Close()
		for st.Receive() {
		}
		return st.Err()
	})
	call("CreateSession cwd", func(ctx context.Context) error {
		_, err := c.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: long}}))
		return err
	})
	call("CreateSession add_dirs", func(ctx context.Context) error {
		_, err := c.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: t.TempDir(), AddDirs: []string{long}}}))
		return err
	})
	call("CreateSession permission_mode", func(ctx context.Context) error {
		_, err := c.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: t.TempDir(), PermissionMode: long}}))
		return err
	})
	call("Decide", func(ctx context.Context) error {
		_, err := c.perms.Decide(ctx, connect.NewRequest(&v1.DecideRequest{RequestId: long, Behavior: v1.Behavior_BEHAVIOR_ALLOW}))
		return err
	})
	call("AddRule global scope_value", func(ctx context.Context) error {
		_, err := c.perms.AddRule(ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{Pattern: "Bash(ls:*)", Behavior: v1.Behavior_BEHAVIOR_ALLOW, ScopeValue: long}}))
		return err
	})
	call("AddRule session scope_value", func(ctx context.Context) error {
		_, err := c.perms.AddRule(ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{Pattern: "Bash(ls:*)", Behavior: v1.Behavior_BEHAVIOR_ALLOW,
			Scope: v1.RuleScope_RULE_SCOPE_SESSION, ScopeValue: long}}))
		return err
	})
	call("AddRule project scope_value", func(ctx context.Context) error {
		_, err := c.perms.AddRule(ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{Pattern: "Bash(ls:*)", Behavior: v1.Behavior_BEHAVIOR_ALLOW,
			Scope: v1.RuleScope_RULE_SCOPE_PROJECT, ScopeValue: "x" + long}}))
		return err
	})
	call("AddRule pattern", func(ctx context.Context) error {
		_, err := c.perms.AddRule(ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{Pattern: "Bash(" + long, Behavior: v1.Behavior_BEHAVIOR_ALLOW}}))
		return err
	})
	call("RemoveRule", func(ctx context.Context) error {
		_, err := c.perms.RemoveRule(ctx, connect.NewRequest(&v1.RemoveRuleRequest{RuleId: long}))
		return err
	})
	call("ListPending", func(ctx context.Context) error {
		_, err := c.perms.ListPending(ctx, connect.NewRequest(&v1.ListPendingRequest{SessionId: long}))
		return err
	})
	call("ListDecisions", func(ctx context.Context) error {
		_, err := c.perms.ListDecisions(ctx, connect.NewRequest(&v1.ListDecisionsRequest{SessionId: long}))
		return err
	})

	// A number is quoted as sent.
	st, err := c.sessions.Subscribe(c.ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id, AfterSeq: -5}))
	if err == nil {
		for st.Receive() {
		}
		err = st.Err()
		st.Close()
	}
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), `after_seq "-5"`) {
		t.Errorf("Subscribe after_seq -5: %v; want InvalidArgument quoting -5", err)
	}
}
