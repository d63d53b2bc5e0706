package claude

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in   string
		want Version
	}{
		{"2.1.329 (Claude Code)", Version{Major: 2, Minor: 1, Patch: 329, Raw: "2.1.329 (Claude Code)"}},
		{"2.1.329 (Claude Code)\n", Version{Major: 2, Minor: 1, Patch: 329, Raw: "2.1.329 (Claude Code)"}},
		{"  \r\n2.1.37 (Claude Code)\r\n\n", Version{Major: 2, Minor: 1, Patch: 37, Raw: "2.1.37 (Claude Code)"}},
		{"claude v1.0.22 (anthropic-2024-12-01)", Version{Major: 1, Minor: 0, Patch: 22, APIVersion: "anthropic-2024-12-01", Raw: "claude v1.0.22 (anthropic-2024-12-01)"}},
		{"claude v1.0.22 (anthropic-2024-12-01)\n", Version{Major: 1, Minor: 0, Patch: 22, APIVersion: "anthropic-2024-12-01", Raw: "claude v1.0.22 (anthropic-2024-12-01)"}},
		{"2.1.329", Version{Major: 2, Minor: 1, Patch: 329, Raw: "2.1.329"}},
		{"v2.1.37", Version{Major: 2, Minor: 1, Patch: 37, Raw: "v2.1.37"}},
		{"V2.1.37\n", Version{Major: 2, Minor: 1, Patch: 37, Raw: "V2.1.37"}},
		{"2.1.0-beta.1 (Claude Code)", Version{Major: 2, Minor: 1, Pre: "beta.1", Raw: "2.1.0-beta.1 (Claude Code)"}},
		{"2.1.0-rc.2+build.7", Version{Major: 2, Minor: 1, Pre: "rc.2", Raw: "2.1.0-rc.2+build.7"}},
		{"Claude Code version 10.20.30 (native build)", Version{Major: 10, Minor: 20, Patch: 30, Raw: "Claude Code version 10.20.30 (native build)"}},
		{"@anthropic-ai/claude-code@2.1.121", Version{Major: 2, Minor: 1, Patch: 121, Raw: "@anthropic-ai/claude-code@2.1.121"}},
		{"0.0.0", Version{Raw: "0.0.0"}},
		// A warning line before the version: the line naming Claude wins.
		{"warning: node 18.20.4 is old\n2.1.329 (Claude Code)\n", Version{Major: 2, Minor: 1, Patch: 329, Raw: "warning: node 18.20.4 is old\n2.1.329 (Claude Code)"}},
		// Numbers glued to letters or a fourth component are skipped.
		{"build1.2.3 then 4.5.6.7 then 2.0.1.", Version{Major: 2, Minor: 0, Patch: 1, Raw: "build1.2.3 then 4.5.6.7 then 2.0.1."}},
	}
	for _, tc := range tests {
		got, err := ParseVersion(tc.in)
		if err != nil {
			t.Errorf("ParseVersion(%q) error: %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseVersion(%q) =\n%#v\nwant\n%#v", tc.in, got, tc.want)
		}
	}
}

func TestParseVersionErrors(t *testing.T) {
	for _, in := range []string{
		"",
		"   \n\t",
		"garbage",
		"claude",
		"2.1",
		"v2",
		"2.1.x (Claude Code)",
		"anthropic-2024-12-01",
		"1.2.3abc",
		"2.1.99999999999999999999999",
		"error: unknown option '--version'",
	} {
		if v, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q) = %+v, want an error", in, v)
		} else if !strings.HasPrefix(err.Error(), "claude: parse version") {
			t.Errorf("ParseVersion(%q) error %q lacks the package prefix", in, err)
		}
	}
}

