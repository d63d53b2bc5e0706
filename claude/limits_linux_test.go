package claude_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
)

// limited starts script under sh with limits, or skips the test where
// they cannot be applied.
func limited(t *testing.T, limits claude.ResourceLimits, script string) claude.Conn {
	t.Helper()
	if err := claude.CheckLimits(limits); err != nil {
		t.Skipf("resource limits cannot be applied here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	tr := &claude.ProcessTransport{Limits: limits}
	conn, err := tr.Start(ctx, &claude.Command{Path: "/bin/sh", Args: []string{"-c", script}, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// drain reads the connection's output to its end.
func drain(conn claude.Conn) string {
	var out strings.Builder
	for {
		l, err := conn.ReadLine()
		if err != nil {
			return out.String()
		}
		out.Write(l.Data)
		out.WriteByte('\n')
	}
}

// hog grows its memory without bound: tail keeps the last lines of
// endless input without a newline, all of it.
const hog = "tail /dev/zero"

// TestLimitsMemoryKillsTheCLI: a CLI that outgrows its memory limit is
// killed by the kernel, and its exit error says so.
func TestLimitsMemoryKillsTheCLI(t *testing.T) {
	conn := limited(t, claude.ResourceLimits{MemoryMax: 32 << 20}, "exec "+hog)
	drain(conn)
	err := conn.Wait()
	var ee *claude.ExitError
	if !errors.As(err, &ee) || ee.MemoryLimit != 32<<20 || !strings.Contains(ee.Error(), "was killed: memory limit 32 MiB reached") {
		t.Fatalf("Wait = %v, want an ExitError naming the memory limit", err)
	}
	if n := conn.(interface{ MemoryKills() int64 }).MemoryKills(); n < 1 {
		t.Errorf("MemoryKills = %d after the kill", n)
	}
}

// TestLimitsMemoryKillsATool: a tool that outgrows the limit is killed,
// the CLI goes on, and MemoryKills counts it.
func TestLimitsMemoryKillsATool(t *testing.T) {
	conn := limited(t, claude.ResourceLimits{MemoryMax: 32 << 20}, hog+"; echo status $?")
	if out := drain(conn); !strings.Contains(out, "status 137") {
		t.Errorf("output %q: the tool was not killed by SIGKILL", out)
	}
	if err := conn.Wait(); err != nil {
		t.Errorf("Wait = %v: the CLI itself was not killed", err)
	}
	if n := conn.(interface{ MemoryKills() int64 }).MemoryKills(); n != 1 {
		t.Errorf("MemoryKills = %d, want 1", n)
	}
}

// TestLimitsPIDs: forks beyond pids_max fail.
func TestLimitsPIDs(t *testing.T) {
	conn := limited(t, claude.ResourceLimits{PIDsMax: 4}, "for i in 1 2 3 4 5 6 7 8; do sleep 30 & done; echo started")
	drain(conn)
	conn.Wait()
	if tail := conn.StderrTail(); !strings.Contains(strings.ToLower(tail), "fork") {
		t.Errorf("stderr %q: no fork failed under pids_max 4 with 8 background processes", tail)
	}
}

// TestLimitsCPU: a busy loop gets at most its share of a CPU.
func TestLimitsCPU(t *testing.T) {
	// The shell spins for a second of wall time, then prints the CPU time
	// it used (its own utime+stime, in clock ticks).
	conn := limited(t, claude.ResourceLimits{CPUMax: 0.1},
		`end=$(( $(date +%s) + 2 )); while [ $(date +%s) -lt $end ]; do :; done; cut -d' ' -f14,15 /proc/$$/stat`)
	out := strings.Fields(drain(conn))
	conn.Wait()
	if len(out) != 2 {
		t.Fatalf("output %q", out)
	}
	u, _ := strconv.Atoi(out[0])
	s, _ := strconv.Atoi(out[1])
	// 2 s at 0.1 CPU is 0.2 s: 20 ticks at 100 Hz; allow for the
	// period's granularity, never for a whole CPU.
	if ticks := u + s; ticks > 50 {
		t.Errorf("the loop used %d ticks of CPU in 2 s under cpu_max 0.1", ticks)
	}
}

// TestLimitsRefused: limits the SDK cannot hold fail Start, never run the
// CLI unlimited.
func TestLimitsRefused(t *testing.T) {
	tr := &claude.ProcessTransport{Limits: claude.ResourceLimits{MemoryMax: 1 << 30}, KeepDetached: true}
	_, err := tr.Start(context.Background(), &claude.Command{Path: "/bin/true"})
	var le *claude.LimitsError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "KeepDetached") {
		t.Errorf("Start with KeepDetached and limits = %v, want a LimitsError", err)
	}
	if err := claude.CheckLimits(claude.ResourceLimits{CPUMax: -1}); err == nil {
		t.Error("CheckLimits accepted a negative CPU share")
	}
}
