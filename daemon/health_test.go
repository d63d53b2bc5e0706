package daemon_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// recorded returns the lines a real CLI printed for one prompt
// (claude/testdata/real), its session id replaced by $SESSION_ID and the
// answer to initialize left out (the in-process CLI gives its own).
func recorded(t *testing.T, name string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "claude", "testdata", "real", "2.1.329", name))
	if err != nil {
		t.Fatal(err)
	}
	sid := regexp.MustCompile(`"session_id":"[0-9a-f-]{36}"`)
	var out [][]byte
	for l := range bytes.SplitSeq(bytes.TrimSpace(raw), []byte("\n")) {
		if bytes.HasPrefix(l, []byte(`{"type":"control_response"`)) {
			continue
		}
		out = append(out, sid.ReplaceAllLiteral(l, []byte(`"session_id":"$SESSION_ID"`)))
	}
	return out
}

// replayOnce runs one session whose CLI prints lines for its prompt, and
// returns the session, its events and the daemon's compatibility while the
// session still runs.
func replayOnce(t *testing.T, opts *daemon.SessionOptions, lines [][]byte) (string, []daemon.Event, daemon.Compatibility) {
	t.Helper()
	cli := &daemontest.InProcessCLI{Script: func(int) [][]byte {
		out := make([][]byte, len(lines))
		for i, l := range lines {
			out[i] = bytes.Clone(l)
		}
		return out
	}}
	td := daemontest.Start(t, &daemontest.Options{Transport: cli})
	if opts == nil {
		opts = &daemon.SessionOptions{}
	}
	opts.Cwd = t.TempDir()
	s, err := td.D.Create(td.Ctx, opts, "go")
	if err != nil {
		t.Fatal(err)
	}
	var evs []daemon.Event
	sawResult := false
	for ev, err := range td.D.Subscribe(td.Ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		sawResult = sawResult || ev.Type == "result"
		if sw, ok := ev.Body.(*daemon.StatusChange); sawResult && ok && sw.Status == store.StatusIdle {
			break
		}
	}
	compat := td.D.Compatibility()
	if err := td.D.CloseSession(td.Ctx, s.ID, "test"); err != nil {
		t.Fatal(err)
	}
	return s.ID, evs, compat
}

func versionOf(t *testing.T, c daemon.Compatibility, v string) daemon.VersionCompat {
	t.Helper()
	for _, vc := range c.Versions {
		if vc.Version == v {
			return vc
		}
	}
	t.Fatalf("no version %q in %+v", v, c.Versions)
	return daemon.VersionCompat{}
}

// storedWarnings is warnings of events as the log holds them.
func storedWarnings(evs []store.Event) []*daemon.Warning {
	out := make([]daemon.Event, len(evs))
	for i, ev := range evs {
		out[i] = daemon.EventFromStore(ev)
	}
	return warnings(out)
}

func warnings(evs []daemon.Event) []*daemon.Warning {
	var out []*daemon.Warning
	for _, ev := range evs {
		if w, ok := ev.Body.(*daemon.Warning); ok {
			out = append(out, w)
		}
	}
	return out
}

