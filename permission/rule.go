package permission

import (
	"errors"
	"fmt"
	"strings"
)

// Behavior is what a rule does with the requests it matches, and what an
// evaluation concluded.
type Behavior string

// The behaviors, spelled as Claude Code spells them.
const (
	// None means no rule settled the request: it goes to a person.
	None  Behavior = ""
	Allow Behavior = "allow"
	Deny  Behavior = "deny"
	// Ask sends the request to a person even when an allow rule matches.
	Ask Behavior = "ask"
)

// Scope says where a rule applies, or where a request was made. A rule
// applies to a request when each of its non-empty fields matches:
// ProjectDir is the request's project directory or one of its parents, and
// SessionID is the request's session. The zero Scope is global.
type Scope struct {
	ProjectDir string
	SessionID  string
}

// Kind returns "global", "project" or "session".
func (s Scope) Kind() string {
	switch {
	case s.SessionID != "":
		return "session"
	case s.ProjectDir != "":
		return "project"
	}
	return "global"
}

// covers reports whether a rule scoped to s applies to a request made in at.
func (s Scope) covers(at Scope) bool {
	if s.SessionID != "" && s.SessionID != at.SessionID {
		return false
	}
	if s.ProjectDir != "" && !within(at.ProjectDir, s.ProjectDir) {
		return false
	}
	return true
}

// A Rule is one permission rule: a tool, optionally narrowed by a pattern in
// Claude Code's own syntax, a behavior and a scope. Build rules with
// [ParseRule] or [NewRule]; a Rule literal is compiled when added to an
// [Engine].
//
// The forms understood, by tool:
//
//	Bash                        every command
//	Bash(npm run test)          exactly that command
//	Bash(git status:*)          the command "git status" and any that starts "git status "
//	Bash(git * main)            * matches any text; "ls *" also matches "ls"
//	Read(src/**) Edit(*.go)     gitignore-style globs on the file path (see below)
//	WebFetch(domain:go.dev)     fetches of that host; domain:*.go.dev for its subdomains
//	mcp__github                 every tool of the MCP server github (also mcp__github__*)
//	mcp__github__create_issue   one MCP tool
//	Agent(Explore) Skill(pdf)   a sub-agent type or a skill, * allowed (Task is Agent)
//	WebSearch, Glob, …          any other tool by name, without a pattern
//
// File rules follow Claude Code: Edit rules cover every tool that changes
// files (Edit, MultiEdit, Write, NotebookEdit); Read rules cover the tools
// that read them (Read, Glob, Grep, LS, NotebookRead); Write, MultiEdit and
// NotebookEdit rules cover their own tool. Paths are gitignore patterns:
// "//abs/path" is absolute, "~/path" is under the home directory, "/path"
// and "./path" are anchored at the project directory (the rule's own for a
// project rule, the request's otherwise), and a pattern without a slash,
// like "*.env", matches at any depth below it. A pattern that matches a
// directory matches everything in it.
//
// A Bash command is split at &&, ||, ;, | and & (outside quotes) and
// leading VAR=value assignments and the wrappers timeout, nice, nohup and
// time are dropped from each part. A deny or ask rule matches when it
// matches any part; allow needs every part to be allowed, by one rule or
// several. A pattern that itself holds one of those operators is matched
// against the whole command instead. Commands with $(…), backquotes or
// process substitution are matched by a whole-tool "Bash" rule only.
//
// A pattern has at most [MaxPatternLen] bytes; the package documentation
// says how long matching takes and what happens to inputs too long to
// match.
type Rule struct {
	// ID is the rule's id in the store, 0 if none. Engine.Remove takes it.
	ID int64
	// Tool is the tool name as written: "Bash", "Edit", "mcp__github".
	Tool string
	// Content is the pattern between the parentheses, "" for the whole tool.
	Content  string
	Behavior Behavior
	Scope    Scope

	m matcher // compiled from Tool and Content
}

// String returns the rule in Claude Code's form, e.g. "Bash(git status:*)".
func (r Rule) String() string {
	if r.Content == "" {
		return r.Tool
	}
	return r.Tool + "(" + r.Content + ")"
}

// ErrSyntax is wrapped by every error of ParseRule.
var ErrSyntax = errors.New("permission: bad rule")

// SyntaxError is the error of a rule that does not parse.
type SyntaxError struct {
	Spec string // the rule as given
	Msg  string // what is wrong with it
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("permission: rule %s: %s", shortSpec(e.Spec), e.Msg)
}

