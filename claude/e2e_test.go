package claude_test

import (
	"testing"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
)

func TestE2EHello(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("Hello from the fake model.")))
	s := e.start()
	msgs, res := e.turn(s, "Say hello")
	if got := assistantText(msgs); got != "Hello from the fake model." {
		t.Errorf("assistant text = %q", got)
	}
	if res.Subtype != "success" || res.IsError || res.Result != "Hello from the fake model." {
		t.Errorf("result = %+v", res)
	}
	if s.SessionID() == "" {
		t.Error("no session id")
	}
	init, err := s.Initialize(e.ctx)
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if len(init.Commands) == 0 {
		t.Errorf("initialize response has no commands: %s", init.Raw)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	var _ claude.Message = res
}
