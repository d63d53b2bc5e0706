// Package sdksurface reads what the official TypeScript Agent SDK
// (@anthropic-ai/claude-agent-sdk) publishes in its sdk.d.ts that the Go
// SDK maps: the fields of Options, the methods of Query, the control
// request subtypes, the message types, the hook events, the capabilities a
// CLI lists and the startup failure reasons. claude/parity_test.go checks
// that docs/parity.md maps each of the pinned version's, and `make
// parity-diff` (internal/tools/paritydiff) says what changed between two
// versions.
//
// It reads the declaration file as text, as the SDK's generator writes it
// (one declaration per `declare type`/`declare interface`, members one per
// line); a layout it cannot read is an error, not an empty surface.
package sdksurface

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// A Kind is a kind of name the surface holds.
type Kind string

// The kinds, in the order docs/parity.md has them.
const (
	Option         Kind = "option"                 // a field of Options
	Method         Kind = "method"                 // a method of the Query interface
	ControlRequest Kind = "control request"        // a subtype of SDKControlRequestInner, either way
	Message        Kind = "message"                // an SDKMessage type, "type" or "type/subtype"
	HookEvent      Kind = "hook event"             // an entry of HOOK_EVENTS
	Capability     Kind = "capability"             // a capability system/init may list
	StartupFailure Kind = "startup failure reason" // an SDKStartupFailureReason
)

// Kinds lists every kind.
var Kinds = []Kind{Option, Method, ControlRequest, Message, HookEvent, Capability, StartupFailure}

// An Entry is one name of the surface and its shape: a method's signature,
// an option's type, or the members of a control request or message type
// (sorted, comma-separated); empty for the kinds that have none.
type Entry struct {
	Name  string
	Shape string
}

// A Surface is the entries of each kind, sorted by name.
type Surface map[Kind][]Entry

// Names returns the names of kind k.
func (s Surface) Names(k Kind) []string {
	out := make([]string, len(s[k]))
	for i, e := range s[k] {
		out[i] = e.Name
	}
	return out
}

// minimum is how many names of each kind a readable sdk.d.ts has at least:
// fewer means its layout changed.
var minimum = map[Kind]int{Option: 50, Method: 25, ControlRequest: 30, Message: 30, HookEvent: 25, Capability: 5, StartupFailure: 15}

