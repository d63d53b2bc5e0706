package permission

import (
	"path"
	"strings"
	"testing"
)

// The matchers are compared with the backtracking ones they replaced
// (match_ref_test.go): exhaustively on small alphabets here, and on what
// the fuzzers find in FuzzWildcard and FuzzPathMatch.

// words returns every string of up to n symbols from alphabet, each
// symbol one string.
func words(alphabet []string, n int) []string {
	out := []string{""}
	last := []string{""}
	for range n {
		var next []string
		for _, w := range last {
			for _, a := range alphabet {
				next = append(next, w+a)
			}
		}
		out = append(out, next...)
		last = next
	}
	return out
}

func TestWildcardAsBefore(t *testing.T) {
	texts := words([]string{"a", "b"}, 8)
	for _, p := range words([]string{"a", "b", "*"}, 6) {
		for _, s := range texts {
			if got, want := wildcard(p, s), refWildcard(p, s); got != want {
				t.Fatalf("wildcard(%q, %q) = %v, the backtracking one says %v", p, s, got, want)
			}
		}
	}
}

func TestPathMatchAsBefore(t *testing.T) {
	var rels []string
	for _, w := range words([]string{"a/", "b/", "ab/", ".a/"}, 3) {
		if w != "" {
			rels = append(rels, strings.TrimSuffix(w, "/"))
		}
	}
	rels = append(rels, ".")
	n := 0
	for _, p := range words([]string{"a/", "b/", "*/", "**/", "?/", "[ab]/", "[!a]*/"}, 4) {
		p = strings.TrimSuffix(p, "/")
		for _, anchor := range []string{"", "/"} { // "//" and "~/" anchor as "/" does
			m, err := compilePath(anchor + p)
			if err != nil {
				t.Fatalf("compilePath(%q): %v", anchor+p, err)
			}
			for _, rel := range rels {
				if got, want := m.matchRel(rel), refMatchRel(m.segs, rel); got != want {
					t.Fatalf("pattern %q on %q: %v, the backtracking matcher says %v", anchor+p, rel, got, want)
				}
				n++
			}
		}
	}
	t.Logf("%d comparisons", n)
}

// refAffordable reports whether a backtracking matcher with stars wildcards
// over n symbols, each of its steps looking at up to size bytes, takes no
// more than about ten million byte steps: the number of ways to split n
// symbols among stars+1 places, times size.
func refAffordable(stars, n, size int) bool {
	ways := float64(size + 1)
	for i := 1; i <= stars; i++ {
		ways = ways * float64(n+i) / float64(i)
	}
	return ways <= 1e7
}

// over maps each byte of s to one of the tokens, to make inputs that
// match, and that share symbols with the patterns, frequent.
func over(tokens []string, s string) string {
	var b strings.Builder
	for i := range len(s) {
		b.WriteString(tokens[int(s[i])%len(tokens)])
	}
	return b.String()
}

func FuzzWildcard(f *testing.F) {
	for _, seed := range [][2]string{
		{"git status *", "git status --short"},
		{"*a*a*a*a*a*a*a*b", strings.Repeat("a", 30)},
		{"git * main", "git checkout main"},
		{"ls*", "lsof -i"},
		{"a*a", "a"},
		{"*", ""},
		{"", ""},
		{"**", "x"},
		{"日本*語", "日本の語"},
	} {
		f.Add(seed[0], seed[1])
	}
	check := func(t *testing.T, p, s string) {
		if !refAffordable(strings.Count(p, "*"), len(s), len(p)+len(s)) {
			return
		}
		if got, want := wildcard(p, s), refWildcard(p, s); got != want {
			t.Fatalf("wildcard(%q, %q) = %v, the backtracking one says %v", p, s, got, want)
		}
	}
	f.Fuzz(func(t *testing.T, p, s string) {
		check(t, p, s)
		check(t, over([]string{"a", "b", "*", "*", "ab"}, p), over([]string{"a", "b", "ab", "ba"}, s))
	})
}

func FuzzPathMatch(f *testing.F) {
	for _, seed := range [][2]string{
		{"./src/**", "src/a/b.go"},
		{"*.env", "deploy/prod.env"},
		{"//**/a/**/a/**/a/b", strings.Repeat("a/", 12) + "b"},
		{"a.[ch]", "a.c"},
		{"docs/*.md", "docs/sub/a.md"},
		{"**", "."},
		{"~/x", "x/y"},
		{"[!a]?/**/\\*", "bc/d/*"},
	} {
		f.Add(seed[0], seed[1])
	}
	check := func(t *testing.T, p, rel string) {
		m, err := compilePath(p)
		if err != nil {
			return
		}
		rel = path.Clean("/" + rel)[1:] // relative, clean, not above the root
		if rel == "" {
			rel = "."
		}
		parts := strings.Count(rel, "/") + 1
		if !refAffordable(strings.Count(p, "**")+1, parts, len(p)+len(rel)) || parts > 64 {
			return
		}
		if got, want := m.matchRel(rel), refMatchRel(m.segs, rel); got != want {
			t.Fatalf("pattern %q on %q: %v, the backtracking matcher says %v", p, rel, got, want)
		}
	}
	f.Fuzz(func(t *testing.T, p, rel string) {
		check(t, p, rel)
		check(t, over([]string{"a", "b", "/", "*", "**/", "?", "[ab]", "[!b]", "/"}, p),
			over([]string{"a", "b", "/", "ab", "/", "*"}, rel))
	})
}