// TestContractDegradation feeds the daemon a real CLI's lines
// (2.1.329, fully compatible by the matrix) with one thing perturbed and
// checks the level, the reasons and the warning event.
func TestContractDegradation(t *testing.T) {
	const version = "2.1.329"
	perturb := func(name string, f func(i int, line []byte) [][]byte) func(t *testing.T) [][]byte {
		return func(t *testing.T) [][]byte {
			var out [][]byte
			for i, l := range recorded(t, name) {
				out = append(out, f(i, l)...)
			}
			return out
		}
	}
	cases := []struct {
		name    string
		lines   func(t *testing.T) [][]byte
		opts    *daemon.SessionOptions
		level   claude.Compatibility
		kind    string
		subject string
		missing []string
	}{{
		name:  "as recorded",
		lines: perturb("tool-bash.ndjson", func(_ int, l []byte) [][]byte { return [][]byte{l} }),
		level: claude.FullyCompatible,
	}, {
		name: "unknown type",
		lines: perturb("tool-bash.ndjson", func(i int, l []byte) [][]byte {
			if i == 0 {
				return [][]byte{l, []byte(`{"type":"telepathy","session_id":"$SESSION_ID","uuid":"u1"}`)}
			}
			return [][]byte{l}
		}),
		level: claude.LikelyCompatible, kind: daemon.ReasonUnknownType, subject: "telepathy",
	}, {
		name: "result usage of the wrong shape",
		lines: perturb("tool-bash.ndjson", func(_ int, l []byte) [][]byte {
			if bytes.Contains(l, []byte(`"type":"result"`)) {
				u := regexp.MustCompile(`"usage":\{[^{}]*(\{[^{}]*\}[^{}]*)*\}`)
				if !u.Match(l) {
					t.Fatal("the recorded result has no usage")
				}
				l = u.ReplaceAllLiteral(l, []byte(`"usage":["input_tokens",12]`))
			}
			return [][]byte{l}
		}),
		level: claude.Degraded, kind: daemon.ReasonParseFailure, subject: "result",
	}, {
		name: "result usage of the wrong shape, the example cut inside a rune",
		lines: perturb("tool-bash.ndjson", func(_ int, l []byte) [][]byte {
			if bytes.Contains(l, []byte(`"type":"result"`)) {
				l = regexp.MustCompile(`"usage":\{[^{}]*(\{[^{}]*\}[^{}]*)*\}`).ReplaceAllLiteral(l, []byte(`"usage":["input_tokens",12]`))
				// "é" (2 bytes) across the 200th byte of the line.
				pad := 199 - len(`{"x":"`)
				l = append([]byte(`{"x":"`+strings.Repeat("a", pad)+`é",`), l[1:]...)
			}
			return [][]byte{l}
		}),
		level: claude.Degraded, kind: daemon.ReasonParseFailure, subject: "result",
	}, {
		name: "system/init without Bash",
		lines: perturb("tool-bash.ndjson", func(_ int, l []byte) [][]byte {
			return [][]byte{bytes.Replace(l, []byte(`"Bash",`), nil, 1)}
		}),
		level: claude.Degraded, kind: daemon.ReasonMissingFeature, subject: "Bash tool", missing: []string{"Bash tool"},
	}, {
		name: "system/init without Bash, which the session disallowed",
		lines: perturb("tool-bash.ndjson", func(_ int, l []byte) [][]byte {
			return [][]byte{bytes.Replace(l, []byte(`"Bash",`), nil, 1)}
		}),
		opts:  &daemon.SessionOptions{DisallowedTools: []string{"Bash"}},
		level: claude.FullyCompatible,
	}, {
		name: "system/init without a model",
		lines: perturb("text.ndjson", func(_ int, l []byte) [][]byte {
			return [][]byte{bytes.Replace(l, []byte(`"model":"claude-opus-5-5",`), nil, 1)}
		}),
		level: claude.Degraded, kind: daemon.ReasonMissingFeature, subject: "model", missing: []string{"model"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lines := c.lines(t)
			id, evs, compat := replayOnce(t, c.opts, lines)
			vc := versionOf(t, compat, version)
			if vc.Level != c.level || vc.Matrix.Level != claude.FullyCompatible || vc.LiveSessions != 1 || !vc.Local {
				t.Errorf("version %s: level %v (matrix %v), %d live, local %v; want %v, 1 live, local",
					version, vc.Level, vc.Matrix.Level, vc.LiveSessions, vc.Local, c.level)
			}
			ws := warnings(evs)
			if c.kind == "" {
				if len(vc.Reasons) != 0 || len(ws) != 0 || len(compat.Sessions) != 0 {
					t.Fatalf("reasons %+v, warnings %+v, degraded sessions %+v; want none", vc.Reasons, ws, compat.Sessions)
				}
				return
			}
			if len(vc.Reasons) != 1 {
				t.Fatalf("reasons %+v; want one", vc.Reasons)
			}
			r := vc.Reasons[0]
			if r.Kind != c.kind || r.Subject != c.subject || r.Level != c.level || r.Count != 1 ||
				r.SessionID != id || r.LastSeen.IsZero() || r.Message == "" {
				t.Errorf("reason %+v; want %s %q at %v, once, in session %s", r, c.kind, c.subject, c.level, id)
			}
			if c.kind == daemon.ReasonParseFailure && strings.Contains(c.name, "rune") {
				if !utf8.ValidString(r.Example) || len(r.Example) != 199 || !strings.HasPrefix(r.Example, `{"x":"aaa`) {
					t.Errorf("example %q (%d bytes): want the line's first 199 bytes, valid UTF-8", r.Example, len(r.Example))
				}
			} else if c.kind == daemon.ReasonParseFailure {
				if !strings.HasPrefix(r.Example, `{"duration_api_ms":66,`) || !strings.Contains(r.Example, `"usage":["input_tokens",12]`) || len(r.Example) > 200 {
					t.Errorf("example %q: want the start of the result line, at most 200 bytes", r.Example)
				}
				if !strings.Contains(r.Message, "usage") {
					t.Errorf("message %q does not say what the daemon lost", r.Message)
				}
			}
			if len(ws) != 1 || ws[0].Kind != c.kind || ws[0].Level != c.level || !slices.Contains(ws[0].Items, c.subject) ||
				ws[0].ClaudeCodeVersion != version {
				t.Fatalf("warnings %+v; want one %s about %q", ws, c.kind, c.subject)
			}
			if c.missing != nil {
				if len(compat.Sessions) != 1 || compat.Sessions[0].SessionID != id ||
					!slices.Equal(compat.Sessions[0].Missing, c.missing) || compat.Sessions[0].Level != claude.Degraded {
					t.Errorf("degraded sessions %+v; want %s missing %v", compat.Sessions, id, c.missing)
				}
			} else if len(compat.Sessions) != 0 {
				t.Errorf("degraded sessions %+v; want none", compat.Sessions)
			}
			// A replayed subscriber gets the same warning from the store.
			var replayed []*daemon.Warning
			for _, ev := range evs {
				if ev.Type == "warning" {
					if w, ok := daemon.EventFromStore(ev.Event).Body.(*daemon.Warning); ok {
						replayed = append(replayed, w)
					}
				}
			}
			if len(replayed) != 1 || replayed[0].Kind != c.kind {
				t.Errorf("the stored warning decodes to %+v", replayed)
			}
		})
	}
}

