package claude

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Version bounds of the embedded compatibility matrix, as x.y.z strings.
const (
	// MinVersion is the oldest Claude Code CLI the SDK works with at all
	// (older ones lack the stream-json control protocol).
	MinVersion = "2.0.0"
	// FullVersion is the oldest CLI with the full control protocol; from
	// MinVersion up to it the SDK works degraded.
	FullVersion = "2.1.0"
	// TestedMinVersion and TestedMaxVersion are the oldest and newest CLI
	// versions the SDK was tested against end to end.
	TestedMinVersion = "2.1.37"
	TestedMaxVersion = "2.1.332"
	// SDKURLMaxVersion is the newest CLI that accepts --sdk-url pointing at a
	// non-Anthropic host; see Version.SupportsSDKURLHost.
	SDKURLMaxVersion = "2.1.120"
)

// recordedVersions are the CLI versions whose output is recorded in
// claude/testdata/real/<version>/ (make fixtures CLI=<version>) and checked
// by the contract tests, oldest first; TestContractMatrixMatchesFixtures
// keeps this list and the folders the same.
var recordedVersions = []string{"2.1.329", "2.1.330", "2.1.332"}

// RecordedVersions returns the CLI versions whose output was recorded and
// is checked by this package's contract tests, oldest first. They are
// FullyCompatible, with CompatibilityReport.Recorded set.
func RecordedVersions() []string { return slices.Clone(recordedVersions) }

// versionTimeout caps VersionOf.
const versionTimeout = 10 * time.Second

// Version is a parsed `claude --version`.
type Version struct {
	Major, Minor, Patch int
	// Pre is the pre-release part without its leading "-", e.g. "beta.1";
	// empty for a release.
	Pre string
	// APIVersion is the API version printed in parentheses by older CLIs,
	// e.g. "anthropic-2024-12-01"; empty when not printed.
	APIVersion string
	// Raw is the parsed text with surrounding whitespace removed.
	Raw string
}

// versionPattern matches a dotted x.y.z number with an optional leading "v",
// SemVer pre-release and build metadata, not glued to a preceding word.
var versionPattern = regexp.MustCompile(
	`(?:^|[^0-9A-Za-z.])[vV]?(\d+)\.(\d+)\.(\d+)` +
		`(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?` +
		`(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?`)

// apiVersionPattern matches the API version older CLIs print in parentheses.
var apiVersionPattern = regexp.MustCompile(`\((anthropic-[^()\s]+)\)`)

// ParseVersion parses the output of `claude --version`. It accepts both known
// formats, "2.1.329 (Claude Code)" and "claude v1.0.22 (anthropic-2024-12-01)",
// as well as surrounding whitespace and newlines, a leading "v", a pre-release
// suffix ("2.1.0-beta.1") and extra words. When the text has several lines, a
// line mentioning Claude is preferred, so a warning printed before the version
// does not confuse it. It returns an error for text without a dotted x.y.z
// number.
func ParseVersion(s string) (Version, error) {
	raw := strings.TrimSpace(s)
	lines := strings.Split(raw, "\n")
	for _, preferClaude := range []bool{true, false} {
		for _, line := range lines {
			if preferClaude && !strings.Contains(strings.ToLower(line), "claude") {
				continue
			}
			v, ok, err := parseVersionLine(line)
			if err != nil {
				return Version{}, fmt.Errorf("claude: parse version %q: %w", versionSnippet(raw), err)
			}
			if ok {
				if m := apiVersionPattern.FindStringSubmatch(line); m != nil {
					v.APIVersion = m[1]
				} else if m := apiVersionPattern.FindStringSubmatch(raw); m != nil {
					v.APIVersion = m[1]
				}
				v.Raw = raw
				return v, nil
			}
		}
	}
	if raw == "" {
		return Version{}, errors.New("claude: parse version: empty output")
	}
	return Version{}, fmt.Errorf("claude: parse version %q: no x.y.z version number", versionSnippet(raw))
}

