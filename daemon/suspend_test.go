package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// lastStatus returns the detail of the last status event of session id.
func lastStatus(t *testing.T, td *daemontest.Daemon, id string) *daemon.StatusChange {
	t.Helper()
	ctx, cancel := context.WithCancel(td.Ctx)
	defer cancel()
	var last *daemon.StatusChange
	s, err := td.D.Session(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for ev, err := range td.D.Subscribe(ctx, id, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if b, ok := ev.Body.(*daemon.StatusChange); ok {
			last = b
		}
		if ev.Seq >= s.LastSeq {
			break
		}
	}
	return last
}

// An idle session's CLI is closed after the idle timeout; the next prompt
// resumes it as if it had never stopped, with the model and mode switched
// while it was suspended.
func TestIdleSessionSuspendsAndResumes(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{IdleTimeout: 300 * time.Millisecond},
		claudetest.Reply(claudetest.Text("I will remember 42.")),
		claudetest.Reply(claudetest.Text("You said 42.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "Remember the number 42.")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, td.D, td.Ctx, s.ID, store.StatusSuspended)
	if st := lastStatus(t, td, s.ID); st == nil || !strings.Contains(st.Detail, "idle for 300ms") {
		t.Errorf("suspension's status event: %+v", st)
	}
	if n := d.Running(); n != 0 {
		t.Errorf("%d sessions still have a CLI", n)
	}
	if err := d.SetModel(ctx, s.ID, "claude-sonnet-4-5"); err != nil {
		t.Fatalf("SetModel on a suspended session: %v", err)
	}
	if err := d.Interrupt(ctx, s.ID, "test"); err != nil {
		t.Errorf("Interrupt of a suspended session (nothing runs): %v", err)
	}
	if err := d.Send(ctx, s.ID, "Which number?"); err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, td.D, td.Ctx, s.ID, store.StatusSuspended) // the turn, then idle again
	if got.Process != 2 || got.Totals.Turns != 2 || got.Model != "claude-sonnet-4-5" {
		t.Errorf("after the resumed turn: process %d, turns %d, model %q", got.Process, got.Totals.Turns, got.Model)
	}
	reqs := td.Model.Requests()
	last := reqs[len(reqs)-1]
	if conv := last.Transcript(); !strings.Contains(conv, "I will remember 42.") || !strings.Contains(conv, "Which number?") {
		t.Errorf("the resumed CLI lacks the first exchange:\n%s", conv)
	}
	if last.Model != "claude-sonnet-4-5" {
		t.Errorf("resumed with model %q, want the one set while suspended", last.Model)
	}
}

// A session created and never prompted has no conversation to resume: its
// first prompt after a suspension starts one.
func TestSuspendedBeforeAnyPrompt(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{IdleTimeout: 200 * time.Millisecond},
		claudetest.Reply(claudetest.Text("Hello.")))
	s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, td.D, td.Ctx, s.ID, store.StatusSuspended)
	if err := td.D.Send(td.Ctx, s.ID, "hi"); err != nil {
		t.Fatal(err)
	}
	if got := waitStatus(t, td.D, td.Ctx, s.ID, store.StatusSuspended); got.Totals.Turns != 1 || got.ClaudeSessionID == "" {
		t.Errorf("after the first prompt: turns %d, claude id %q", got.Totals.Turns, got.ClaudeSessionID)
	}
}

