package claudetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// CLIEnv is the environment variable naming the claude binary to test
// against. The project's Makefile sets it to the pinned CLI.
const CLIEnv = "CLAUDECTL_TEST_CLI"

// CLIPath returns the claude binary to test against:
//
//   - $CLAUDECTL_TEST_CLI if set (tb.Fatal if it does not exist);
//   - else the newest .tools/claude-code-VERSION/node_modules/.bin/claude
//     found walking up from the working directory to the directory holding
//     go.mod;
//   - else claude on PATH.
//
// If none is found it calls tb.Fatal when the environment has CI=true, and
// tb.Skip otherwise.
func CLIPath(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv(CLIEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("claude CLI not found: %s=%s: %v; run make test", CLIEnv, p, err)
			return ""
		}
		return p
	}
	if p := findToolsCLI(); p != "" {
		return p
	}
	if p, err := exec.LookPath("claude"); err == nil {
		return p
	}
	msg := "claude CLI not found (set " + CLIEnv + ", install it into .tools/ or put claude on PATH); run make test"
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	} else {
		tb.Skip(msg)
	}
	return ""
}

// CLIWSEnv is the environment variable naming the claude binary to test the
// WebSocket (--sdk-url) transport against: a CLI of version 2.1.120 or
// older, as newer ones refuse a local --sdk-url. The Makefile sets it.
const CLIWSEnv = "CLAUDECTL_TEST_CLI_WS"

// SDKURLCLIPath returns the claude binary to test --sdk-url against, the way
// CLIPath does: $CLAUDECTL_TEST_CLI_WS if set, else the newest
// .tools/claude-code-VERSION with VERSION at most 2.1.120, else it calls
// tb.Fatal when CI=true and tb.Skip otherwise.
func SDKURLCLIPath(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv(CLIWSEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("claude CLI for --sdk-url not found: %s=%s: %v; run make test", CLIWSEnv, p, err)
			return ""
		}
		return p
	}
	if p := findToolsCLIMatching(func(v []int) bool { return compareVersions(v, []int{2, 1, 120}) <= 0 }); p != "" {
		return p
	}
	msg := "claude CLI 2.1.120 or older not found (set " + CLIWSEnv + " or install one into .tools/); run make test"
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	} else {
		tb.Skip(msg)
	}
	return ""
}

// findToolsCLI walks up from the working directory to the module root looking
// for .tools/claude-code-*/node_modules/.bin/claude and returns the newest.
func findToolsCLI() string {
	return findToolsCLIMatching(func([]int) bool { return true })
}

// findToolsCLIMatching is findToolsCLI among the versions ok accepts.
func findToolsCLIMatching(ok func(version []int) bool) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		matches, _ := filepath.Glob(filepath.Join(dir, ".tools", "claude-code-*", "node_modules", ".bin", "claude"))
		best, bestVer := "", []int(nil)
		for _, m := range matches {
			if _, err := os.Stat(m); err != nil {
				continue
			}
			v := parseVersion(strings.TrimPrefix(filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(m)))), "claude-code-"))
			if !ok(v) {
				continue
			}
			if best == "" || compareVersions(v, bestVer) > 0 {
				best, bestVer = m, v
			}
		}
		if best != "" {
			return best
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// parseVersion parses "2.1.329" into [2 1 329]; non-numeric parts count as -1.
func parseVersion(s string) []int {
	var v []int
	for _, p := range strings.Split(s, ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			n = -1
		}
		v = append(v, n)
	}
	return v
}

func compareVersions(a, b []int) int {
	for i := range max(len(a), len(b)) {
		x, y := 0, 0
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// CLIVersion returns the version the CLI under test (CLIPath) reports, such
// as "2.1.330", for tests that check what is shown of it.
func CLIVersion(tb testing.TB) string {
	tb.Helper()
	out, err := exec.Command(CLIPath(tb), "--version").Output()
	if err != nil {
		tb.Fatalf("claude --version: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		tb.Fatalf("claude --version printed nothing")
	}
	return f[0]
}
