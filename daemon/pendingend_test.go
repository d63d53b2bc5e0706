package daemon_test

import (
	"context"
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
)

// A session whose CLI ends while one of its permission requests waits for
// a person (closed by a client, its CLI killed, the daemon stopping) ends
// promptly, the request withdrawn, and the daemon goes on answering for it:
// the request's handler, withdrawn, must not wait for the session's loop
// while the loop waits for the handler to let the CLI go.
func TestSessionEndsWithPendingRequest(t *testing.T) {
	for _, how := range []string{"close", "kill", "shutdown"} {
		t.Run(how, func(t *testing.T) {
			td := daemontest.Start(t, nil,
				claudetest.Reply(claudetest.ToolUseID("toolu_p1", "Bash", map[string]any{"command": "rm -rf /tmp/x", "description": "clean"})),
				claudetest.Reply(claudetest.Text("Stopped.")))
			d, ctx := td.D, td.Ctx
			dir := t.TempDir()
			s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir}, "clean")
			if err != nil {
				t.Fatal(err)
			}
			waitPending(t, d, ctx, s.ID)
			ended := make(chan error, 1)
			switch how {
			case "close":
				go func() { ended <- d.CloseSession(ctx, s.ID, "test") }()
			case "kill":
				pid := childIn(t, dir)
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				close(ended)
			case "shutdown":
				go func() { ended <- d.Close() }()
			}
			select {
			case err := <-ended:
				if err != nil {
					t.Fatalf("%s: %v", how, err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%s with a permission request pending did not return", how)
			}
			if how == "shutdown" {
				return
			}
			// The daemon still answers for the session, and its CLI is gone.
			answered := make(chan error, 1)
			go func() {
				qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				deadline := time.Now().Add(10 * time.Second)
				for {
					got, err := d.Session(qctx, s.ID)
					if err != nil {
						answered <- err
						return
					}
					if _, err := d.Sessions(qctx, store.SessionFilter{}); err != nil {
						answered <- err
						return
					}
					if got.Status == store.StatusClosed || got.Status == store.StatusFailed {
						answered <- nil
						return
					}
					if time.Now().After(deadline) {
						answered <- fmt.Errorf("session still %s", got.Status)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
			select {
			case err := <-answered:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Session and Sessions hang after the session ended with a request pending")
			}
			if p := d.Pending(s.ID); len(p) != 0 {
				t.Errorf("still pending: %+v", p)
			}
			if d.Running() != 0 {
				t.Errorf("Running = %d after the session ended, want 0", d.Running())
			}
		})
	}
}

// waitPending waits until session id has a permission request pending.
func waitPending(t *testing.T, d *daemon.Daemon, ctx context.Context, id string) {
	t.Helper()
	for len(d.Pending(id)) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("no permission request came")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// childIn returns the pid of this process's child whose working directory
// is dir: the session's CLI.
func childIn(t *testing.T, dir string) int {
	t.Helper()
	me := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == dir && parentOf(t, pid) == me {
			return pid
		}
	}
	t.Fatalf("no child of this process runs in %s", dir)
	return 0
}

// gatedCLI holds each CLI's start until gate is closed, telling entered.
type gatedCLI struct {
	inner   claude.Transport
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedCLI) Start(ctx context.Context, cmd *claude.Command) (claude.Conn, error) {
	g.entered <- struct{}{}
	<-g.gate
	return g.inner.Start(ctx, cmd)
}

// A session closed while its CLI starts (by a client, or by the daemon
// stopping) ends once the CLI is up: the close used to wait for an actor
// nobody would ever ask to end.
func TestCloseWhileStarting(t *testing.T) {
	for _, how := range []string{"close", "shutdown"} {
		t.Run(how, func(t *testing.T) {
			g := &gatedCLI{inner: &daemontest.InProcessCLI{}, entered: make(chan struct{}, 1), gate: make(chan struct{})}
			td := daemontest.Start(t, &daemontest.Options{Transport: g})
			d, ctx := td.D, td.Ctx
			created := make(chan error, 1)
			go func() {
				_, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "")
				created <- err
			}()
			<-g.entered
			var id string
			for id == "" {
				all, err := d.Sessions(ctx, store.SessionFilter{})
				if err != nil {
					t.Fatal(err)
				}
				if len(all) == 1 {
					id = all[0].ID
				}
			}
			ended := make(chan error, 1)
			go func() {
				if how == "close" {
					ended <- d.CloseSession(ctx, id, "test")
				} else {
					ended <- d.Close()
				}
			}()
			time.Sleep(100 * time.Millisecond) // the close is waiting for the start
			close(g.gate)
			select {
			case err := <-ended:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%s while the CLI started did not return", how)
			}
			<-created
			if how == "close" {
				waitStatus(t, d, ctx, id, store.StatusClosed)
				if d.Running() != 0 {
					t.Errorf("Running = %d after the close", d.Running())
				}
			}
		})
	}
}

// parentOf returns a process's parent pid (0 when it is gone).
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
