package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// startDegradedDaemon runs a daemon whose (in-process) CLI prints a
// system/init without Bash, and one session on it, and waits until the
// daemon has judged it.
func startDegradedDaemon(t *testing.T) (*testDaemon, string) {
	t.Helper()
	cli := &daemontest.InProcessCLI{Init: func(f map[string]any) {
		f["tools"] = slices.DeleteFunc(f["tools"].([]string), func(s string) bool { return s == "Bash" })
	}}
	d, _ := startDaemonModel(t, &daemontest.Options{Transport: cli})
	id := d.create(t, t.TempDir(), "go")
	waitFor(t, "the daemon to judge the session", func() bool {
		o := claudectl(t, invocation{getenv: d.tokenEnv()}, "doctor", "--server", d.url)
		return strings.Contains(o.stdout, "Bash tool")
	})
	return d, id
}

func TestDoctorServerShowsDegradation(t *testing.T) {
	d, id := startDegradedDaemon(t)
	o := claudectl(t, invocation{getenv: d.tokenEnv()}, "doctor", "--server", d.url)
	if o.code != 0 {
		t.Fatalf("doctor --server: exit %d, stderr %q", o.code, o.stderr)
	}
	for _, want := range []string{"Daemon:", d.url, "Version:        " + claudetest.CLIVersion(t), "Compatibility:  degraded",
		"Reasons:", "[degraded]", "missing_feature Bash tool", "session " + id, "CLI versions:",
		claude.TestedMaxVersion + ": degraded (local, 1 live)", "Degraded:", id + " lacks Bash tool",
		"Sessions:       1 with a live CLI (no limit), 0 queued, 0 suspended"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("doctor --server output lacks %q:\n%s", want, o.stdout)
		}
	}

	o = claudectl(t, invocation{getenv: d.tokenEnv()}, "doctor", "--server", d.url, "--json")
	var rep daemonDoctorReport
	if err := json.Unmarshal([]byte(o.stdout), &rep); err != nil || o.code != 0 {
		t.Fatalf("doctor --server --json: exit %d, %v:\n%s", o.code, err, o.stdout)
	}
	if rep.Compatibility != "degraded" || !rep.OK || len(rep.Reasons) != 1 || rep.Reasons[0].Subject != "Bash tool" ||
		rep.Reasons[0].LastSeen == "" || len(rep.DegradedSessions) != 1 || rep.DegradedSessions[0].SessionID != id ||
		!strings.HasPrefix(rep.StoreLocation, "sqlite /") || !strings.HasSuffix(rep.StoreLocation, "claudectl.db") {
		t.Errorf("doctor --server --json: %+v", rep)
	}

	if o := claudectl(t, invocation{getenv: d.tokenEnv()}, "doctor", "--server", d.url, "--cli", "/bin/true"); o.code != 2 || !strings.Contains(o.stderr, "--server") {
		t.Errorf("doctor --server --cli: exit %d, stderr %q; want 2 naming --server", o.code, o.stderr)
	}
}

func TestSessionsHeaderWhenDegraded(t *testing.T) {
	d, id := startDegradedDaemon(t)
	o := claudectl(t, d.inv(), "sessions")
	if o.code != 0 {
		t.Fatalf("sessions: exit %d, stderr %q", o.code, o.stderr)
	}
	lines := strings.Split(o.stdout, "\n")
	if !strings.HasPrefix(lines[0], "Claude Code "+claudetest.CLIVersion(t)+": degraded: ") || !strings.Contains(lines[0], "Bash tool") ||
		!strings.Contains(lines[0], "claudectl doctor --server "+d.url) {
		t.Errorf("sessions' first line %q; want the degradation header", lines[0])
	}
	if len(lines) < 3 || !strings.HasPrefix(lines[1], "ID") || !strings.Contains(lines[2], id) {
		t.Errorf("sessions output:\n%s", o.stdout)
	}
	// --json stays a JSON array.
	o = claudectl(t, d.inv(), "sessions", "--json")
	if !strings.HasPrefix(strings.TrimSpace(o.stdout), "[") {
		t.Errorf("sessions --json: %q", o.stdout)
	}
}

func TestSessionsNoHeaderWhenCompatible(t *testing.T) {
	d, _ := startDaemonModel(t, &daemontest.Options{Transport: &daemontest.InProcessCLI{}})
	id := d.create(t, t.TempDir(), "go")
	o := claudectl(t, d.inv(), "sessions")
	if o.code != 0 || !strings.HasPrefix(o.stdout, "ID") || !strings.Contains(o.stdout, id) {
		t.Errorf("sessions: exit %d, output:\n%s", o.code, o.stdout)
	}
}
