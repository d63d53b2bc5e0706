package claudetest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// DemoOptions tune [Demo]. A nil *DemoOptions means the defaults.
type DemoOptions struct {
	// Pace is waited before every streamed chunk of a reply (and before
	// the first byte, three times over), so that a person sees it stream.
	// Zero means 25ms: a reply takes a few seconds. Negative means no
	// delay at all (tests).
	Pace time.Duration
	// Dir is where the scenes that make files make them: the Write of
	// 'write a file' and of the tour, the empty file of 'touch'. Empty
	// means the session's working directory; claudectl serve --demo gives
	// a directory of its own, so that trying the demo in a checkout
	// leaves no file there.
	Dir string
}

// Demo scene names: the keywords a prompt is matched against, in order.
// The first scene whose keyword appears in the prompt (case-insensitive)
// plays; a prompt matching none gets DemoHelp.
var demoScenes = []struct {
	name     string
	keywords []string
	steps    []func(*demoCtx) Turn
}{
	{"tour", []string{"tour", "everything"}, []func(*demoCtx) Turn{
		(*demoCtx).thinkThenList, (*demoCtx).listedThenAsk, (*demoCtx).answeredThenWrite, (*demoCtx).wroteThenDone,
	}},
	{"tool", []string{"tool", "bash", " ls", "list", "approve"}, []func(*demoCtx) Turn{
		(*demoCtx).thinkThenList, (*demoCtx).listed,
	}},
	{"question", []string{"question", "ask", "attach"}, []func(*demoCtx) Turn{
		(*demoCtx).ask, (*demoCtx).answered,
	}},
	{"touch", []string{"touch", "always"}, []func(*demoCtx) Turn{
		(*demoCtx).touch, (*demoCtx).touched,
	}},
	{"edit", []string{"edit", "write", "file"}, []func(*demoCtx) Turn{
		(*demoCtx).write, (*demoCtx).wrote,
	}},
	{"think", []string{"think"}, []func(*demoCtx) Turn{
		(*demoCtx).think,
	}},
	{"markdown", []string{"markdown", "format"}, []func(*demoCtx) Turn{
		(*demoCtx).markdown,
	}},
}

// DemoKeywords lists the prompts the demo model understands, one line
// each: what to type, and what the reply shows.
const DemoKeywords = `  'tour'                 everything below in one turn (about a minute)
  'show me a tool'       thinking, then Bash ls, which needs permission (claudectl approve ID)
  'ask me a question'    AskUserQuestion: answer it with claudectl attach ID
  'write a file'         Write claudectl-demo.md, shown as a diff (asks permission)
  'touch'                Bash touch, which Claude Code offers to always allow (a rule)
  'think about it'       a thinking block (shown by clients that show thinking)
  'markdown'             a reply in Markdown: a heading, lists, a table, code (and HTML shown as text)
  anything else          a streamed reply listing these`

// DemoCommand is the demo's Bash command: harmless, and not one the CLI
// runs without asking (it expands a variable).
const DemoCommand = `ls -l "$PWD"`

// DemoFile is the file the demo's Write scene creates, in DemoOptions.Dir
// (else the session's working directory).
const DemoFile = "claudectl-demo.md"

// Demo returns a stateless Responder for trying claudectl without an API
// key: it answers by keyword (see DemoKeywords), with replies that stream
// slowly enough to watch, thinking, a Bash command and a file Write that
// need permission, and an AskUserQuestion. Each prompt starts its scene
// afresh; the steps of a scene follow the tool round trips after the
// prompt, so sessions of many prompts, resumed and forked ones work too.
func Demo(o *DemoOptions) Responder {
	pace := 25 * time.Millisecond
	if o != nil && o.Pace != 0 {
		pace = max(o.Pace, 0)
	}
	var dir string
	if o != nil {
		dir = o.Dir
	}
	return ResponderFunc(func(r *Request) Turn {
		c := newDemoCtx(r)
		if dir != "" {
			c.dir = dir
		}
		var t Turn
		switch {
		case r.MaxTokens == 1 || len(r.Tools) == 0 && c.prompt == "":
			// A probe (after set_model) or a side request: answer at once.
			return Reply(Text("ok"))
		case c.scene < 0:
			t = c.help()
		case c.step < len(demoScenes[c.scene].steps):
			t = demoScenes[c.scene].steps[c.step](c)
		default:
			t = Reply(Text("That was the whole scene. " + demoTry))
		}
		t.ChunkSize = 6
		t.DeltaDelay = pace
		t.Delay = 3 * pace
		return t
	})
}

