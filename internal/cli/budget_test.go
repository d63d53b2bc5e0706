package cli

import (
	"regexp"
	"strings"
	"testing"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// TestBudgetCommands: run says its session is held at the cap its turn
// reached, send keeps a prompt for it, budget and pending show the hold
// and the spend against the caps, and budget raise releases it: the kept
// prompt runs.
func TestBudgetCommands(t *testing.T) {
	costly := claudetest.Reply(claudetest.Text("That was expensive."))
	costly.InputTokens, costly.OutputTokens = 200000, 50000
	d, model := startDaemonModel(t, &daemontest.Options{Budgets: daemon.Budgets{SessionUSD: 0.01}},
		costly, claudetest.Reply(claudetest.Text("The kept prompt ran.")))
	o := claudectl(t, d.inv(), "run", "--keep", "--cwd", t.TempDir(), "spend")
	m := regexp.MustCompile(`daemon session (\S+) `).FindStringSubmatch(o.stderr)
	if o.code != 0 || m == nil {
		t.Fatalf("run: exit %d, stderr %q", o.code, o.stderr)
	}
	id := m[1]
	d.waitStatus(t, id, v1.SessionStatus_SESSION_STATUS_BUDGET)

	o = claudectl(t, d.inv(), "send", id, "second")
	if o.code != 0 || !strings.HasPrefix(o.stdout, "Kept for session "+id+", waiting for budget: $") || !strings.Contains(o.stdout, "of $0.01 for this session") {
		t.Errorf("send to a held session: exit %d, stdout %q", o.code, o.stdout)
	}
	o = claudectl(t, d.inv(), "budget")
	if o.code != 0 || !regexp.MustCompile(`session\s+`+id+`\s+\$\S+\s+\$0\.01`).MatchString(o.stdout) ||
		!strings.Contains(o.stdout, "Held at a spend cap:\n  "+id+"  waiting for budget") || !strings.Contains(o.stdout, "1 prompt waiting") ||
		!strings.Contains(o.stdout, "claudectl budget raise "+id+" USD") {
		t.Errorf("budget: exit %d, stdout:\n%s", o.code, o.stdout)
	}
	o = claudectl(t, d.inv(), "pending")
	if o.code != 0 || !strings.Contains(o.stdout, "Held at a spend cap:\n  "+id) {
		t.Errorf("pending: exit %d, stdout:\n%s", o.code, o.stdout)
	}
	if len(model.Requests()) != 1 {
		t.Fatalf("%d model requests: a turn started past the cap", len(model.Requests()))
	}

	o = claudectl(t, d.inv(), "budget", "raise", id, "0.001")
	if o.code != 1 || !strings.Contains(o.stderr, "must be above the $") {
		t.Errorf("raise below the spend: exit %d, stderr %q", o.code, o.stderr)
	}
	o = claudectl(t, d.inv(), "budget", "raise", id[:10], "10")
	if o.code != 0 || o.stdout != "Released: the session cap of "+id+" raised to $10.00; session "+id+" goes on.\n" {
		t.Errorf("raise: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	d.waitResults(t, id, 2)
	if got := model.Requests()[1].LastUserText(); got != "second" {
		t.Errorf("the turn after the raise answered %q", got)
	}
	o = claudectl(t, d.inv(), "budget", "allow", id)
	if o.code != 1 || !strings.Contains(o.stderr, "not waiting for budget") {
		t.Errorf("allow a session not held: exit %d, stderr %q", o.code, o.stderr)
	}
}