func TestVersionString(t *testing.T) {
	for _, tc := range []struct {
		v    Version
		want string
	}{
		{Version{Major: 2, Minor: 1, Patch: 329, Raw: "2.1.329 (Claude Code)"}, "2.1.329"},
		{Version{Major: 1, Patch: 22, APIVersion: "anthropic-2024-12-01"}, "1.0.22"},
		{Version{Major: 2, Minor: 1, Pre: "beta.1"}, "2.1.0-beta.1"},
		{Version{}, "0.0.0"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestVersionCompare(t *testing.T) {
	// Each entry is strictly newer than the one before it.
	ordered := []string{
		"0.0.1",
		"1.0.22",
		"1.9.99",
		"2.0.0-alpha",
		"2.0.0-alpha.1",
		"2.0.0-alpha.beta",
		"2.0.0-beta",
		"2.0.0-beta.2",
		"2.0.0-beta.11",
		"2.0.0-rc.1",
		"2.0.0",
		"2.0.9",
		"2.0.10",
		"2.1.37",
		"2.1.329",
		"2.10.0",
		"10.0.0",
	}
	vs := make([]Version, len(ordered))
	for i, s := range ordered {
		vs[i] = mustParseVersion(s)
	}
	for i := range vs {
		for j := range vs {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := vs[i].Compare(vs[j]); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", vs[i], vs[j], got, want)
			}
		}
	}

	// Only the number and pre-release take part.
	a := mustParseVersion("claude v1.0.22 (anthropic-2024-12-01)")
	b := mustParseVersion("1.0.22 (Claude Code)")
	if a.Compare(b) != 0 {
		t.Errorf("%#v.Compare(%#v) != 0", a, b)
	}
	// Numeric pre-release identifiers compare numerically, leading zeros aside.
	if c := mustParseVersion("1.0.0-01").Compare(mustParseVersion("1.0.0-1")); c != 0 {
		t.Errorf("1.0.0-01 vs 1.0.0-1: %d, want 0", c)
	}
}

func TestCheckCompatibility(t *testing.T) {
	tests := []struct {
		v       string
		level   Compatibility
		message string // a substring of the message
	}{
		{"0.0.1", Incompatible, "needs Claude Code 2.0.0 or newer"},
		{"claude v1.0.22 (anthropic-2024-12-01)", Incompatible, "npm install -g @anthropic-ai/claude-code"},
		{"1.99.99", Incompatible, "too old"},
		{"2.0.0-rc.1", Incompatible, "2.0.0-rc.1 is too old"},
		{"2.0.0", Degraded, "get_context_usage"},
		{"2.0.77", Degraded, "mcp_set_servers"},
		{"2.1.0-beta.1", Degraded, "older control protocol"},
		{"2.1.0", FullyCompatible, "fully compatible"},
		{"2.1.37", FullyCompatible, "tested: 2.1.37 and 2.1.332"},
		{"2.1.120", FullyCompatible, "2.1.120 is fully compatible"},
		{"2.1.329 (Claude Code)", FullyCompatible, "its output is recorded"},
		{"2.1.330", FullyCompatible, "its output is recorded"},
		{"2.1.331", FullyCompatible, "2.1.331 is fully compatible"},
		{"2.1.332", FullyCompatible, "its output is recorded"},
		{"2.1.333", LikelyCompatible, "newer than the versions this SDK was tested with"},
		{"2.9.0", LikelyCompatible, "unknown message types are passed through"},
		{"2.999.999", LikelyCompatible, "likely compatible"},
		{"3.0.0-alpha", LikelyCompatible, "likely compatible"},
		{"3.0.0", LikelyCompatible, "may have breaking changes"},
		{"12.4.1", LikelyCompatible, "warning: Claude Code 12.4.1 is a new major version"},
	}
	for _, tc := range tests {
		v := mustParseVersion(tc.v)
		r := CheckCompatibility(v)
		if r.Level != tc.level || r.Version != v {
			t.Errorf("CheckCompatibility(%s) = %v for %#v, want %v", tc.v, r.Level, r.Version, tc.level)
		}
		if !strings.Contains(r.Message, tc.message) {
			t.Errorf("CheckCompatibility(%s).Message = %q, want it to contain %q", tc.v, r.Message, tc.message)
		}
		if !strings.Contains(r.Message, v.String()) {
			t.Errorf("CheckCompatibility(%s).Message = %q does not name the version", tc.v, r.Message)
		}
		if tc.level != LikelyCompatible || v.Major < 3 {
			if strings.Contains(r.Message, "breaking") {
				t.Errorf("CheckCompatibility(%s).Message = %q warns about breaking changes", tc.v, r.Message)
			}
		}
	}

	if r := CheckCompatibility(Version{}); r.Level != CompatibilityUnknown || r.Message == "" {
		t.Errorf("CheckCompatibility(Version{}) = %+v, want unknown with a message", r)
	}
}

func TestCompatibilityMatrixIsContiguous(t *testing.T) {
	if compatMatrix[0].min != (Version{}) || compatMatrix[len(compatMatrix)-1].max != (Version{}) {
		t.Error("the matrix must be unbounded at both ends")
	}
	for i := 1; i < len(compatMatrix); i++ {
		if compatMatrix[i].min != compatMatrix[i-1].max {
			t.Errorf("row %d starts at %s but row %d ends at %s", i, compatMatrix[i].min, i-1, compatMatrix[i-1].max)
		}
	}
	for _, s := range []string{MinVersion, FullVersion, TestedMinVersion, TestedMaxVersion} {
		if r := CheckCompatibility(mustParseVersion(s)); r.Level == Incompatible {
			t.Errorf("exported bound %s is incompatible", s)
		}
	}
	for _, s := range []string{TestedMinVersion, TestedMaxVersion} {
		if r := CheckCompatibility(mustParseVersion(s)); r.Level != FullyCompatible {
			t.Errorf("tested version %s is %v", s, r.Level)
		}
	}
}

func TestCompatibilityString(t *testing.T) {
	for c, want := range map[Compatibility]string{
		CompatibilityUnknown: "unknown",
		FullyCompatible:      "fully compatible",
		LikelyCompatible:     "likely compatible",
		Degraded:             "degraded",
		Incompatible:         "incompatible",
		Compatibility(42):    "Compatibility(42)",
	} {
		if got := c.String(); got != want {
			t.Errorf("Compatibility(%d).String() = %q, want %q", int(c), got, want)
		}
	}
}

func TestSupportsSDKURLHost(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"2.1.37", true},
		{"2.1.120", true},
		{SDKURLMaxVersion, true},
		{"2.1.121-beta.1", true},
		{"2.1.121", false},
		{"2.1.329", false},
		{"3.0.0", false},
	} {
		if got := mustParseVersion(tc.v).SupportsSDKURLHost(); got != tc.want {
			t.Errorf("%s.SupportsSDKURLHost() = %v, want %v", tc.v, got, tc.want)
		}
	}
}

