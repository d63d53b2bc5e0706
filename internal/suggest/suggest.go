// Package suggest finds the word a person probably meant when they typed
// one claudectl does not know: "did you mean ...?" for a mistyped command,
// flag or settings key.
package suggest

// Closest returns the candidate fewest edits away from word, if it is at
// most within edits away; the first such candidate in order on a tie, ""
// if none is that close.
func Closest(word string, candidates []string, within int) string {
	best, bestDist := "", within+1
	for _, c := range candidates {
		if d := Distance(word, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// Within is how many edits a word of n bytes may be from the one meant:
// a third of it, at least one ("rn" for "run", "sesions" for "sessions",
// not "ls" for "run").
func Within(n int) int { return max(1, n/3) }

// Distance is how many edits turn a into b: single-byte insertions,
// deletions and substitutions, and swaps of two adjacent bytes ("lsit" is
// one edit from "list"), each edit on a part no other edit touched (the
// optimal string alignment distance).
func Distance(a, b string) int {
	// Three rows of the table: i-2, i-1 and i.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
