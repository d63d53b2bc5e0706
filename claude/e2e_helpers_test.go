package claude_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
)

// e2e bundles what an end-to-end test needs: the real CLI, a scripted fake
// API and options pointing one at the other.
type e2e struct {
	t    *testing.T
	srv  *claudetest.Server
	opts *claude.Options
	ctx  context.Context
}

func newE2E(t *testing.T, turns ...claudetest.Turn) *e2e {
	return newE2EResponder(t, claudetest.Script(turns...))
}

func newE2EResponder(t *testing.T, r claudetest.Responder) *e2e {
	t.Helper()
	bin := claudetest.CLIPath(t)
	srv := claudetest.NewServer(r)
	t.Cleanup(srv.Close)
	home := t.TempDir()
	env := srv.EnvMap(home)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return &e2e{t: t, srv: srv, ctx: ctx, opts: &claude.Options{
		CLIPath: bin,
		Cwd:     t.TempDir(),
		Env:     env,
		Stderr:  func(line string) { t.Logf("cli stderr: %s", line) },
	}}
}

// start starts a session and closes it at cleanup.
func (e *e2e) start() *claude.Session {
	e.t.Helper()
	s, err := claude.Start(e.ctx, e.opts)
	if err != nil {
		e.t.Fatalf("Start: %v", err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// turn sends text and collects the turn's messages up to the result.
func (e *e2e) turn(s *claude.Session, text string) ([]claude.Message, *claude.ResultMessage) {
	e.t.Helper()
	if err := s.SendText(e.ctx, text); err != nil {
		e.t.Fatalf("SendText: %v", err)
	}
	return e.collect(s)
}

func (e *e2e) collect(s *claude.Session) ([]claude.Message, *claude.ResultMessage) {
	e.t.Helper()
	var msgs []claude.Message
	for m, err := range s.Turn(e.ctx) {
		if err != nil {
			e.t.Fatalf("reading turn: %v (stderr: %s)", err, s.StderrTail())
		}
		msgs = append(msgs, m)
		if r, ok := m.(*claude.ResultMessage); ok {
			return msgs, r
		}
	}
	e.t.Fatalf("turn ended without a result")
	return nil, nil
}

func assistantText(msgs []claude.Message) string {
	var sb strings.Builder
	for _, m := range msgs {
		if a, ok := m.(*claude.AssistantMessage); ok {
			sb.WriteString(a.Text())
		}
	}
	return sb.String()
}
