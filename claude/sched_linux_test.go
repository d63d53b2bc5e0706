package claude_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"golang.org/x/sys/unix"
)

// TestSchedulingBatch starts a CLI, which starts a child of its own, under
// each scheduling: with SchedulingBatch both run as SCHED_BATCH, otherwise
// as SCHED_OTHER; no thread of this process is left batch; an unknown
// value is refused before anything starts.
func TestSchedulingBatch(t *testing.T) {
	if a, err := unix.SchedGetAttr(0, 0); err != nil || a.Policy != unix.SCHED_NORMAL {
		t.Skipf("this test runs under scheduling policy %v (%v), not the default one, which SchedulingBatch keeps", a, err)
	}
	// The "CLI": starts a sleeping child, writes both pids, then echoes
	// stdin until it closes.
	dir := t.TempDir()
	cli := filepath.Join(dir, "cli")
	if err := os.WriteFile(cli, []byte("#!/bin/sh\nsleep 60 &\necho $$ $! > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"\nexec cat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    claude.Scheduling
		want uint32
	}{
		{"", unix.SCHED_NORMAL},
		{claude.SchedulingNormal, unix.SCHED_NORMAL},
		{claude.SchedulingBatch, unix.SCHED_BATCH},
	} {
		t.Run(string(c.s), func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pids")
			tr := &claude.ProcessTransport{Scheduling: c.s, GracePeriod: -1}
			conn, err := tr.Start(context.Background(), &claude.Command{Path: cli, Args: []string{pidFile}})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var pids []int
			deadline := time.Now().Add(10 * time.Second)
			for len(pids) < 2 {
				if time.Now().After(deadline) {
					t.Fatal("the CLI did not write its pids")
				}
				time.Sleep(10 * time.Millisecond)
				b, err := os.ReadFile(pidFile)
				if err != nil {
					continue
				}
				for _, f := range strings.Fields(string(b)) {
					pid, err := strconv.Atoi(f)
					if err != nil {
						t.Fatalf("pid file %q", b)
					}
					pids = append(pids, pid)
				}
			}
			for i, pid := range pids {
				a, err := unix.SchedGetAttr(pid, 0)
				if err != nil {
					t.Fatalf("sched_getattr(%d): %v", pid, err)
				}
				if a.Policy != c.want {
					t.Errorf("%s (pid %d): policy %d, want %d", []string{"the CLI", "its child"}[i], pid, a.Policy, c.want)
				}
			}
			if err := conn.WriteLine(context.Background(), []byte("still there?\n")); err != nil {
				t.Errorf("the CLI stopped after its start: %v", err)
			}
			if l, err := conn.ReadLine(); err != nil || string(l.Data) != "still there?" {
				t.Errorf("the CLI answered %q, %v", l.Data, err)
			}
			checkThreadsNormal(t)
		})
	}
	t.Run("unknown", func(t *testing.T) {
		_, err := (&claude.ProcessTransport{Scheduling: "fast"}).Start(context.Background(), &claude.Command{Path: cli})
		var se *claude.StartError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), `"fast"`) {
			t.Fatalf("Start with an unknown scheduling: %v, want a StartError naming it", err)
		}
	})
}

// checkThreadsNormal fails if a thread of this process is not SCHED_OTHER.
func checkThreadsNormal(t *testing.T) {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // the thread ended
		}
		if a.Policy != unix.SCHED_NORMAL {
			t.Errorf("thread %d of this process has policy %d after the start", tid, a.Policy)
		}
	}
}