const demoTry = "Try another prompt: 'tour', 'show me a tool', 'ask me a question', 'write a file' or 'think about it'."

// demoCtx is what a demo step knows of the conversation.
type demoCtx struct {
	req    *Request
	prompt string // the latest prompt typed by the user
	scene  int    // index in demoScenes, -1 for none
	step   int    // model calls since the prompt
	cwd    string // the session's working directory, "" if unknown
	dir    string // where files are made: DemoOptions.Dir, else cwd
}

func newDemoCtx(r *Request) *demoCtx {
	c := &demoCtx{req: r, scene: -1}
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role == "assistant" {
			c.step++
			continue
		}
		if m.Role == "user" && strings.TrimSpace(userText(m)) != "" && !onlyToolResults(m) {
			c.prompt = userText(m)
			break
		}
	}
	lower := " " + strings.ToLower(c.prompt)
	for i, s := range demoScenes {
		for _, k := range s.keywords {
			if strings.Contains(lower, k) {
				c.scene = i
				break
			}
		}
		if c.scene >= 0 {
			break
		}
	}
	c.cwd = workingDir(r)
	c.dir = c.cwd
	return c
}

// onlyToolResults reports whether m answers tool calls rather than
// carrying a new prompt (the CLI may add reminders beside the results).
func onlyToolResults(m RequestMessage) bool {
	for _, b := range m.Content {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}

var cwdRE = regexp.MustCompile(`(?m)(?:Primary w|W)orking directory:\s*(\S[^\n<]*)`)

// workingDir finds the session's directory in what the CLI tells the
// model about its environment.
func workingDir(r *Request) string {
	texts := []string{r.System}
	for _, m := range r.Messages {
		for _, b := range m.Content {
			if b.Type == "text" {
				texts = append(texts, b.Text)
			}
		}
	}
	for _, t := range texts {
		if m := cwdRE.FindStringSubmatch(t); m != nil {
			return strings.TrimSpace(m[1])
		}
	}
	return ""
}

// lastResult is the content of the last tool result of the request and
// whether it is an error (a denial, a failed command).
func (c *demoCtx) lastResult() (string, bool) {
	for i := len(c.req.Messages) - 1; i >= 0; i-- {
		for _, b := range c.req.Messages[i].Content {
			if b.Type == "tool_result" {
				return b.Content, b.IsError
			}
		}
	}
	return "", false
}

func (c *demoCtx) help() Turn {
	return Reply(Text(`Hello! This is claudectl's demo: I am a scripted model running inside the daemon, not Claude. No API key is used and nothing leaves this machine; the real Claude Code CLI runs every session and its tools, exactly as it would against the API.

I answer by keyword. Try these prompts:

` + DemoKeywords + `

Meanwhile this reply streamed to you a few characters at a time, as a real one does.`))
}

func (c *demoCtx) think() Turn {
	return Reply(
		Thinking("The user wants to see thinking. Claude thinks before it answers when extended thinking is on; clients show these blocks dimmed, or not at all. This block is scripted, like everything else in the demo."),
		Text("I thought about it (see the thinking block above, if your client shows it). "+demoTry))
}

// DemoMarkdown is the reply of the demo's markdown scene: what a client
// that renders Markdown should show as a heading, a list, a task list, a
// table, a Go block and a diff, with links, and the HTML in it as text.
const DemoMarkdown = "## What the migration changed\n\n" +
	"The fix touched **three** places:\n\n" +
	"- the `sessions` table gains a *title*\n" +
	"- the indexer reads the queue\n" +
	"- search finds words, see [the docs](https://example.com/docs) or [this](javascript:alert(1))\n\n" +
	"What is left:\n\n" +
	"- [x] write the migration\n- [ ] run it on the staging copy\n\n" +
	"| step | engine | time |\n|---|---|---:|\n| migrate | SQLite | 12 ms |\n| index | PostgreSQL | 40 ms |\n\n" +
	"```go\nfunc Title(s *Session) string {\n\tif s.Title != \"\" {\n\t\treturn s.Title\n\t}\n\treturn s.FirstPrompt // until Claude Code names it\n}\n```\n\n" +
	"```diff\n-\treturn s.ID\n+\treturn s.Title\n```\n\n" +
	"Raw HTML stays text: <img src=x onerror=\"document.title='pwned'\"> and <script>alert(1)</script>.\n"

func (c *demoCtx) markdown() Turn {
	return Reply(Text(DemoMarkdown))
}

func (c *demoCtx) thinkThenList() Turn {
	return Reply(
		Thinking("To show a tool, a harmless command: list the files of the working directory. Bash needs the user's permission, so the daemon will hold the request until someone approves it."),
		Text("Let me look at the files here. Claude Code runs plain read-only commands by itself; this one expands a variable, so it asks first: allow it in the terminal that runs the prompt, in `claudectl attach SESSION_ID`, or with `claudectl approve REQUEST_ID` from another terminal."),
		ToolUse("Bash", map[string]any{"command": DemoCommand, "description": "List the files in the working directory"}))
}

func (c *demoCtx) listedSummary() string {
	out, isErr := c.lastResult()
	if isErr {
		return "The command did not run (" + firstLine(out) + "). That is fine: denying is part of the demo too."
	}
	var lines []string // the names, last on each line of ls -l
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] != "total" && !strings.HasPrefix(l, "(") {
			lines = append(lines, f[len(f)-1])
		}
	}
	switch {
	case len(lines) == 0:
		return "The directory is empty."
	case len(lines) > 8:
		return fmt.Sprintf("The directory holds %d entries, among them %s.", len(lines), strings.Join(lines[:8], ", "))
	}
	return fmt.Sprintf("The directory holds %d entries: %s.", len(lines), strings.Join(lines, ", "))
}

