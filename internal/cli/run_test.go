package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
)

// These tests run the real claude CLI (claudetest.CLIPath) against the fake
// Messages API of claudetest.

func TestRunPrintsReply(t *testing.T) {
	t.Parallel()
	const reply = "Hello from the fake model. It streams in small pieces, so several deltas make it up."
	turn := claudetest.Reply(claudetest.Text(reply))
	turn.ChunkSize = 8
	f := newFake(t, turn)
	o := f.run(t, invocation{}, "Say hello")
	if o.code != 0 {
		t.Fatalf("exit %d, want 0", o.code)
	}
	// Streamed as deltas and not printed again from the assistant message.
	if o.stdout != reply+"\n" {
		t.Errorf("stdout = %q, want the reply once, then a newline", o.stdout)
	}
	if o.stderr != "" {
		t.Errorf("stderr = %q, want nothing on success", o.stderr)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 1 || reqs[0].LastUserText() != "Say hello" {
		t.Errorf("the model got %d requests; first prompt %q", len(reqs), reqs[0].LastUserText())
	}
}

func TestRunPromptWordsAndFlagsAfterIt(t *testing.T) {
	t.Parallel()
	f := newFake(t, claudetest.Reply(claudetest.Text("ok")))
	o := f.run(t, invocation{}, "list", "the", "files", "--model", "claude-sonnet-4-5")
	if o.code != 0 || o.stdout != "ok\n" {
		t.Fatalf("exit %d, stdout %q", o.code, o.stdout)
	}
	r := f.srv.Requests()[0]
	if r.LastUserText() != "list the files" || r.Model != "claude-sonnet-4-5" {
		t.Errorf("prompt %q, model %q", r.LastUserText(), r.Model)
	}
}

func TestRunPromptFromStdin(t *testing.T) {
	t.Parallel()
	f := newFake(t, claudetest.Reply(claudetest.Text("read it")))
	o := f.run(t, invocation{stdin: "a prompt\nover two lines\n"}, "-")
	if o.code != 0 || o.stdout != "read it\n" {
		t.Fatalf("exit %d, stdout %q", o.code, o.stdout)
	}
	if got := f.srv.Requests()[0].LastUserText(); got != "a prompt\nover two lines" {
		t.Errorf("prompt = %q", got)
	}
}

func TestRunStreamJSON(t *testing.T) {
	t.Parallel()
	f := newFake(t,
		claudetest.Reply(claudetest.Text("Running it."), claudetest.ToolUse("Bash", map[string]any{"command": "echo hi"})),
		claudetest.Reply(claudetest.Text("It printed hi.")))
	o := f.run(t, invocation{}, "--output-format", "stream-json", "run echo hi")
	if o.code != 0 {
		t.Fatalf("exit %d", o.code)
	}
	if !strings.HasSuffix(o.stdout, "\n") {
		t.Errorf("stdout does not end with a newline")
	}
	types := map[string]int{}
	var last map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line %d is not JSON: %v: %.200q", i+1, err, line)
		}
		typ, _ := m["type"].(string)
		if typ == "" {
			t.Errorf("stdout line %d has no type: %.200q", i+1, line)
		}
		types[typ]++
		if typ == "result" {
			last = m
		}
	}
	for _, typ := range []string{"system", "assistant", "user", "stream_event", "result"} {
		if types[typ] == 0 {
			t.Errorf("no %q line on stdout (lines by type: %v)", typ, types)
		}
	}
	if types["result"] != 1 || last["result"] != "It printed hi." || last["is_error"] != false {
		t.Errorf("%d result lines; result: %v", types["result"], last)
	}
	if strings.Contains(o.stdout, "⏺") {
		t.Error("text transcript mixed into stream-json output")
	}
}

