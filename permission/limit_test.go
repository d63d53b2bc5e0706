package permission_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/testcpu"
	"github.com/claudectl/claudectl/permission"
)

// decideWithin evaluates req and fails the test if that takes a second of
// CPU or more (testcpu: a busy machine stretches the wall time, not the
// CPU time), or if no decision comes in a minute. (If it never returns,
// the evaluating goroutine is left behind, and goleak reports it too.)
func decideWithin(t *testing.T, e *permission.Engine, req *claude.PermissionRequest) permission.Decision {
	t.Helper()
	type decided struct {
		d   permission.Decision
		cpu time.Duration
	}
	done := make(chan decided, 1)
	start := time.Now()
	go func() {
		var r decided
		r.cpu = testcpu.Of(func() { r.d = e.Evaluate(req, here) })
		done <- r
	}()
	select {
	case r := <-done:
		t.Logf("decided in %v, %v of CPU: %s", time.Since(start), r.cpu, r.d.Reason)
		if r.cpu >= time.Second {
			t.Fatalf("deciding on %s took %v of CPU, want under a second", req.ToolName, r.cpu)
		}
		return r.d
	case <-time.After(time.Minute):
		t.Fatalf("no decision on %s after a minute", req.ToolName)
		return permission.Decision{}
	}
}

// TestPatternsCannotBlowUp runs the rules that took the backtracking
// matcher exponential time: each decision must take under a second of CPU
// (it takes microseconds), and be right.
func TestPatternsCannotBlowUp(t *testing.T) {
	aPath := "/" + strings.Repeat("a/", 79) + "a" // 80 segments
	// A piece long enough for strings.Index to search with Rabin-Karp,
	// a few nanoseconds a byte: 64 KiB of parts, each matching the whole
	// line again, would take seconds.
	piece := strings.Repeat("a;", 40) + "b"
	parts := strings.Repeat("a;", 32<<10)
	tests := []struct {
		name string
		rule string
		req  *claude.PermissionRequest
		want permission.Behavior
	}{
		{"stars, no match", "Bash(*a*a*a*a*a*a*a*b)", bash(strings.Repeat("a", 400)), permission.None},
		{"stars, a match", "Bash(*a*a*a*a*a*a*a*b)", bash(strings.Repeat("a", 400) + "b"), permission.Allow},
		{"double stars, no match", "Read(//**/a/**/a/**/a/**/a/**/a/b)", file("Read", aPath), permission.None},
		{"double stars, a match", "Read(//**/a/**/a/**/a/**/a/**/a/b)", file("Read", aPath+"/b"), permission.Allow},
		{"double stars, inside a match", "Read(//**/a/**/a/**/a/**/a/**/a)", file("Read", aPath+"/b"), permission.Allow},
		{"stars in a segment", "Read(//**/*a*a*a*a*a*a*a*a*b)", file("Read", "/"+strings.Repeat("a", 4000)), permission.None},
		// A rule with an operator is matched against the whole line once,
		// not once for each of its 32Ki parts.
		{"whole line, many parts", "Bash(a;*" + piece + "*a)", bash(parts + piece + ";a"), permission.Allow},
		{"whole line, many parts, no match", "Bash(a;*" + piece + "*a)", bash(parts + "a"), permission.None},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := engine(t, rule(t, tt.rule, permission.Allow, permission.Scope{}))
			if d := decideWithin(t, e, tt.req); d.Behavior != tt.want {
				t.Errorf("%s: %q, want %q (%s)", tt.rule, d.Behavior, tt.want, d.Reason)
			}
		})
	}
}

func TestPatternLimit(t *testing.T) {
	ok := "Bash(" + strings.Repeat("a", permission.MaxPatternLen) + ")"
	if _, err := permission.ParseRule(ok); err != nil {
		t.Errorf("a pattern of MaxPatternLen bytes: %v", err)
	}
	long := "Bash(" + strings.Repeat("a", permission.MaxPatternLen+1) + ")"
	want := fmt.Sprintf(`permission: rule "Bash(%s"… (%d bytes): the pattern is %d bytes, more than the limit of %d`,
		strings.Repeat("a", 75), len(long), permission.MaxPatternLen+1, permission.MaxPatternLen)
	if _, err := permission.ParseRule(long); err == nil || err.Error() != want || !errors.Is(err, permission.ErrSyntax) {
		t.Errorf("ParseRule of a pattern over the limit: %v, want %q", err, want)
	}
	e := engine(t)
	lit := permission.Rule{Tool: "Read", Content: strings.Repeat("a/", permission.MaxPatternLen), Behavior: permission.Allow}
	if err := e.Add(lit); !errors.Is(err, permission.ErrSyntax) || !strings.Contains(err.Error(), "more than the limit of 4096") {
		t.Errorf("Add of a literal rule over the limit: %v", err)
	}
}

