package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// shellOrSkip returns the shell's path, or skips: bash must be there under
// CI; zsh and fish are checked where installed (the Makefile cannot
// install shells).
func shellOrSkip(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if name == "bash" && os.Getenv("CI") == "true" {
			t.Fatalf("bash not found under CI: %v", err)
		}
		t.Skipf("%s is not installed: its completion script is not checked (install %s to check it)", name, name)
	}
	return p
}

// Each script is valid for its shell.
func TestCompletionScriptsParse(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		t.Run(sh, func(t *testing.T) {
			o := claudectl(t, invocation{}, "completion", sh)
			if o.code != 0 || !strings.Contains(o.stdout, "claudectl") {
				t.Fatalf("completion %s: exit %d, stderr %q", sh, o.code, o.stderr)
			}
			bin := shellOrSkip(t, sh)
			path := filepath.Join(t.TempDir(), "claudectl."+sh)
			if err := os.WriteFile(path, []byte(o.stdout), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "-n", path).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", sh, err, out)
			}
		})
	}
	if o := claudectl(t, invocation{}, "completion", "tcsh"); o.code != ExitUsage || !strings.Contains(o.stderr, `unknown shell "tcsh"`) {
		t.Errorf("completion tcsh: exit %d, stderr %q", o.code, o.stderr)
	}
	if o := claudectl(t, invocation{}, "completion"); o.code != ExitUsage {
		t.Errorf("completion without a shell: exit %d", o.code)
	}
}

// bashComplete sources the bash script and completes the words (the last
// one being typed) with the given claudectl executable.
func bashComplete(t *testing.T, script, self string, words ...string) []string {
	t.Helper()
	bash := shellOrSkip(t, "bash")
	path := filepath.Join(t.TempDir(), "claudectl.bash")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellQuote(w)
	}
	prog := "source " + shellQuote(path) + "\nCOMP_WORDS=(" + shellQuote(self) + " " + strings.Join(quoted, " ") + ")\n" +
		"COMP_CWORD=" + strconv.Itoa(len(words)) + "\n_claudectl\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

// The bash script completes commands, flags, words and, through
// "claudectl __complete", session and request ids.
func TestCompletionBash(t *testing.T) {
	o := claudectl(t, invocation{}, "completion", "bash")
	if o.code != 0 {
		t.Fatalf("exit %d", o.code)
	}
	// A claudectl that knows two sessions and records how it was asked.
	dir := t.TempDir()
	log := filepath.Join(dir, "asked")
	self := script(t, `echo "$@" >> `+log+`
case "$*" in
*"__complete"*sessions) printf 'SESSAAA\tidle /tmp\nSESSBBB\trunning /home\n' ;;
*"__complete"*requests) printf 'req-123\tBash in SESSAAA\n' ;;
esac`)
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"att"}, "attach"},
		{[]string{"ver"}, "version"},
		{[]string{"--ver"}, "--version"},
		{[]string{"run", "--permission-m"}, "--permission-mode"},
		{[]string{"serve", "--de"}, "--demo"},
		{[]string{"completion", "f"}, "fish"},
		{[]string{"rules", "l"}, "list"},
		{[]string{"help", "att"}, "attach"},
		{[]string{"attach", "SESSB"}, "SESSBBB"},
		{[]string{"approve", ""}, "req-123"},
	} {
		got := bashComplete(t, o.stdout, self, tc.words...)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("claudectl %s<TAB>: %q, want %q", strings.Join(tc.words, " "), got, tc.want)
		}
	}
	if got := bashComplete(t, o.stdout, self, "attach", "S"); strings.Join(got, " ") != "SESSAAA SESSBBB" {
		t.Errorf("claudectl attach S<TAB>: %q, want both sessions", got)
	}
	// --server on the line goes to the daemon query.
	bashComplete(t, o.stdout, self, "close", "--server", "http://127.0.0.1:9", "")
	asked, _ := os.ReadFile(log)
	if !strings.Contains(string(asked), "__complete --server http://127.0.0.1:9 sessions") {
		t.Errorf("the daemon was asked with %q, want --server passed on", asked)
	}
}

// __complete lists the daemon's sessions and pending requests, and prints
// nothing (quickly) when no daemon answers.
func TestCompleteIDs(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := d.create(t, t.TempDir(), "hello")
	inv := invocation{getenv: map[string]string{"CLAUDECTL_SERVER": d.url, "CLAUDECTL_TOKEN": d.token}}
	o := claudectl(t, inv, "__complete", "sessions")
	if o.code != 0 || !strings.HasPrefix(o.stdout, id+"\t") {
		t.Errorf("__complete sessions: exit %d, stdout %q; want %s first", o.code, o.stdout, id)
	}
	if o := claudectl(t, inv, "__complete", "requests"); o.code != 0 || o.stdout != "" {
		t.Errorf("__complete requests with none pending: exit %d, stdout %q", o.code, o.stdout)
	}
	down := invocation{getenv: map[string]string{"CLAUDECTL_SERVER": "http://" + freeAddr(t)}}
	if o := claudectl(t, down, "__complete", "sessions"); o.code == 0 || o.stdout != "" || o.stderr != "" {
		t.Errorf("__complete with no daemon: exit %d, stdout %q, stderr %q; want a failure and silence", o.code, o.stdout, o.stderr)
	}
	if o := claudectl(t, inv, "help"); strings.Contains(o.stdout, "__complete") {
		t.Error("the hidden command is listed")
	}
}
