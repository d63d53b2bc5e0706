package permission

import (
	"path"
	"strings"
)

// The matchers as they were before they were made linear, kept as the
// reference the fuzz tests compare the real ones with. They backtrack, and
// take exponential time on patterns with many stars: call them on short
// inputs only.

// refWildcard is the backtracking wildcard: * matches any text.
func refWildcard(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	s, pattern = s[star:], pattern[star+1:]
	for i := 0; i <= len(s); i++ {
		if refWildcard(pattern, s[i:]) {
			return true
		}
	}
	return false
}

// refMatchSegs is the backtracking segment matcher: "**" matches any
// number of segments.
func refMatchSegs(pat, parts []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(parts); i++ {
				if refMatchSegs(pat[1:], parts[i:]) {
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

// refMatchRel is what pathMatcher.match did with the path relative to the
// rule's root: "." only for "**", else the pattern must match the path or
// one of the directories holding it.
func refMatchRel(segs []string, rel string) bool {
	if rel == "." {
		return len(segs) == 1 && segs[0] == "**"
	}
	parts := strings.Split(rel, "/")
	for n := len(parts); n > 0; n-- {
		if refMatchSegs(segs, parts[:n]) {
			return true
		}
	}
	return false
}
