package permission

import (
	"errors"
	"strings"
)

// bashMatcher is a Bash rule with a pattern.
type bashMatcher struct {
	pattern string // "*" matches any text
	// whole is set when the pattern holds a shell operator: it is then
	// matched against the whole command, not against each part.
	whole bool
}

func compileBash(content string) (bashMatcher, error) {
	p := strings.TrimSpace(content)
	if prefix, ok := strings.CutSuffix(p, ":*"); ok { // legacy prefix form
		prefix = strings.TrimSpace(prefix)
		if prefix == "" {
			return bashMatcher{}, errors.New(`":*" needs a command prefix before it, e.g. Bash(git status:*)`)
		}
		p = prefix + " *" // the same thing in the wildcard form: "git status" or "git status …"
	}
	parts, opaque := splitCommand(p)
	if len(parts) == 1 && !opaque {
		return bashMatcher{pattern: parts[0]}, nil // wrappers dropped, as from commands
	}
	return bashMatcher{pattern: p, whole: true}, nil
}

func (m bashMatcher) covers(tool string) bool { return tool == "Bash" }

// match is used by the generic evaluation path only; Bash requests go
// through Engine.evalBash, which applies the compound-command rules.
func (m bashMatcher) match(q *request, _ *Rule) bool { return m.matches(q.str("command")) }

func (m bashMatcher) tooLong(q *request) string {
	return overLimit("command", q.str("command"), MaxCommandLen)
}

// matches reports whether one command (or, for a whole rule, the whole
// command line) matches the pattern. A pattern ending in " *" with no other
// wildcard also matches the command without arguments.
func (m bashMatcher) matches(cmd string) bool {
	cmd = strings.TrimSpace(cmd)
	if wildcard(m.pattern, cmd) {
		return true
	}
	if base, ok := strings.CutSuffix(m.pattern, " *"); ok && !strings.Contains(base, "*") {
		return cmd == strings.TrimSpace(base)
	}
	return false
}

// splitCommand splits a shell command line into the commands it runs,
// at &&, ||, ;, |, |&, & and newlines outside quotes, and strips each of
// leading VAR=value assignments and wrapper commands. opaque reports that
// the line runs commands that cannot be seen without a shell: command or
// process substitution, backquotes, or an unterminated quote.
func splitCommand(line string) (parts []string, opaque bool) {
	var (
		cur    strings.Builder
		quote  byte // ' or " while inside quotes
		escape bool
	)
	flush := func() {
		if p := stripWrappers(strings.TrimSpace(cur.String())); p != "" {
			parts = append(parts, p)
		}
		cur.Reset()
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		next := byte(0)
		if i+1 < len(line) {
			next = line[i+1]
		}
		switch {
		case escape:
			escape = false
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case c == '\\':
			escape = true
		case c == '`' || c == '$' && next == '(':
			opaque = true
		case quote == '"':
			if c == '"' {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case (c == '<' || c == '>') && next == '(':
			opaque = true
		case c == ';' || c == '\n':
			flush()
			continue
		case c == '|':
			flush()
			if next == '|' || next == '&' {
				i++
			}
			continue
		case c == '&':
			prev := byte(0)
			if i > 0 {
				prev = line[i-1]
			}
			if prev == '>' || prev == '<' || next == '>' { // 2>&1, &>file: a redirection
				break
			}
			flush()
			if next == '&' {
				i++
			}
			continue
		}
		cur.WriteByte(c)
	}
	if quote != 0 || escape {
		opaque = true
	}
	flush()
	return parts, opaque
}

// stripWrappers drops leading VAR=value assignments and the wrappers env,
// nohup, time, nice [-n N] and timeout [options] DURATION from a command.
func stripWrappers(cmd string) string {
	for {
		word, rest, _ := strings.Cut(cmd, " ")
		rest = strings.TrimLeft(rest, " \t")
		switch {
		case isAssignment(word):
			cmd = rest
		case word == "env" || word == "nohup" || word == "time":
			cmd = rest
		case word == "nice":
			cmd = rest
			if w, r, _ := strings.Cut(cmd, " "); w == "-n" {
				_, cmd, _ = strings.Cut(strings.TrimLeft(r, " \t"), " ")
			} else if strings.HasPrefix(w, "-") {
				cmd = r
			}
		case word == "timeout":
			cmd = rest
			for strings.HasPrefix(cmd, "-") { // options, then the duration
				var opt string
				opt, cmd, _ = strings.Cut(cmd, " ")
				if opt == "-s" || opt == "-k" || opt == "--signal" || opt == "--kill-after" {
					_, cmd, _ = strings.Cut(strings.TrimLeft(cmd, " \t"), " ") // its argument
				}
				cmd = strings.TrimLeft(cmd, " \t")
			}
			_, cmd, _ = strings.Cut(cmd, " ")
		default:
			return cmd
		}
		cmd = strings.TrimLeft(cmd, " \t")
	}
}

// isAssignment reports whether word is NAME=value with no quotes in it.
func isAssignment(word string) bool {
	name, _, ok := strings.Cut(word, "=")
	if !ok || name == "" || strings.ContainsAny(word, `'"`) {
		return false
	}
	for i, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
