package main_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// stubbornCLI writes a "CLI" that answers --version and otherwise ignores
// its input's end and SIGTERM: closing its session takes the SDK's whole
// grace (5 s for stdin, 5 s after SIGTERM) before SIGKILL.
func stubbornCLI(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "claude")
	script := "#!/bin/sh\n[ \"$1\" = --version ] && { echo '2.1.329 (Claude Code)'; exit 0; }\n" +
		"trap '' TERM\nexec 0</dev/null\nwhile :; do sleep 1; done\n"
	if err := os.WriteFile(p, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServeShutdown: SIGTERM stops the daemon cleanly (exit 0) with a
// session whose CLI ignores it, within the bound; a second SIGTERM while it
// waits ends it at once.
func TestServeShutdown(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "claudectl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, second := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		httpc := &http.Client{Transport: &http.Transport{}}
		defer httpc.CloseIdleConnections()
		tmp := t.TempDir()
		p := startServe(ctx, t, bin, stubbornCLI(t), filepath.Join(tmp, "data"), os.Environ(), filepath.Join(tmp, "serve.log"), httpc)
		if _, err := p.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: tmp}})); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		p.cmd.Process.Signal(syscall.SIGTERM)
		if second {
			// Once the daemon is shutting down, a second SIGTERM ends it at
			// once. (Sent again every half second: main restores SIGTERM's
			// default action just after the first one cancels its context,
			// and one sent in between is not seen.)
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.log(), "shutting down"); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no shutdown log line 30 s after SIGTERM:\n%s", p.log())
				}
			}
			start = time.Now()
			p.cmd.Process.Signal(syscall.SIGTERM)
			go func() {
				for {
					select {
					case <-p.done:
						return
					case <-time.After(500 * time.Millisecond):
						p.cmd.Process.Signal(syscall.SIGTERM)
					}
				}
			}()
		}
		select {
		case <-p.done:
		case <-time.After(45 * time.Second):
			t.Fatalf("second SIGTERM %v: still running 45 s after SIGTERM\n%s", second, p.log())
		}
		took := time.Since(start)
		switch {
		case second && took > 5*time.Second:
			t.Errorf("a second SIGTERM took %v to end the daemon", took)
		case second && p.cmd.ProcessState.ExitCode() == 0:
			t.Errorf("a second SIGTERM: exit 0, want terminated")
		case !second && p.err != nil:
			t.Errorf("SIGTERM: %v after %v\n%s", p.err, took, p.log())
		case !second && !strings.Contains(p.log(), "shutting down"):
			t.Errorf("no shutdown log line:\n%s", p.log())
		}
	}
}