// A tool that needs permission is denied when stdin is not a terminal, with a
// message saying why, and runs when a flag allows it.
func TestRunPermissionsWithoutTerminal(t *testing.T) {
	t.Parallel()
	bash := func(dir string) claudetest.Turn {
		return claudetest.Reply(claudetest.Text("I will create it."),
			claudetest.ToolUse("Bash", map[string]any{"command": "touch " + filepath.Join(dir, "made.txt"), "description": "create a file"}))
	}
	write := func(dir string) claudetest.Turn {
		return claudetest.Reply(claudetest.ToolUse("Write", map[string]any{"file_path": filepath.Join(dir, "made.txt"), "content": "hello\n"}))
	}
	for _, tc := range []struct {
		name    string
		turn    func(dir string) claudetest.Turn
		flags   []string
		allowed bool
	}{
		{"bash denied", bash, nil, false},
		{"write denied", write, nil, false},
		{"bash --allow Bash", bash, []string{"--allow", "Bash"}, true},
		{"write --permission-mode acceptEdits", write, []string{"--permission-mode", "acceptEdits"}, true},
		{"write --allow Write", write, []string{"--allow", "Write"}, true},
		{"bash --allow Bash --deny Bash", bash, []string{"--allow", "Bash", "--deny", "Bash"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			f := newFake(t, tc.turn(dir), claudetest.Reply(claudetest.Text("Done.")))
			f.cwd = dir
			o := f.run(t, invocation{}, append(tc.flags, "make the file")...)
			if o.code != 0 {
				t.Fatalf("exit %d, want 0", o.code)
			}
			content, isError := f.toolResult(t)
			made := fileExists(filepath.Join(dir, "made.txt"))
			if tc.allowed {
				if isError || !made {
					t.Errorf("tool_result %q (is_error %v), file made: %v; want the tool to run", content, isError, made)
				}
				if strings.Contains(o.stderr, "no terminal") {
					t.Errorf("stderr speaks of asking: %q", o.stderr)
				}
			} else {
				if !isError || made {
					t.Errorf("tool_result %q (is_error %v), file made: %v; want a denial", content, isError, made)
				}
				if tc.flags == nil {
					if !strings.Contains(content, "no terminal was available") {
						t.Errorf("the model was not told why: %q", content)
					}
					if !strings.Contains(o.stderr, "no terminal was available to ask") {
						t.Errorf("stderr does not say why it was denied: %q", o.stderr)
					}
				}
				if !strings.Contains(o.stdout, "  ⎿  Error: ") {
					t.Errorf("the denial is not shown in the transcript:\n%s", o.stdout)
				}
			}
			if !strings.Contains(o.stdout, "⏺ ") || !strings.HasSuffix(o.stdout, "Done.\n") {
				t.Errorf("transcript:\n%s", o.stdout)
			}
		})
	}
}

func TestRunTranscript(t *testing.T) {
	t.Parallel()
	f := newFake(t,
		claudetest.Reply(claudetest.Text("I will run it."), claudetest.ToolUse("Bash", map[string]any{"command": "echo hi; echo there", "description": "greet"})),
		claudetest.Reply(claudetest.Text("It printed hi.")))
	o := f.run(t, invocation{}, "--allow", "Bash", "greet")
	want := "I will run it.\n\n⏺ Bash(echo hi; echo there)\n  ⎿  hi (+1 more line)\n\nIt printed hi.\n"
	if o.code != 0 || o.stdout != want {
		t.Errorf("exit %d; stdout:\n%s\nwant:\n%s", o.code, o.stdout, want)
	}
}

// On a terminal claudectl asks, and the answer decides.
func TestRunTerminalPrompt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, answers string
		allowed       bool
		always        bool
	}{
		{"yes", "y\n", true, false},
		{"no", "n\n", false, false},
		{"default is no", "\n", false, false},
		{"always", "a\n", true, true},
		{"asks again", "maybe\nyes\n", true, false},
		{"stdin closed", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			f := newFake(t,
				claudetest.Reply(touchMade()),
				claudetest.Reply(claudetest.Text("Done.")))
			f.cwd = dir
			o := f.run(t, invocation{tty: true, stdin: tc.answers}, "make the file")
			if o.code != 0 {
				t.Fatalf("exit %d", o.code)
			}
			if !strings.Contains(o.stderr, "Allow Bash: touch made.txt? [y/N/a(lways)] ") {
				t.Errorf("no permission prompt on stderr: %q", o.stderr)
			}
			if tc.name == "asks again" && strings.Count(o.stderr, "Allow Bash") != 2 {
				t.Errorf("did not ask again after a bad answer: %q", o.stderr)
			}
			content, isError := f.toolResult(t)
			made := fileExists(filepath.Join(dir, "made.txt"))
			if tc.allowed != (!isError && made) {
				t.Errorf("tool_result %q (is_error %v), file made %v; want allowed=%v", content, isError, made, tc.allowed)
			}
			if !tc.allowed && tc.answers != "" && !strings.Contains(content, "The user denied permission to use Bash") {
				t.Errorf("denial message = %q", content)
			}
			// "always" applies the CLI's suggestion: a rule in the project's
			// local settings.
			settings, _ := os.ReadFile(filepath.Join(dir, ".claude", "settings.local.json"))
			if got := strings.Contains(string(settings), "touch made.txt"); got != tc.always {
				t.Errorf("settings.local.json has the rule: %v, want %v: %s", got, tc.always, settings)
			}
		})
	}
}

