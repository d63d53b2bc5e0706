package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// waitSpares waits until n spare CLIs are ready and returns their pids.
func waitSpares(t *testing.T, td *daemontest.Daemon, n int) []int {
	t.Helper()
	for {
		if pids := daemon.SparePIDsForTest(td.D); len(pids) == n {
			return pids
		}
		select {
		case <-td.Ctx.Done():
			ready, taken := td.D.Spares()
			t.Fatalf("%d spare CLIs ready (%d taken), want %d", ready, taken, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitGone waits until process pid has exited and been reaped.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventKinds are the direction, type and subtype of session id's stored
// events up to and including its first prompt, and whether their seqs run
// 1, 2, 3...
func eventKinds(t *testing.T, td *daemontest.Daemon, id string) (kinds []string, fromOne bool) {
	t.Helper()
	fromOne = true
	want := int64(1)
	for ev, err := range td.DB().Events(td.Ctx, id, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq != want {
			fromOne = false
		}
		want = ev.Seq + 1
		k := fmt.Sprintf("%s %s/%s", ev.Direction, ev.Type, ev.Subtype)
		if ev.Type == "status" {
			k += " " + string(ev.Raw)[:min(len(ev.Raw), 30)]
		}
		kinds = append(kinds, k)
		if ev.Direction == store.ToCLI && ev.Type == "user" {
			break
		}
	}
	return kinds, fromOne
}

// A session created with the options of a recent one takes the spare CLI
// started for them: its prompt reaches that CLI and is answered, its log
// begins at seq 1 with what a cold start's holds (the initialize request
// written to the spare before any session had it), and its conversation
// is its own (another id than the first session's, with a transcript).
// A session with other options starts its own CLI; the daemon's Close
// ends the spare it keeps.
func TestSpareCLITakenByMatchingSession(t *testing.T) {
	home := t.TempDir()
	td := daemontest.Start(t, &daemontest.Options{Spares: 2, SpareLifetime: time.Minute, CLIEnv: map[string]string{"HOME": home}},
		claudetest.Reply(claudetest.Text("Cold answer.")),
		claudetest.Reply(claudetest.Text("Warm answer.")),
		claudetest.Reply(claudetest.Text("Other answer.")))
	d, ctx := td.D, td.Ctx
	dir := t.TempDir()
	opts := &daemon.SessionOptions{Cwd: dir, AllowedTools: []string{"Read"}}
	a, err := d.Create(ctx, opts, "first prompt")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, ctx, a.ID, store.StatusIdle)
	first := waitSpares(t, td, 1)[0]

	b, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir, AllowedTools: []string{"Read"}}, "second prompt")
	if err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, d, ctx, b.ID, store.StatusIdle)
	if _, taken := d.Spares(); taken != 1 {
		t.Fatalf("%d spares taken, want 1: the second session started its own CLI", taken)
	}
	if got.Totals.Turns != 1 {
		t.Errorf("the session on the spare: %d turns, want 1", got.Totals.Turns)
	}
	reqs := td.Model.Requests()
	if conv := reqs[len(reqs)-1].Transcript(); !strings.Contains(conv, "second prompt") || strings.Contains(conv, "first prompt") {
		t.Errorf("the spare's request to the model:\n%s", conv)
	}
	if a2, _ := d.Session(ctx, a.ID); got.ClaudeSessionID == "" || got.ClaudeSessionID == a2.ClaudeSessionID {
		t.Errorf("conversation ids: the spare's session %q, the first %q", got.ClaudeSessionID, a2.ClaudeSessionID)
	}
	transcripts, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", got.ClaudeSessionID+".jsonl"))
	if len(transcripts) != 1 {
		t.Errorf("no transcript of the spare's conversation %s under %s", got.ClaudeSessionID, home)
	} else if raw, _ := os.ReadFile(transcripts[0]); !strings.Contains(string(raw), `"text":"second prompt"`) {
		t.Errorf("the spare's transcript %s lacks its prompt (%d bytes)", transcripts[0], len(raw))
	}
	cold, coldFromOne := eventKinds(t, td, a.ID)
	warm, warmFromOne := eventKinds(t, td, b.ID)
	if !coldFromOne || !warmFromOne || !slices.Equal(cold, warm) {
		t.Errorf("a cold start's log begins (from seq 1: %v)\n  %s\nthe spare's (from seq 1: %v)\n  %s",
			coldFromOne, strings.Join(cold, "\n  "), warmFromOne, strings.Join(warm, "\n  "))
	}
	if !slices.ContainsFunc(warm, func(k string) bool { return strings.Contains(k, "control_request/initialize") }) {
		t.Errorf("the spare's initialize request is not in its session's log:\n  %s", strings.Join(warm, "\n  "))
	}

	// The pool starts another for the options just used; other options
	// take none.
	if again := waitSpares(t, td, 1)[0]; again == first {
		t.Errorf("the spare taken (pid %d) is still in the pool", first)
	}
	c, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir}, "third prompt")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, ctx, c.ID, store.StatusIdle)
	if _, taken := d.Spares(); taken != 1 {
		t.Errorf("a session with other options took a spare (%d taken)", taken)
	}
	pids := waitSpares(t, td, 2) // one for each option set
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		waitGone(t, pid, "a spare CLI after the daemon's Close")
	}
}

