package daemon_test

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
	"golang.org/x/sys/unix"
)

// A tool the CLI started in its own session (setsid) ends with the CLI
// when the daemon suspends an idle session, as when it is closed: a
// suspended session costs no process at all.
func TestSuspendLeavesNoOrphans(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "tail.pid")
	cmd := fmt.Sprintf("setsid sh -c 'echo $$ > %s; exec tail -f /dev/null' </dev/null >/dev/null 2>&1 &", pidFile)
	td := daemontest.Start(t, &daemontest.Options{IdleTimeout: 500 * time.Millisecond},
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": cmd, "description": "start a detached tail"})),
		claudetest.Reply(claudetest.Text("Started.")))
	if err := td.D.AddRule(td.Ctx, &store.Rule{Spec: "Bash", Behavior: "allow"}); err != nil {
		t.Fatal(err)
	}
	s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: dir}, "start it")
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for pid == 0 {
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		select {
		case <-td.Ctx.Done():
			t.Fatal("the tool never started")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil {
		t.Fatal(err)
	} else if f := strings.Fields(string(stat)); len(f) < 6 || f[5] != strconv.Itoa(pid) {
		t.Fatalf("the tool is not in its own session (%s): the test proves nothing", stat)
	}
	waitStatus(t, td.D, td.Ctx, s.ID, store.StatusSuspended)
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			break // gone and reaped
		}
		if f := strings.Fields(string(stat)); len(f) > 2 && f[2] == "Z" {
			if time.Now().After(deadline) {
				t.Fatalf("the tool %d is a zombie 10 s after the suspension", pid)
			}
		} else if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the tool %d outlived the suspended session's CLI", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A session's CLI and the tools it runs are scheduled as
// sessions.cli_scheduling says: SCHED_BATCH by default, so that they never
// preempt the daemon as they wake; as any process with "normal".
func TestCLIScheduling(t *testing.T) {
	if a, err := unix.SchedGetAttr(0, 0); err != nil || a.Policy != unix.SCHED_NORMAL {
		t.Skipf("this test runs under scheduling policy %v (%v), not the default one, which the daemon keeps", a, err)
	}
	for _, c := range []struct {
		setting claude.Scheduling
		want    uint32
	}{
		{"", unix.SCHED_BATCH},
		{claude.SchedulingNormal, unix.SCHED_NORMAL},
	} {
		t.Run(cmp.Or(string(c.setting), "default"), func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "tool.pid")
			// In the foreground: the chain from the CLI down stays while
			// the test looks at it.
			cmd := fmt.Sprintf("sh -c 'echo $$ > %[1]s.tmp && mv %[1]s.tmp %[1]s; exec sleep 30'", pidFile)
			td := daemontest.Start(t, &daemontest.Options{CLIScheduling: c.setting},
				claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": cmd, "description": "start a sleeper"})),
				claudetest.Reply(claudetest.Text("Started.")))
			if err := td.D.AddRule(td.Ctx, &store.Rule{Spec: "Bash", Behavior: "allow"}); err != nil {
				t.Fatal(err)
			}
			if _, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: dir}, "start it"); err != nil {
				t.Fatal(err)
			}
			sleeper := 0
			for sleeper == 0 {
				if b, err := os.ReadFile(pidFile); err == nil {
					sleeper, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				}
				select {
				case <-td.Ctx.Done():
					t.Fatal("the tool never started")
				case <-time.After(20 * time.Millisecond):
				}
			}
			defer syscall.Kill(sleeper, syscall.SIGKILL) // ends the turn
			// The sleeper and its ancestors up to the daemon: the CLI is
			// among them.
			chain := []int{sleeper}
			for pid := sleeper; ; {
				ppid := parentOf(t, pid)
				if ppid == os.Getpid() || ppid <= 1 {
					break
				}
				chain = append(chain, ppid)
				pid = ppid
			}
			if len(chain) < 2 {
				t.Fatalf("the sleeper %d is not a descendant of a CLI of this daemon", sleeper)
			}
			for _, pid := range chain {
				a, err := unix.SchedGetAttr(pid, 0)
				if err != nil {
					t.Fatalf("sched_getattr(%d): %v", pid, err)
				}
				if a.Policy != c.want {
					comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
					t.Errorf("%s (pid %d): scheduling policy %d, want %d", strings.TrimSpace(string(comm)), pid, a.Policy, c.want)
				}
			}
		})
	}
}
