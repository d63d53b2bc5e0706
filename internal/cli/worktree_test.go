package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// newGitRepo makes a repository with one commit on main.
func newGitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "--quiet", "--initial-branch=main"}, {"add", "."}, {"commit", "--quiet", "-m", "first"}} {
		if args[0] == "add" {
			os.WriteFile(filepath.Join(dir, "README"), []byte("a repository\n"), 0o644)
		}
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return dir
}

// TestWorktreeCommands: run --worktree starts a session in a worktree of
// its own and says where; diff shows its changes, merge brings one in and
// refuses a conflict in the daemon's words, discard removes a worktree.
func TestWorktreeCommands(t *testing.T) {
	repo := newGitRepo(t)
	d, _ := startDaemonModel(t, &daemontest.Options{Responder: claudetest.ResponderFunc(func(r *claudetest.Request) claudetest.Turn {
		if r.AssistantCount() > 0 {
			return claudetest.Reply(claudetest.Text("Done."))
		}
		who := strings.TrimPrefix(r.LastUserText(), "write ")
		return claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "echo 'from " + who + "' > notes.txt", "description": "write"}))
	})})
	sessionOf := regexp.MustCompile(`daemon session (\S+) `)
	run := func(args ...string) (string, outcome) {
		t.Helper()
		o := claudectl(t, d.inv(), append([]string{"run", "--allow", "Bash", "--cwd", repo}, args...)...)
		m := sessionOf.FindStringSubmatch(o.stderr)
		if o.code != 0 || m == nil {
			t.Fatalf("run %q: exit %d, stderr %q", args, o.code, o.stderr)
		}
		return m[1], o
	}
	a, o := run("--worktree", "write A")
	if !strings.Contains(o.stderr, "it works in the worktree ") || !strings.Contains(o.stderr, "on branch claudectl/"+strings.ToLower(a[:8])+" from main") {
		t.Errorf("run --worktree does not say where the session works: %q", o.stderr)
	}
	b, o := run("--worktree=feature-b", "write B")
	if !strings.Contains(o.stderr, "on branch feature-b from main") {
		t.Errorf("run --worktree=feature-b: %q", o.stderr)
	}
	if _, err := os.Stat(filepath.Join(repo, "notes.txt")); err == nil {
		t.Error("the repository's own tree got notes.txt")
	}

	o = claudectl(t, d.inv(), "diff", a)
	if o.code != 0 || !regexp.MustCompile(`added\s+\+1 -0\s+notes\.txt`).MatchString(o.stdout) || !strings.Contains(o.stdout, "+from A") ||
		!strings.Contains(o.stdout, "against main at ") {
		t.Errorf("diff: exit %d, stdout %q", o.code, o.stdout)
	}
	o = claudectl(t, d.inv(), "diff", "--stat", b)
	if o.code != 0 || !strings.Contains(o.stdout, "notes.txt") || strings.Contains(o.stdout, "+from B") {
		t.Errorf("diff --stat: exit %d, stdout %q", o.code, o.stdout)
	}

	o = claudectl(t, d.inv(), "merge", a)
	if o.code != 0 || !regexp.MustCompile(`^Merged session `+a+` into main \(commit [0-9a-f]{12}\): 1 file: notes\.txt\.\n$`).MatchString(o.stdout) {
		t.Errorf("merge: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "notes.txt")); string(b) != "from A\n" {
		t.Errorf("after merge the repository's notes.txt is %q", b)
	}
	o = claudectl(t, d.inv(), "merge", b)
	if o.code != 1 || !strings.Contains(o.stderr, "conflict with main in notes.txt") {
		t.Errorf("merge of a conflict: exit %d, stderr %q", o.code, o.stderr)
	}

	o = claudectl(t, d.inv(), "discard", b)
	if o.code != 0 || !strings.Contains(o.stdout, "its branch feature-b.") {
		t.Errorf("discard: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	o = claudectl(t, d.inv(), "diff", b)
	if o.code != 1 || !strings.Contains(o.stderr, "its worktree was discarded") {
		t.Errorf("diff after discard: exit %d, stderr %q", o.code, o.stderr)
	}

	plain := d.create(t, repo, "")
	o = claudectl(t, d.inv(), "diff", plain)
	if o.code != 1 || !strings.Contains(o.stderr, "has no worktree of its own") {
		t.Errorf("diff of a session without a worktree: exit %d, stderr %q", o.code, o.stderr)
	}
	o = claudectl(t, invocation{getenv: map[string]string{}}, "run", "--worktree", "hello")
	if o.code != ExitUsage || !strings.Contains(o.stderr, "--worktree goes with --server") {
		t.Errorf("run --worktree without a daemon: exit %d, stderr %q", o.code, o.stderr)
	}
}
