package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

func TestRunServer(t *testing.T) {
	t.Parallel()
	d, model := startDaemonModel(t, nil,
		claudetest.Reply(claudetest.Text("I will make it."), touchMade()),
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
	// The prompt shows the request's id, which approve and deny take.
	decs, err := d.perms.ListDecisions(d.ctx, connect.NewRequest(&v1.ListDecisionsRequest{}))
	if err != nil || len(decs.Msg.Decisions) != 1 {
		t.Fatalf("decisions: %v (%v)", decs, err)
	}
	reqID := decs.Msg.Decisions[0].RequestId
	if want := "  request " + reqID + " (claudectl approve " + reqID + ", or deny, from another terminal)\nAllow Bash"; !strings.Contains(o.stderr, want) {
		t.Errorf("the prompt does not show the request's id %s:\n%s", reqID, o.stderr)
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

// An interrupt from another client ends the run saying who it was, once
// (--verbose too).
func TestRunServerInterruptedByAnother(t *testing.T) {
	t.Parallel()
	for _, verbose := range []bool{false, true} {
		t.Run(fmt.Sprintf("verbose=%v", verbose), func(t *testing.T) {
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
			args := []string{"run", "--server", d.url, "--cwd", t.TempDir()}
			if verbose {
				args = append(args, "--verbose")
			}
			o := claudectl(t, invocation{stdout: &firstWrite{ch: started}, getenv: d.tokenEnv()}, append(args, "go slowly")...)
			if o.code != ExitInterrupted {
				t.Errorf("exit %d, want %d", o.code, ExitInterrupted)
			}
			if !strings.Contains(o.stderr, "claudectl: the turn was interrupted by client:alice\n") {
				t.Errorf("stderr does not say who interrupted: %q", o.stderr)
			}
			if n := strings.Count(o.stderr, "interrupted by"); n != 1 {
				t.Errorf("stderr says who interrupted %d times: %q", n, o.stderr)
			}
			if strings.Contains(o.stderr+o.stdout, "ede_diagnostic") {
				t.Errorf("the CLI's internal diagnostic is shown: %q", o.stderr)
			}
		})
	}
}

// Without a terminal run --server denies what needs a person, as run does.
func TestRunServerNoTerminal(t *testing.T) {
	t.Parallel()
	d, _ := startDaemonModel(t, nil,
		claudetest.Reply(touchMade()),
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

// A run whose session waits for a slot (sessions.max_running) says so, and
// Ctrl-C gives it up at once: the daemon closes the queued session.
func TestRunServerQueued(t *testing.T) {
	t.Parallel()
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("slow ", 4000))}, ChunkSize: 5, DeltaDelay: 50 * time.Millisecond}
	d, _ := startDaemonModel(t, &daemontest.Options{MaxRunning: 1}, slow)
	d.create(t, t.TempDir(), "go slowly") // holds the only slot for minutes
	dir := t.TempDir()
	ints := make(chan os.Signal, 1)
	done, _, stderr := runInBackground(d, ints, "run", "--server", d.url, "--cwd", dir, "wait your turn")
	waitFor(t, "run to say it is queued", func() bool { return strings.Contains(stderr.String(), "claudectl: queued: ") })
	if want := "claudectl: queued: next in line, waiting for a free session slot (sessions.max_running is 1); Ctrl-C gives up\n"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
	ints <- os.Interrupt
	waitExit(t, done, ExitInterrupted, 30*time.Second, stderr, "Ctrl-C did not end the queued run")
	if !strings.Contains(stderr.String(), "interrupted: the daemon closes the session that waited for a slot") {
		t.Errorf("stderr %q does not say the queued session is given up", stderr.String())
	}
	var queued *v1.Session
	waitFor(t, "the queued session closed", func() bool {
		res, err := d.sessions.ListSessions(d.ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Msg.Sessions {
			if s.Cwd == dir && s.Status == v1.SessionStatus_SESSION_STATUS_CLOSED {
				queued = s
			}
		}
		return queued != nil
	})
	stream, err := d.sessions.Subscribe(d.ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: queued.Id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	for stream.Receive() {
		if sc := stream.Msg().GetEvent().GetStatusChange(); sc.GetStatus() == v1.SessionStatus_SESSION_STATUS_CLOSED {
			if !strings.Contains(sc.GetDetail(), "closed while queued") {
				t.Errorf("the queued session closed with %q, want closed while queued", sc.GetDetail())
			}
			break
		}
	}
}

func TestQueueText(t *testing.T) {
	t.Parallel()
	for detail, want := range map[string]string{
		"waiting for one of 3 running sessions to become idle (sessions.max_running); 0 ahead": "next in line, waiting for a free session slot (sessions.max_running is 3)",
		"waiting for one of 3 running sessions to become idle (sessions.max_running); 1 ahead": "1 session ahead, waiting for a free session slot (sessions.max_running is 3)",
		"waiting for one of 3 running sessions to become idle (sessions.max_running); 4 ahead": "4 sessions ahead, waiting for a free session slot (sessions.max_running is 3)",
		"": "waiting for a free session slot (sessions.max_running)",
	} {
		if got := queueText(detail); got != want {
			t.Errorf("queueText(%q) = %q, want %q", detail, got, want)
		}
	}
}

// A Ctrl-C while the session's CLI starts (not queued: here its start
// waits for the store) is left to the turn, saying so, since a call given
// up then could leave the session half started; a second one gives up at
// once.
func TestRunServerCtrlCWhileStarting(t *testing.T) {
	t.Parallel()
	fail := make(chan struct{})
	d, _ := startDaemonModel(t, &daemontest.Options{WrapStore: func(s store.Store) store.Store { return slowStart{s, nil, fail} }})
	// The daemon may not have seen the call given up yet: its start fails
	// then, never to race the daemon's close.
	defer close(fail)
	dir := t.TempDir()
	ints := make(chan os.Signal, 1)
	done, _, stderr := runInBackground(d, ints, "run", "--server", d.url, "--cwd", dir, "hi")
	waitStarting(t, d)
	ints <- os.Interrupt
	waitFor(t, "run to put the interrupt off", func() bool {
		return strings.Contains(stderr.String(), "claudectl: interrupting the turn once the session has started (press Ctrl-C again to give up at once)")
	})
	ints <- os.Interrupt
	waitExit(t, done, ExitInterrupted, 30*time.Second, stderr, "a second Ctrl-C did not end the run")
	if !strings.Contains(stderr.String(), "claudectl: interrupted before the session started") || strings.Contains(stderr.String(), "queued") {
		t.Errorf("stderr %q", stderr.String())
	}
}

// The Ctrl-C put off while the session started interrupts its turn once
// it runs; the run then ends as an interrupted one, its session closed.
func TestRunServerCtrlCWhileStartingInterruptsTheTurn(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("slow ", 4000))}, ChunkSize: 5, DeltaDelay: 50 * time.Millisecond}
	fail := make(chan struct{})
	d, _ := startDaemonModel(t, &daemontest.Options{WrapStore: func(s store.Store) store.Store { return slowStart{s, gate, fail} }}, slow)
	defer close(fail) // should the test end before it opens the gate
	ints := make(chan os.Signal, 1)
	done, stdout, stderr := runInBackground(d, ints, "run", "--server", d.url, "--cwd", t.TempDir(), "go slowly")
	waitStarting(t, d)
	ints <- os.Interrupt
	waitFor(t, "run to put the interrupt off", func() bool {
		return strings.Contains(stderr.String(), "interrupting the turn once the session has started")
	})
	close(gate)
	waitExit(t, done, ExitInterrupted, 60*time.Second, stderr, "the turn was not interrupted")
	if !strings.Contains(stderr.String(), "claudectl: interrupted\n") {
		t.Errorf("stderr %q", stderr.String())
	}
	if n := strings.Count(stdout.String(), "slow"); n >= 4000 {
		t.Errorf("stdout has all %d words: the turn was not interrupted", n)
	}
	res, err := d.sessions.ListSessions(d.ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
	if err != nil || len(res.Msg.Sessions) != 1 || res.Msg.Sessions[0].Status != v1.SessionStatus_SESSION_STATUS_CLOSED {
		t.Errorf("sessions after the run: %v (%v), want one closed", res, err)
	}
}

// slowStart is a store where a session's CLI cannot start (NewProcess)
// until gate is closed, and fails to once fail is.
type slowStart struct {
	store.Store
	gate, fail chan struct{}
}

func (s slowStart) NewProcess(ctx context.Context, id string) (int64, error) {
	select {
	case <-s.gate:
	case <-s.fail:
		return 0, errors.New("slowStart: the test is over")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return s.Store.NewProcess(ctx, id)
}

// waitStarting waits until d has one session, and it is starting.
func waitStarting(t *testing.T, d *testDaemon) {
	t.Helper()
	waitFor(t, "the session to start", func() bool {
		res, err := d.sessions.ListSessions(d.ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
		return err == nil && len(res.Msg.Sessions) == 1 && res.Msg.Sessions[0].Status == v1.SessionStatus_SESSION_STATUS_STARTING
	})
}

// waitExit waits up to within for the run's exit status and checks it is
// want; a run that does not end fails the test with what (and what the
// run said). It logs the run's stderr.
func waitExit(t *testing.T, done <-chan int, want int, within time.Duration, stderr *lockedBuffer, what string) {
	t.Helper()
	select {
	case code := <-done:
		if code != want {
			t.Errorf("exit %d, want %d", code, want)
		}
	case <-time.After(within):
		t.Fatalf("%s; stderr %q", what, stderr.String())
	}
	t.Logf("stderr:\n%s", stderr.String())
}

// runInBackground runs claudectl with args against d, its Ctrl-Cs coming
// from ints; its exit status comes on done.
func runInBackground(d *testDaemon, ints chan os.Signal, args ...string) (done chan int, stdout, stderr *lockedBuffer) {
	done, stdout, stderr = make(chan int, 1), new(lockedBuffer), new(lockedBuffer)
	go func() {
		env := &Env{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr, Interrupts: ints,
			Getenv: func(k string) string { return d.tokenEnv()[k] }}
		done <- Main(d.ctx, env, args)
	}()
	return done, stdout, stderr
}

// noCredentials is the settings' env that leaves the daemon's CLIs
// without credentials: no key, no token, no other provider (their HOME
// is a fresh temporary one, with no login).
var noCredentials = map[string]string{"ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": "", "CLAUDE_CODE_OAUTH_TOKEN": "",
	"CLAUDE_CODE_USE_BEDROCK": "", "CLAUDE_CODE_USE_VERTEX": "", "CLAUDE_CODE_USE_FOUNDRY": ""}

// A daemon whose Claude Code has no credentials: the real CLI answers
// the turn with its bare "Not logged in · Please run /login" (an API
// error reported as subtype success) without reaching the API. run
// --server, send and attach give the hint the local run gives, in the
// daemon's words (the key goes in the daemon's environment or its
// settings' env), and no client is told of an error "(success)".
func TestServerNotLoggedIn(t *testing.T) {
	t.Parallel()
	d, model := startDaemonModel(t, &daemontest.Options{CLIEnv: noCredentials})
	const hint = "hint: the daemon's Claude Code has no credentials the API accepts: set ANTHROPIC_API_KEY in the daemon's environment or in \"env\" of its settings file ("
	o := claudectl(t, invocation{getenv: d.tokenEnv()}, "run", "--server", d.url, "--keep", "--cwd", t.TempDir(), "Say hello.")
	if o.code != 1 || !strings.Contains(o.stderr, "claudectl run: Not logged in") || !strings.Contains(o.stderr, "claudectl run: "+hint) ||
		!strings.Contains(o.stderr, "make demo") {
		t.Errorf("run --server without credentials: exit %d, stderr %q; want 1, the CLI's words and the daemon's hint", o.code, o.stderr)
	}
	id := sessionIn(t, o.stderr)

	o = claudectl(t, invocation{getenv: d.tokenEnv()}, "send", "--server", d.url, id, "Say hello again.")
	if o.code != 0 || !strings.Contains(o.stdout, "Sent to session") ||
		!strings.Contains(o.stderr, "claudectl send: warning: the daemon expects this turn to fail for lack of credentials") ||
		!strings.Contains(o.stderr, "claudectl send: "+hint) {
		t.Errorf("send after a turn refused for lack of credentials: exit %d, stdout %q, stderr %q; want it sent, with the hint", o.code, o.stdout, o.stderr)
	}
	d.waitResults(t, id, 2)
	d.closeSession(t, id)
	o = claudectl(t, invocation{getenv: d.tokenEnv()}, "attach", "--server", d.url, id)
	if n := strings.Count(o.stderr, "claudectl: "+hint); n != 2 || !strings.Contains(o.stderr, "claudectl: error: the API call failed (authentication_failed): Not logged in") {
		t.Errorf("attach: %d hints (want one a turn), stderr %q", n, o.stderr)
	}
	for _, out := range []string{o.stdout, o.stderr} {
		if strings.Contains(out, "(success)") {
			t.Errorf("attach says an error of subtype success: %q", out)
		}
	}
	if !strings.Contains(o.stderr, "claudectl: error: the turn failed at the API: Not logged in") {
		t.Errorf("attach does not say the turn failed at the API: %q", o.stderr)
	}
	if n := len(model.Requests()); n != 0 {
		t.Errorf("%d requests reached the API", n)
	}
}

// sessionIn returns the id of the daemon session run --server names in
// its stderr.
func sessionIn(t *testing.T, stderr string) string {
	t.Helper()
	_, rest, ok := strings.Cut(stderr, "claudectl: daemon session ")
	id, _, _ := strings.Cut(rest, " ")
	if !ok || id == "" {
		t.Fatalf("run --server names no session: %q", stderr)
	}
	return id
}
