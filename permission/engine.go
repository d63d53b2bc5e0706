package permission

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/claudectl/claudectl/claude"
)

// A Decision is the outcome of evaluating a request against the rules.
type Decision struct {
	// Behavior is Allow or Deny when a rule settled the request, Ask when
	// it must go to a person whatever the allow rules say, None when no
	// rule matched (it goes to a person too).
	Behavior Behavior
	// Rule is the rule that decided; nil for None, for AskUserQuestion and
	// for an input too long to be matched that no rule could settle.
	// For a compound Bash command allowed part by part, it is the rule of
	// the first part and Reason names the others.
	Rule *Rule
	// Reason says why, for logs and the audit trail.
	Reason string
}

// EngineOptions configures NewEngine. A nil *EngineOptions is the same as
// a zero one.
type EngineOptions struct {
	// Home is the directory "~/" patterns start from. Empty means
	// os.UserHomeDir; if that fails, "~/" patterns match nothing.
	Home string
}

// An Engine holds the permission rules of every scope and evaluates tool
// requests against them. It is safe for concurrent use: Evaluate takes no
// lock, and changes to the rule set are seen by the evaluations that start
// after them.
type Engine struct {
	home  string
	mu    sync.Mutex             // serialises changes to rules
	rules atomic.Pointer[[]Rule] // copy-on-write
}

// NewEngine returns an engine with no rules.
func NewEngine(opts *EngineOptions) *Engine {
	e := &Engine{}
	if opts != nil {
		e.home = opts.Home
	}
	if e.home == "" {
		e.home, _ = os.UserHomeDir()
	}
	e.rules.Store(new([]Rule))
	return e
}

// Add adds rules. Each is compiled if it was built as a literal; an error
// naming the first bad rule leaves the set unchanged. Rules are evaluated
// in the order they were added, which only decides which of several
// matching rules a Decision reports.
func (e *Engine) Add(rules ...Rule) error {
	compiled, err := compileAll(rules)
	if err != nil {
		return err
	}
	e.update(func(rs []Rule) []Rule { return append(rs, compiled...) })
	return nil
}

// Put is Add for rules that may be in the set already (stored rules loaded
// again): a rule with the ID of one of them (other than 0) is replaced. The set is
// changed once for all of them, so loading n rules copies it once, not n
// times.
func (e *Engine) Put(rules ...Rule) error {
	compiled, err := compileAll(rules)
	if err != nil {
		return err
	}
	ids := make(map[int64]bool, len(compiled))
	for _, r := range compiled {
		if r.ID != 0 {
			ids[r.ID] = true
		}
	}
	e.update(func(rs []Rule) []Rule {
		rs = slices.DeleteFunc(rs, func(r Rule) bool { return r.ID != 0 && ids[r.ID] })
		return append(rs, compiled...)
	})
	return nil
}

// compileAll returns rules compiled and checked, or an error naming the
// first bad one.
func compileAll(rules []Rule) ([]Rule, error) {
	compiled := make([]Rule, len(rules))
	for i, r := range rules {
		if r.m == nil {
			if err := r.compile(); err != nil {
				return nil, &SyntaxError{Spec: r.String(), Msg: err.Error()}
			}
		}
		if r.Behavior != Allow && r.Behavior != Deny && r.Behavior != Ask {
			return nil, &SyntaxError{Spec: r.String(), Msg: fmt.Sprintf("behavior %q is not allow, deny or ask", r.Behavior)}
		}
		compiled[i] = r
	}
	return compiled, nil
}

// Replace sets the whole rule set, as Add would build it.
func (e *Engine) Replace(rules []Rule) error {
	fresh := &Engine{home: e.home}
	fresh.rules.Store(new([]Rule))
	if err := fresh.Add(rules...); err != nil {
		return err
	}
	e.update(func([]Rule) []Rule { return *fresh.rules.Load() })
	return nil
}

// Remove removes the rules with the given store ID and reports whether
// there was one.
func (e *Engine) Remove(id int64) bool {
	var found bool
	e.update(func(rs []Rule) []Rule {
		return slices.DeleteFunc(rs, func(r Rule) bool {
			found = found || r.ID == id
			return r.ID == id
		})
	})
	return found
}

// RemoveSession removes the rules scoped to a session, for when it ends,
// and returns how many there were.
func (e *Engine) RemoveSession(sessionID string) int {
	n := 0
	e.update(func(rs []Rule) []Rule {
		return slices.DeleteFunc(rs, func(r Rule) bool {
			if r.Scope.SessionID == sessionID {
				n++
				return true
			}
			return false
		})
	})
	return n
}