func TestRunAskUserQuestion(t *testing.T) {
	t.Parallel()
	ask := colorQuestion()
	t.Run("terminal", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, claudetest.Reply(ask), claudetest.Reply(claudetest.Text("Blue it is.")))
		o := f.run(t, invocation{tty: true, stdin: "2\n"}, "pick a color")
		if o.code != 0 {
			t.Fatalf("exit %d", o.code)
		}
		for _, want := range []string{"[Color] Which color?", "1. red - warm", "2. blue - cold", "Choose 1-2"} {
			if !strings.Contains(o.stderr, want) {
				t.Errorf("stderr lacks %q: %q", want, o.stderr)
			}
		}
		content, isError := f.toolResult(t)
		if isError || !strings.Contains(content, "blue") {
			t.Errorf("tool_result %q (is_error %v), want the answer blue", content, isError)
		}
	})
	t.Run("no terminal", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, claudetest.Reply(ask), claudetest.Reply(claudetest.Text("I will guess.")))
		o := f.run(t, invocation{stdin: "2\n"}, "pick a color")
		if o.code != 0 {
			t.Fatalf("exit %d", o.code)
		}
		content, isError := f.toolResult(t)
		if !isError || !strings.Contains(content, "no terminal") {
			t.Errorf("tool_result %q (is_error %v), want a denial saying there was no terminal", content, isError)
		}
		if !strings.Contains(o.stderr, "no terminal was available to ask") {
			t.Errorf("stderr = %q", o.stderr)
		}
	})
}

func TestRunErrorResult(t *testing.T) {
	t.Parallel()
	f := newFake(t, claudetest.Error(400, "invalid_request_error", "bad"))
	o := f.run(t, invocation{}, "hi")
	if o.code != 1 {
		t.Errorf("exit %d, want 1", o.code)
	}
	if !strings.Contains(o.stderr, "claudectl run: API Error: 400 bad") {
		t.Errorf("stderr = %q, want the error", o.stderr)
	}
	if strings.Contains(o.stdout, "API Error") {
		t.Errorf("the error went to stdout too: %q", o.stdout)
	}
}

func TestRunMaxTurns(t *testing.T) {
	t.Parallel()
	f := newFake(t,
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "echo one"})),
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "echo two"})),
		claudetest.Reply(claudetest.Text("Done.")))
	o := f.run(t, invocation{}, "--max-turns", "1", "--allow", "Bash", "count")
	if o.code != 1 || !strings.Contains(o.stderr, "turn limit (--max-turns)") {
		t.Errorf("exit %d, stderr %q; want 1 and the turn limit", o.code, o.stderr)
	}
}

// Without an API key the CLI's own error is shown, as make run does it.
func TestRunNotLoggedIn(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.env["ANTHROPIC_API_KEY"] = "" // removed
	f.env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:1"
	o := f.run(t, invocation{}, "Say hello in one sentence.")
	if o.code != 1 {
		t.Errorf("exit %d, want 1", o.code)
	}
	if !strings.Contains(o.stderr, "Not logged in") || !strings.Contains(o.stderr, "hint: set ANTHROPIC_API_KEY") {
		t.Errorf("stderr = %q", o.stderr)
	}
	if n := len(f.srv.Requests()); n != 0 {
		t.Errorf("%d requests reached the API", n)
	}
}

func TestRunVerbose(t *testing.T) {
	t.Parallel()
	f := newFake(t, claudetest.Reply(claudetest.Text("ok")))
	o := f.run(t, invocation{}, "--verbose", "hi")
	if o.code != 0 || o.stdout != "ok\n" {
		t.Fatalf("exit %d, stdout %q", o.code, o.stdout)
	}
	lines := strings.Split(strings.TrimSpace(o.stderr), "\n")
	stats := lines[len(lines)-1]
	for _, want := range []string{"claudectl: session ", " · 1 turn · ", "$0.", " in, ", " out tokens"} {
		if !strings.Contains(stats, want) {
			t.Errorf("last stderr line %q lacks %q", stats, want)
		}
	}
}

