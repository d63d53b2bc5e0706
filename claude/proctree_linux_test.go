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
	deadline := time.Now().Add(20 * time.Second)
	for {
		var left []string
		for name, pid := range pids {
			if st, _, ok := procState(pid); ok {
				left = append(left, fmt.Sprintf("%s (pid %d, state %c)", name, pid, st))
			}
		}
		if len(left) == 0 {
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
		for _, end := range []string{"close", "kill"} {
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
	s, tr := startOrphanSession(t, script)
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
	switch end {
	case "close":
		s.Close()
	case "kill":
		if err := syscall.Kill(cli, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("the session did not end after kill -9 of its CLI")
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
	s, tr := startOrphanSession(t, script, func(tr *keepConnTransport) { tr.KeepDetached = true })
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

// startOrphanSession starts the real CLI and has it run script in a Bash
// tool call, to completion of the turn.
func startOrphanSession(t *testing.T, script string, mod ...func(*keepConnTransport)) (*claude.Session, *keepConnTransport) {
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
