package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
)

func TestDoctorRealCLI(t *testing.T) {
	t.Parallel()
	cli := claudetest.CLIPath(t)
	o := claudectl(t, invocation{}, "doctor", "--cli", cli)
	if o.code != 0 {
		t.Errorf("exit %d, want 0", o.code)
	}
	for _, want := range []string{cli + " (from --cli)", "Version:        " + claudetest.CLIVersion(t), "Compatibility:  fully compatible", "What to do:"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
}

func TestDoctorJSON(t *testing.T) {
	t.Parallel()
	cli := claudetest.CLIPath(t)
	// Found through CLAUDE_BIN this time.
	o := claudectl(t, invocation{getenv: map[string]string{"CLAUDE_BIN": cli}}, "doctor", "--json")
	if o.code != 0 {
		t.Errorf("exit %d, want 0", o.code)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(o.stdout), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v", err)
	}
	if !rep.Found || rep.CLIPath != cli || rep.CLISource != claude.SourceEnv || rep.Version != claudetest.CLIVersion(t) ||
		rep.Compatibility != "fully compatible" || !rep.OK || rep.ExitCode != 0 || rep.Advice == "" || rep.Message == "" {
		t.Errorf("report: %+v", rep)
	}
}

func TestDoctorMissing(t *testing.T) {
	t.Parallel()
	o := claudectl(t, invocation{}, "doctor", "--cli", "/nonexistent")
	if o.code != ExitNotFound {
		t.Errorf("exit %d, want %d", o.code, ExitNotFound)
	}
	if !strings.Contains(o.stdout, "Claude Code CLI not found: /nonexistent: does not exist") || !strings.Contains(o.stdout, "What to do:") {
		t.Errorf("stdout = %q", o.stdout)
	}

	o = claudectl(t, invocation{}, "doctor", "--cli", "/nonexistent", "--json")
	var rep doctorReport
	if err := json.Unmarshal([]byte(o.stdout), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v", err)
	}
	if o.code != ExitNotFound || rep.Found || rep.OK || rep.ExitCode != ExitNotFound || !strings.Contains(rep.Error, "/nonexistent") {
		t.Errorf("exit %d, report %+v", o.code, rep)
	}
}

// Without --cli the error lists every place searched.
func TestDoctorSearched(t *testing.T) {
	t.Parallel()
	if fileExists("/usr/local/bin/claude") {
		t.Skip("/usr/local/bin/claude exists")
	}
	empty := t.TempDir()
	o := claudectl(t, invocation{getenv: map[string]string{"HOME": empty, "PATH": empty}}, "doctor")
	if o.code != ExitNotFound {
		t.Errorf("exit %d, want %d", o.code, ExitNotFound)
	}
	for _, want := range []string{"looked in:", "CLAUDE_BIN (unset)", empty + "/.claude/local/claude (does not exist)", "$PATH (not on PATH)"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
}

func TestDoctorVersions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script string
		code         int
		want         []string
	}{
		{"too old", `echo "1.0.3 (Claude Code)"`, ExitConfig, []string{"Version:        1.0.3", "incompatible", "upgrade Claude Code to 2.0.0 or newer"}},
		{"degraded", `echo "2.0.5 (Claude Code)"`, 0, []string{"degraded", "Warning:", "older control protocol"}},
		{"newer", `echo "2.2.0 (Claude Code)"`, 0, []string{"likely compatible"}},
		{"next major", `echo "3.0.1 (Claude Code)"`, 0, []string{"likely compatible", "Warning:        Claude Code 3.0.1 is a new major version"}},
		{"no version", `echo "hello"`, ExitUnavailable, []string{"no x.y.z version number"}},
		{"fails", `echo "broken install" >&2; exit 1`, ExitUnavailable, []string{"broken install"}},
		{"hangs", `sleep 60 & echo $! > "$0.child"; sleep 61`, ExitUnavailable, []string{"--version` did not answer within 10s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cli := script(t, tc.script)
			o := claudectl(t, invocation{}, "doctor", "--cli", cli)
			if o.code != tc.code {
				t.Errorf("exit %d, want %d", o.code, tc.code)
			}
			for _, want := range tc.want {
				if !strings.Contains(o.stdout, want) {
					t.Errorf("stdout lacks %q", want)
				}
			}
			if tc.code == 0 && strings.Contains(o.stdout, "Error:") {
				t.Errorf("stdout reports an error")
			}
			if b, err := os.ReadFile(cli + ".child"); err == nil {
				// What the CLI started ends with it.
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				for i := 0; ; i++ {
					st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
					if err != nil || strings.Contains(string(st), ") Z ") {
						break
					}
					if i == 50 {
						t.Fatalf("the CLI's child %d outlived it", pid)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
}

func TestDoctorUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"doctor", "extra"}, {"doctor", "--bogus"}} {
		o := claudectl(t, invocation{}, args...)
		if o.code != 2 || !strings.Contains(o.stderr, `see "claudectl doctor -h"`) {
			t.Errorf("%v: exit %d, stderr %q", args, o.code, o.stderr)
		}
	}
}
