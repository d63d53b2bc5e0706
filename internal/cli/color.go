package cli

// palette colours text for one stream with ANSI SGR sequences. The zero
// palette (colour off) returns text unchanged.
type palette struct{ on bool }

// ANSI SGR sequences the palette uses.
const (
	sgrReset = "\x1b[0m"
	sgrBold  = "\x1b[1m"
	sgrDim   = "\x1b[2m"
	sgrRed   = "\x1b[31m"
	sgrGreen = "\x1b[32m"
	sgrCyan  = "\x1b[36m"
)

func (p palette) wrap(sgr, s string) string {
	if !p.on || s == "" {
		return s
	}
	return sgr + s + sgrReset
}

// tool is a tool's name in a tool line.
func (p palette) tool(s string) string { return p.wrap(sgrBold+sgrCyan, s) }

// err is an error: a failed tool result, a failed turn.
func (p palette) err(s string) string { return p.wrap(sgrRed, s) }

// dim is text that matters less: thinking, the status line.
func (p palette) dim(s string) string { return p.wrap(sgrDim, s) }

// added and removed are a diff's + and - lines.
func (p palette) added(s string) string   { return p.wrap(sgrGreen, s) }
func (p palette) removed(s string) string { return p.wrap(sgrRed, s) }

// colorFor returns the palette for a stream: colour only on a terminal
// (isTerminal), and never with NO_COLOR set (to any value, see
// https://no-color.org) or TERM=dumb.
func colorFor(env *Env, isTerminal func() bool) palette {
	if _, set := env.lookupEnv("NO_COLOR"); set {
		return palette{}
	}
	if !capableTerm(env) {
		return palette{}
	}
	return palette{on: isTerminal()}
}

// capableTerm reports whether TERM allows escape sequences: not "dumb".
func capableTerm(env *Env) bool {
	return env.Getenv("TERM") != "dumb"
}
