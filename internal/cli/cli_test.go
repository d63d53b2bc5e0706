package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/claudectl/claudectl/claude"
)

func TestDispatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args       []string
		code       int
		stdout     []string // substrings
		stderr     []string
		stdoutNone bool
	}{
		{args: nil, code: 2, stderr: []string{"Commands:", "run ", "doctor "}, stdoutNone: true},
		{args: []string{"help"}, code: 0, stdout: []string{"Commands:", "run ", "doctor "}},
		{args: []string{"--help"}, code: 0, stdout: []string{"Commands:"}},
		{args: []string{"bogus"}, code: 2, stderr: []string{"claudectl: unknown command \"bogus\"\n", "Commands:", "run ", "doctor "}, stdoutNone: true},
		{args: []string{"--verbose", "run"}, code: 2, stderr: []string{"unknown flag --verbose", "Commands:"}},
		{args: []string{"help", "run"}, code: 0, stdout: []string{"Usage: claudectl run", "--permission-mode MODE", "--allow TOOL", "--timeout DURATION"}},
		{args: []string{"help", "nope"}, code: 2, stderr: []string{`unknown command "nope"`}},
		// A mistyped command: the one meant is named.
		{args: []string{"sesions"}, code: 2, stderr: []string{`claudectl: unknown command "sesions" (did you mean "sessions"?)`, "Commands:"}, stdoutNone: true},
		{args: []string{"atach", "ID"}, code: 2, stderr: []string{`unknown command "atach" (did you mean "attach"?)`}, stdoutNone: true},
		{args: []string{"help", "aprove"}, code: 2, stderr: []string{`unknown command "aprove" (did you mean "approve"?)`}},
		{args: []string{"rules", "lsit"}, code: 2, stderr: []string{`unknown subcommand "lsit" (did you mean "list"?): rules needs list, add or rm`}},
		{args: []string{"run", "--verbos", "hi"}, code: 2, stderr: []string{`unknown flag --verbos (did you mean --verbose?)`}},
		{args: []string{"run", "-h"}, code: 0, stdout: []string{"Usage: claudectl run [flags] PROMPT", "acceptEdits"}},
		{args: []string{"run", "--help"}, code: 0, stdout: []string{"Usage: claudectl run"}},
		{args: []string{"doctor", "-h"}, code: 0, stdout: []string{"Usage: claudectl doctor", "--json", "--cli PATH"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			o := claudectl(t, invocation{}, tc.args...)
			if o.code != tc.code {
				t.Errorf("exit %d, want %d", o.code, tc.code)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(o.stdout, s) {
					t.Errorf("stdout lacks %q", s)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(o.stderr, s) {
					t.Errorf("stderr lacks %q", s)
				}
			}
			if tc.stdoutNone && o.stdout != "" {
				t.Errorf("stdout = %q, want nothing", o.stdout)
			}
		})
	}
}

// Every bad flag or value is a usage error (exit 2) on one line naming the
// flag, the value and what is allowed.
func TestRunUsageErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--permission-mode", "bogus", "hi"}, []string{`invalid value "bogus" for --permission-mode`, "must be one of default, acceptEdits, bypassPermissions, plan, dontAsk, auto"}},
		{[]string{"--max-turns", "-1", "hi"}, []string{`invalid value "-1" for --max-turns`, "whole number >= 0"}},
		{[]string{"--max-turns", "two", "hi"}, []string{`invalid value "two" for --max-turns`}},
		{[]string{"--max-budget-usd", "-0.5", "hi"}, []string{`invalid value "-0.5" for --max-budget-usd`, "number >= 0"}},
		{[]string{"--max-payload-bytes", "100", "hi"}, []string{`invalid value "100" for --max-payload-bytes`, "at least 1024"}},
		{[]string{"--timeout", "soon", "hi"}, []string{`invalid value "soon" for --timeout`, "duration"}},
		{[]string{"--timeout", "-5s", "hi"}, []string{`invalid value "-5s" for --timeout`}},
		{[]string{"--cwd", "/nonexistent", "hi"}, []string{`invalid value "/nonexistent" for --cwd`, "no such directory"}},
		{[]string{"--cwd", file, "hi"}, []string{`for --cwd`, "not a directory"}},
		{[]string{"--add-dir", "/nonexistent", "hi"}, []string{`invalid value "/nonexistent" for --add-dir`, "no such directory"}},
		{[]string{"--output-format", "xml", "hi"}, []string{`invalid value "xml" for --output-format`, "must be one of text, stream-json"}},
		{[]string{"--cli", "/nonexistent", "hi"}, []string{`invalid value "/nonexistent" for --cli`, "does not exist"}},
		{[]string{"--allow", "", "hi"}, []string{`invalid value "" for --allow`, "must not be empty"}},
		{[]string{"--bogus", "hi"}, []string{"unknown flag --bogus"}},
		{[]string{"hi", "--model"}, []string{"--model needs a value"}},
		{[]string{"--verbose=maybe", "hi"}, []string{`"maybe"`, "--verbose"}},
		{nil, []string{"missing PROMPT"}},
		{[]string{"--verbose"}, []string{"missing PROMPT"}},
		{[]string{"  "}, []string{"PROMPT is empty"}},
		{[]string{"--resume", "abc", "--continue", "hi"}, []string{"--resume and --continue cannot be used together"}},
		{[]string{"--fork", "hi"}, []string{"--fork needs --resume ID or --continue"}},
		{[]string{"--keep", "hi"}, []string{"--keep goes with --server (or CLAUDECTL_SERVER)"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			o := claudectl(t, invocation{}, append([]string{"run"}, tc.args...)...)
			if o.code != 2 {
				t.Errorf("exit %d, want 2", o.code)
			}
			if !strings.HasPrefix(o.stderr, "claudectl run: ") || !strings.HasSuffix(o.stderr, "; see \"claudectl run -h\"\n") || strings.Count(o.stderr, "\n") != 1 {
				t.Errorf("stderr is not one line ending in the help hint: %q", o.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(o.stderr, w) {
					t.Errorf("stderr lacks %q: %q", w, o.stderr)
				}
			}
			if o.stdout != "" {
				t.Errorf("stdout = %q", o.stdout)
			}
		})
	}
}