// Is makes errors.Is(err, ErrSyntax) true.
func (e *SyntaxError) Is(target error) bool { return target == ErrSyntax }

// ParseRule parses a rule in Claude Code's form ("Bash(git status:*)");
// the result has no behavior and a global scope. Errors are
// [*SyntaxError]s naming the rule and what is wrong.
func ParseRule(spec string) (Rule, error) {
	fail := func(format string, args ...any) (Rule, error) {
		return Rule{}, &SyntaxError{Spec: spec, Msg: fmt.Sprintf(format, args...)}
	}
	s := strings.TrimSpace(spec)
	var r Rule
	if i := strings.IndexByte(s, '('); i >= 0 {
		if !strings.HasSuffix(s, ")") {
			return fail(`missing ")" at the end`)
		}
		r.Tool, r.Content = s[:i], s[i+1:len(s)-1]
		if strings.TrimSpace(r.Content) == "" {
			return fail("empty parentheses; write %s alone to cover the whole tool", r.Tool)
		}
	} else {
		if strings.ContainsRune(s, ')') {
			return fail(`")" without "("`)
		}
		r.Tool = s
	}
	if err := r.compile(); err != nil {
		return fail("%s", err.Error())
	}
	return r, nil
}

// NewRule parses spec and gives it a behavior and a scope. b must be Allow,
// Deny or Ask.
func NewRule(spec string, b Behavior, s Scope) (Rule, error) {
	r, err := ParseRule(spec)
	if err != nil {
		return Rule{}, err
	}
	if b != Allow && b != Deny && b != Ask {
		return Rule{}, &SyntaxError{Spec: spec, Msg: fmt.Sprintf("behavior %q is not allow, deny or ask", b)}
	}
	r.Behavior, r.Scope = b, s
	return r, nil
}

// compile checks r.Tool and r.Content and sets r.m.
func (r *Rule) compile() error {
	if r.Tool == "" {
		return errors.New("no tool name")
	}
	if len(r.Content) > MaxPatternLen {
		return fmt.Errorf("the pattern is %d bytes, more than the limit of %d", len(r.Content), MaxPatternLen)
	}
	if r.Content == "*" { // Claude Code: Bash(*) is Bash
		r.Content = ""
	}
	for i, c := range r.Tool {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-' || i > 0 && c >= '0' && c <= '9' ||
			c == '*' && strings.HasPrefix(r.Tool, "mcp__") && i == len(r.Tool)-1) {
			return fmt.Errorf("tool name %q: character %q not allowed", r.Tool, c)
		}
	}
	if strings.HasPrefix(r.Tool, "mcp__") {
		if r.Content != "" {
			return errors.New("MCP rules take no pattern; name the server (mcp__server) or the tool (mcp__server__tool)")
		}
		r.m = mcpMatcher(r.Tool)
		return nil
	}
	if r.Content == "" {
		r.m = toolMatcher{tools: coveredTools(r.Tool)}
		return nil
	}
	switch r.Tool {
	case "Bash":
		m, err := compileBash(r.Content)
		if err != nil {
			return err
		}
		r.m = m
	case "Read", "Edit", "Write", "MultiEdit", "NotebookEdit", "NotebookRead":
		m, err := compilePath(r.Content)
		if err != nil {
			return err
		}
		m.tools = coveredTools(r.Tool)
		r.m = m
	case "WebFetch":
		host, ok := strings.CutPrefix(r.Content, "domain:")
		if !ok || host == "" || strings.ContainsAny(host, "/: ") {
			return errors.New(`WebFetch takes "domain:<host>", e.g. WebFetch(domain:example.com)`)
		}
		r.m = domainMatcher(strings.ToLower(host))
	case "Agent", "Task":
		r.m = fieldMatcher{tools: coveredTools(r.Tool), field: "subagent_type", pattern: r.Content}
	case "Skill":
		r.m = fieldMatcher{tools: coveredTools(r.Tool), field: "skill", pattern: r.Content}
	default:
		return fmt.Errorf("%s rules take no pattern; write %s alone", r.Tool, r.Tool)
	}
	return nil
}

// coveredTools returns the tools a rule naming tool applies to.
func coveredTools(tool string) []string {
	switch tool {
	case "Edit":
		return []string{"Edit", "MultiEdit", "Write", "NotebookEdit"}
	case "Read":
		return []string{"Read", "Glob", "Grep", "LS", "NotebookRead"}
	case "Agent", "Task":
		return []string{"Agent", "Task"}
	}
	return []string{tool}
}
