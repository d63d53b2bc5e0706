package cli

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// This file draws the status line that says what a turn is doing while
// nothing else moves ("⠹ thinking… (12s · 340 tokens)"): on stderr, on the
// last line of the terminal, redrawn in place at most statusInterval apart.
// Every write to stdout or stderr goes through the same statusLine, which
// first wipes the status line, so that output never mixes with it; the
// line is drawn only when the cursor is at the start of a line (not while
// a reply streams, nor after a question waiting for its answer).

// statusInterval is how often the status line is redrawn (10 times a
// second at most).
const statusInterval = 100 * time.Millisecond

// clearLine returns the cursor to the start of the line and wipes it.
const clearLine = "\r\x1b[K"

// spinner is the status line's animation, one frame per redraw.
var spinner = []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")

// statusLine is the status line of one command. Its methods may be called
// from any goroutine; a nil *statusLine does nothing.
type statusLine struct {
	mu          sync.Mutex
	stderr      io.Writer // where the line is drawn
	pal         palette   // for stderr
	width       int       // the terminal's columns
	atLineStart bool      // the cursor is at the start of a line, as far as we know
	shown       bool      // the status line is on screen

	what    string    // the activity shown; "" for none (nothing drawn)
	before  string    // the activity before waiting for permission
	started time.Time // when the turn started (the elapsed time counts from it)
	tokens  int64     // output tokens of the finished messages
	current int64     // output tokens of the message streaming (estimated until reported)
	chars   int       // characters streamed in the current message
	frame   int

	now      func() time.Time
	interval time.Duration // between redraws: statusInterval
	stop     chan struct{}
	wg       sync.WaitGroup
}

// withStatusLine returns env with its stdout and stderr going through a
// new status line, and that status line; env itself and nil when stderr
// is not a terminal able to redraw a line (TERM=dumb) or on is false.
// Close the status line when the command is done.
func withStatusLine(env *Env, on bool) (*Env, *statusLine) {
	if !on || !env.StderrIsTerminal() || !capableTerm(env) {
		return env, nil
	}
	s := newStatusLine(env.Stderr, colorFor(env, env.StderrIsTerminal), terminalWidth(env.Stderr))
	c := *env
	c.Stdout = &statusWriter{s: s, w: env.Stdout}
	c.Stderr = &statusWriter{s: s, w: env.Stderr}
	s.start()
	return &c, s
}

// terminalWidth returns the width of the terminal w writes to, 80 if it
// cannot tell.
func terminalWidth(w io.Writer) int {
	if sw, ok := w.(*syncWriter); ok {
		w = sw.w
	}
	if f, ok := w.(*os.File); ok {
		if n := termWidth(f); n > 0 {
			return n
		}
	}
	return 80
}

func newStatusLine(stderr io.Writer, pal palette, width int) *statusLine {
	return &statusLine{stderr: stderr, pal: pal, width: width, atLineStart: true, now: time.Now, interval: statusInterval}
}

// start starts redrawing every statusInterval.
func (s *statusLine) start() {
	stop := make(chan struct{}) // the goroutine's own copy: close sets s.stop to nil
	s.mu.Lock()
	s.stop = stop
	s.mu.Unlock()
	s.wg.Go(func() {
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.draw()
			case <-stop:
				return
			}
		}
	})
}

// close stops redrawing and wipes the line. Idempotent.
func (s *statusLine) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	stop := s.stop
	s.stop = nil
	s.what = ""
	s.clearLocked()
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		s.wg.Wait()
	}
}

// set says what the turn is doing now ("thinking"); the first call starts
// the turn's clock. "" hides the line until the next set.
func (s *statusLine) set(what string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if what != "" && s.what == "" && s.started.IsZero() {
		s.started = s.now()
	}
	s.what = what
	if what == "" {
		s.clearLocked()
	}
}

