package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
)

func TestRunServer(t *testing.T) {
	t.Parallel()
	d, model := startDaemonModel(t, nil,
		claudetest.Reply(claudetest.Text("I will make it."), claudetest.ToolUse("Bash", map[string]any{"command": "touch made.txt", "description": "create a file"})),
		claudetest.Reply(claudetest.Text("Done.")))
	dir := t.TempDir()
	o := claudectl(t, invocation{tty: true, stdin: "y\n", getenv: d.tokenEnv()}, "run", "--server", d.url, "--cwd", dir, "--model", "claude-sonnet-4-5", "make the file")
	if o.code != 0 {
		t.Fatalf("exit %d, want 0", o.code)
	}
	want := "I will make it.\n\n⏺ Bash(touch made.txt)\n  ⎿  (Bash completed with no output)\n\nDone.\n"
	if o.stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", o.stdout, want)
	}
	if !strings.Contains(o.stderr, "claudectl: daemon session ") || !strings.Contains(o.stderr, "closed after the turn; --keep keeps it") {
		t.Errorf("stderr does not name the session: %q", o.stderr)
	}
	if !strings.Contains(o.stderr, "Allow Bash: touch made.txt? [y/N/a(lways)] ") {
		t.Errorf("no permission prompt on stderr: %q", o.stderr)
	}
	// The prompt says what "always" stores, and where.
	if !strings.Contains(o.stderr, "  a(lways) would also:\n    - allow Bash(touch made.txt) in "+dir+" (a rule of the daemon's: claudectl rules rm revokes it)\n") {
		t.Errorf("the prompt does not show the rule always stores: %q", o.stderr)
	}
	if !fileExists(filepath.Join(dir, "made.txt")) {
		t.Error("made.txt was not created")
	}
	reqs := model.Requests()
	if len(reqs) < 2 || reqs[0].LastUserText() != "make the file" || reqs[0].Model != "claude-sonnet-4-5" {
		t.Fatalf("the model got %d requests; the first: prompt %q, model %q", len(reqs), reqs[0].LastUserText(), reqs[0].Model)
	}
	// The session is closed once the turn is over, by this run.
	res, err := d.sessions.ListSessions(d.ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
	if err != nil || len(res.Msg.Sessions) != 1 || res.Msg.Sessions[0].Cwd != dir {
		t.Fatalf("sessions: %v (%v)", res, err)
	}
	if st := res.Msg.Sessions[0].Status; st != v1.SessionStatus_SESSION_STATUS_CLOSED {
		t.Errorf("the session is %s after the run, want closed", statusName(st))
	}
}

// With --keep the session stays, for attach and send.
func TestRunServerKeep(t *testing.T) {
	t.Parallel()
	d, _ := startDaemonModel(t, nil, claudetest.Reply(claudetest.Text("Kept.")))
	o := claudectl(t, invocation{getenv: d.tokenEnv()}, "run", "--server", d.url, "--keep", "--cwd", t.TempDir(), "hi")
	if o.code != 0 || o.stdout != "Kept.\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	if !strings.Contains(o.stderr, "(claudectl attach ") {
		t.Errorf("stderr does not say how to attach: %q", o.stderr)
	}
	res, err := d.sessions.ListSessions(d.ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
	if err != nil || len(res.Msg.Sessions) != 1 {
		t.Fatalf("sessions: %v (%v)", res, err)
	}
	if st := res.Msg.Sessions[0].Status; st == v1.SessionStatus_SESSION_STATUS_CLOSED || st == v1.SessionStatus_SESSION_STATUS_FAILED {
		t.Errorf("the kept session is %s", statusName(st))
	}
}

// An interrupt from another client ends the run saying who it was.
func TestRunServerInterruptedByAnother(t *testing.T) {
	t.Parallel()
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("slow ", 2000))}, ChunkSize: 5, DeltaDelay: 50 * time.Millisecond}
	d, _ := startDaemonModel(t, nil, slow)
	started := make(chan struct{})
	go func() {
		<-started
		res, err := d.sessions.ListSessions(d.ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
		if err != nil || len(res.Msg.Sessions) != 1 {
			t.Errorf("sessions: %v (%v)", res, err)
			return
		}
		if _, err := d.sessions.Interrupt(d.ctx, connect.NewRequest(&v1.InterruptRequest{SessionId: res.Msg.Sessions[0].Id, Client: "alice"})); err != nil {
			t.Errorf("interrupt: %v", err)
		}
	}()
	o := claudectl(t, invocation{stdout: &firstWrite{ch: started}, getenv: d.tokenEnv()}, "run", "--server", d.url, "--cwd", t.TempDir(), "go slowly")
	if o.code != ExitInterrupted {
		t.Errorf("exit %d, want %d", o.code, ExitInterrupted)
	}
	if !strings.Contains(o.stderr, "claudectl: the turn was interrupted by client:alice\n") {
		t.Errorf("stderr does not say who interrupted: %q", o.stderr)
	}
	if strings.Contains(o.stderr+o.stdout, "ede_diagnostic") {
		t.Errorf("the CLI's internal diagnostic is shown: %q", o.stderr)
	}
}