// Beyond max_running a launch queues (status queued) until a session goes
// idle, which is then suspended to make room.
func TestMaxRunningQueues(t *testing.T) {
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("slow ", 40))}, ChunkSize: 5, DeltaDelay: 20 * time.Millisecond}
	td := daemontest.Start(t, &daemontest.Options{MaxRunning: 1},
		slow, claudetest.Reply(claudetest.Text("B's turn.")), claudetest.Reply(claudetest.Text("A again.")))
	d, ctx := td.D, td.Ctx
	a, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "go slowly")
	if err != nil {
		t.Fatal(err)
	}
	type created struct {
		s   *store.Session
		err error
	}
	bc := make(chan created, 1)
	go func() {
		s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "B here")
		bc <- created{s, err}
	}()
	// B waits, visibly, while A's turn runs.
	var queuedID string
	for queuedID == "" {
		all, err := d.Sessions(ctx, store.SessionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			if s.Status == store.StatusQueued {
				queuedID = s.ID
			}
		}
		select {
		case b := <-bc:
			t.Fatalf("B started while A's turn ran (max_running 1): %+v, %v", b.s, b.err)
		case <-ctx.Done():
			t.Fatal("B never showed as queued")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if d.Queued() != 1 {
		t.Errorf("Queued() = %d, want 1", d.Queued())
	}
	b := <-bc // A went idle and was suspended for B
	if b.err != nil {
		t.Fatal(b.err)
	}
	if b.s.ID != queuedID {
		t.Errorf("queued %s, started %s", queuedID, b.s.ID)
	}
	waitStatus(t, td.D, td.Ctx, a.ID, store.StatusSuspended)
	if st := lastStatus(t, td, a.ID); st == nil || !strings.Contains(st.Detail, "make room") {
		t.Errorf("A's suspension: %+v", st)
	}
	waitStatus(t, td.D, td.Ctx, b.s.ID, store.StatusIdle)
	if n := d.Running(); n != 1 {
		t.Errorf("%d sessions run, want 1", n)
	}
	// A's next prompt takes B's slot in turn.
	if err := d.Send(ctx, a.ID, "and again"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, td.D, td.Ctx, b.s.ID, store.StatusSuspended)
	if got := waitStatus(t, td.D, td.Ctx, a.ID, store.StatusIdle); got.Totals.Turns != 2 {
		t.Errorf("A after its second prompt: %d turns", got.Totals.Turns)
	}
}

// A launch that gives up while queued leaves no CLI and says why.
func TestQueuedLaunchGivesUp(t *testing.T) {
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("slow ", 100))}, ChunkSize: 5, DeltaDelay: 20 * time.Millisecond}
	td := daemontest.Start(t, &daemontest.Options{MaxRunning: 1}, slow)
	d, ctx := td.D, td.Ctx
	if _, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "go slowly"); err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := d.Create(qctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "B"); err == nil {
		t.Fatal("Create returned while the only slot was busy")
	}
	all, err := d.Sessions(ctx, store.SessionFilter{Status: store.StatusClosed})
	if err != nil || len(all) != 1 {
		t.Fatalf("closed sessions: %+v, %v", all, err)
	}
	if st := lastStatus(t, td, all[0].ID); st == nil || !strings.Contains(st.Detail, "closed while queued") {
		t.Errorf("the given-up session's status: %+v", st)
	}
	if d.Queued() != 0 || d.Running() != 1 {
		t.Errorf("queued %d, running %d; want 0, 1", d.Queued(), d.Running())
	}
}

