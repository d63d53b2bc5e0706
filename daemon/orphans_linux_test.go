package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
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
