package claude_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"golang.org/x/sys/unix"
)

// keepConnTransport is a ProcessTransport that keeps the connection it made.
type keepConnTransport struct {
	claude.ProcessTransport
	conn claude.Conn
}

func (c *keepConnTransport) Start(ctx context.Context, cmd *claude.Command) (claude.Conn, error) {
	conn, err := c.ProcessTransport.Start(ctx, cmd)
	c.conn = conn
	return conn, err
}

// procState returns the state letter and session id of a process, ok false
// when it is gone.
func procState(pid int) (state byte, sid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	sid, _ = strconv.Atoi(f[3])
	return f[0][0], sid, true
}

// waitGone polls until none of pids exists any more, not even as a zombie.
func waitGone(t *testing.T, what string, pids map[string]int) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(20 * time.Second)
	for {
		var left []string
		for name, pid := range pids {
			if st, _, ok := procState(pid); ok {
				left = append(left, fmt.Sprintf("%s (pid %d, state %c)", name, pid, st))
			}
		}
		if len(left) == 0 {
			t.Logf("gone %v after %s", time.Since(start).Round(time.Millisecond), what)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, still there: %s", what, strings.Join(left, ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("no %s: %v", name, err)
	}
	return p
}

// orphanScript is a Bash tool command that leaves, in dir, the pids of
// processes that leave the CLI's process group: a setsid'd tail, a
// double-forked daemon and, if clean, one that also clears its environment.
func orphanScript(t *testing.T, dir string, clean bool) (string, []string) {
	setsid, sleep, env := lookPath(t, "setsid"), lookPath(t, "sleep"), lookPath(t, "env")
	q := func(s string) string { return "'" + s + "'" }
	cmd := fmt.Sprintf("%s sh -c 'echo $$ > %s; exec tail -f /dev/null' </dev/null >/dev/null 2>&1 &\n", setsid, filepath.Join(dir, "setsid"))
	cmd += fmt.Sprintf("( %s sh -c 'echo $$ > %s; exec %s 1000' </dev/null >/dev/null 2>&1 & )\n", setsid, filepath.Join(dir, "daemon"), sleep)
	names := []string{"setsid", "daemon"}
	if clean {
		cmd += fmt.Sprintf("( %s -i %s /bin/sh -c %s </dev/null >/dev/null 2>&1 & )\n", env, setsid,
			q(fmt.Sprintf(`echo $$ > %s; exec %s 1000`, filepath.Join(dir, "clean"), sleep)))
		names = append(names, "clean")
	}
	return cmd + "echo spawned", names
}

// TestE2ENoOrphans runs the real CLI with each mechanism; a Bash tool call
// starts processes in their own sessions, then the CLI ends by Close or by
// kill -9 from outside: they must all be gone, not even zombies.
func TestE2ENoOrphans(t *testing.T) {
	for _, mech := range []string{"cgroup2", "cgroup1-pids", "cgroup1-freezer", "environ"} {
		for _, end := range []string{"close", "kill", "cancel"} {
			t.Run(mech+"/"+end, func(t *testing.T) { testNoOrphans(t, mech, end) })
		}
	}
}