// Three sessions started at once with one slot all get their turn, in
// order: the one granted a slot is not suspended to make room for the
// third before its own prompt is sent (it suspended itself, its loop not
// yet running, and every launch behind it hung).
func TestMaxRunningQueueOfThree(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{MaxRunning: 1},
		claudetest.Reply(claudetest.Text("One.")), claudetest.Reply(claudetest.Text("Two.")), claudetest.Reply(claudetest.Text("Three.")))
	d, ctx := td.D, td.Ctx
	type created struct {
		s   *store.Session
		err error
	}
	done := make(chan created, 3)
	for i := range 3 {
		go func() {
			s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, fmt.Sprintf("prompt %d", i))
			done <- created{s, err}
		}()
		time.Sleep(100 * time.Millisecond)
	}
	var ids []string
	for range 3 {
		select {
		case c := <-done:
			if c.err != nil {
				t.Fatal(c.err)
			}
			ids = append(ids, c.s.ID)
		case <-time.After(60 * time.Second):
			t.Fatalf("launches behind a one-slot queue hung (%d of 3 returned)", len(ids))
		}
	}
	// Each gets its turn: the last one runs, the others were suspended
	// after theirs.
	for _, id := range ids {
		deadline := time.Now().Add(30 * time.Second)
		for {
			s, err := d.Session(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if s.Totals.Turns == 1 && (s.Status == store.StatusIdle || s.Status == store.StatusSuspended) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s: %s with %d turns, want its turn done", id, s.Status, s.Totals.Turns)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if d.Running() > 1 {
		t.Errorf("%d sessions run, max_running 1", d.Running())
	}
}

// A client's close that comes while the session is being suspended (to
// make room, or idle) closes it: the client asked for closed.
func TestCloseWinsOverSuspension(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{IdleTimeout: time.Hour},
		claudetest.Reply(claudetest.Text("Done.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "hello")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, ctx, s.ID, store.StatusIdle)
	daemon.SuspendForTest(d, s.ID, "a test suspension")
	if err := d.CloseSession(ctx, s.ID, "test"); err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, d, ctx, s.ID, store.StatusClosed)
	if st := lastStatus(t, td, got.ID); st == nil || !strings.Contains(st.Detail, "closed by client:test") {
		t.Errorf("final status: %+v, want closed by the client", st)
	}
}

// A resumed CLI (after an idle suspension) and a fork's CLI go on from the
// totals their conversation's last process saved: the ledger counts each
// turn once, not the restored totals again.
func TestResumedCostCountedOnce(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{IdleTimeout: 300 * time.Millisecond},
		claudetest.Reply(claudetest.Text("One.")), claudetest.Reply(claudetest.Text("Two.")), claudetest.Reply(claudetest.Text("Three.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "one")
	if err != nil {
		t.Fatal(err)
	}
	one := waitStatus(t, d, ctx, s.ID, store.StatusSuspended).Totals
	if one.Turns != 1 || one.CostUSD <= 0 {
		t.Fatalf("after the first turn: %+v", one)
	}
	// Every request of the scripted model costs about the same.
	approx := func(got, want float64) bool { return got > want*0.95 && got < want*1.05 }
	if err := d.Send(ctx, s.ID, "two"); err != nil { // resumes it
		t.Fatal(err)
	}
	two := waitStatus(t, d, ctx, s.ID, store.StatusSuspended).Totals
	if two.Turns != 2 || !approx(two.CostUSD, 2*one.CostUSD) || !approx(float64(two.InputTokens), float64(2*one.InputTokens)) {
		t.Errorf("after a resumed turn: %+v, want twice %+v", two, one)
	}
	f, err := d.Fork(ctx, s.ID, "three")
	if err != nil {
		t.Fatal(err)
	}
	forked := waitStatus(t, d, ctx, f.ID, store.StatusSuspended).Totals
	if forked.Turns != 1 || !approx(forked.CostUSD, one.CostUSD) || !approx(float64(forked.InputTokens), float64(one.InputTokens)) {
		t.Errorf("the fork after its first turn: %+v, want %+v", forked, one)
	}
}

// A model name no CLI could take is refused by SetModel (and Create)
// before anything is stored: it used to be stored, and every later launch
// of the session failed with the CLI's exec error, for good.
func TestSetModelRefusesBadNames(t *testing.T) {
	td := daemontest.Start(t, nil, claudetest.Reply(claudetest.Text("Hi.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "hello")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, ctx, s.ID, store.StatusIdle)
	for _, bad := range []string{"a\x00b", "opus\n--settings", strings.Repeat("m", 300)} {
		var ia *daemon.InvalidArgumentError
		if err := d.SetModel(ctx, s.ID, bad); !errors.As(err, &ia) || ia.Field != "model" {
			t.Errorf("SetModel(%.20q): %v, want InvalidArgument on model", bad, err)
		}
		if _, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir(), Model: bad}, ""); !errors.As(err, &ia) || ia.Field != "options.model" {
			t.Errorf("Create with model %.20q: %v, want InvalidArgument on options.model", bad, err)
		}
	}
	if got, err := d.Session(ctx, s.ID); err != nil || got.Model != "" {
		t.Errorf("the session after refused SetModels: model %q, %v", got.Model, err)
	}
	if err := d.SetModel(ctx, s.ID, "claude-sonnet-4-5"); err != nil {
		t.Errorf("a good model: %v", err)
	}
}

// A session waiting for a remote worker to connect (the daemon waits a
// minute here, two by default) is closed at once when a client closes it,
// saying who; one that waits when the daemon stops does not hold the stop
// up, and is left for the next prompt. A suspended session being resumed
// from the queue is closed too when a client closes it, not left
// suspended.
func TestCloseWhileLaunching(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{WorkerToken: "worker-token", MaxRunning: 1},
		claudetest.Reply(claudetest.Text("Hi.")), claudetest.Reply(claudetest.Text("Again.")))
	d, ctx := td.D, td.Ctx
	// launch starts a session on a remote worker that never comes, and
	// returns its id once it waits for one.
	launch := func() (string, <-chan error) {
		t.Helper()
		created := make(chan error, 1)
		go func() {
			_, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir(), Worker: daemon.WorkerRemote}, "")
			created <- err
		}()
		for {
			all, err := d.Sessions(ctx, store.SessionFilter{Status: store.StatusStarting})
			if err != nil {
				t.Fatal(err)
			}
			if len(all) == 1 {
				return all[0].ID, created
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	id, created := launch()
	time.Sleep(200 * time.Millisecond) // waiting for the worker
	start := time.Now()
	if err := d.CloseSession(ctx, id, "alice"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("closing the session waiting for a worker took %v", took)
	}
	if err := <-created; !errors.Is(err, daemon.ErrNotRunning) {
		t.Errorf("Create of the session closed while it started: %v, want ErrNotRunning", err)
	}
	if s := waitStatus(t, d, ctx, id, store.StatusClosed); s == nil {
		t.Fatal("not closed")
	}
	if st := lastStatus(t, td, id); st == nil || st.Detail != "closed by client:alice while its CLI started" {
		t.Errorf("the closed session's last status: %+v", st)
	}

	// A local session takes the one slot; a suspended one resumed behind
	// it queues, and a client closes it there.
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "hi")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, ctx, s.ID, store.StatusIdle)
	td.Restart() // every session suspended
	d, ctx = td.D, td.Ctx
	waitStatus(t, d, ctx, s.ID, store.StatusSuspended)
	other, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "")
	if err != nil {
		t.Fatal(err)
	}
	resumed := make(chan error, 1)
	go func() { _, err := d.Resume(ctx, s.ID, "again"); resumed <- err }()
	waitStatus(t, d, ctx, s.ID, store.StatusQueued)
	if err := d.CloseSession(ctx, s.ID, "bob"); err != nil {
		t.Fatal(err)
	}
	if err := <-resumed; err == nil {
		t.Error("Resume of the session closed while queued succeeded")
	}
	waitStatus(t, d, ctx, s.ID, store.StatusClosed)
	if st := lastStatus(t, td, s.ID); st == nil || st.Detail != "closed by client:bob while queued" {
		t.Errorf("the session closed while queued: last status %+v", st)
	}
	if err := d.CloseSession(ctx, other.ID, ""); err != nil {
		t.Fatal(err)
	}

	// The daemon stops while a session waits for a worker.
	id, created = launch()
	time.Sleep(200 * time.Millisecond)
	start = time.Now()
	td.Restart()
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("stopping the daemon with a session waiting for a worker took %v", took)
	}
	if err := <-created; err == nil {
		t.Error("Create of the session the daemon stopped under succeeded")
	}
	if s := waitStatus(t, td.D, td.Ctx, id, store.StatusSuspended); s == nil {
		t.Fatal("not suspended")
	}
}

// A session's budget holds across resumes: the CLI resumed after a
// suspension reports totals that go on from its conversation's (restored),
// but counts its --max-budget-usd from what it spends itself, so the daemon
// hands it what is left of the budget. With room for two and a half
// turns, the resumed second turn ends normally and the third, over the
// budget, stops the session.
func TestBudgetAcrossResumes(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{IdleTimeout: 300 * time.Millisecond},
		claudetest.Reply(claudetest.Text("Zero.")), claudetest.Reply(claudetest.Text("One.")),
		claudetest.Reply(claudetest.Text("Two.")), claudetest.Reply(claudetest.Text("Three.")))
	d, ctx := td.D, td.Ctx
	probe, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "zero")
	if err != nil {
		t.Fatal(err)
	}
	turnCost := waitStatus(t, d, ctx, probe.ID, store.StatusSuspended).Totals.CostUSD // each costs about the same
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir(), MaxBudgetUsd: 2.5 * turnCost}, "one")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, ctx, s.ID, store.StatusSuspended)
	if err := d.Send(ctx, s.ID, "two"); err != nil { // resumes it
		t.Fatal(err)
	}
	if got := waitStatus(t, d, ctx, s.ID, store.StatusSuspended); got.Totals.Turns != 2 || got.Error != "" {
		t.Fatalf("after the resumed second turn: %d turns, error %q", got.Totals.Turns, got.Error)
	}
	if err := d.Send(ctx, s.ID, "three"); err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, d, ctx, s.ID, store.StatusClosed)
	if got.Totals.Turns != 3 || !strings.Contains(got.Error, "budget") {
		t.Errorf("after the third turn: %d turns, error %q; want 3 and the budget", got.Totals.Turns, got.Error)
	}
	// The CLI itself stopped at what was left (it would go on, in a turn
	// of many requests, had it been handed the whole budget).
	var subtypes []string
	for ev, err := range d.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "result" {
			subtypes = append(subtypes, ev.Subtype)
		}
		if ev.Seq >= got.LastSeq {
			break
		}
	}
	if want := []string{"success", "success", "error_max_budget_usd"}; !slices.Equal(subtypes, want) {
		t.Errorf("the turns' results: %v, want %v", subtypes, want)
	}
}