// waiting shows that the turn waits for a permission decision (on), or
// that it runs again: what it did before, or "thinking" if nothing was
// shown.
func (s *statusLine) waiting(on bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	waiting := s.what == waitingActivity
	before := s.before
	s.mu.Unlock()
	switch {
	case on && !waiting:
		s.mu.Lock()
		s.before = s.what
		s.mu.Unlock()
		s.set(waitingActivity)
	case !on && waiting:
		s.set(cmp.Or(before, "thinking"))
	case !on && s.activity() == "":
		s.set("thinking")
	}
}

const waitingActivity = "waiting for permission"

func (s *statusLine) activity() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.what
}

// idle ends the turn: the line is wiped and the clock and tokens reset.
func (s *statusLine) idle() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.what, s.started = "", time.Time{}
	s.tokens, s.current, s.chars = 0, 0, 0
	s.clearLocked()
}

// messageStarted counts a new message of the model's.
func (s *statusLine) messageStarted() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens += s.current
	s.current, s.chars = 0, 0
}

// streamed counts n characters streamed: about 4 to a token, until the
// message reports its tokens.
func (s *statusLine) streamed(n int) {
	if s == nil || n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chars += n
	s.current = max(s.current, int64(s.chars/4))
}

// outputTokens sets the current message's output tokens, as it reports them.
func (s *statusLine) outputTokens(n int64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current = n
}

// lineEntered tells that the user ended a line on the terminal (answering a
// question): the cursor is at the start of a line again.
func (s *statusLine) lineEntered() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.atLineStart = true
}

// draw redraws the line if there is something to show and room for it.
func (s *statusLine) draw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.what == "" || !s.atLineStart || s.stop == nil {
		return
	}
	s.frame++
	text := statusText(s.frame, s.what, s.now().Sub(s.started), s.tokens+s.current)
	if r := []rune(text); len(r) > s.width-1 {
		text = string(r[:max(s.width-2, 1)]) + "…"
	}
	io.WriteString(s.stderr, clearLine+s.pal.dim(text))
	s.shown = true
}

// clearLocked wipes the line if it is on screen.
func (s *statusLine) clearLocked() {
	if s.shown {
		io.WriteString(s.stderr, clearLine)
		s.shown = false
	}
}

// wrote records that p was written: the cursor is at a line's start after
// a newline.
func (s *statusLine) wroteLocked(p []byte) {
	if len(p) > 0 {
		s.atLineStart = p[len(p)-1] == '\n'
	}
}

// statusText is the status line's text: the spinner's frame, what is
// happening, the time since the turn started and the tokens so far.
func statusText(frame int, what string, elapsed time.Duration, tokens int64) string {
	var b strings.Builder
	b.WriteRune(spinner[frame%len(spinner)])
	b.WriteByte(' ')
	b.WriteString(what)
	b.WriteString("… (")
	b.WriteString(elapsedText(elapsed))
	if tokens > 0 {
		fmt.Fprintf(&b, " · %d %s", tokens, plural(int(tokens), "token", "tokens"))
	}
	b.WriteString(")")
	return b.String()
}

// elapsedText is 7s, 1m05s or 1h02m.
func elapsedText(d time.Duration) string {
	sec := int(d / time.Second)
	switch {
	case sec < 60:
		return fmt.Sprintf("%ds", sec)
	case sec < 3600:
		return fmt.Sprintf("%dm%02ds", sec/60, sec%60)
	}
	return fmt.Sprintf("%dh%02dm", sec/3600, sec/60%60)
}

// toolActivity is what the status line says while a tool runs:
// "running Bash `go test ./...`".
func toolActivity(name string, input []byte) string {
	s := toolSummary(name, input)
	if s == "" {
		return "running " + name
	}
	if utf8.RuneCountInString(s) > 40 {
		s = truncate(s, 40)
	}
	return "running " + name + " `" + s + "`"
}

// statusWriter is stdout or stderr seen through the status line: each
// write wipes the line first.
type statusWriter struct {
	s *statusLine
	w io.Writer
}

func (w *statusWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.clearLocked()
	n, err := w.w.Write(p)
	w.s.wroteLocked(p[:n])
	return n, err
}

// lineEntered passes on to the status line (see statusLine.lineEntered).
func (w *statusWriter) lineEntered() { w.s.lineEntered() }