// TestUnknownTypesWarnOncePerVersion: the second session that sees the
// same unknown type gets no warning of its own, and the count goes on.
func TestUnknownTypesWarnOncePerVersion(t *testing.T) {
	cli := &daemontest.InProcessCLI{Script: func(int) [][]byte {
		return [][]byte{
			[]byte(`{"type":"system","subtype":"init","session_id":"$SESSION_ID","model":"m","permissionMode":"default","tools":["Bash","Read","Edit","Write"],"claude_code_version":"2.1.400"}`),
			[]byte(`{"type":"system","subtype":"hologram","session_id":"$SESSION_ID"}`),
			[]byte(`{"type":"result","subtype":"success","session_id":"$SESSION_ID","total_cost_usd":0.001}`),
		}
	}}
	td := daemontest.Start(t, &daemontest.Options{Transport: cli})
	var perSession [][]*daemon.Warning
	for range 2 {
		s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "go")
		if err != nil {
			t.Fatal(err)
		}
		evs := untilIdle(t, td.D, td.Ctx, s.ID, 0)
		ws := storedWarnings(evs)
		perSession = append(perSession, ws)
	}
	if len(perSession[0]) != 1 || perSession[0][0].Items[0] != "system/hologram" || len(perSession[1]) != 0 {
		t.Fatalf("warnings per session %+v; want one in the first, none in the second", perSession)
	}
	vc := versionOf(t, td.D.Compatibility(), "2.1.400")
	if vc.Matrix.Level != claude.LikelyCompatible || vc.Level != claude.LikelyCompatible ||
		len(vc.Reasons) != 1 || vc.Reasons[0].Count != 2 {
		t.Fatalf("version %+v; want likely compatible with one reason seen twice", vc)
	}
}