// TestThinkingShown: Claude's thinking is in the transcript, before the
// reply, by default (the demo's tour promises it), in run, run --server
// and attach alike, and --hide-thinking leaves it out.
func TestThinkingShown(t *testing.T) {
	t.Parallel()
	think := func() claudetest.Turn {
		return claudetest.Reply(claudetest.Thinking("First the files,\nthen the answer."), claudetest.Text("Forty-two."))
	}
	const shown = "✻ Thinking…\n  First the files,\n  then the answer.\n\nForty-two.\n"
	check := func(t *testing.T, what string, o outcome, hide bool) {
		t.Helper()
		want := shown
		if hide {
			want = "Forty-two.\n"
		}
		if o.code != 0 || o.stdout != want {
			t.Errorf("%s: exit %d, stdout:\n%s\nwant:\n%s", what, o.code, o.stdout, want)
		}
	}
	for _, hide := range []bool{false, true} {
		var flags []string
		if hide {
			flags = []string{"--hide-thinking"}
		}
		t.Run(fmt.Sprintf("run/hide=%v", hide), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, think())
			check(t, "run", f.run(t, invocation{}, append(flags, "hi")...), hide)
		})
		t.Run(fmt.Sprintf("server/hide=%v", hide), func(t *testing.T) {
			t.Parallel()
			d, _ := startDaemonModel(t, nil, think())
			dir := t.TempDir()
			o := claudectl(t, invocation{getenv: d.tokenEnv()}, append([]string{"run", "--server", d.url, "--keep", "--cwd", dir}, append(flags, "hi")...)...)
			check(t, "run --server", o, hide)
			res, err := d.sessions.ListSessions(d.ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
			if err != nil || len(res.Msg.Sessions) != 1 {
				t.Fatalf("sessions: %v (%v)", res, err)
			}
			id := res.Msg.Sessions[0].Id
			d.closeSession(t, id)
			// attach replays the session: the prompt, then the same transcript.
			o = claudectl(t, d.inv(), append([]string{"attach", id}, flags...)...)
			if want := "> hi\n\n" + shown; hide {
				if o.code != 0 || o.stdout != "> hi\n\nForty-two.\n" {
					t.Errorf("attach --hide-thinking: exit %d, stdout:\n%s", o.code, o.stdout)
				}
			} else if o.code != 0 || o.stdout != want {
				t.Errorf("attach: exit %d, stdout:\n%s\nwant:\n%s", o.code, o.stdout, want)
			}
		})
	}
}

func TestRunInterrupt(t *testing.T) {
	t.Parallel()
	// 2000 deltas 50ms apart: the whole reply would take 100s.
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("slow ", 2000))}, ChunkSize: 5, DeltaDelay: 50 * time.Millisecond}
	for _, tc := range []struct {
		name    string
		presses int
	}{{"once", 1}, {"twice", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, slow)
			ints := make(chan os.Signal, 2)
			started := make(chan struct{})
			go func() {
				<-started
				for range tc.presses {
					ints <- os.Interrupt
				}
			}()
			start := time.Now()
			o := f.run(t, invocation{interrupts: ints, stdout: &firstWrite{ch: started}}, "go slowly")
			if o.code != ExitInterrupted {
				t.Errorf("exit %d, want %d", o.code, ExitInterrupted)
			}
			if !strings.Contains(o.stderr, "claudectl: interrupted") {
				t.Errorf("stderr = %q", o.stderr)
			}
			if !strings.HasPrefix(o.stdout, "slow") || strings.Count(o.stdout, "slow") >= 2000 {
				t.Errorf("stdout has %d of 2000 words; want some, not all", strings.Count(o.stdout, "slow"))
			}
			if d := time.Since(start); d > 60*time.Second {
				t.Errorf("took %v: the turn was not cut short", d)
			}
		})
	}
}

// firstWrite closes ch on the first write.
type firstWrite struct {
	ch   chan struct{}
	done bool
}

