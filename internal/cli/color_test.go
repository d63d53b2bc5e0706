package cli

import (
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claude"
)

func TestColorFor(t *testing.T) {
	t.Parallel()
	yes := func() bool { return true }
	no := func() bool { return false }
	for _, c := range []struct {
		name   string
		env    map[string]string
		lookup func(string) (string, bool)
		term   func() bool
		want   bool
	}{
		{"terminal", map[string]string{"TERM": "xterm-256color"}, nil, yes, true},
		{"not a terminal", map[string]string{"TERM": "xterm"}, nil, no, false},
		{"NO_COLOR=1", map[string]string{"TERM": "xterm", "NO_COLOR": "1"}, nil, yes, false},
		{"NO_COLOR empty", map[string]string{"TERM": "xterm"}, func(k string) (string, bool) { return "", k == "NO_COLOR" }, yes, false},
		{"TERM=dumb", map[string]string{"TERM": "dumb"}, nil, yes, false},
	} {
		env := &Env{Getenv: func(k string) string { return c.env[k] }, lookupEnv: c.lookup}
		env = env.withDefaults()
		if got := colorFor(env, c.term).on; got != c.want {
			t.Errorf("%s: colour %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRendererColour(t *testing.T) {
	t.Parallel()
	lines := []string{
		`{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"thinking","thinking":"Let me look.\nFirst the files.","signature":"x"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"no such file","is_error":true}]}}`,
	}
	render := func(pal palette, thinking bool) string {
		var out lockedBuffer
		r := newRenderer(&out, nil)
		r.pal, r.thinking = pal, thinking
		for _, l := range lines {
			m, err := claude.DecodeMessage([]byte(l))
			if err != nil {
				t.Fatal(err)
			}
			r.handle(m)
		}
		return out.String()
	}
	plain := render(palette{}, false)
	if want := "⏺ Bash(ls)\n  ⎿  Error: no such file\n"; plain != want {
		t.Errorf("without colour:\n%q\nwant\n%q", plain, want)
	}
	coloured := render(palette{on: true}, true)
	for _, want := range []string{
		sgrDim + "✻ Thinking…" + sgrReset + "\n",
		sgrDim + "  Let me look." + sgrReset + "\n",
		"⏺ " + sgrBold + sgrCyan + "Bash" + sgrReset + "(ls)\n",
		sgrRed + "  ⎿  Error: no such file" + sgrReset + "\n",
	} {
		if !strings.Contains(coloured, want) {
			t.Errorf("with colour and thinking, %q is missing from:\n%q", want, coloured)
		}
	}
	if strings.Contains(render(palette{}, true), "\x1b") {
		t.Error("escape codes without colour")
	}
}