func (c *demoCtx) listed() Turn {
	return Reply(Text(c.listedSummary() + " The tool ran in the real Claude Code CLI, after the permission went through the daemon.\n\n" + demoTry))
}

// DemoTouchFile is the empty file the demo's touch scene creates, in
// DemoOptions.Dir (else the session's working directory), with a command
// Claude Code asks about and suggests a rule for ("always allow").
const DemoTouchFile = "claudectl-demo.txt"

// path is name in the directory files are made in; relative (to the
// session's directory) when that is unknown.
func (c *demoCtx) path(name string) string {
	if c.dir == "" {
		return name
	}
	return strings.TrimRight(c.dir, "/") + "/" + name
}

func (c *demoCtx) touch() Turn {
	return Reply(Text("I will create an empty file with touch. Claude Code asks first, and offers a rule to always allow such commands: the daemon keeps that rule, and shows it before you agree."),
		ToolUse("Bash", map[string]any{"command": "touch " + shellWord(c.path(DemoTouchFile)), "description": "Create an empty file"}))
}

func (c *demoCtx) touched() Turn {
	out, isErr := c.lastResult()
	if isErr {
		return Reply(Text("The command did not run (" + firstLine(out) + ").\n\n" + demoTry))
	}
	return Reply(Text("Created " + c.path(DemoTouchFile) + ".\n\n" + demoTry))
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var demoQuestion = map[string]any{"questions": []any{map[string]any{
	"question":    "Which part of claudectl would you like to see next?",
	"header":      "Next",
	"multiSelect": false,
	"options": []any{
		map[string]any{"label": "Files", "description": "a tool that writes a file"},
		map[string]any{"label": "Thinking", "description": "what a thinking block looks like"},
	},
}}}

// answerRE finds the answer in the CLI's tool result for AskUserQuestion:
// "QUESTION"="ANSWER".
var answerRE = regexp.MustCompile(`"="([^"]*)"`)

func (c *demoCtx) ask() Turn {
	return Reply(Text("I have a question for you. Answer it in the terminal that runs the prompt, or with `claudectl attach SESSION_ID`."),
		ToolUse("AskUserQuestion", demoQuestion))
}

func (c *demoCtx) answerSummary() string {
	out, isErr := c.lastResult()
	if isErr || out == "" {
		return "Nobody answered the question (" + firstLine(out) + ")."
	}
	if m := answerRE.FindStringSubmatch(out); m != nil {
		return "Thanks: you chose " + m[1] + ". Your answer went from claudectl through the daemon to the CLI, and to me."
	}
	return "Thanks, your answer reached me: " + firstLine(out)
}

func (c *demoCtx) answered() Turn {
	return Reply(Text(c.answerSummary() + "\n\n" + demoTry))
}

func (c *demoCtx) listedThenAsk() Turn {
	return Reply(Text(c.listedSummary()+"\n\nNext, a question."), ToolUse("AskUserQuestion", demoQuestion))
}

func (c *demoCtx) writeBlock() Block {
	return ToolUse("Write", map[string]any{"file_path": c.path(DemoFile), "content": "# claudectl demo\n\nThis file was written by the Claude Code CLI, driven by claudectl's daemon,\nfor a scripted demo model. Delete it at will.\n"})
}

func (c *demoCtx) write() Turn {
	return Reply(Text("I will write "+c.path(DemoFile)+". Writing a file needs your permission too."), c.writeBlock())
}

func (c *demoCtx) wroteSummary() string {
	out, isErr := c.lastResult()
	if isErr {
		return "The file was not written (" + firstLine(out) + ")."
	}
	return "Wrote " + c.path(DemoFile) + "."
}

func (c *demoCtx) wrote() Turn {
	return Reply(Text(c.wroteSummary() + "\n\n" + demoTry))
}

func (c *demoCtx) answeredThenWrite() Turn {
	return Reply(Text(c.answerSummary()+"\n\nLast, a file."), c.writeBlock())
}

func (c *demoCtx) wroteThenDone() Turn {
	// The tour's tool results, in its order: Bash, the question, Write.
	var res []RequestBlock
	for i := len(c.req.Messages) - 1; i >= 0 && len(res) < 3; i-- {
		for _, b := range slices.Backward(c.req.Messages[i].Content) {
			if b.Type == "tool_result" && len(res) < 3 {
				res = append(res, b)
			}
		}
	}
	slices.Reverse(res)
	done := func(i int) bool { return i < len(res) && !res[i].IsError }
	parts := []string{"a Bash command denied", "a question left unanswered", "a file write denied"}
	if done(0) {
		parts[0] = "a Bash command approved"
	}
	if done(1) && answerRE.MatchString(res[1].Content) {
		parts[1] = "a question answered"
	}
	if done(2) {
		parts[2] = "a file written"
	}
	end := "\n\nThat was the tour: streaming, thinking, " + parts[0] + ", " + parts[1] + " and " + parts[2] +
		", every event recorded by the daemon (claudectl attach SESSION_ID replays them)."
	if !done(0) && !done(2) {
		end += " Approve the requests next time to see the tools run."
	}
	return Reply(Text(c.wroteSummary() + end))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