func (w *firstWrite) Write(p []byte) (int, error) {
	if !w.done {
		w.done = true
		close(w.ch)
	}
	return len(p), nil
}

// The CLI's failure is reported with what it wrote on stderr.
func TestRunCLIFails(t *testing.T) {
	t.Parallel()
	// It reads the prompt and the initialize request first: writing to a CLI
	// that has already exited trips a data race inside the SDK (finish
	// updates the *ExitError that a failed write returned).
	cli := script(t, `[ "$1" = --version ] && { echo "2.1.329 (Claude Code)"; exit 0; }; head -n 2 >/dev/null; echo "boom: something is broken" >&2; exit 3`)
	o := claudectl(t, invocation{}, "run", "--cli", cli, "hi")
	if o.code != 1 {
		t.Errorf("exit %d, want 1", o.code)
	}
	if !strings.Contains(o.stderr, "boom: something is broken") || !strings.Contains(o.stderr, "code 3") {
		t.Errorf("stderr = %q", o.stderr)
	}
}

// Without --cli, run runs the CLI the daemon would: the settings file's
// "cli" first.
func TestRunUsesSettingsCLI(t *testing.T) {
	t.Parallel()
	cli := script(t, `[ "$1" = --version ] && { echo "2.1.329 (Claude Code)"; exit 0; }; head -n 2 >/dev/null; echo "the settings' CLI ran" >&2; exit 3`)
	config := t.TempDir()
	if err := os.MkdirAll(filepath.Join(config, "claudectl"), 0o700); err != nil {
		t.Fatal(err)
	}
	settings := fmt.Sprintf(`{"cli": %q}`, cli)
	if err := os.WriteFile(filepath.Join(config, "claudectl", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	o := claudectl(t, invocation{getenv: map[string]string{"XDG_CONFIG_HOME": config, "HOME": t.TempDir(), "PATH": t.TempDir()}}, "run", "hi")
	if o.code != 1 || !strings.Contains(o.stderr, "the settings' CLI ran") {
		t.Errorf("exit %d, stderr %q; want the CLI named in settings.json run", o.code, o.stderr)
	}
}

func TestRunCLINotFound(t *testing.T) {
	t.Parallel()
	if fileExists("/usr/local/bin/claude") {
		t.Skip("/usr/local/bin/claude exists")
	}
	empty := t.TempDir()
	o := claudectl(t, invocation{getenv: map[string]string{"HOME": empty, "PATH": empty}}, "run", "hi")
	if o.code != ExitNotFound || !strings.HasPrefix(o.stderr, "claudectl run: Claude Code CLI not found; looked in: ") {
		t.Errorf("exit %d, stderr %q", o.code, o.stderr)
	}
}

func TestRunTimeout(t *testing.T) {
	t.Parallel()
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text("too late")}, Delay: time.Minute}
	f := newFake(t, slow)
	start := time.Now()
	o := f.run(t, invocation{}, "--timeout", "3s", "hi")
	if o.code != 1 || !strings.Contains(o.stderr, "timed out after 3s (--timeout)") {
		t.Errorf("exit %d, stderr %q; want 1 and a timeout", o.code, o.stderr)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestRunPromptShowsDiff: the permission prompt for Write shows the new
// file as a diff, every line added.
func TestRunPromptShowsDiff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "notes.txt")
	f := newFake(t,
		claudetest.Reply(claudetest.ToolUse("Write", map[string]any{"file_path": path, "content": "first line\nsecond line\n"})),
		claudetest.Reply(claudetest.Text("Written.")))
	f.cwd = dir
	o := f.run(t, invocation{tty: true, stdin: "y\n"}, "write the notes")
	if o.code != 0 {
		t.Fatalf("exit %d", o.code)
	}
	want := "  --- " + path + "\n  +++ " + path + "\n  @@ -0,0 +1,2 @@\n  +first line\n  +second line\n"
	if i := strings.Index(o.stderr, want); i < 0 || i > strings.Index(o.stderr, "Allow Write: "+path+"?") {
		t.Errorf("the prompt does not show the diff:\n%s\nwant:\n%s", o.stderr, want)
	}
	if strings.Contains(o.stderr, "\x1b[") {
		t.Errorf("colour on a stderr that is not a terminal: %q", o.stderr)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "first line\nsecond line\n" {
		t.Errorf("the file after an allowed Write: %q, %v", b, err)
	}
}