// Read reads the surface of an sdk.d.ts.
func Read(src string) (Surface, error) {
	d := newDecls(src)
	s := Surface{}
	var err error
	if s[Option], err = d.members("Options", true); err != nil {
		return nil, err
	}
	if s[Method], err = d.members("Query", true); err != nil {
		return nil, err
	}
	if s[ControlRequest], err = d.tagged("SDKControlRequestInner", false); err != nil {
		return nil, err
	}
	if s[Message], err = d.tagged("SDKMessage", true); err != nil {
		return nil, err
	}
	if s[HookEvent], err = quotedList(d.clean, `HOOK_EVENTS: readonly [`, "]"); err != nil {
		return nil, err
	}
	if s[StartupFailure], err = quotedList(d.clean, "type SDKStartupFailureReason =", ";"); err != nil {
		return nil, err
	}
	s[Capability] = capabilities(src)
	for _, k := range Kinds {
		slices.SortFunc(s[k], func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
		s[k] = slices.CompactFunc(s[k], func(a, b Entry) bool { return a.Name == b.Name })
		if len(s[k]) < minimum[k] {
			return nil, fmt.Errorf("sdk.d.ts: read only %d names of kind %q (at least %d expected): has its layout changed?", len(s[k]), k, minimum[k])
		}
	}
	return s, nil
}

// decls finds declarations in a comment-free copy of the file.
type decls struct {
	clean string
}

var (
	blockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	lineComment  = regexp.MustCompile(`(?m)^\s*//.*$`)
	space        = regexp.MustCompile(`\s+`)
)

func newDecls(src string) *decls {
	return &decls{clean: lineComment.ReplaceAllString(blockComment.ReplaceAllString(src, ""), "")}
}

// body returns the text of the declaration of name: from after its "=" or
// its interface head to its end at depth 0 (the ";" of a type, the "}" of
// an interface).
func (d *decls) body(name string) (string, error) {
	re := regexp.MustCompile(`(?m)^(?:export )?declare (type|interface) ` + regexp.QuoteMeta(name) + `\b[^=\n{]*(=|\{)`)
	m := re.FindStringSubmatchIndex(d.clean)
	if m == nil {
		return "", fmt.Errorf("sdk.d.ts: no declaration of %s", name)
	}
	rest := d.clean[m[1]:]
	if d.clean[m[4]:m[5]] == "{" { // an interface: its body is the braces
		end := scan(rest, func(depth int, c byte) bool { return depth == 0 && c == '}' })
		if end < 0 {
			return "", fmt.Errorf("sdk.d.ts: %s: unterminated", name)
		}
		return "{" + rest[:end+1], nil
	}
	end := scan(rest, func(depth int, c byte) bool { return depth == 0 && c == ';' })
	if end < 0 {
		return "", fmt.Errorf("sdk.d.ts: %s: unterminated", name)
	}
	return rest[:end], nil
}

// scan walks src outside string literals, tracking the depth of (), {},
// [] and <>, and returns the index of the first byte stop accepts, or -1.
func scan(src string, stop func(depth int, c byte) bool) int {
	depth := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '\'', '"', '`':
			if j := strings.IndexByte(src[i+1:], c); j >= 0 {
				i += j + 1
				continue
			}
		}
		if stop(depth, c) {
			return i
		}
		switch c {
		case '(', '{', '[', '<':
			depth++
		case ')', '}', ']':
			depth--
		case '>':
			if i > 0 && src[i-1] != '=' { // not the arrow of a function type
				depth--
			}
		}
	}
	return -1
}

// topBlocks returns the insides of the {...} blocks at the top level of
// src (outside string literals).
func topBlocks(src string) []string {
	var out []string
	depth, start := 0, -1
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '\'', '"', '`':
			if j := strings.IndexByte(src[i+1:], c); j >= 0 {
				i += j + 1
			}
		case '{':
			if depth == 0 {
				start = i + 1
			}
			depth++
		case '}':
			if depth--; depth == 0 && start >= 0 {
				out = append(out, src[start:i])
				start = -1
			}
		}
	}
	return out
}

var member = regexp.MustCompile(`^(?:readonly\s+)?([A-Za-z_$][A-Za-z0-9_$]*)\??\s*[:(<]`)

// objectMembers returns the members of the object types at the top level
// of body ({...} blocks, possibly joined by &): each member's name and its
// text up to its ";", spaces collapsed.
func objectMembers(body string) []Entry {
	var out []Entry
	for _, block := range topBlocks(body) {
		for start := 0; start < len(block); {
			stop := scan(block[start:], func(d int, c byte) bool { return d == 0 && c == ';' })
			var text string
			if stop < 0 {
				text, start = block[start:], len(block)
			} else {
				text, start = block[start:start+stop], start+stop+1
			}
			text = strings.TrimSpace(space.ReplaceAllString(text, " "))
			if m := member.FindStringSubmatch(text); m != nil {
				out = append(out, Entry{Name: m[1], Shape: text})
			}
		}
	}
	return out
}

// members returns the members of the object type or interface name.
// withShape keeps each member's text as its shape.
func (d *decls) members(name string, withShape bool) ([]Entry, error) {
	body, err := d.body(name)
	if err != nil {
		return nil, err
	}
	out := objectMembers(body)
	if len(out) == 0 {
		return nil, fmt.Errorf("sdk.d.ts: %s has no members", name)
	}
	if !withShape {
		for i := range out {
			out[i].Shape = ""
		}
	}
	return out, nil
}

var (
	unionMember = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$.]*$`)
	literal     = regexp.MustCompile(`'([^']*)'`)
)