// parseVersionLine returns the first well-delimited x.y.z version in line.
func parseVersionLine(line string) (Version, bool, error) {
	for _, m := range versionPattern.FindAllStringSubmatchIndex(line, -1) {
		// Reject a number glued to what follows: "1.2.3abc", "1.2.3.4".
		if rest := line[m[1]:]; rest != "" {
			c := rest[0]
			if isAlnum(c) || c == '.' && len(rest) > 1 && isAlnum(rest[1]) {
				continue
			}
		}
		var nums [3]int
		for i := range nums {
			n, err := strconv.Atoi(line[m[2+2*i]:m[3+2*i]])
			if err != nil {
				return Version{}, false, fmt.Errorf("version number out of range: %w", err)
			}
			nums[i] = n
		}
		v := Version{Major: nums[0], Minor: nums[1], Patch: nums[2]}
		if m[8] >= 0 {
			v.Pre = line[m[8]:m[9]]
		}
		return v, true, nil
	}
	return Version{}, false, nil
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// versionSnippet shortens s for an error message.
func versionSnippet(s string) string {
	const limit = 200
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}

// mustParseVersion parses a version constant.
func mustParseVersion(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// String returns the version as "major.minor.patch", followed by
// "-" and the pre-release when there is one: "2.1.329", "2.1.0-beta.1".
func (v Version) String() string {
	s := strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) + "." + strconv.Itoa(v.Patch)
	if v.Pre != "" {
		s += "-" + v.Pre
	}
	return s
}

// Compare returns -1, 0 or +1 as v is older than, the same as, or newer than
// w, using SemVer precedence: major, minor and patch numerically, then a
// pre-release sorts before the release it precedes. APIVersion and Raw are
// ignored.
func (v Version) Compare(w Version) int {
	if c := cmp.Compare(v.Major, w.Major); c != 0 {
		return c
	}
	if c := cmp.Compare(v.Minor, w.Minor); c != 0 {
		return c
	}
	if c := cmp.Compare(v.Patch, w.Patch); c != 0 {
		return c
	}
	return comparePrerelease(v.Pre, w.Pre)
}

// comparePrerelease orders pre-release strings by SemVer rules.
func comparePrerelease(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	}
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, y := as[i], bs[i]
		xNum, yNum := isDigits(x), isDigits(y)
		var c int
		switch {
		case xNum && yNum:
			x, y = strings.TrimLeft(x, "0"), strings.TrimLeft(y, "0")
			c = cmp.Compare(len(x), len(y))
			if c == 0 {
				c = strings.Compare(x, y)
			}
		case xNum:
			c = -1
		case yNum:
			c = 1
		default:
			c = strings.Compare(x, y)
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(as), len(bs))
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// SupportsSDKURLHost reports whether this CLI version accepts --sdk-url
// pointing at a non-Anthropic host (such as a local WebSocket server). Since
// 2.1.121 the CLI refuses those ("--sdk-url rejected: host ... is not an
// approved Anthropic endpoint"), so it is true only for versions up to
// SDKURLMaxVersion.
func (v Version) SupportsSDKURLHost() bool {
	return v.Compare(sdkURLLimit) < 0
}

var sdkURLLimit = Version{Major: 2, Minor: 1, Patch: 121}

// VersionError is returned by VersionOf when the CLI cannot be run, fails, or
// prints no version. It carries what the CLI printed.
type VersionError struct {
	Path   string // the executable that was run
	Stdout string // its standard output, possibly truncated
	Stderr string // its standard error, possibly truncated
	Err    error  // the underlying error
}

// Error returns a message with the command, the cause and, when present, the
// CLI's output.
func (e *VersionError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "claude: `%s --version`: %v", e.Path, e.Err)
	if out := strings.TrimSpace(e.Stdout); out != "" {
		fmt.Fprintf(&b, "; stdout: %q", versionSnippet(out))
	}
	if errOut := strings.TrimSpace(e.Stderr); errOut != "" {
		fmt.Fprintf(&b, "; stderr: %q", versionSnippet(errOut))
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *VersionError) Unwrap() error { return e.Err }

// VersionOf runs `<path> --version` and parses what it prints. ctx bounds the
// run, and so does a 10 second cap (then the error says it "did not answer
// within 10s"); whatever the CLI started is killed with it. Errors are
// *VersionError values carrying the command's output and stderr; they wrap
// ctx's error when the run was cut short by cancellation or the deadline.
func VersionOf(ctx context.Context, path string) (Version, error) {
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > versionTimeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, versionTimeout, versionTimeoutError{versionTimeout})
		defer cancel()
	}
	var stdout, stderr cappedBuffer
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// In a process group of its own, killed whole when ctx ends: a script
	// that hangs (sleep) must not outlive the check.
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
	// Do not hang on a grandchild that keeps the output pipes open.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		// The CLI exited successfully; only a process it left behind kept
		// the output pipes open. What it printed is still usable.
		err = nil
	}
	verr := &VersionError{Path: path, Stdout: stdout.String(), Stderr: stderr.String()}
	if err != nil {
		if te := (versionTimeoutError{}); errors.As(context.Cause(ctx), &te) {
			err = te
		} else if ctxErr := ctx.Err(); ctxErr != nil {
			err = fmt.Errorf("%w (%v)", ctxErr, err)
		}
		verr.Err = err
		return Version{}, verr
	}
	v, err := ParseVersion(verr.Stdout)
	if err != nil && strings.TrimSpace(verr.Stdout) == "" {
		// Some programs print their version on stderr.
		if v2, err2 := ParseVersion(verr.Stderr); err2 == nil {
			return v2, nil
		}
	}
	if err != nil {
		verr.Err = err
		return Version{}, verr
	}
	return v, nil
}

// versionTimeoutError is VersionError.Err when `--version` did not end
// within VersionOf's own cap. It is a context.DeadlineExceeded.
type versionTimeoutError struct{ d time.Duration }

func (e versionTimeoutError) Error() string { return fmt.Sprintf("did not answer within %v", e.d) }

