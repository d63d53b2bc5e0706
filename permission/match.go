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
}

// str returns a string field of the tool input, "" if absent or not a
// string.
func (q *request) str(field string) string {
	var s string
	if raw, ok := q.input[field]; ok {
		json.Unmarshal(raw, &s)
	}
	return s
}

// A matcher is a compiled rule body.
type matcher interface {
	// covers reports whether the rule is about tool at all.
	covers(tool string) bool
	// match reports whether the rule matches q; r is the rule itself, for
	// its scope.
	match(q *request, r *Rule) bool
}

// toolMatcher is a rule without a pattern: every call of its tools.
type toolMatcher struct{ tools []string }

func (m toolMatcher) covers(tool string) bool    { return slices.Contains(m.tools, tool) }
func (m toolMatcher) match(*request, *Rule) bool { return true }

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

// wildcard reports whether s matches pattern, in which * matches any
// text (including none) and every other character itself.
func wildcard(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	s, pattern = s[star:], pattern[star+1:]
	for i := 0; i <= len(s); i++ {
		if wildcard(pattern, s[i:]) {
			return true
		}
	}
	return false
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
	return m, nil
}

func (m *pathMatcher) covers(tool string) bool { return slices.Contains(m.tools, tool) }

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
	if rel == "." {
		return len(m.segs) == 1 && m.segs[0] == "**"
	}
	// gitignore: a pattern that matches a directory covers what it holds.
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for n := len(parts); n > 0; n-- {
		if matchSegs(m.segs, parts[:n]) {
			return true
		}
	}
	return false
}

// targetPath returns the absolute, cleaned path a file tool call touches:
// file_path, notebook_path, or for the search tools path (default the
// project directory). Relative paths are taken from the project directory.
func targetPath(q *request) string {
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

// matchSegs matches path segments against pattern segments, where "**"
// matches any number of segments (including none).
func matchSegs(pat, parts []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(parts); i++ {
				if matchSegs(pat[1:], parts[i:]) {
					return true
				}
			}
			return false
		}
		if len(parts) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], parts[0]); !ok {
			return false
		}
		pat, parts = pat[1:], parts[1:]
	}
	return len(parts) == 0
}

// within reports whether dir is base or below it.
func within(dir, base string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(filepath.Clean(base), filepath.Clean(dir))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
