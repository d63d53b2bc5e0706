package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// This file shows what an Edit, MultiEdit or Write would change, as a
// unified diff, in the permission prompt that asks for it.

// maxDiffLines bounds the diff a permission prompt shows; the rest is
// counted ("… 12 more lines not shown").
const maxDiffLines = 40

// diffContext is how many unchanged lines surround a change.
const diffContext = 3

// maxDiffCells bounds the work of the line diff (old lines × new lines);
// beyond it the whole old text is shown removed and the new one added.
const maxDiffCells = 4_000_000

// diffOp is one line of an edit script.
type diffOp struct {
	kind byte // ' ', '-' or '+'
	text string
}

// splitLines splits s into lines without their newlines; "" has none.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// lineDiff returns an edit script turning a into b: a longest common
// subsequence of lines kept, the rest removed and added.
func lineDiff(a, b []string) []diffOp {
	// Common prefix and suffix first: edits are usually small.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []diffOp
	for _, l := range a[:pre] {
		ops = append(ops, diffOp{' ', l})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n, m := len(ma), len(mb)
	if n*m > maxDiffCells {
		for _, l := range ma {
			ops = append(ops, diffOp{'-', l})
		}
		for _, l := range mb {
			ops = append(ops, diffOp{'+', l})
		}
	} else {
		// lcs[i][j] is the LCS length of ma[i:] and mb[j:].
		lcs := make([][]int32, n+1)
		for i := range lcs {
			lcs[i] = make([]int32, m+1)
		}
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n || j < m {
			switch {
			case i < n && j < m && ma[i] == mb[j]:
				ops = append(ops, diffOp{' ', ma[i]})
				i, j = i+1, j+1
			case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
				ops = append(ops, diffOp{'-', ma[i]})
				i++
			default:
				ops = append(ops, diffOp{'+', mb[j]})
				j++
			}
		}
	}
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, diffOp{' ', l})
	}
	return ops
}

// unifiedDiff returns the hunks of a unified diff from a to b ("@@ -1,3
// +1,4 @@" and their lines, without file headers); firstLine is the line
// number of a's first line in its file. Nothing when a and b are equal.
func unifiedDiff(a, b []string, firstLine int) []string {
	ops := lineDiff(a, b)
	var out []string
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// A hunk: from diffContext lines before this change to
		// diffContext lines after the last change closer than 2×context.
		start := max(0, i-diffContext)
		end := i
		for k := i; k < len(ops); k++ {
			if ops[k].kind != ' ' {
				end = k + 1
				continue
			}
			if k-end >= 2*diffContext {
				break
			}
		}
		end = min(len(ops), end+diffContext)
		// Line numbers of the hunk's start in a and b.
		la, lb := firstLine, firstLine
		for _, op := range ops[:start] {
			if op.kind != '+' {
				la++
			}
			if op.kind != '-' {
				lb++
			}
		}
		var na, nb int
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				na++
			}
			if op.kind != '-' {
				nb++
			}
		}
		out = append(out, fmt.Sprintf("@@ -%s +%s @@", hunkRange(la, na), hunkRange(lb, nb)))
		for _, op := range ops[start:end] {
			out = append(out, string(op.kind)+op.text)
		}
		i = end
	}
	return out
}

// hunkRange is "start,count" as diff -u writes it.
func hunkRange(start, n int) string {
	if n == 0 {
		start-- // an empty range names the line before it
	}
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

// permissionDiff returns the unified diff of what the file tool name
// would change with input, its lines bounded by limit (the cut counted on
// a last line); nil for other tools or an input it cannot read. Write is
// compared with the file on disk when it exists; Edit and MultiEdit show
// their old and new strings, numbered as in the file when it holds them.
func permissionDiff(name string, input json.RawMessage, limit int) []string {
	var in struct {
		FilePath  string  `json:"file_path"`
		Content   *string `json:"content"`
		OldString string  `json:"old_string"`
		NewString string  `json:"new_string"`
		Edits     []struct {
			OldString string `json:"old_string"`
			NewString string `json:"new_string"`
		} `json:"edits"`
	}
	if json.Unmarshal(input, &in) != nil || in.FilePath == "" {
		return nil
	}
	type change struct{ old, new string }
	var changes []change
	switch name {
	case "Write":
		if in.Content == nil {
			return nil
		}
		old, _ := os.ReadFile(in.FilePath) // none: every line is added
		changes = []change{{string(old), *in.Content}}
	case "Edit":
		changes = []change{{in.OldString, in.NewString}}
	case "MultiEdit":
		for _, e := range in.Edits {
			changes = append(changes, change{e.OldString, e.NewString})
		}
	default:
		return nil
	}
	var file string
	if name != "Write" {
		if b, err := os.ReadFile(in.FilePath); err == nil {
			file = string(b)
		}
	}
	lines := []string{"--- " + in.FilePath, "+++ " + in.FilePath}
	for _, c := range changes {
		first := 1
		if name != "Write" && c.old != "" {
			if i := strings.Index(file, c.old); i >= 0 {
				first = strings.Count(file[:i], "\n") + 1
			}
		}
		lines = append(lines, unifiedDiff(splitLines(c.old), splitLines(c.new), first)...)
	}
	if len(lines) == 2 {
		return nil // no change
	}
	if len(lines) > limit {
		cut := len(lines) - limit
		lines = append(lines[:limit], fmt.Sprintf("… %d more diff %s not shown", cut, plural(cut, "line", "lines")))
	}
	return lines
}

// colorDiff colours a diff's lines: + green, - red, the rest as it is.
func colorDiff(p palette, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			out[i] = p.wrap(sgrBold, l)
		case strings.HasPrefix(l, "+"):
			out[i] = p.added(l)
		case strings.HasPrefix(l, "-"):
			out[i] = p.removed(l)
		case strings.HasPrefix(l, "@@"):
			out[i] = p.wrap(sgrCyan, l)
		default:
			out[i] = l
		}
	}
	return out
}