// BenchmarkMatch compares the matchers with the backtracking ones they
// replaced on ordinary rules, old and new in the same run: go test -bench
// ^BenchmarkMatch$ -run ^$ -count 10 ./permission, then benchstat -col /impl.
func BenchmarkMatch(b *testing.B) {
	for _, bb := range []struct{ name, pattern, s string }{
		{"prefix", "git status *", "git status --short"},
		{"prefix-miss", "git status *", "ls -la"},
		{"exact", "npm run test", "npm run test"},
		{"middle", "git * main", "git push --force-with-lease origin main"},
		{"two-stars", "docker * --rm *", "docker run -it --rm alpine sh"},
	} {
		b.Run("bash/"+bb.name+"/impl=old", func(b *testing.B) {
			for b.Loop() {
				refWildcard(bb.pattern, bb.s)
			}
		})
		b.Run("bash/"+bb.name+"/impl=new", func(b *testing.B) {
			for b.Loop() {
				wildcard(bb.pattern, bb.s)
			}
		})
	}
	for _, bb := range []struct{ name, pattern, rel string }{
		{"dir", "src/**", "src/pkg/sub/file.go"},
		{"ext", "*.env", "deploy/prod/.env"},
		{"ext-deep", "*.go", "a/b/c/d/e/f/g/h/x.go"},
		{"ext-miss", "*.go", "a/b/c/d/e/f/g/h/x.md"},
		{"two-stars", "//home/u/**/secrets/**/*.pem", "home/u/work/app/secrets/tls/key.pem"},
		{"anchored-miss", "docs/*.md", "docs/sub/a.md"},
	} {
		m, err := compilePath(bb.pattern)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("path/"+bb.name+"/impl=old", func(b *testing.B) {
			for b.Loop() {
				refMatchRel(m.segs, bb.rel)
			}
		})
		b.Run("path/"+bb.name+"/impl=new", func(b *testing.B) {
			for b.Loop() {
				m.matchRel(bb.rel)
			}
		})
	}
}

// BenchmarkMatchWorst matches the worst patterns we know of at the size
// limits, where the backtracking matchers would never finish:
// go test -bench MatchWorst -run ^$ ./permission.
func BenchmarkMatchWorst(b *testing.B) {
	// Pieces that almost occur everywhere, long enough for strings.Index
	// to fall back to Rabin-Karp, against 1 MiB.
	piece := strings.Repeat("a;", 40) + "b"
	pattern := "*" + strings.Repeat(piece+"*", MaxPatternLen/len(piece)-1) + "c"
	cmd := strings.Repeat("a;", MaxCommandLen/2-1) + "ac"
	b.Run("bash/near-misses", func(b *testing.B) {
		for b.Loop() {
			wildcard(pattern, cmd)
		}
	})
	stars := strings.Repeat("*a", MaxPatternLen/2-1) + "*b"
	b.Run("bash/stars", func(b *testing.B) {
		for b.Loop() {
			wildcard(stars, cmd[:len(cmd)-1]+"b")
		}
	})
	// A run of half the path's segments that almost matches at every
	// place, against a 4 KiB path: about a million path.Match calls.
	rel := strings.Repeat("a/", MaxPathLen/2-1) + "z"
	for _, seg := range []string{"a", "*a"} {
		m, err := compilePath("**/" + strings.Repeat(seg+"/", MaxPathLen/2/len(seg+"/")-4) + "b/**/z")
		if err != nil {
			b.Fatal(err)
		}
		b.Run("path/run-of-"+seg, func(b *testing.B) {
			for b.Loop() {
				m.matchRel(rel)
			}
		})
	}
	m, err := compilePath("//" + strings.Repeat("*a", MaxPatternLen/2-2) + "*b")
	if err != nil {
		b.Fatal(err)
	}
	long := strings.Repeat("a", MaxPathLen-1)
	b.Run("path/stars-in-a-segment", func(b *testing.B) {
		for b.Loop() {
			m.matchRel(long)
		}
	})
}