// Rules returns a copy of the rule set.
func (e *Engine) Rules() []Rule { return slices.Clone(*e.rules.Load()) }

func (e *Engine) update(f func([]Rule) []Rule) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs := f(slices.Clone(*e.rules.Load()))
	e.rules.Store(&rs)
}

// Evaluate decides req, made in a session of project at.ProjectDir, with
// the rules whose scope covers at. Deny rules win over ask rules, which win
// over allow rules; AskUserQuestion always goes to a person. An input that
// is not a JSON object matches no pattern (only whole-tool rules).
func (e *Engine) Evaluate(req *claude.PermissionRequest, at Scope) Decision {
	if req.ToolName == "AskUserQuestion" {
		return Decision{Behavior: Ask, Reason: "AskUserQuestion always goes to a person"}
	}
	q := &request{tool: req.ToolName, at: at, home: e.home}
	json.Unmarshal(req.Input, &q.input)
	rules := *e.rules.Load()
	var live []*Rule
	for i := range rules {
		if r := &rules[i]; r.Scope.covers(at) && r.m.covers(req.ToolName) {
			live = append(live, r)
		}
	}
	if d, ok := decideTooLong(q, live); ok {
		return d
	}
	if req.ToolName == "Bash" {
		return evalBash(q, live)
	}
	for _, b := range []Behavior{Deny, Ask, Allow} {
		for _, r := range live {
			if r.Behavior == b && r.m.match(q, r) {
				return Decision{Behavior: b, Rule: r, Reason: fmt.Sprintf("%s rule %s (%s)", b, r, r.Scope.Kind())}
			}
		}
	}
	return Decision{Behavior: None, Reason: "no rule matches " + req.ToolName}
}

// evalBash applies the compound-command rules described on [Rule].
func evalBash(q *request, live []*Rule) Decision {
	cmd := strings.TrimSpace(q.str("command"))
	parts, opaque := splitCommand(cmd)
	// matchesAny reports whether r matches the command line or one of its
	// parts; matchesPart whether it matches part p. A rule matched against
	// the whole line is matched once, however many parts ask.
	wholeLine := make(map[*Rule]bool)
	matchesPart := func(r *Rule, p string) bool {
		m, ok := r.m.(bashMatcher)
		if !ok {
			return true // the whole tool
		}
		if m.whole {
			ok, done := wholeLine[r]
			if !done {
				ok = m.matches(cmd)
				wholeLine[r] = ok
			}
			return ok
		}
		return m.matches(p)
	}
	matchesAny := func(r *Rule) bool {
		if m, ok := r.m.(bashMatcher); !ok || m.whole {
			return matchesPart(r, "")
		}
		return slices.ContainsFunc(parts, func(p string) bool { return matchesPart(r, p) })
	}
	for _, b := range []Behavior{Deny, Ask} {
		for _, r := range live {
			if r.Behavior == b && matchesAny(r) {
				return Decision{Behavior: b, Rule: r, Reason: fmt.Sprintf("%s rule %s (%s)", b, r, r.Scope.Kind())}
			}
		}
	}
	// Allow: every part must be allowed; a line hiding commands (or with
	// none) only by a rule for the whole tool.
	var by []*Rule
	for i := 0; i < len(parts) || i == 0; i++ {
		var found *Rule
		for _, r := range live {
			if r.Behavior != Allow {
				continue
			}
			if _, pattern := r.m.(bashMatcher); pattern && (opaque || len(parts) == 0) {
				continue
			}
			p := ""
			if i < len(parts) {
				p = parts[i]
			}
			if matchesPart(r, p) {
				found = r
				break
			}
		}
		if found == nil {
			reason := "no rule matches the command"
			switch {
			case opaque:
				reason = "the command runs substituted commands; only a rule for all of Bash allows it"
			case len(parts) > 1:
				reason = fmt.Sprintf("no allow rule matches %q", parts[i])
			}
			return Decision{Behavior: None, Reason: reason}
		}
		by = append(by, found)
	}
	var names []string
	for i, r := range by {
		if slices.Contains(by[:i], r) {
			continue
		}
		if s := r.String(); !slices.Contains(names, s) {
			names = append(names, s)
		}
	}
	return Decision{Behavior: Allow, Rule: by[0],
		Reason: fmt.Sprintf("allow rule %s (%s)", strings.Join(names, ", "), by[0].Scope.Kind())}
}
