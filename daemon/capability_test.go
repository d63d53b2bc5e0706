package daemon_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// hideCapability runs the real CLI but removes a capability from what it
// prints, as a CLI without it would print.
type hideCapability struct {
	claude.Transport
	capability string
}

func (h hideCapability) Start(ctx context.Context, cmd *claude.Command) (claude.Conn, error) {
	c, err := h.Transport.Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return hiddenConn{c, h.capability}, nil
}

type hiddenConn struct {
	claude.Conn
	capability string
}

func (c hiddenConn) ReadLine() (claude.Line, error) {
	l, err := c.Conn.ReadLine()
	q := `"` + c.capability + `"`
	l.Data = bytes.ReplaceAll(bytes.ReplaceAll(l.Data, []byte(q+","), nil), []byte(","+q), nil)
	return l, err
}

// A person who refuses an AskUserQuestion dismisses it: to a CLI that lists
// ask_user_question_unanswered_v1 (2.1.329 on) the daemon answers with the
// questions marked unanswered and the refusal's message as what Claude
// reads, not a failed tool call; to a CLI without the capability, which
// may refuse such an answer whole, with the denial as before. The audit
// trail has the person's denial either way. On the real CLI.
func TestQuestionRefusedByCapability(t *testing.T) {
	question := map[string]any{"questions": []any{map[string]any{"question": "Which colour?", "header": "Colour", "multiSelect": false,
		"options": []any{map[string]any{"label": "red", "description": "warm"}, map[string]any{"label": "blue", "description": "cold"}}}}}
	for _, c := range []struct {
		name      string
		hide      bool
		dismissed bool
	}{{"the CLI lists the capability", false, true}, {"a CLI without it", true, false}} {
		t.Run(c.name, func(t *testing.T) {
			opts := &daemontest.Options{}
			if c.hide {
				opts.Transport = hideCapability{&claude.ProcessTransport{}, string(claude.CapabilityAskUserQuestionUnanswered)}
			}
			td := daemontest.Start(t, opts,
				claudetest.Reply(claudetest.ToolUseID("toolu_q", "AskUserQuestion", question)),
				claudetest.Reply(claudetest.Text("Fine.")))
			d, ctx := td.D, td.Ctx
			s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "ask me")
			if err != nil {
				t.Fatal(err)
			}
			sawResult := false
			for ev, err := range d.Subscribe(ctx, s.ID, 0) {
				if err != nil {
					t.Fatal(err)
				}
				if pr, ok := ev.Body.(*daemon.PermissionRequest); ok {
					if _, _, err := d.Decide(ctx, daemon.Decision{RequestID: pr.RequestID, Message: "not now", Client: "alice"}); err != nil {
						t.Fatal(err)
					}
				}
				sawResult = sawResult || ev.Type == "result"
				if st, ok := ev.Body.(*daemon.StatusChange); ok && sawResult && st.Status == store.StatusIdle {
					break
				}
			}
			reqs := td.Model.Requests()
			if len(reqs) < 2 {
				t.Fatalf("%d requests to the model", len(reqs))
			}
			out, isErr, ok := reqs[1].ToolResult("toolu_q")
			if !ok || isErr == c.dismissed || !strings.Contains(out, "not now") {
				t.Errorf("the question's tool_result %q (is_error %v); want dismissed %v", out, isErr, c.dismissed)
			}
			if c.dismissed != strings.Contains(out, "Not answered: not now") {
				t.Errorf("the question's tool_result %q; want dismissed %v", out, c.dismissed)
			}
			decs, err := d.Decisions(ctx, store.DecisionFilter{SessionID: s.ID})
			if err != nil || len(decs) != 1 || decs[0].Behavior != "deny" || decs[0].Message != "not now" || decs[0].By != "client:alice" {
				t.Errorf("the audit trail: %+v, %v; want alice's denial", decs, err)
			}
		})
	}
}