func testNoOrphans(t *testing.T, mech, end string) {
	defer claude.SetTreeMechanism(mech)()
	pidDir := t.TempDir()
	// The environment mechanism cannot find a process that cleared its
	// environment and left the tree; cgroups can.
	script, names := orphanScript(t, pidDir, mech != "environ")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, tr := startOrphanSession(t, ctx, script)
	if got, _ := claude.TreeMechanism(tr.conn); got != mech {
		t.Skipf("mechanism %s not available here (got %s)", mech, got)
	}
	_, dir := claude.TreeMechanism(tr.conn)
	cli := claude.ConnPID(tr.conn)
	pids := readPIDs(t, pidDir, names)
	defer killAll(pids)
	_, cliSID, _ := procState(cli)
	for name, pid := range pids {
		if st, sid, ok := procState(pid); !ok || st == 'Z' || sid == cliSID {
			t.Fatalf("%s (pid %d): state %c, session %d (the CLI's is %d): want a live process in its own session", name, pid, st, sid, cliSID)
		}
	}
	ended := time.Now()
	defer func() { t.Logf("ending took %v", time.Since(ended).Round(time.Millisecond)) }()
	switch end {
	case "close":
		s.Close()
	case "kill", "cancel":
		if end == "cancel" {
			cancel()
		} else if err := syscall.Kill(cli, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.Done():
		case <-time.After(20 * time.Second):
			t.Fatalf("the session did not end after %s", end)
		}
	}
	// Killed before Close (or the session's end) returned; reaping them is
	// then init's job, which takes it a moment here.
	for name, pid := range pids {
		if st, _, ok := procState(pid); ok && st != 'Z' {
			t.Errorf("%s (pid %d) still running (state %c) when the session had ended", name, pid, st)
		}
	}
	waitGone(t, end, pids)
	if dir != "" {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("cgroup %s left behind", dir)
		}
	}
}

// The control: with only the process group (KeepDetached), the same
// processes survive Close, which shows that the test above can fail.
func TestE2EKeepDetachedLeavesThem(t *testing.T) {
	pidDir := t.TempDir()
	script, names := orphanScript(t, pidDir, false)
	s, tr := startOrphanSession(t, context.Background(), script, func(tr *keepConnTransport) { tr.KeepDetached = true })
	if got, _ := claude.TreeMechanism(tr.conn); got != "process-group" {
		t.Fatalf("KeepDetached: mechanism %s, want process-group", got)
	}
	pids := readPIDs(t, pidDir, names)
	defer killAll(pids)
	s.Close()
	time.Sleep(500 * time.Millisecond)
	for name, pid := range pids {
		if st, _, ok := procState(pid); !ok || st == 'Z' {
			t.Errorf("%s (pid %d) did not survive Close with KeepDetached", name, pid)
		}
	}
}

// startOrphanSession starts the real CLI for the life of ctx and has it run
// script in a Bash tool call, to completion of the turn.
func startOrphanSession(t *testing.T, ctx context.Context, script string, mod ...func(*keepConnTransport)) (*claude.Session, *keepConnTransport) {
	t.Helper()
	e := newE2E(t,
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": script, "description": "spawn"})),
		claudetest.Reply(claudetest.Text("done")))
	e.opts.AllowedTools = []string{"Bash"}
	tr := &keepConnTransport{ProcessTransport: claude.ProcessTransport{Stderr: e.opts.Stderr}}
	for _, f := range mod {
		f(tr)
	}
	e.opts.Transport = tr
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancel)
	e.ctx = ctx // the session's life
	s := e.start()
	msgs, _ := e.turn(s, "spawn them")
	if txt := assistantText(msgs); !strings.Contains(txt, "done") {
		t.Fatalf("turn: %q", txt)
	}
	return s, tr
}

