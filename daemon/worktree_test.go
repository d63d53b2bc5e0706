package daemon_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/internal/worktree"
	"github.com/claudectl/claudectl/store"
)

// gitRepo makes a repository with one commit on main (README) and
// returns its directory and a function running git in it.
func gitRepo(t testing.TB) (string, func(args ...string) string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "--quiet", "--initial-branch=main")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("a repository\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "--quiet", "-m", "first")
	return dir, git
}

// bashScript answers each conversation by its first prompt: "write X"
// makes the Bash call echo "from X" > notes.txt, a later prompt "where"
// writes the directory the CLI runs in to where.txt; each call is followed
// by "Done.".
func bashScript() claudetest.Responder {
	return claudetest.ResponderFunc(func(r *claudetest.Request) claudetest.Turn {
		if r.AssistantCount()%2 == 1 {
			return claudetest.Reply(claudetest.Text("Done."))
		}
		cmd := "pwd > where.txt"
		if text := r.LastUserText(); strings.HasPrefix(text, "write ") {
			cmd = "echo 'from " + strings.TrimPrefix(text, "write ") + "' > notes.txt"
		}
		return claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": cmd, "description": "write a file"}))
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestWorktreeSessions: two sessions with worktree auto in one repository
// each write notes.txt with their own content; neither sees the other's,
// the repository's working tree is untouched, Changes shows each, and
// MergeChanges brings one in (the other then conflicts, changing
// nothing). A resume goes on in the same worktree, a fork gets its own
// with its source's files, a discarded worktree is gone with its branch.
func TestWorktreeSessions(t *testing.T) {
	repo, git := gitRepo(t)
	td := daemontest.Start(t, &daemontest.Options{Responder: bashScript()})
	d, ctx := td.D, td.Ctx
	var ss []*store.Session
	for _, who := range []string{"A", "B"} {
		s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: repo, Worktree: "auto", AllowedTools: []string{"Bash"}}, "write "+who)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	for _, s := range ss {
		untilIdle(t, d, ctx, s.ID, 0)
	}
	a, b := ss[0], ss[1]
	for i, s := range ss {
		who := []string{"A", "B"}[i]
		if want := "claudectl/" + strings.ToLower(s.ID[:8]); s.Worktree.Branch != want || s.Worktree.BaseBranch != "main" || s.Cwd != repo {
			t.Errorf("session %s: worktree %+v, cwd %s; want branch %s from main, cwd %s", who, s.Worktree, s.Cwd, want, repo)
		}
		if got := readFile(t, filepath.Join(s.Worktree.Path, "notes.txt")); got != "from "+who+"\n" {
			t.Errorf("session %s's notes.txt: %q", who, got)
		}
		c, _, err := d.Changes(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Files) != 1 || c.Files[0].Path != "notes.txt" || c.Files[0].Status != "added" || !strings.Contains(c.Diff, "+from "+who) {
			t.Errorf("session %s's changes: %+v\n%s", who, c.Files, c.Diff)
		}
	}
	if _, err := os.Stat(filepath.Join(repo, "notes.txt")); err == nil {
		t.Error("the repository's own tree got notes.txt")
	}
	if st := git("status", "--porcelain"); st != "" {
		t.Errorf("the repository's status: %q", st)
	}

	m, err := d.MergeChanges(ctx, a.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if m.BaseBranch != "main" || !slices.Equal(m.Files, []string{"notes.txt"}) || readFile(t, filepath.Join(repo, "notes.txt")) != "from A\n" {
		t.Errorf("MergeChanges = %+v; the repository's notes.txt: %q", m, readFile(t, filepath.Join(repo, "notes.txt")))
	}
	if _, err := d.MergeChanges(ctx, b.ID, "alice"); !errors.Is(err, worktree.ErrConflict) || !strings.Contains(err.Error(), "notes.txt") {
		t.Errorf("merging B's conflicting notes.txt: %v", err)
	}

	// A resume goes on in the same worktree.
	if err := d.CloseSession(ctx, a.ID, "test"); err != nil {
		t.Fatal(err)
	}
	got, _ := d.Session(ctx, a.ID)
	if _, err := d.Resume(ctx, a.ID, "where"); err != nil {
		t.Fatal(err)
	}
	untilIdle(t, d, ctx, a.ID, got.LastSeq)
	if where := readFile(t, filepath.Join(a.Worktree.Path, "where.txt")); strings.TrimSpace(where) != a.Worktree.Path {
		t.Errorf("the resumed CLI ran in %q, want %s", where, a.Worktree.Path)
	}

	// A fork gets a worktree of its own, as its source is.
	f, err := d.Fork(ctx, a.ID, "where")
	if err != nil {
		t.Fatal(err)
	}
	untilIdle(t, d, ctx, f.ID, 0)
	if f.Worktree.Path == a.Worktree.Path || f.Worktree.Branch == a.Worktree.Branch || f.Worktree.BaseBranch != "main" {
		t.Errorf("the fork's worktree %+v, its source's %+v", f.Worktree, a.Worktree)
	}
	if where := readFile(t, filepath.Join(f.Worktree.Path, "where.txt")); strings.TrimSpace(where) != f.Worktree.Path {
		t.Errorf("the fork's CLI ran in %q, want %s", where, f.Worktree.Path)
	}
	if got := readFile(t, filepath.Join(f.Worktree.Path, "notes.txt")); got != "from A\n" {
		t.Errorf("the fork's notes.txt: %q", got)
	}

	// Discarded: worktree and branch gone; the session cannot run again.
	if err := d.DiscardWorktree(ctx, b.ID, "alice"); err == nil || !strings.Contains(err.Error(), "close the session first") {
		t.Errorf("discarding a live session's worktree: %v", err)
	}
	if err := d.CloseSession(ctx, b.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if err := d.DiscardWorktree(ctx, b.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.Worktree.Path); err == nil {
		t.Error("the discarded worktree is still there")
	}
	if br := git("branch", "--list", b.Worktree.Branch); br != "" {
		t.Errorf("the discarded branch is still there: %q", br)
	}
	var se *daemon.StateError
	if _, err := d.Resume(ctx, b.ID, "more"); !errors.As(err, &se) || !strings.Contains(err.Error(), "worktree was discarded") {
		t.Errorf("resuming a session whose worktree was discarded: %v", err)
	}
}

// TestWorktreeErrors: each refusal names the option and says why.
func TestWorktreeErrors(t *testing.T) {
	repo, _ := gitRepo(t)
	td := daemontest.Start(t, nil)
	d, ctx := td.D, td.Ctx
	for _, tc := range []struct {
		cwd, worktree, field, says string
	}{
		{t.TempDir(), "auto", "options.cwd", "is not in a git repository"},
		{repo, "main", "options.worktree", "the branch main exists in " + repo},
		{repo, "two words", "options.worktree", "is not a branch name git accepts"},
	} {
		_, err := d.Create(ctx, &daemon.SessionOptions{Cwd: tc.cwd, Worktree: tc.worktree}, "")
		var ia *daemon.InvalidArgumentError
		if !errors.As(err, &ia) || ia.Field != tc.field || !strings.Contains(ia.Reason, tc.says) {
			t.Errorf("worktree %q in %s: %v; want %s saying %q", tc.worktree, tc.cwd, err, tc.field, tc.says)
		}
	}
	plain, err := d.Create(ctx, &daemon.SessionOptions{Cwd: repo}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Changes(ctx, plain.ID); err == nil || !strings.Contains(err.Error(), "has no worktree of its own") {
		t.Errorf("the changes of a session without a worktree: %v", err)
	}
	sessions, _ := d.Sessions(ctx, store.SessionFilter{})
	if len(sessions) != 1 {
		t.Errorf("refused worktree sessions were stored: %d sessions", len(sessions))
	}
}
