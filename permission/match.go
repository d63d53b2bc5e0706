package permission

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// A request is a tool call being evaluated, with its input decoded once.
type request struct {
	tool  string
	input map[string]json.RawMessage
	at    Scope
	home  string
	strs  map[string]string // fields decoded by str, for the next rule
	// target is targetPath's result once known.
	target *string
}

// str returns a string field of the tool input, "" if absent or not a
// string.
func (q *request) str(field string) string {
	if s, ok := q.strs[field]; ok {
		return s
	}
	var s string
	if raw, ok := q.input[field]; ok {
		json.Unmarshal(raw, &s)
	}
	if q.strs == nil {
		q.strs = make(map[string]string)
	}
	q.strs[field] = s
	return s
}

// A matcher is a compiled rule body.
type matcher interface {
	// covers reports whether the rule is about tool at all.
	covers(tool string) bool
	// match reports whether the rule matches q; r is the rule itself, for
	// its scope.
	match(q *request, r *Rule) bool
	// tooLong returns, when what the rule's pattern is matched against in
	// q is longer than the limit for it, a sentence saying so; "" when it
	// is not, and for a rule without a pattern.
	tooLong(q *request) string
}

// toolMatcher is a rule without a pattern: every call of its tools.
type toolMatcher struct{ tools []string }

func (m toolMatcher) covers(tool string) bool    { return slices.Contains(m.tools, tool) }
func (m toolMatcher) match(*request, *Rule) bool { return true }
func (m toolMatcher) tooLong(*request) string    { return "" }

// mcpMatcher is mcp__server (every tool of the server), mcp__server__*
// (the same) or mcp__server__tool.
type mcpMatcher string

func (m mcpMatcher) covers(tool string) bool {
	name := string(m)
	if server, ok := strings.CutSuffix(name, "__*"); ok {
		name = server
	}
	if strings.Count(name, "__") == 1 { // mcp__server
		return strings.HasPrefix(tool, name+"__")
	}
	return tool == name
}
func (m mcpMatcher) match(*request, *Rule) bool { return true }
func (m mcpMatcher) tooLong(*request) string    { return "" }

// domainMatcher is WebFetch(domain:host); "*.host" covers subdomains.
type domainMatcher string

func (m domainMatcher) covers(tool string) bool { return tool == "WebFetch" }
func (m domainMatcher) match(q *request, _ *Rule) bool {
	u, err := url.Parse(q.str("url"))
	if err != nil || u.Hostname() == "" {
		return false
	}
	host := strings.ToLower(u.Hostname())
	if sub, ok := strings.CutPrefix(string(m), "*."); ok {
		return strings.HasSuffix(host, "."+sub)
	}
	return host == string(m)
}
func (m domainMatcher) tooLong(q *request) string {
	return overLimit("URL", q.str("url"), MaxCommandLen)
}

// fieldMatcher matches one string field of the input against a pattern in
// which * matches any text.
type fieldMatcher struct {
	tools   []string
	field   string
	pattern string
}

func (m fieldMatcher) covers(tool string) bool { return slices.Contains(m.tools, tool) }
func (m fieldMatcher) match(q *request, _ *Rule) bool {
	return wildcard(m.pattern, q.str(m.field))
}
func (m fieldMatcher) tooLong(q *request) string {
	return overLimit(strings.ReplaceAll(m.field, "_", " "), q.str(m.field), MaxCommandLen)
}

// wildcard reports whether s matches pattern, in which * matches any
// text (including none) and every other byte itself.
//
// It never backtracks. The pieces between the stars match text of their
// own length, so the text matches if and only if the first piece is a
// prefix, the last a suffix of what is left, and the pieces between them
// occur in order in what remains, each where it first occurs after the
// one before: putting a piece further right never helps the next. Each
// search starts where the previous one ended, so the whole match takes
// O(len(pattern)·len(s)) time at worst, linear in practice.
func wildcard(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	s, pattern = s[star:], pattern[star+1:]
	star = strings.LastIndexByte(pattern, '*')
	last := pattern[star+1:] // all of it when there is no other star
	if !strings.HasSuffix(s, last) {
		return false
	}
	s, pattern = s[:len(s)-len(last)], pattern[:max(star, 0)]
	for pattern != "" { // the pieces between, if any
		piece := pattern
		if star = strings.IndexByte(pattern, '*'); star >= 0 {
			piece, pattern = pattern[:star], pattern[star+1:]
		} else {
			pattern = ""
		}
		i := strings.Index(s, piece)
		if i < 0 {
			return false
		}
		s = s[i+len(piece):]
	}
	return true
}

// pathMatcher is a file rule: a gitignore-style pattern anchored at a root.
type pathMatcher struct {
	tools []string
	// root is "/" for //abs patterns, "~" for ~/ patterns, "" for the
	// project directory.
	root string
	// segs is the pattern split on "/", with a leading "**" when the
	// pattern was not anchored.
	segs []string
	// under is segs with a trailing "**": what matches it is a path the
	// pattern matches or a path inside one.
	under []string
}