// writeScript writes an executable shell script into dir.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// versionOf calls VersionOf, retrying while a freshly written script is
// "text file busy" because a concurrent fork briefly held its write fd.
func versionOf(ctx context.Context, t *testing.T, path string) (Version, error) {
	t.Helper()
	for i := 0; ; i++ {
		v, err := VersionOf(ctx, path)
		if errors.Is(err, syscall.ETXTBSY) && i < 20 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		return v, err
	}
}

func TestVersionOfScripts(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs /bin/sh")
	}
	dir := t.TempDir()
	newFormat := writeScript(t, dir, "new", `[ "$1" = --version ] || exit 3
echo '2.1.329 (Claude Code)'
`)
	oldFormat := writeScript(t, dir, "old", `[ "$1" = --version ] || exit 3
printf 'claude v1.0.22 (anthropic-2024-12-01)\n'
`)
	onStderr := writeScript(t, dir, "stderr", `echo 'v2.1.37' >&2
`)
	failing := writeScript(t, dir, "failing", `echo 'partial output'
echo 'fatal: cannot start' >&2
exit 1
`)
	garbage := writeScript(t, dir, "garbage", `echo 'hello there'
echo 'some noise' >&2
`)

	ctx := context.Background()
	for _, tc := range []struct {
		path string
		want Version
	}{
		{newFormat, Version{Major: 2, Minor: 1, Patch: 329, Raw: "2.1.329 (Claude Code)"}},
		{oldFormat, Version{Major: 1, Minor: 0, Patch: 22, APIVersion: "anthropic-2024-12-01", Raw: "claude v1.0.22 (anthropic-2024-12-01)"}},
		{onStderr, Version{Major: 2, Minor: 1, Patch: 37, Raw: "v2.1.37"}},
	} {
		got, err := versionOf(ctx, t, tc.path)
		if err != nil {
			t.Errorf("VersionOf(%s): %v", filepath.Base(tc.path), err)
			continue
		}
		if got != tc.want {
			t.Errorf("VersionOf(%s) = %#v, want %#v", filepath.Base(tc.path), got, tc.want)
		}
	}

	t.Run("exit 1", func(t *testing.T) {
		_, err := versionOf(ctx, t, failing)
		var ve *VersionError
		if !errors.As(err, &ve) {
			t.Fatalf("VersionOf error %T %v, want *VersionError", err, err)
		}
		if ve.Path != failing || strings.TrimSpace(ve.Stdout) != "partial output" || strings.TrimSpace(ve.Stderr) != "fatal: cannot start" {
			t.Errorf("VersionError = %+v", ve)
		}
		for _, sub := range []string{failing + " --version", "exit status 1", "partial output", "fatal: cannot start"} {
			if !strings.Contains(err.Error(), sub) {
				t.Errorf("Error() = %q, want it to contain %q", err.Error(), sub)
			}
		}
	})

	t.Run("no version in output", func(t *testing.T) {
		_, err := versionOf(ctx, t, garbage)
		var ve *VersionError
		if !errors.As(err, &ve) {
			t.Fatalf("VersionOf error %T %v, want *VersionError", err, err)
		}
		for _, sub := range []string{"no x.y.z version number", "hello there", "some noise"} {
			if !strings.Contains(err.Error(), sub) {
				t.Errorf("Error() = %q, want it to contain %q", err.Error(), sub)
			}
		}
	})

	t.Run("missing binary", func(t *testing.T) {
		_, err := versionOf(ctx, t, filepath.Join(dir, "does-not-exist"))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("VersionOf(missing) = %v, want fs.ErrNotExist", err)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		hang := writeScript(t, t.TempDir(), "hang", "echo started\nexec sleep 30\n")
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := versionOf(ctx, t, hang)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("VersionOf(hang) = %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 20*time.Second { // not the sleep's 30 s
			t.Errorf("VersionOf(hang) took %v", d)
		}
	})

	t.Run("grandchild keeps pipes open", func(t *testing.T) {
		// The script exits 0 after printing; a background sleep keeps the
		// pipes open. VersionOf must return promptly with the version.
		// The sleep is long enough that waiting for it stands out from a
		// busy machine's slowness, and killed at the end.
		dir := t.TempDir()
		hang := writeScript(t, dir, "hang", "sleep 30 &\necho $! > "+filepath.Join(dir, "pid")+"\necho '2.1.329 (Claude Code)'\n")
		t.Cleanup(func() {
			if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
		start := time.Now()
		v, err := versionOf(ctx, t, hang)
		if err != nil || v.String() != "2.1.329" {
			t.Errorf("VersionOf = %v, %v; want 2.1.329", v, err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("VersionOf took %v", d)
		}
	})

	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := versionOf(ctx, t, newFormat)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("VersionOf(canceled ctx) = %v, want context.Canceled", err)
		}
	})
}