// tagged returns the members of the union name by their tags: the literal
// of each member type's "subtype" (control requests), or its "type" and,
// with withType, "type/subtype" where it has a subtype (messages). A
// member that is itself a union is followed. Each entry's shape is the
// member type's other members, sorted.
func (d *decls) tagged(name string, withType bool) ([]Entry, error) {
	body, err := d.body(name)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, part := range strings.Split(body, "|") {
		part = strings.TrimSpace(part)
		if !unionMember.MatchString(part) {
			return nil, fmt.Errorf("sdk.d.ts: %s: %q is not a type name", name, part)
		}
		part = part[strings.LastIndexByte(part, '.')+1:] // coreTypes.X
		mb, err := d.body(part)
		if err != nil {
			return nil, err
		}
		if t := strings.TrimSpace(mb); unionMember.MatchString(strings.TrimSpace(strings.Split(t, "|")[0])) && !strings.Contains(t, "{") {
			sub, err := d.tagged(part, withType)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
			continue
		}
		var typ, shape []string
		var subtypes []string
		for _, m := range objectMembers(mb) {
			switch {
			case m.Name == "type" && withType:
				for _, l := range literal.FindAllStringSubmatch(m.Shape, -1) {
					typ = append(typ, l[1])
				}
			case m.Name == "subtype":
				for _, l := range literal.FindAllStringSubmatch(m.Shape, -1) {
					subtypes = append(subtypes, l[1])
				}
			default:
				shape = append(shape, m.Name)
			}
		}
		slices.Sort(shape)
		s := strings.Join(shape, ", ")
		switch {
		case withType && len(typ) == 0:
			return nil, fmt.Errorf("sdk.d.ts: %s (in %s) has no type literal", part, name)
		case !withType && len(subtypes) == 0:
			return nil, fmt.Errorf("sdk.d.ts: %s (in %s) has no subtype literal", part, name)
		}
		if !withType {
			for _, st := range subtypes {
				out = append(out, Entry{Name: st, Shape: s})
			}
			continue
		}
		for _, t := range typ {
			if len(subtypes) == 0 {
				out = append(out, Entry{Name: t, Shape: s})
			}
			for _, st := range subtypes {
				out = append(out, Entry{Name: t + "/" + st, Shape: s})
			}
		}
	}
	return out, nil
}

// quotedList returns the quoted strings between head and the first end
// after it.
func quotedList(src, head, end string) ([]Entry, error) {
	i := strings.Index(src, head)
	if i < 0 {
		return nil, fmt.Errorf("sdk.d.ts: no %q", head)
	}
	rest := src[i+len(head):]
	j := strings.Index(rest, end)
	if j < 0 {
		return nil, fmt.Errorf("sdk.d.ts: %q does not end", head)
	}
	var out []Entry
	for _, m := range literal.FindAllStringSubmatch(rest[:j], -1) {
		out = append(out, Entry{Name: m[1]})
	}
	return out, nil
}

var (
	// versioned matches a versioned capability name wherever the file
	// names one (in the docs of the fields it governs).
	versioned = regexp.MustCompile(`\b[a-z][a-z0-9]*(?:_[a-z0-9]+)*_v[0-9]+\b`)
	// capDoc is the doc comment of system/init's capabilities field, whose
	// "'name' = what" entries name the unversioned ones too.
	capDoc    = regexp.MustCompile(`(?s)/\*\*((?:[^*]|\*[^/])*)\*/\s*capabilities\?: string\[\];`)
	capDocked = regexp.MustCompile(`'([a-z][a-z0-9_]*)' =`)
)

// capabilities returns the capabilities src names: versioned names (…_v1)
// anywhere, and the entries of the capabilities field's doc.
func capabilities(src string) []Entry {
	var out []Entry
	for _, n := range versioned.FindAllString(src, -1) {
		if n != "cgroup_v2" { // a Linux feature the docs mention, not a capability
			out = append(out, Entry{Name: n})
		}
	}
	for _, doc := range capDoc.FindAllStringSubmatch(src, -1) {
		for _, m := range capDocked.FindAllStringSubmatch(doc[1], -1) {
			out = append(out, Entry{Name: m[1]})
		}
	}
	return out
}
