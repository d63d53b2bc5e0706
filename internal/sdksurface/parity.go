package sdksurface

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Sections names the section of docs/parity.md whose table maps each kind
// (its "## " heading).
var Sections = map[Kind]string{
	Option:         "Options",
	Method:         "Query methods",
	ControlRequest: "Control requests",
	Message:        "Messages",
	HookEvent:      "Hook events",
	Capability:     "Capabilities",
	StartupFailure: "Startup failure reasons",
}

var backquoted = regexp.MustCompile("`([^`]+)`")

// Mapped reads docs/parity.md: for each kind, the names in backquotes in
// the first column of the table of its section. A name is mapped when a
// row says what the Go SDK does with it, "none" and why included.
func Mapped(md string) map[Kind]map[string]bool {
	kindOf := map[string]Kind{}
	for k, title := range Sections {
		kindOf[title] = k
	}
	out := map[Kind]map[string]bool{}
	var k Kind
	for _, line := range strings.Split(md, "\n") {
		if title, ok := strings.CutPrefix(line, "## "); ok {
			k = kindOf[strings.TrimSpace(title)]
			continue
		}
		cells := strings.Split(line, "|")
		if k == "" || len(cells) < 3 || strings.TrimSpace(cells[0]) != "" || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		for _, m := range backquoted.FindAllStringSubmatch(cells[1], -1) {
			if out[k] == nil {
				out[k] = map[string]bool{}
			}
			out[k][m[1]] = true
		}
	}
	return out
}

// Unmapped returns the names of each kind of s that mapped lacks, sorted;
// kinds with none are left out.
func Unmapped(s Surface, mapped map[Kind]map[string]bool) map[Kind][]string {
	out := map[Kind][]string{}
	for _, k := range Kinds {
		for _, e := range s[k] {
			if !mapped[k][e.Name] {
				out[k] = append(out[k], e.Name)
			}
		}
	}
	return out
}

// A Change is what changed of one kind between two surfaces: names added
// and removed, and names whose shape changed (from, to).
type Change struct {
	Kind           Kind
	Added, Removed []Entry
	Changed        [][2]Entry
}

// Diff returns what changed of each kind from from to to, in the order of
// Kinds (every kind, changed or not).
func Diff(from, to Surface) []Change {
	var out []Change
	for _, k := range Kinds {
		c := Change{Kind: k}
		old := map[string]Entry{}
		for _, e := range from[k] {
			old[e.Name] = e
		}
		seen := map[string]bool{}
		for _, e := range to[k] {
			seen[e.Name] = true
			switch o, ok := old[e.Name]; {
			case !ok:
				c.Added = append(c.Added, e)
			case o.Shape != e.Shape:
				c.Changed = append(c.Changed, [2]Entry{o, e})
			}
		}
		for _, e := range from[k] {
			if !seen[e.Name] {
				c.Removed = append(c.Removed, e)
			}
		}
		out = append(out, c)
	}
	return out
}

// memberKinds are the kinds whose shape is a list of member names.
var memberKinds = []Kind{ControlRequest, Message}

// Print writes changes as a report: per kind, the names added (+),
// removed (-) and changed (~, with the members added and removed, or the
// old and the new declaration).
func Print(w io.Writer, changes []Change) {
	for _, c := range changes {
		if len(c.Added)+len(c.Removed)+len(c.Changed) == 0 {
			fmt.Fprintf(w, "%s: no change\n", c.Kind)
			continue
		}
		fmt.Fprintf(w, "%s:\n", c.Kind)
		for _, e := range c.Added {
			fmt.Fprintf(w, "  + %s\n", e.Name)
		}
		for _, e := range c.Removed {
			fmt.Fprintf(w, "  - %s\n", e.Name)
		}
		for _, p := range c.Changed {
			if slices.Contains(memberKinds, c.Kind) {
				was, is := members(p[0].Shape), members(p[1].Shape)
				var parts []string
				for _, m := range is {
					if !slices.Contains(was, m) {
						parts = append(parts, "+"+m)
					}
				}
				for _, m := range was {
					if !slices.Contains(is, m) {
						parts = append(parts, "-"+m)
					}
				}
				fmt.Fprintf(w, "  ~ %s: members %s\n", p[1].Name, strings.Join(parts, " "))
				continue
			}
			fmt.Fprintf(w, "  ~ %s\n      was: %s\n      now: %s\n", p[1].Name, p[0].Shape, p[1].Shape)
		}
	}
}

func members(shape string) []string {
	if shape == "" {
		return nil
	}
	return strings.Split(shape, ", ")
}