// TestInputLimit checks what is decided when the input is too long to be
// matched against patterns: only the rules without a pattern decide, as
// far as the patterns could not have changed the outcome.
func TestInputLimit(t *testing.T) {
	allow := func(spec string) permission.Rule { return rule(t, spec, permission.Allow, permission.Scope{}) }
	deny := func(spec string) permission.Rule { return rule(t, spec, permission.Deny, permission.Scope{}) }
	ask := func(spec string) permission.Rule { return rule(t, spec, permission.Ask, permission.Scope{}) }
	longCmd := "rm -rf /tmp/x " + strings.Repeat("y", permission.MaxCommandLen)
	atLimit := longCmd[:permission.MaxCommandLen]
	longPath := "/p/" + strings.Repeat("d/", permission.MaxPathLen/2) + ".env"
	pathAtLimit := "/p/" + strings.Repeat("d", permission.MaxPathLen-len("/p//.env")) + "/.env"
	bigWrite, _ := json.Marshal(map[string]string{"file_path": "/p/src/a", "content": strings.Repeat("x", permission.MaxCommandLen+1)})
	tests := []struct {
		name     string
		rules    []permission.Rule
		req      *claude.PermissionRequest
		want     permission.Behavior
		wantRule string
	}{
		{"at the limit, matched", []permission.Rule{allow("Bash"), deny("Bash(rm:*)")}, bash(atLimit), permission.Deny, "Bash(rm:*)"},
		{"over it, a deny pattern could apply", []permission.Rule{allow("Bash"), deny("Bash(rm:*)")}, bash(longCmd), permission.Ask, ""},
		{"over it, an ask pattern could apply", []permission.Rule{allow("Bash"), ask("Bash(rm:*)")}, bash(longCmd), permission.Ask, ""},
		{"over it, denied whole", []permission.Rule{allow("Bash(rm:*)"), deny("Bash")}, bash(longCmd), permission.Deny, "Bash"},
		{"over it, asked whole", []permission.Rule{allow("Bash(rm:*)"), ask("Bash")}, bash(longCmd), permission.Ask, "Bash"},
		{"over it, allowed whole", []permission.Rule{allow("Bash(ls:*)"), allow("Bash")}, bash(longCmd), permission.Allow, "Bash"},
		{"over it, only allow patterns", []permission.Rule{allow("Bash(rm:*)")}, bash(longCmd), permission.Ask, ""},
		{"no pattern, no limit", []permission.Rule{deny("Bash")}, bash(longCmd), permission.Deny, "Bash"},
		{"path at the limit, matched", []permission.Rule{allow("Read"), deny("Read(*.env)")}, file("Read", pathAtLimit), permission.Deny, "Read(*.env)"},
		{"path over it", []permission.Rule{allow("Read"), deny("Read(*.env)")}, file("Read", longPath), permission.Ask, ""},
		{"path over it, allowed whole", []permission.Rule{allow("Read"), allow("Read(src/**)")}, file("Read", longPath), permission.Allow, "Read"},
		{"only the matched field counts", []permission.Rule{allow("Edit(src/**)")}, req("Write", string(bigWrite)), permission.Allow, "Edit(src/**)"},
		{"agent type over it", []permission.Rule{deny("Agent(Ex*)"), allow("Agent")},
			req("Agent", fmt.Sprintf(`{"subagent_type":"Ex%s"}`, strings.Repeat("x", permission.MaxCommandLen))), permission.Ask, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := engine(t, tt.rules...).Evaluate(tt.req, here)
			got := ""
			if d.Rule != nil {
				got = d.Rule.String()
			}
			if d.Behavior != tt.want || got != tt.wantRule {
				t.Errorf("Evaluate: %q by %q, want %q by %q (%s)", d.Behavior, got, tt.want, tt.wantRule, d.Reason)
			}
			if strings.Contains(tt.name, "over it") && !strings.Contains(d.Reason, "more than the") {
				t.Errorf("reason %q does not say the input is over the limit", d.Reason)
			}
		})
	}
}
