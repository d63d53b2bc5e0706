package cli

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

// TestWorkerLeavesNoOrphans runs a Bash tool that leaves its process group
// (setsid, double fork) in a session on a "claudectl worker": when the
// session is closed, or the worker's CLI is killed with SIGKILL, those
// processes end too (claude.ProcessTransport's default).
func TestWorkerLeavesNoOrphans(t *testing.T) {
	cli := claudetest.CLIPath(t)
	bin := buildClaudectl(t)
	for _, end := range []string{"close", "kill"} {
		t.Run(end, func(t *testing.T) {
			pidDir := t.TempDir()
			setsid, err := exec.LookPath("setsid")
			if err != nil {
				t.Skip("no setsid")
			}
			script := fmt.Sprintf("%s sh -c 'echo $$ > %s; exec tail -f /dev/null' </dev/null >/dev/null 2>&1 &\n", setsid, filepath.Join(pidDir, "setsid")) +
				fmt.Sprintf("( %s sh -c 'echo $$ > %s; exec sleep 1000' </dev/null >/dev/null 2>&1 & )\necho spawned", setsid, filepath.Join(pidDir, "daemon"))
			srv := claudetest.NewServer(claudetest.Script(
				claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": script, "description": "spawn"})),
				claudetest.Reply(claudetest.Text("done"))))
			defer srv.Close()
			l := &claude.WorkerListener{Token: "token-" + strings.ReplaceAll(t.Name(), "/", "-"), WaitTimeout: 60 * time.Second}
			if err := l.Listen(); err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			tokenFile := filepath.Join(t.TempDir(), "token")
			os.WriteFile(tokenFile, []byte(l.Token+"\n"), 0o600)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			worker := exec.CommandContext(ctx, bin, "worker", "--connect", l.URL(), "--token-file", tokenFile, "--cli", cli, "--once", "--name", "orphans")
			var werr syncBuffer
			worker.Stderr = &werr
			if err := worker.Start(); err != nil {
				t.Fatal(err)
			}
			workerDone := make(chan error, 1)
			go func() { workerDone <- worker.Wait() }()
			defer func() {
				cancel()
				<-workerDone
				t.Logf("worker stderr:\n%s", werr.String())
			}()
			s, err := claude.Start(ctx, &claude.Options{
				Transport: l,
				Cwd:       t.TempDir(),
				Env:       srv.EnvMap(t.TempDir()),
				CanUseTool: func(context.Context, *claude.PermissionRequest) (claude.PermissionResult, error) {
					return claude.Allow(), nil
				},
			})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			defer s.Close()
			if err := s.SendText(ctx, "spawn them"); err != nil {
				t.Fatal(err)
			}
			for _, err := range s.Turn(ctx) {
				if err != nil {
					t.Fatalf("turn: %v", err)
				}
			}
			pids := map[string]int{}
			for _, name := range []string{"setsid", "daemon"} {
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					b, _ := os.ReadFile(filepath.Join(pidDir, name))
					if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
						pids[name] = pid
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the tool never wrote %s's pid", name)
					}
				}
			}
			defer func() {
				for _, pid := range pids {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}()
			for name, pid := range pids {
				if !running(pid) {
					t.Fatalf("%s (pid %d) is not running after the turn", name, pid)
				}
			}
			switch end {
			case "close":
				s.Close()
			case "kill":
				cliPID := childOf(worker.Process.Pid)
				if cliPID == 0 {
					t.Fatal("the worker's CLI not found")
				}
				syscall.Kill(cliPID, syscall.SIGKILL)
				select {
				case <-s.Done():
				case <-time.After(30 * time.Second):
					t.Fatal("the session did not end after kill -9 of the worker's CLI")
				}
			}
			deadline := time.Now().Add(20 * time.Second)
			for name, pid := range pids {
				for exists(pid) {
					if time.Now().After(deadline) {
						t.Fatalf("%s (pid %d) still there after %s", name, pid, end)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
}

// procStat returns the state and parent of a process, ok false when gone.
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid, true
}

func running(pid int) bool {
	st, _, ok := procStat(pid)
	return ok && st != 'Z'
}

// exists reports whether pid is still there, zombie included.
func exists(pid int) bool {
	_, _, ok := procStat(pid)
	return ok
}

// childOf returns a live child of pid, or 0.
func childOf(pid int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ppid, ok := procStat(p); ok && ppid == pid && st != 'Z' {
			return p
		}
	}
	return 0
}
