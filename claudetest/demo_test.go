package claudetest

import (
	"encoding/json"
	"strings"
	"testing"
)

// demoRequest is a request whose conversation is msgs, with the CLI's
// environment text naming dir.
func demoRequest(dir string, msgs ...RequestMessage) *Request {
	return &Request{Stream: true, MaxTokens: 32000, Tools: []string{"Bash", "Write", "AskUserQuestion"},
		System: "You are Claude Code.\nPrimary working directory: " + dir + "\n", Messages: msgs}
}

func user(text string) RequestMessage {
	return RequestMessage{Role: "user", Content: []RequestBlock{
		{Type: "text", Text: "<system-reminder>tour everything</system-reminder>"}, {Type: "text", Text: text}}}
}

func toolResult(content string, isErr bool) RequestMessage {
	return RequestMessage{Role: "user", Content: []RequestBlock{{Type: "tool_result", ToolUseID: "t", Content: content, IsError: isErr}}}
}

var assistant = RequestMessage{Role: "assistant", Content: []RequestBlock{{Type: "text", Text: "..."}}}

func texts(t Turn) string {
	var b strings.Builder
	for _, bl := range t.Blocks {
		if tb, ok := bl.(*TextBlock); ok {
			b.WriteString(tb.Text)
		}
	}
	return b.String()
}

func tools(t Turn) []*ToolUseBlock {
	var out []*ToolUseBlock
	for _, bl := range t.Blocks {
		if tu, ok := bl.(*ToolUseBlock); ok {
			out = append(out, tu)
		}
	}
	return out
}

func TestDemoScenes(t *testing.T) {
	d := Demo(&DemoOptions{Pace: -1})
	// Unknown prompt: the help, listing the keywords; injected reminders
	// do not count as the prompt.
	if got := texts(d.Respond(demoRequest("/w", user("hello")))); !strings.Contains(got, "'show me a tool'") {
		t.Errorf("help: %q", got)
	}
	// The tool scene: thinking and Bash, then a summary of its output.
	first := d.Respond(demoRequest("/w", user("Show me a TOOL")))
	if tu := tools(first); len(tu) != 1 || tu[0].Name != "Bash" || !strings.Contains(string(tu[0].Input), `ls -l`) {
		t.Errorf("tool scene step 0: %+v", tu)
	}
	if _, ok := first.Blocks[0].(*ThinkingBlock); !ok {
		t.Errorf("tool scene step 0 starts with %T, want thinking", first.Blocks[0])
	}
	if first.DeltaDelay != 0 || first.ChunkSize == 0 {
		t.Errorf("pace -1: delta delay %v, chunk %d", first.DeltaDelay, first.ChunkSize)
	}
	got := texts(d.Respond(demoRequest("/w", user("show me a tool"), assistant,
		toolResult("total 8\n-rw-r--r-- 1 u u 2 Jan 1 00:00 a.txt\n-rw-r--r-- 1 u u 2 Jan 1 00:00 b.go", false))))
	if !strings.Contains(got, "2 entries: a.txt, b.go") {
		t.Errorf("tool scene step 1: %q", got)
	}
	got = texts(d.Respond(demoRequest("/w", user("show me a tool"), assistant, toolResult("Permission to use Bash was denied", true))))
	if !strings.Contains(got, "did not run (Permission to use Bash was denied)") {
		t.Errorf("tool scene, denied: %q", got)
	}
	// A second prompt starts its own scene.
	q := d.Respond(demoRequest("/w", user("show me a tool"), assistant, toolResult("x", false), assistant, user("now ask me a question")))
	if tu := tools(q); len(tu) != 1 || tu[0].Name != "AskUserQuestion" {
		t.Errorf("question scene: %+v", tu)
	}
	got = texts(d.Respond(demoRequest("/w", user("ask me a question"), assistant,
		toolResult(`Your questions have been answered: "Which part?"="Files". You can now continue.`, false))))
	if !strings.Contains(got, "you chose Files") {
		t.Errorf("question scene step 1: %q", got)
	}
	// Write goes to the session's directory.
	w := tools(d.Respond(demoRequest("/home/me/proj", user("write a file"))))
	var in struct {
		FilePath string `json:"file_path"`
	}
	if len(w) != 1 || w[0].Name != "Write" || json.Unmarshal(w[0].Input, &in) != nil || in.FilePath != "/home/me/proj/"+DemoFile {
		t.Errorf("write scene: %+v (%q)", w, in.FilePath)
	}
	// With a Dir, the files are made there, not in the session's directory.
	dd := Demo(&DemoOptions{Pace: -1, Dir: "/var/demo files"})
	w = tools(dd.Respond(demoRequest("/home/me/proj", user("write a file"))))
	if len(w) != 1 || json.Unmarshal(w[0].Input, &in) != nil || in.FilePath != "/var/demo files/"+DemoFile {
		t.Errorf("write scene with a Dir: %+v (%q)", w, in.FilePath)
	}
	var cmd struct {
		Command string `json:"command"`
	}
	tc := tools(dd.Respond(demoRequest("/home/me/proj", user("touch"))))
	if len(tc) != 1 || json.Unmarshal(tc[0].Input, &cmd) != nil || cmd.Command != "touch '/var/demo files/"+DemoTouchFile+"'" {
		t.Errorf("touch scene with a Dir: %+v (%q)", tc, cmd.Command)
	}
	// The tour goes through every step and ends, saying what happened.
	answered := `Your questions have been answered: "Which part?"="Files". You can now continue.`
	for _, tc := range []struct {
		results []RequestMessage
		want    string
	}{
		{[]RequestMessage{toolResult("total 0", false), toolResult(answered, false), toolResult("File created", false)},
			"a Bash command approved, a question answered and a file written"},
		{[]RequestMessage{toolResult("denied", true), toolResult("denied", true), toolResult("denied", true)},
			"a Bash command denied, a question left unanswered and a file write denied, every event recorded by the daemon (claudectl attach SESSION_ID replays them). Approve the requests"},
	} {
		conv := []RequestMessage{user("tour")}
		var names []string
		var last Turn
		for i := range 4 {
			last = d.Respond(demoRequest("/w", conv...))
			for _, u := range tools(last) {
				names = append(names, u.Name)
			}
			if i < 3 {
				conv = append(conv, assistant, tc.results[i])
			}
		}
		if strings.Join(names, ",") != "Bash,AskUserQuestion,Write" {
			t.Errorf("tour tools %v", names)
		}
		if got := texts(last); !strings.Contains(got, "That was the tour: streaming, thinking, "+tc.want) {
			t.Errorf("tour end: %q, want %q", got, tc.want)
		}
	}
	// A probe without tools is answered at once.
	if p := d.Respond(&Request{MaxTokens: 1}); texts(p) != "ok" || p.Delay != 0 {
		t.Errorf("probe: %+v", p)
	}
}
