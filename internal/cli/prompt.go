package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claude"
)

// toolLog records which tool calls the transcript has shown, so that a
// permission prompt appears after its "⏺ Tool(...)" line rather than before
// it: the CLI's request is answered on its own goroutine and can overtake the
// message that announced the call. A nil *toolLog shows nothing and waits
// for nothing.
type toolLog struct {
	mu   sync.Mutex
	seen map[string]chan struct{}
}

func newToolLog() *toolLog { return &toolLog{seen: map[string]chan struct{}{}} }

func (t *toolLog) ch(id string) chan struct{} {
	c, ok := t.seen[id]
	if !ok {
		c = make(chan struct{})
		t.seen[id] = c
	}
	return c
}

// shown records that the call id was printed.
func (t *toolLog) shown(id string) {
	if t == nil || id == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.ch(id)
	select {
	case <-c:
	default:
		close(c)
	}
}

// wait waits until the call id was printed, for at most d.
func (t *toolLog) wait(ctx context.Context, id string, d time.Duration) {
	if t == nil || id == "" {
		return
	}
	t.mu.Lock()
	c := t.ch(id)
	t.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-c:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// lineReader reads answers from stdin one line at a time, on request, on a
// goroutine of its own: a prompt must give up when the CLI withdraws its
// question or the session ends, and a read from a terminal cannot be
// cancelled. Calls to next must not overlap (the asker serialises them).
type lineReader struct {
	in   io.Reader
	once sync.Once
	want chan struct{}
	got  chan lineResult
	stop chan struct{}

	pending bool // a line was asked for and has not been taken yet
	eof     bool
}

type lineResult struct {
	line string
	err  error
}

func newLineReader(in io.Reader) *lineReader {
	return &lineReader{
		in:   in,
		want: make(chan struct{}),
		got:  make(chan lineResult, 1),
		stop: make(chan struct{}),
	}
}

func (l *lineReader) start() {
	l.once.Do(func() {
		go func() {
			br := bufio.NewReader(l.in)
			for {
				select {
				case <-l.want:
				case <-l.stop:
					return
				}
				line, err := br.ReadString('\n')
				l.got <- lineResult{strings.TrimRight(line, "\r\n"), err}
				if err != nil {
					return
				}
			}
		}()
	})
}

// next returns the next line, io.EOF once input has ended, or ctx's error.
// A line that arrives after ctx ended is kept for the next call.
func (l *lineReader) next(ctx context.Context) (string, error) {
	if l.eof {
		return "", io.EOF
	}
	l.start()
	if !l.pending {
		select {
		case l.want <- struct{}{}:
			l.pending = true
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	select {
	case r := <-l.got:
		l.pending = false
		if r.err != nil {
			l.eof = true
			if r.line != "" { // a last line without a newline
				return r.line, nil
			}
			return "", io.EOF
		}
		return r.line, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// close stops the reading goroutine unless it is blocked reading, in which
// case it ends with the input (or the process).
func (l *lineReader) close() { close(l.stop) }

// asker puts permission prompts and AskUserQuestion questions to the user on
// the terminal: the question on stderr, the answer from stdin.
type asker struct {
	out   io.Writer
	pal   palette // colours for out
	lines *lineReader
	tools *toolLog
	turn  chan struct{} // one question at a time

	// requestIDs shows each permission request's id with its prompt: a
	// daemon's, which claudectl approve and deny take from another
	// terminal (run --server; attach prints it as the request comes).
	requestIDs bool
}

func newAsker(out io.Writer, in io.Reader, tools *toolLog) *asker {
	return &asker{out: out, lines: newLineReader(in), tools: tools, turn: make(chan struct{}, 1)}
}

func (a *asker) close() { a.lines.close() }

// entered tells the status line, if out is one's, that the user ended a
// line typing an answer.
func (a *asker) entered() {
	if le, ok := a.out.(interface{ lineEntered() }); ok {
		le.lineEntered()
	}
}

// acquire waits for the terminal; release gives it back.
func (a *asker) acquire(ctx context.Context) error {
	select {
	case a.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *asker) release() { <-a.turn }

// canUseTool asks whether a tool may run: y allows it once, a allows it and
// applies the CLI's suggested rules ("always"), anything else denies it.
func (a *asker) canUseTool(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
	if err := a.acquire(ctx); err != nil {
		return claude.PermissionResult{}, err
	}
	defer a.release()
	a.tools.wait(ctx, req.ToolUseID, time.Second)
	what := req.ToolName
	if s := toolSummary(req.ToolName, req.Input); s != "" {
		what += ": " + s
	}
	always, ok := ctx.Value(alwaysKey{}).([]string)
	if !ok {
		always = describeSuggestions(req.Suggestions)
	}
	if diff := permissionDiff(req.ToolName, req.Input, maxDiffLines); diff != nil {
		for _, l := range colorDiff(a.pal, diff) {
			fmt.Fprintln(a.out, "  "+l)
		}
	}
	choices := "[y/N]"
	if len(always) > 0 {
		fmt.Fprintln(a.out, "  a(lways) would also:")
		for _, s := range always {
			fmt.Fprintf(a.out, "    - %s\n", s)
		}
		choices = "[y/N/a(lways)]"
	}
	if a.requestIDs && req.RequestID != "" {
		fmt.Fprintln(a.out, a.pal.dim(fmt.Sprintf("  request %s (claudectl approve %s, or deny, from another terminal)", req.RequestID, req.RequestID)))
	}
	for {
		fmt.Fprintf(a.out, "Allow %s? %s ", what, choices)
		line, err := a.lines.next(ctx)
		if err == nil {
			a.entered()
		}
		if err != nil {
			fmt.Fprintln(a.out)
			if errors.Is(err, io.EOF) {
				fmt.Fprintf(a.out, "claudectl: no answer (stdin closed): denied %s\n", req.ToolName)
				return claude.Deny("The user did not answer the permission prompt for " + req.ToolName + ", so it was denied."), nil
			}
			fmt.Fprintf(a.out, "claudectl: the question about %s was withdrawn\n", req.ToolName)
			return claude.PermissionResult{}, err
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return claude.Allow(), nil
		case "a", "always":
			if len(always) == 0 {
				break
			}
			r := claude.Allow()
			r.UpdatedPermissions = req.Suggestions
			return r, nil
		case "", "n", "no":
			return claude.Deny("The user denied permission to use " + req.ToolName + "."), nil
		}
		if len(always) == 0 {
			fmt.Fprintln(a.out, "Please answer y (yes) or n (no).")
		} else {
			fmt.Fprintln(a.out, "Please answer y (yes), n (no) or a (always).")
		}
	}
}

// alwaysKey is the context key of what "always" does for the request being
// asked about, in words ([]string), when a daemon said it.
type alwaysKey struct{}

// destinations says where the CLI keeps a permission update, in words.
var destinations = map[string]string{
	"userSettings": "in your user settings (~/.claude/settings.json)", "projectSettings": "in the project's .claude/settings.json",
	"localSettings": "in the project's .claude/settings.local.json", "session": "for this session",
}

// describeSuggestions says in words what the CLI does with its suggested
// permission updates when the user answers always (a local run: the CLI
// applies them itself).
func describeSuggestions(sugs []claude.PermissionUpdate) []string {
	var parts []string
	for _, u := range sugs {
		where := destinations[u.Destination]
		if where == "" {
			where = "(" + u.Destination + ")"
		}
		switch u.Type {
		case "addRules", "replaceRules":
			var specs []string
			for _, r := range u.Rules {
				spec := r.ToolName
				if r.RuleContent != "" {
					spec += "(" + r.RuleContent + ")"
				}
				specs = append(specs, spec)
			}
			b := u.Behavior
			if b == "" {
				b = "allow"
			}
			parts = append(parts, fmt.Sprintf("%s %s %s", b, strings.Join(specs, ", "), where))
		case "setMode":
			parts = append(parts, fmt.Sprintf("switch to permission mode %s %s", u.Mode, where))
		case "addDirectories":
			parts = append(parts, fmt.Sprintf("allow the directories %s %s", strings.Join(u.Directories, ", "), where))
		}
	}
	return parts
}

// describeAlways says in words what the daemon does for "always": the
// rules it stores and what it changes in this CLI process only.
func describeAlways(pr *v1.PermissionRequest) []string {
	var parts []string
	for _, r := range pr.GetAlwaysRules() {
		where := "everywhere"
		switch r.GetScope() {
		case v1.RuleScope_RULE_SCOPE_PROJECT:
			where = "in " + r.GetScopeValue()
		case v1.RuleScope_RULE_SCOPE_SESSION:
			where = "in this session"
		}
		parts = append(parts, fmt.Sprintf("%s %s %s (a rule of the daemon's: claudectl rules rm revokes it)", behaviorName(r.GetBehavior()), r.GetPattern(), where))
	}
	return append(parts, pr.GetAlwaysSession()...)
}

// answer puts AskUserQuestion's questions to the user: a number picks an
// option (several, comma-separated, where more than one may be chosen), any
// other text is the answer itself.
func (a *asker) answer(ctx context.Context, qs []claude.Question) (map[string]string, error) {
	if err := a.acquire(ctx); err != nil {
		return nil, err
	}
	defer a.release()
	answers := make(map[string]string, len(qs))
	for _, q := range qs {
		if q.Header != "" {
			fmt.Fprintf(a.out, "[%s] ", q.Header)
		}
		fmt.Fprintln(a.out, q.Question)
		for i, o := range q.Options {
			if o.Description != "" {
				fmt.Fprintf(a.out, "  %d. %s - %s\n", i+1, o.Label, o.Description)
			} else {
				fmt.Fprintf(a.out, "  %d. %s\n", i+1, o.Label)
			}
		}
		prompt := "Your answer: "
		switch {
		case len(q.Options) > 0 && q.MultiSelect:
			prompt = fmt.Sprintf("Choose 1-%d (several: 1,3) or type an answer: ", len(q.Options))
		case len(q.Options) > 0:
			prompt = fmt.Sprintf("Choose 1-%d or type an answer: ", len(q.Options))
		}
		for {
			fmt.Fprint(a.out, prompt)
			line, err := a.lines.next(ctx)
			if err == nil {
				a.entered()
			}
			if err != nil {
				fmt.Fprintln(a.out)
				if errors.Is(err, io.EOF) {
					return nil, errors.New("the user gave no answer (stdin closed)")
				}
				return nil, err
			}
			if ans, ok := pickOptions(q, strings.TrimSpace(line)); ok {
				answers[q.Question] = ans
				break
			}
			fmt.Fprintln(a.out, "Please choose one of the numbers, or type an answer.")
		}
	}
	return answers, nil
}

// pickOptions turns an answer line into the answer for q: option numbers
// become their labels (joined by ", "), other text is taken as it is.
func pickOptions(q claude.Question, line string) (string, bool) {
	if line == "" {
		return "", false
	}
	var labels []string
	for _, f := range strings.Split(line, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return line, true // free text
		}
		if n < 1 || n > len(q.Options) {
			return "", false
		}
		labels = append(labels, q.Options[n-1].Label)
	}
	if len(labels) > 1 && !q.MultiSelect {
		return "", false
	}
	return strings.Join(labels, ", "), true
}

// denyNoTerminal answers every request when there is no terminal to ask on.
func denyNoTerminal(out io.Writer) claude.CanUseToolFunc {
	return func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		what := req.ToolName
		if s := toolSummary(req.ToolName, req.Input); s != "" {
			what += "(" + s + ")"
		}
		if req.ToolName == "AskUserQuestion" {
			fmt.Fprintf(out, "claudectl: could not ask %q: no terminal was available to ask (stdin is not a terminal)\n", toolSummary(req.ToolName, req.Input))
			return claude.Deny("The user could not be asked: claudectl had no terminal available to ask questions on (stdin is not a terminal). Proceed without the answer, using your best judgement."), nil
		}
		fmt.Fprintf(out, "claudectl: denied %s: no terminal was available to ask for permission (stdin is not a terminal); allow it with --allow %s or --permission-mode\n", what, req.ToolName)
		return claude.Deny("Permission to use " + req.ToolName + " was denied: no terminal was available to ask the user (claudectl's stdin is not a terminal). The user can allow it with claudectl's --allow or --permission-mode flags."), nil
	}
}