// pinnedVersion returns the CLI version the Makefile pins (its
// CLAUDE_CODE_VERSION, the one place the pin lives).
func pinnedVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CLAUDE_CODE_VERSION \?= (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no CLAUDE_CODE_VERSION in the Makefile")
	}
	return string(m[1])
}

// realCLI returns the pinned Claude Code CLI installed by `make cli`, if any,
// and whether it is the pinned version.
func realCLI(t *testing.T) (path string, pinned bool) {
	dir := "claude-code-" + pinnedVersion(t)
	rel := filepath.Join(".tools", dir, "node_modules", ".bin", "claude")
	for _, p := range []string{filepath.Join("..", rel), filepath.Join("/work/main", rel)} {
		if _, reason := checkExecutable(p); reason == "" {
			return p, true
		}
	}
	if p := os.Getenv("CLAUDECTL_TEST_CLI"); p != "" {
		if _, reason := checkExecutable(p); reason == "" {
			return p, strings.Contains(p, dir)
		}
	}
	return "", false
}

func TestVersionOfRealCLI(t *testing.T) {
	path, pinned := realCLI(t)
	pin := pinnedVersion(t)
	if path == "" {
		t.Skip("real Claude Code CLI not installed (make cli)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := VersionOf(ctx, path)
	if err != nil {
		t.Fatalf("VersionOf(%s): %v", path, err)
	}
	t.Logf("%s: %#v", path, v)
	if pinned && (v.String() != pin || v.Raw != pin+" (Claude Code)") {
		t.Errorf("VersionOf(%s) = %#v, want %s", path, v, pin)
	}
	// The pinned CLI's output is recorded for the contract tests.
	if r := CheckCompatibility(v); r.Level == Incompatible || (pinned && (r.Level != FullyCompatible || !r.Recorded)) {
		t.Errorf("CheckCompatibility(%s) = %v, recorded %v: %s", v, r.Level, r.Recorded, r.Message)
	}
	if pinned && v.SupportsSDKURLHost() {
		t.Errorf("%s must not support --sdk-url to local hosts", pin)
	}

	// FindBinary accepts it too, through a symlink in CLAUDE_BIN.
	got, err := FindBinary(&FindOptions{Env: findEnv(map[string]string{"CLAUDE_BIN": path})})
	if err != nil || !sameFile(t, got, path) {
		t.Errorf("FindBinary(CLAUDE_BIN=%s) = %q, %v", path, got, err)
	}
}