func readPIDs(t *testing.T, dir string, names []string) map[string]int {
	t.Helper()
	pids := map[string]int{}
	deadline := time.Now().Add(10 * time.Second)
	for _, name := range names {
		for {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
				pids[name] = pid
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the tool never wrote %s's pid", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return pids
}

// killAll cleans up after a failed test.
func killAll(pids map[string]int) {
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// A cgroup left by a host process that died (named after a pid that is not
// running) is emptied and removed by the next Start, or by KillLeftovers
// (which a daemon calls as it starts).
func TestLeftoverCgroupsCleaned(t *testing.T) {
	for _, c := range []struct{ mech, by string }{
		{"cgroup2", "start"}, {"cgroup1-pids", "start"}, {"cgroup1-freezer", "start"},
		{"cgroup2", "KillLeftovers"}, {"cgroup1-pids", "KillLeftovers"},
	} {
		mech := c.mech
		t.Run(mech+"/"+c.by, func(t *testing.T) {
			fstype, controller := "cgroup", strings.TrimPrefix(mech, "cgroup1-")
			if mech == "cgroup2" {
				fstype, controller = "cgroup2", ""
			}
			parent, err := claude.OwnCgroupDir(fstype, controller)
			if err != nil {
				t.Skipf("no %s: %v", mech, err)
			}
			dir := filepath.Join(parent, claude.CgroupPrefix+"999999999-1-0123456789ab")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Skipf("cannot make a cgroup: %v", err)
			}
			defer os.Remove(dir)
			sleeper := exec.Command(lookPath(t, "sleep"), "1000")
			if err := sleeper.Start(); err != nil {
				t.Fatal(err)
			}
			defer sleeper.Process.Kill()
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0); err != nil {
				t.Fatal(err)
			}
			defer claude.SetTreeMechanism(mech)()
			if c.by == "start" {
				s := startFake(t, context.Background(), "echo")
				defer s.Close()
			} else {
				claude.KillLeftovers()
			}
			done := make(chan error, 1)
			go func() { done <- sleeper.Wait() }()
			select {
			case err := <-done:
				if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Errorf("the leftover's process ended with %v, want SIGKILL", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the process in the leftover cgroup still runs")
			}
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("leftover cgroup %s not removed", dir)
			}
		})
	}
}

// subreaperEnv makes TestSubreaperHelper run (in a child test binary).
const subreaperEnv = "CLAUDECTL_TEST_SUBREAPER_MECH"

// When this process is the child subreaper, the killed tools become its
// children: it reaps them, and nothing else. Run in a child process, as
// being a subreaper changes the whole process.
func TestSubreaperReapsKilledTools(t *testing.T) {
	for _, mech := range []string{"cgroup2", "cgroup1-pids", "environ"} {
		t.Run(mech, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSubreaperHelper$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), subreaperEnv+"="+mech)
			out, err := cmd.CombinedOutput()
			if err == nil && strings.Contains(string(out), "--- SKIP: TestSubreaperHelper") {
				t.Skipf("%s", out)
			}
			if err != nil || !strings.Contains(string(out), "--- PASS: TestSubreaperHelper") {
				t.Fatalf("helper: %v\n%s", err, out)
			}
		})
	}
}

func TestSubreaperHelper(t *testing.T) {
	mech := os.Getenv(subreaperEnv)
	if mech == "" {
		t.Skip("run by TestSubreaperReapsKilledTools")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	defer claude.SetTreeMechanism(mech)()
	pidFile := filepath.Join(t.TempDir(), "pid")
	// A stand-in CLI: a tool in its own session, then the CLI waits.
	script := fmt.Sprintf("%s sh -c 'echo $$ > %s; exec sleep 1000' </dev/null >/dev/null 2>&1 & exec sleep 1000", lookPath(t, "setsid"), pidFile)
	tr := claude.ProcessTransport{GracePeriod: -1}
	conn, err := tr.Start(context.Background(), &claude.Command{Path: "/bin/sh", Args: []string{"-c", script}, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := claude.TreeMechanism(conn); got != mech {
		conn.Close()
		t.Skipf("mechanism %s not available here (got %s)", mech, got)
	}
	pids := readPIDs(t, filepath.Dir(pidFile), []string{"pid"})
	defer killAll(pids)
	conn.Close()
	if err := conn.Wait(); err == nil {
		t.Error("the stand-in exited cleanly; want killed")
	}
	// Reaped already: not even a zombie when Close returns.
	if st, _, ok := procState(pids["pid"]); ok {
		t.Errorf("the tool (pid %d) is still there after Close, state %c", pids["pid"], st)
	}
	var ws unix.WaitStatus
	if pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); pid > 0 {
		t.Errorf("an unreaped child %d was left", pid)
	} else if err != nil && err != unix.ECHILD {
		t.Errorf("wait4: %v", err)
	}
}