// compilePath compiles the pattern of a file rule.
func compilePath(p string) (*pathMatcher, error) {
	m := &pathMatcher{}
	anchored := false
	switch {
	case strings.HasPrefix(p, "//"):
		m.root, p, anchored = "/", p[2:], true
	case p == "~" || strings.HasPrefix(p, "~/"):
		m.root, p, anchored = "~", strings.TrimPrefix(strings.TrimPrefix(p, "~"), "/"), true
	case strings.HasPrefix(p, "/"):
		p, anchored = p[1:], true
	case strings.HasPrefix(p, "./"):
		p, anchored = p[2:], true
	}
	p = strings.TrimSuffix(p, "/") // a directory pattern: it covers what is inside
	if strings.Contains(p, "/") {
		anchored = true // gitignore: a slash inside anchors the pattern
	}
	if p == "" {
		p = "**"
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return nil, fmt.Errorf("path pattern %q: empty, . or .. segment", p)
		}
		if seg != "**" {
			if _, err := path.Match(seg, ""); err != nil {
				return nil, fmt.Errorf("path pattern %q: %v", p, err)
			}
		}
		m.segs = append(m.segs, seg)
	}
	if !anchored {
		m.segs = append([]string{"**"}, m.segs...)
	}
	m.under = m.segs
	if m.segs[len(m.segs)-1] != "**" {
		m.under = append(slices.Clip(m.segs), "**")
	}
	return m, nil
}

func (m *pathMatcher) covers(tool string) bool { return slices.Contains(m.tools, tool) }
func (m *pathMatcher) tooLong(q *request) string {
	return overLimit("file path", targetPath(q), MaxPathLen)
}

func (m *pathMatcher) match(q *request, r *Rule) bool {
	target := targetPath(q)
	if target == "" {
		return false
	}
	var root string
	switch m.root {
	case "/":
		root = "/"
	case "~":
		root = q.home
	default:
		root = r.Scope.ProjectDir
		if root == "" {
			root = q.at.ProjectDir
		}
	}
	if root == "" {
		return false
	}
	rel, err := filepath.Rel(root, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return false
	}
	return m.matchRel(filepath.ToSlash(rel))
}

// matchRel reports whether rel, a clean relative path other than "..",
// is matched by the pattern or lies inside a directory that is.
func (m *pathMatcher) matchRel(rel string) bool {
	if rel == "." {
		return len(m.segs) == 1 && m.segs[0] == "**"
	}
	// gitignore: a pattern that matches a directory covers what it holds.
	return matchSegs(m.under, strings.Split(rel, "/"))
}

// targetPath returns the absolute, cleaned path a file tool call touches:
// file_path, notebook_path, or for the search tools path (default the
// project directory). Relative paths are taken from the project directory.
func targetPath(q *request) string {
	if q.target == nil {
		t := findTarget(q)
		q.target = &t
	}
	return *q.target
}

func findTarget(q *request) string {
	p := q.str("file_path")
	if p == "" {
		p = q.str("notebook_path")
	}
	if p == "" {
		switch q.tool {
		case "Glob", "Grep", "LS":
			if p = q.str("path"); p == "" {
				p = q.at.ProjectDir
			}
		}
	}
	if p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		if q.at.ProjectDir == "" {
			return ""
		}
		p = filepath.Join(q.at.ProjectDir, p)
	}
	return filepath.Clean(p)
}

// matchSegs reports whether the path segments parts match the pattern
// segments pat, where "**" matches any number of segments (including none)
// and any other pattern segment matches one segment, as path.Match does.
//
// It never backtracks, for the reason wildcard does not: the runs of
// pattern segments between the "**"s match a fixed number of segments, so
// the first run must match at the start, the last at the end, and each run
// between them where it first matches after the one before. That is at
// most len(pat)·len(parts) calls of path.Match, each taking time
// proportional to the product of the two segments' lengths: O(len(pattern)
// ·len(path)) in all.
func matchSegs(pat, parts []string) bool {
	// The run before the first "**".
	i := slices.Index(pat, "**")
	if i < 0 {
		return len(pat) == len(parts) && matchRun(pat, parts)
	}
	if len(parts) < i || !matchRun(pat[:i], parts[:i]) {
		return false
	}
	pat, parts = pat[i+1:], parts[i:]
	// The run after the last "**".
	j := len(pat)
	for j > 0 && pat[j-1] != "**" {
		j--
	}
	last := pat[j:]
	if len(parts) < len(last) || !matchRun(last, parts[len(parts)-len(last):]) {
		return false
	}
	pat, parts = pat[:max(j-1, 0)], parts[:len(parts)-len(last)]
	// The runs between, each at the first place it matches.
	for len(pat) > 0 {
		run := pat
		if k := slices.Index(pat, "**"); k >= 0 {
			run, pat = pat[:k], pat[k+1:]
		} else {
			pat = nil
		}
		at := indexRun(parts, run)
		if at < 0 {
			return false
		}
		parts = parts[at+len(run):]
	}
	return true
}

// matchRun reports whether each segment of parts matches the pattern
// segment of run at its index; they have the same length.
func matchRun(run, parts []string) bool {
	for i, p := range run {
		if ok, _ := path.Match(p, parts[i]); !ok {
			return false
		}
	}
	return true
}

// indexRun returns the first index at which run matches in parts, -1 if
// none.
func indexRun(parts, run []string) int {
	for at := 0; at+len(run) <= len(parts); at++ {
		if matchRun(run, parts[at:at+len(run)]) {
			return at
		}
	}
	return -1
}

// within reports whether dir is base or below it.
func within(dir, base string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(filepath.Clean(base), filepath.Clean(dir))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
