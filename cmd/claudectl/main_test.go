package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

// These tests build claudectl and run the binary, to check what only the
// process shows: exit statuses and signal handling.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "claudectl-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "claudectl")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	code := pgtest.M(m).Run() // stops the PostgreSQL server the tests started
	os.RemoveAll(dir)
	os.Exit(code)
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func TestExitStatuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{nil, 2, "Commands:"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"run", "--permission-mode", "bogus", "hi"}, 2, `invalid value "bogus" for --permission-mode`},
		{[]string{"doctor", "--cli", "/nonexistent"}, 72, ""},
		{[]string{"help"}, 0, ""},
	} {
		cmd := exec.Command(binary, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		code := exitCode(t, cmd.Run())
		if code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("claudectl %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.stderr)
		}
	}
}

// Ctrl-C interrupts the turn (exit 130); SIGTERM ends claudectl (exit 143).
func TestSignals(t *testing.T) {
	t.Parallel()
	cli := claudetest.CLIPath(t)
	for _, tc := range []struct {
		name    string
		signals []os.Signal
		code    int
	}{
		{"ctrl-c", []os.Signal{os.Interrupt}, 130},
		{"ctrl-c twice", []os.Signal{os.Interrupt, os.Interrupt}, 130},
		{"sigterm", []os.Signal{syscall.SIGTERM}, 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("slow\n", 2000))}, ChunkSize: 5, DeltaDelay: 50 * time.Millisecond}
			srv := claudetest.NewServer(claudetest.Script(slow))
			t.Cleanup(srv.Close)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, "run", "--cli", cli, "--cwd", t.TempDir(), "go slowly")
			cmd.Env = srv.Env(t.TempDir())
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(stdout)
			if _, err := r.ReadString('\n'); err != nil { // the reply is streaming
				t.Fatalf("reading stdout: %v; stderr: %s", err, stderr.String())
			}
			for _, sig := range tc.signals {
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			var rest bytes.Buffer
			rest.ReadFrom(r)
			code := exitCode(t, cmd.Wait())
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			if n := strings.Count(rest.String(), "slow"); n > 1500 {
				t.Errorf("%d more lines after the signal: not stopped", n)
			}
			if tc.code == 130 && !strings.Contains(stderr.String(), "claudectl: interrupted") {
				t.Errorf("stderr = %q", stderr.String())
			}
		})
	}
}