// TestRealCLIDisallowedToolIsNotDegradation runs the real CLI with
// --disallowedTools Bash: its system/init lacks Bash because the session
// asked so, which is not a degradation.
func TestRealCLIDisallowedToolIsNotDegradation(t *testing.T) {
	td := daemontest.Start(t, nil, claudetest.Reply(claudetest.Text("done")))
	s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir(), DisallowedTools: []string{"Bash"}}, "hi")
	if err != nil {
		t.Fatal(err)
	}
	evs := untilIdle(t, td.D, td.Ctx, s.ID, 0)
	var init *claude.SystemInit
	for _, ev := range evs {
		if ev.Type == "system" && ev.Subtype == "init" {
			m, err := claude.DecodeMessage(ev.Raw)
			if err != nil {
				t.Fatal(err)
			}
			init = m.(*claude.SystemInit)
		}
		if w, ok := daemon.EventFromStore(ev).Body.(*daemon.Warning); ok && w.Kind == daemon.ReasonMissingFeature {
			t.Errorf("warning %+v for a tool the session disallowed", w)
		}
	}
	if init == nil || slices.Contains(init.Tools, "Bash") || !slices.Contains(init.Tools, "Read") {
		t.Fatalf("the real CLI's init %+v: want tools without Bash (the test proves nothing otherwise)", init)
	}
	compat := td.D.Compatibility()
	vc := versionOf(t, compat, init.ClaudeCodeVersion)
	for _, r := range vc.Reasons {
		if r.Level == claude.Degraded || r.Kind == daemon.ReasonMissingFeature {
			t.Errorf("reason %+v with the real CLI", r)
		}
		t.Logf("the real CLI %s shows: %s %s ×%d", vc.Version, r.Kind, r.Subject, r.Count)
	}
	if vc.Level == claude.Degraded || len(compat.Sessions) != 0 {
		t.Fatalf("version %s is %v, degraded sessions %+v; want not degraded", vc.Version, vc.Level, compat.Sessions)
	}
}

// TestStandinWithoutBashIsDegraded runs a stand-in CLI (a process) whose
// system/init drops Bash although the session did not disallow it.
func TestStandinWithoutBashIsDegraded(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the stand-in CLI:", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "standin")
	if out, err := exec.Command(gobin, "build", "-o", bin, "github.com/claudectl/claudectl/daemon/internal/standin").CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in CLI: %v\n%s", err, out)
	}
	wrapper := filepath.Join(dir, "claude")
	script := "#!/bin/sh\nSTANDIN_DROP_TOOLS=Bash STANDIN_DELTAS=3 exec " + bin + ` "$@"` + "\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	td := daemontest.Start(t, &daemontest.Options{CLIPath: wrapper})
	s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "hi")
	if err != nil {
		t.Fatal(err)
	}
	evs := untilIdle(t, td.D, td.Ctx, s.ID, 0)
	ws := storedWarnings(evs)
	if len(ws) != 1 || ws[0].Kind != daemon.ReasonMissingFeature || !slices.Equal(ws[0].Items, []string{"Bash tool"}) {
		t.Fatalf("warnings %+v; want one saying Bash is missing", ws)
	}
	compat := td.D.Compatibility()
	if vc := versionOf(t, compat, "2.1.329"); vc.Level != claude.Degraded {
		t.Errorf("version level %v; want degraded", vc.Level)
	}
	if len(compat.Sessions) != 1 || compat.Sessions[0].SessionID != s.ID {
		t.Errorf("degraded sessions %+v; want %s", compat.Sessions, s.ID)
	}
	// Once the session ends, its version still carries the reason (the
	// cause is the CLI, not the session), but the session is no longer
	// listed.
	if err := td.D.CloseSession(context.Background(), s.ID, "test"); err != nil {
		t.Fatal(err)
	}
	compat = td.D.Compatibility()
	if vc := versionOf(t, compat, "2.1.329"); vc.Level != claude.Degraded || vc.LiveSessions != 0 || len(compat.Sessions) != 0 {
		t.Errorf("after close: %+v, sessions %+v; want degraded, none live", vc, compat.Sessions)
	}
}
