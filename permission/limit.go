package permission

import (
	"fmt"
	"unicode/utf8"
)

// Limits on the sizes of what is matched, so that no decision takes long:
// matching one rule takes time proportional at worst to the length of its
// pattern times the length of what it is matched against (see [Rule]).
const (
	// MaxPatternLen is the longest pattern a rule may have, in bytes: the
	// text between its parentheses. ParseRule, NewRule and Engine.Add
	// refuse longer ones.
	MaxPatternLen = 4 << 10
	// MaxPathLen is the longest file path file patterns are matched
	// against, in bytes: PATH_MAX on Linux, which refuses to open longer
	// paths anyway.
	MaxPathLen = 4 << 10
	// MaxCommandLen is the longest Bash command, URL, agent type or skill
	// name patterns are matched against, in bytes.
	MaxCommandLen = 1 << 20
)

// overLimit returns a sentence saying that the input s, named what, is
// longer than limit, or "" if it is not.
func overLimit(what, s string, limit int) string {
	if len(s) <= limit {
		return ""
	}
	return fmt.Sprintf("the %s is %d bytes, more than the %d that rule patterns are matched against", what, len(s), limit)
}

// decideTooLong decides a request whose input is too long for the
// patterns of live, the rules that apply to it, to be matched against it,
// and reports whether it was. Such a request is decided by the rules
// without a pattern, as far as the patterns could not have changed the
// outcome: a deny rule for the whole tool denies it, an ask rule asks
// unless a deny rule has a pattern, an allow rule allows it unless a deny
// or ask rule has one. Anything else goes to a person.
func decideTooLong(q *request, live []*Rule) (Decision, bool) {
	var (
		reason    string
		patterned = make(map[Behavior]bool)
	)
	for _, r := range live {
		if !hasPattern(r) {
			continue
		}
		patterned[r.Behavior] = true
		if reason == "" {
			reason = r.m.tooLong(q)
		}
	}
	if reason == "" {
		return Decision{}, false
	}
	whole := func(b Behavior) (Decision, bool) {
		for _, r := range live {
			if r.Behavior == b && !hasPattern(r) {
				return Decision{Behavior: b, Rule: r,
					Reason: fmt.Sprintf("%s rule %s (%s); %s", b, r, r.Scope.Kind(), reason)}, true
			}
		}
		return Decision{}, false
	}
	if d, ok := whole(Deny); ok {
		return d, true
	}
	if !patterned[Deny] {
		if d, ok := whole(Ask); ok {
			return d, true
		}
		if !patterned[Ask] {
			if d, ok := whole(Allow); ok {
				return d, true
			}
		}
	}
	return Decision{Behavior: Ask, Reason: reason + "; a person decides"}, true
}

// hasPattern reports whether r has a pattern, as opposed to covering every
// call of its tools.
func hasPattern(r *Rule) bool {
	switch r.m.(type) {
	case toolMatcher, mcpMatcher:
		return false
	}
	return true
}

// maxSpecShown is how much of a rule an error message quotes.
const maxSpecShown = 80

// shortSpec quotes spec for a message, cut after maxSpecShown bytes.
func shortSpec(spec string) string {
	if len(spec) <= maxSpecShown {
		return fmt.Sprintf("%q", spec)
	}
	cut := maxSpecShown
	for cut > 0 && !utf8.RuneStart(spec[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", spec[:cut], len(spec))
}