func TestRunEmptyPromptFromStdin(t *testing.T) {
	t.Parallel()
	o := claudectl(t, invocation{stdin: "\n"}, "run", "-")
	if o.code != 2 || !strings.Contains(o.stderr, "prompt read from stdin is empty") {
		t.Errorf("exit %d, stderr %q", o.code, o.stderr)
	}
}

func TestRunParse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := &RunCommand{}
	cfg, _, err := c.parse([]string{
		"--allow", "Read", "fix", "--allow", "Bash(git status:*)", "the bug",
		"--deny", "WebFetch", "--add-dir", dir, "--permission-mode=plan", "--resume", "s1", "--fork",
		"--max-turns", "3", "--max-budget-usd", "0.25", "--timeout", "1m", "--", "--not-a-flag",
	})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{cfg.prompt, cfg.allow, cfg.deny, cfg.addDirs, cfg.permissionMode, cfg.resume, cfg.fork, cfg.maxTurns, cfg.maxBudgetUSD, cfg.timeout.String(), cfg.outputFormat}
	want := []any{"fix the bug --not-a-flag", []string{"Read", "Bash(git status:*)"}, []string{"WebFetch"}, []string{dir}, "plan", "s1", true, 3, 0.25, "1m0s", "text"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parsed config (-want +got):\n%s", diff)
	}
	// Every mode the SDK knows is accepted.
	for _, m := range claude.PermissionModes {
		if _, _, err := c.parse([]string{"--permission-mode", string(m), "hi"}); err != nil {
			t.Errorf("--permission-mode %s: %v", m, err)
		}
	}
}

func TestToolSummary(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100)
	for _, tc := range []struct {
		name, input, want string
	}{
		{"Bash", `{"command":"echo hi","description":"say hi"}`, "echo hi"},
		{"Bash", `{"description":"say hi","command":"echo  hi\n echo there"}`, "echo hi echo there"},
		{"Read", `{"file_path":"/tmp/a.go","limit":10}`, "/tmp/a.go"},
		{"Grep", `{"path":"src","pattern":"func main"}`, "func main"},
		{"WebFetch", `{"prompt":"summarise","url":"https://example.com"}`, "https://example.com"},
		{"Custom", `{"n":1,"flag":true,"zeta":"first string","alpha":"second"}`, "first string"},
		{"Custom", `{"n":1}`, ""},
		{"Custom", `not json`, ""},
		{"AskUserQuestion", `{"questions":[{"question":"Which color?","options":["red"]}]}`, "Which color?"},
		{"Bash", `{"command":"` + long + `"}`, strings.Repeat("x", 79) + "…"},
	} {
		if got := toolSummary(tc.name, json.RawMessage(tc.input)); got != tc.want {
			t.Errorf("toolSummary(%s, %s) = %q, want %q", tc.name, tc.input, got, tc.want)
		}
	}
	if got := toolLine("Bash", json.RawMessage(`{"command":"echo hi"}`)); got != "⏺ Bash(echo hi)" {
		t.Errorf("toolLine = %q", got)
	}
	if got := toolLine("TaskList", json.RawMessage(`{}`)); got != "⏺ TaskList" {
		t.Errorf("toolLine = %q", got)
	}
}

func TestResultLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		block claude.ToolResultBlock
		want  string
	}{
		{claude.ToolResultBlock{Content: claude.TextContent("hi")}, "  ⎿  hi"},
		{claude.ToolResultBlock{Content: claude.TextContent("\none\ntwo\nthree")}, "  ⎿  one (+2 more lines)"},
		{claude.ToolResultBlock{Content: claude.TextContent("")}, "  ⎿  (no output)"},
		{claude.ToolResultBlock{Content: claude.TextContent("nope"), IsError: true}, "  ⎿  Error: nope"},
		{claude.ToolResultBlock{Content: claude.TextContent("Error: exit 1"), IsError: true}, "  ⎿  Error: exit 1"},
		{claude.ToolResultBlock{Content: claude.BlockContent(&claude.TextBlock{Text: "from blocks"})}, "  ⎿  from blocks"},
	} {
		if got := resultLine(&tc.block); got != tc.want {
			t.Errorf("resultLine(%+v) = %q, want %q", tc.block, got, tc.want)
		}
	}
}

func TestDescribeResultError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		res  claude.ResultMessage
		want string
	}{
		{claude.ResultMessage{Subtype: "success", IsError: true, Result: "API Error: 400 bad"}, "API Error: 400 bad"},
		{claude.ResultMessage{Subtype: "error_max_turns", IsError: true, Errors: []string{"Reached maximum number of turns (1)"}}, "stopped at the turn limit (--max-turns): Reached maximum number of turns (1)"},
		{claude.ResultMessage{Subtype: "error_max_budget_usd", IsError: true}, "stopped at the budget limit (--max-budget-usd)"},
		{claude.ResultMessage{Subtype: "error_new_kind", IsError: true}, "the turn ended with error_new_kind"},
		{claude.ResultMessage{Subtype: "success", IsError: true}, "the turn ended with an error (Claude Code gave no detail)"},
	} {
		if got := describeResultError(&tc.res); got != tc.want {
			t.Errorf("describeResultError(%+v) = %q, want %q", tc.res, got, tc.want)
		}
	}
}

func TestPickOptions(t *testing.T) {
	t.Parallel()
	q := claude.Question{Question: "Q", Options: []claude.QuestionOption{{Label: "a"}, {Label: "b"}, {Label: "c"}}}
	multi := q
	multi.MultiSelect = true
	for _, tc := range []struct {
		q    claude.Question
		line string
		want string
		ok   bool
	}{
		{q, "2", "b", true},
		{q, "4", "", false},
		{q, "0", "", false},
		{q, "1,3", "", false},
		{multi, "1, 3", "a, c", true},
		{q, "something else", "something else", true},
		{q, "", "", false},
	} {
		got, ok := pickOptions(tc.q, tc.line)
		if got != tc.want || ok != tc.ok {
			t.Errorf("pickOptions(multi=%v, %q) = %q, %v; want %q, %v", tc.q.MultiSelect, tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCommandsAreListed(t *testing.T) {
	t.Parallel()
	var names []string
	for _, c := range Commands(&Env{}) {
		names = append(names, c.Name())
		if c.Summary() == "" {
			t.Errorf("%s has no summary", c.Name())
		}
	}
	if !slices.Equal(names, []string{"run", "doctor", "worker", "serve", "sessions", "search", "workers", "send", "attach", "resume", "fork", "interrupt", "close", "diff", "merge", "discard", "pending", "budget", "approve", "deny", "rules", "tokens", "whoami", "audit", "notify", "hook", "prune", "backup", "restore", "reload", "version", "completion"}) {
		t.Errorf("commands %v", names)
	}
}

// Every flag's description is on its line of the help: one with a newline
// would start its next line at column 0, out of the list.
func TestHelpFlagLines(t *testing.T) {
	t.Parallel()
	for _, c := range Commands(&Env{}) {
		o := claudectl(t, invocation{}, c.Name(), "-h")
		_, flags, ok := strings.Cut(o.stdout, "\nFlags:\n")
		if o.code != 0 || !ok {
			t.Errorf("%s -h: exit %d, no flag list:\n%s", c.Name(), o.code, o.stdout)
			continue
		}
		flags, _, _ = strings.Cut(flags, "\n\n")
		if flags = strings.TrimSuffix(flags, "\n"); flags == "" {
			continue // a command without flags
		}
		for _, line := range strings.Split(flags, "\n") {
			if !strings.HasPrefix(line, "  ") {
				t.Errorf("%s -h: a line of the flag list is not indented: %q", c.Name(), line)
			}
		}
	}
}