// Without a terminal run --server denies what needs a person, as run does.
func TestRunServerNoTerminal(t *testing.T) {
	t.Parallel()
	d, _ := startDaemonModel(t, nil,
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "touch made.txt", "description": "create a file"})),
		claudetest.Reply(claudetest.Text("Could not.")))
	dir := t.TempDir()
	inv := d.inv() // CLAUDECTL_SERVER
	o := claudectl(t, inv, "run", "--cwd", dir, "make the file")
	if o.code != 0 || !strings.HasSuffix(o.stdout, "Could not.\n") {
		t.Fatalf("exit %d, stdout %q", o.code, o.stdout)
	}
	if !strings.Contains(o.stderr, "no terminal was available to ask") || fileExists(filepath.Join(dir, "made.txt")) {
		t.Errorf("not denied: stderr %q", o.stderr)
	}
}

func TestRunServerErrorResult(t *testing.T) {
	t.Parallel()
	d, _ := startDaemonModel(t, nil, claudetest.Error(400, "invalid_request_error", "bad"))
	o := claudectl(t, invocation{getenv: d.tokenEnv()}, "run", "--server", d.url, "--cwd", t.TempDir(), "hi")
	if o.code != 1 {
		t.Errorf("exit %d, want 1", o.code)
	}
	if !strings.Contains(o.stderr, "claudectl run: API Error: 400 bad") {
		t.Errorf("stderr = %q, want the error", o.stderr)
	}
}

func TestRunServerInterrupt(t *testing.T) {
	t.Parallel()
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("slow ", 2000))}, ChunkSize: 5, DeltaDelay: 50 * time.Millisecond}
	d, _ := startDaemonModel(t, nil, slow)
	ints := make(chan os.Signal, 1)
	started := make(chan struct{})
	go func() {
		<-started
		ints <- os.Interrupt
	}()
	start := time.Now()
	o := claudectl(t, invocation{interrupts: ints, stdout: &firstWrite{ch: started}, getenv: d.tokenEnv()}, "run", "--server", d.url, "--keep", "--cwd", t.TempDir(), "go slowly")
	if o.code != ExitInterrupted {
		t.Errorf("exit %d, want %d", o.code, ExitInterrupted)
	}
	if !strings.Contains(o.stderr, "interrupting the turn") || !strings.Contains(o.stderr, "claudectl: interrupted") {
		t.Errorf("stderr = %q", o.stderr)
	}
	if n := strings.Count(o.stdout, "slow"); n == 0 || n >= 2000 {
		t.Errorf("stdout has %d of 2000 words; want some, not all", n)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("took %v: the turn was not cut short", d)
	}
	// The session goes on (--keep).
	res, err := d.sessions.ListSessions(d.ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
	if err != nil || len(res.Msg.Sessions) != 1 {
		t.Fatalf("sessions: %v (%v)", res, err)
	}
	if st := res.Msg.Sessions[0].Status; st == v1.SessionStatus_SESSION_STATUS_CLOSED || st == v1.SessionStatus_SESSION_STATUS_FAILED {
		t.Errorf("the session is %s after Ctrl-C", statusName(st))
	}
}