// A spare nobody takes is closed after sessions.spare_lifetime.
func TestSpareCLIExpires(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{Spares: 1, SpareLifetime: 3 * time.Second},
		claudetest.Reply(claudetest.Text("Answer.")))
	s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "a prompt")
	if err != nil {
		t.Fatal(err)
	}
	pid := waitSpares(t, td, 1)[0] // 3 s is long enough to see it, even on a busy machine
	waitGone(t, pid, "a spare past its lifetime")
	if ready, taken := td.D.Spares(); ready != 0 || taken != 0 {
		t.Errorf("after the spare's lifetime: %d ready, %d taken", ready, taken)
	}
	waitStatus(t, td.D, td.Ctx, s.ID, store.StatusIdle) // the session goes on
}

// A spare takes one of the sessions.max_running slots, and is the first to
// give it up: a session that would queue for one starts at once, in the
// spare's place.
func TestSpareGivesWayToQueuedSession(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{Spares: 1, SpareLifetime: time.Minute, MaxRunning: 2},
		claudetest.Reply(claudetest.Text("First.")),
		claudetest.Reply(claudetest.Text("Second.")))
	d, ctx := td.D, td.Ctx
	a, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "first prompt")
	if err != nil {
		t.Fatal(err)
	}
	pid := waitSpares(t, td, 1)[0]
	waitStatus(t, d, ctx, a.ID, store.StatusIdle)
	b, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "second prompt") // other options
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, ctx, b.ID, store.StatusIdle)
	waitGone(t, pid, "the spare that gave its slot")
	if s, _ := d.Session(ctx, a.ID); s.Status != store.StatusIdle {
		t.Errorf("the first session is %s: it was suspended for the second, not the spare", s.Status)
	}
}

// A change of the pool's settings (a reload) closes the spares running;
// with sessions.spare_clis 0 no more start.
func TestSetSparesClosesSpares(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{Spares: 1, SpareLifetime: time.Minute},
		claudetest.Reply(claudetest.Text("First.")),
		claudetest.Reply(claudetest.Text("Second.")))
	d, ctx := td.D, td.Ctx
	dir := t.TempDir()
	a, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir}, "first prompt")
	if err != nil {
		t.Fatal(err)
	}
	pid := waitSpares(t, td, 1)[0]
	d.SetSpares(0, time.Minute)
	waitGone(t, pid, "a spare after sessions.spare_clis became 0")
	waitStatus(t, d, ctx, a.ID, store.StatusIdle)
	b, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir}, "second prompt")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, ctx, b.ID, store.StatusIdle)
	if ready, taken := d.Spares(); ready != 0 || taken != 0 || len(daemon.SparePIDsForTest(d)) != 0 {
		t.Errorf("with no spares allowed: %d ready, %d taken", ready, taken)
	}
}

// The daemon's Close ends a spare whose CLI is still starting (one that
// never answers its initialize request here) at once, instead of waiting
// for the start to give up.
func TestCloseEndsStartingSpare(t *testing.T) {
	cli := filepath.Join(t.TempDir(), "claude")
	script := "#!/bin/sh\n[ \"$1\" = --version ] && { echo '2.1.332 (Claude Code)'; exit 0; }\nexec sleep 600\n"
	if err := os.WriteFile(cli, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	td := daemontest.Start(t, &daemontest.Options{CLIPath: cli, Spares: 1, SpareLifetime: time.Minute})
	if _, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, ""); err != nil {
		t.Fatal(err)
	}
	for daemon.SparesForTest(td.D) == 0 {
		sleepT(t, td)
	}
	start := time.Now()
	if err := td.D.Close(); err != nil {
		t.Fatal(err)
	}
	// The initialize request waits a minute for its answer: a Close that
	// waited for the spare's start would take that long.
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("Close took %s with a spare starting", took)
	}
}

func sleepT(t *testing.T, td *daemontest.Daemon) {
	t.Helper()
	select {
	case <-td.Ctx.Done():
		t.Fatal(td.Ctx.Err())
	case <-time.After(10 * time.Millisecond):
	}
}