func (e versionTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// cappedBuffer keeps the first 64 KiB written to it and discards the rest.
type cappedBuffer struct {
	b []byte
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	const limit = 64 << 10
	if room := limit - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string { return string(c.b) }

// Compatibility is how well a Claude Code CLI version works with this SDK.
type Compatibility int

// Compatibility levels, from the embedded matrix (see CheckCompatibility).
const (
	// CompatibilityUnknown means the version is not known.
	CompatibilityUnknown Compatibility = iota
	// FullyCompatible means the version is within the tested range.
	FullyCompatible
	// LikelyCompatible means the version is newer than tested, with no
	// known issues.
	LikelyCompatible
	// Degraded means the version works but lacks some features.
	Degraded
	// Incompatible means the version is too old for the SDK to work.
	Incompatible
)

// String returns the level in words: "unknown", "fully compatible",
// "likely compatible", "degraded" or "incompatible".
func (c Compatibility) String() string {
	switch c {
	case CompatibilityUnknown:
		return "unknown"
	case FullyCompatible:
		return "fully compatible"
	case LikelyCompatible:
		return "likely compatible"
	case Degraded:
		return "degraded"
	case Incompatible:
		return "incompatible"
	}
	return "Compatibility(" + strconv.Itoa(int(c)) + ")"
}

// CompatibilityReport is the result of checking a version against the
// embedded matrix.
type CompatibilityReport struct {
	Version Version
	Level   Compatibility
	// Message is human readable: what the level means and what to do.
	Message string
	// Recorded is set for a version whose output is recorded and checked
	// by the contract tests (see RecordedVersions).
	Recorded bool
}

// compatRow is one row of the compatibility matrix: versions v with
// min <= v < max. A zero min or max means no bound on that side.
type compatRow struct {
	min, max Version
	level    Compatibility
	note     string // a format with one %s for the version
}

// afterTestedMax is the first version newer than TestedMaxVersion.
var afterTestedMax = func() Version {
	v := mustParseVersion(TestedMaxVersion)
	return Version{Major: v.Major, Minor: v.Minor, Patch: v.Patch + 1}
}()

var compatMatrix = []compatRow{
	{
		max:   mustParseVersion(MinVersion),
		level: Incompatible,
		note: "Claude Code %s is too old: the stream-json control protocol this SDK speaks needs Claude Code " +
			MinVersion + " or newer; upgrade: npm install -g @anthropic-ai/claude-code",
	},
	{
		min:   mustParseVersion(MinVersion),
		max:   mustParseVersion(FullVersion),
		level: Degraded,
		note: "Claude Code %s speaks an older control protocol: some control requests such as " +
			"get_context_usage and mcp_set_servers are missing and will fail; upgrade to " + FullVersion +
			" or newer for full support: npm install -g @anthropic-ai/claude-code",
	},
	{
		min:   mustParseVersion(FullVersion),
		max:   afterTestedMax,
		level: FullyCompatible,
		note:  "Claude Code %s is fully compatible (tested: " + TestedMinVersion + " and " + TestedMaxVersion + ")",
	},
	{
		min:   afterTestedMax,
		max:   Version{Major: 3},
		level: LikelyCompatible,
		note: "Claude Code %s is newer than the versions this SDK was tested with (up to " + TestedMaxVersion +
			") and is likely compatible; unknown message types are passed through",
	},
	{
		min:   Version{Major: 3},
		level: LikelyCompatible,
		note: "warning: Claude Code %s is a new major version and may have breaking changes; this SDK was " +
			"tested with 2.x (up to " + TestedMaxVersion + "). Unknown message types are passed through, " +
			"but if sessions fail, install a 2.x release: npm install -g @anthropic-ai/claude-code@2",
	},
}

// CheckCompatibility checks v against the embedded compatibility matrix:
//
//	        v < 2.0.0    Incompatible
//	2.0.0 ≤ v < 2.1.0    Degraded (older control protocol)
//	2.1.0 ≤ v ≤ 2.1.332  FullyCompatible (tested: 2.1.37 to 2.1.332;
//	                     recorded: 2.1.329, 2.1.330, 2.1.332, see RecordedVersions)
//	2.1.332 < v          LikelyCompatible (from 3.0.0 with a warning
//	                     that a major version may break things)
//
// Versions are ordered as by Version.Compare, so a pre-release sorts before
// its release. The zero Version gives CompatibilityUnknown.
func CheckCompatibility(v Version) CompatibilityReport {
	if v == (Version{}) {
		return CompatibilityReport{
			Level:   CompatibilityUnknown,
			Message: "the Claude Code version is unknown, so its compatibility cannot be checked; run `claude --version`",
		}
	}
	for _, row := range compatMatrix {
		aboveMin := row.min == (Version{}) || v.Compare(row.min) >= 0
		belowMax := row.max == (Version{}) || v.Compare(row.max) < 0
		if aboveMin && belowMax {
			r := CompatibilityReport{Version: v, Level: row.level, Message: fmt.Sprintf(row.note, v)}
			if v.Pre == "" && slices.Contains(recordedVersions, v.String()) {
				r.Recorded = true
				r.Message += "; its output is recorded and checked by the SDK's contract tests"
			}
			return r
		}
	}
	// Unreachable: the matrix covers every version.
	return CompatibilityReport{Version: v, Level: CompatibilityUnknown, Message: "Claude Code " + v.String() + ": compatibility unknown"}
}
