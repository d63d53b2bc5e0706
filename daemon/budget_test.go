package daemon_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// expensive is a turn that costs more than a cent.
func expensive(text string) claudetest.Turn {
	t := claudetest.Reply(claudetest.Text(text))
	t.InputTokens, t.OutputTokens = 200000, 50000
	return t
}

// waitHeld waits until session id has status st and keeps queued prompts.
func waitHeld(t *testing.T, d *daemon.Daemon, td *daemontest.Daemon, id string, st store.SessionStatus, queued int64) *store.Session {
	t.Helper()
	for {
		s := waitStatus(t, d, td.Ctx, id, st)
		if s.QueuedPrompts == queued {
			return s
		}
		select {
		case <-td.Ctx.Done():
			t.Fatalf("session %s keeps %d prompts, want %d", id, s.QueuedPrompts, queued)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestBudgetHoldsSession: a session whose turn reaches its spend cap
// finishes that turn, then is held (status budget, saying which cap); a
// prompt sent meanwhile is kept, across a restart of the daemon, and no
// turn starts; once an approver raises the cap the kept prompt runs.
func TestBudgetHoldsSession(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{Budgets: daemon.Budgets{SessionUSD: 0.01}},
		expensive("That was expensive."), claudetest.Reply(claudetest.Text("The kept prompt ran.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "spend")
	if err != nil {
		t.Fatal(err)
	}
	// Sent while the first turn runs or once it ended: kept either way.
	if err := d.Send(ctx, s.ID, "second"); err != nil {
		t.Fatal(err)
	}
	held := waitHeld(t, d, td, s.ID, store.StatusBudget, 1)
	last := lastStatus(t, td, s.ID)
	if !strings.HasPrefix(last.Detail, "waiting for budget: $") || !strings.Contains(last.Detail, " of $0.01 for this session") {
		t.Errorf("the budget status's detail: %q", last.Detail)
	}
	if hint := d.BudgetHint(ctx, s.ID); !strings.Contains(hint, "waiting for budget") || !strings.Contains(hint, "claudectl budget") {
		t.Errorf("Send's hint: %q", hint)
	}
	if n := len(td.Model.Requests()); n != 1 || held.Totals.Turns != 1 {
		t.Fatalf("%d model requests, %d turns: a turn started past the cap", n, held.Totals.Turns)
	}
	_, holds, _, err := d.BudgetCaps(ctx)
	if err != nil || len(holds) != 1 || holds[0].SessionID != s.ID || holds[0].Cap.Cap != store.CapSession || holds[0].Queued != 1 {
		t.Fatalf("holds %+v, %v", holds, err)
	}

	// Kept across a restart.
	td.Restart()
	d = td.D
	waitHeld(t, d, td, s.ID, store.StatusBudget, 1)

	// A held session without a CLI takes a model for its next turn, as a
	// suspended one does.
	if err := d.SetModel(ctx, s.ID, "opus"); err != nil {
		t.Errorf("SetModel on a held session without a CLI: %v", err)
	}
	if _, _, err := d.RaiseBudget(ctx, s.ID, 0.001, false, "alice"); err == nil || !strings.Contains(err.Error(), "above the $") {
		t.Errorf("raising the cap below what was spent: %v", err)
	}
	c, released, err := d.RaiseBudget(ctx, s.ID, 100, false, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if c.LimitUSD != 100 || !c.Raised || len(released) != 1 || released[0] != s.ID {
		t.Errorf("RaiseBudget = %+v, released %v", c, released)
	}
	got := waitTurns(t, d, ctx, s.ID, 2)
	if got.QueuedPrompts != 0 {
		t.Errorf("%d prompts still kept after the kept one ran", got.QueuedPrompts)
	}
	if conv := td.Model.Requests()[1].LastUserText(); conv != "second" {
		t.Errorf("the turn after the raise answered %q, want the kept prompt", conv)
	}
	var se *daemon.StateError
	if _, _, err := d.RaiseBudget(ctx, s.ID, 200, false, "alice"); !errors.As(err, &se) {
		t.Errorf("raising the cap of a session not held: %v", err)
	}
}

// TestBudgetDirectoryCapAndOneTurn: a directory's daily cap holds every
// session of it once reached, a new one's first prompt included; one more
// turn lets a held session run exactly one.
func TestBudgetDirectoryCapAndOneTurn(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{Budgets: daemon.Budgets{DirectoryUSDPerDay: 0.01}},
		expensive("Spent."), claudetest.Reply(claudetest.Text("One more.")))
	d, ctx := td.D, td.Ctx
	dir := t.TempDir()
	a, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir}, "spend")
	if err != nil {
		t.Fatal(err)
	}
	waitHeld(t, d, td, a.ID, store.StatusBudget, 0)
	b, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir}, "first of b")
	if err != nil {
		t.Fatal(err)
	}
	waitHeld(t, d, td, b.ID, store.StatusBudget, 1)
	if last := lastStatus(t, td, b.ID); !strings.Contains(last.Detail, "today for "+dir) {
		t.Errorf("b's detail: %q", last.Detail)
	}
	other, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	// Another directory's cap is its own: its first turn runs (and, as
	// expensive, reaches it).
	if got := waitHeld(t, d, td, other.ID, store.StatusBudget, 0); got.Totals.Turns != 1 {
		t.Errorf("a session of another directory ran %d turns", got.Totals.Turns)
	}

	if _, _, err := d.RaiseBudget(ctx, b.ID, 0, true, "bob"); err != nil {
		t.Fatal(err)
	}
	// b's first turn runs (the script's first reply: expensive), then b
	// is held again, the directory being over its cap still.
	waitHeld(t, d, td, b.ID, store.StatusBudget, 0)
	if got, _ := d.Session(ctx, b.ID); got.Totals.Turns != 1 {
		t.Errorf("b ran %d turns on one more turn", got.Totals.Turns)
	}
	if err := d.CloseSession(ctx, a.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Session(ctx, a.ID); got.Status != store.StatusClosed {
		t.Errorf("a held session closed: %s", got.Status)
	}
}

// TestBudgetRaisedInSettings: a session held when the daemon stopped, no
// cap holding it once it starts again (its settings raised the cap), is
// released as it starts: its kept prompt runs.
func TestBudgetRaisedInSettings(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{Budgets: daemon.Budgets{SessionUSD: 0.01}},
		expensive("That was expensive."), claudetest.Reply(claudetest.Text("The kept prompt ran.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "spend")
	if err != nil {
		t.Fatal(err)
	}
	waitHeld(t, d, td, s.ID, store.StatusBudget, 0)
	if err := d.Send(ctx, s.ID, "second"); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, d, td, s.ID, store.StatusBudget, 1)
	td.RestartWithBudgets(daemon.Budgets{SessionUSD: 100})
	if got := waitTurns(t, td.D, ctx, s.ID, 2); got.QueuedPrompts != 0 {
		t.Errorf("%d prompts still kept", got.QueuedPrompts)
	}
}
