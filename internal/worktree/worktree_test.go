package worktree_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/internal/worktree"
	"github.com/claudectl/claudectl/store"
)

// gitEnv is a git environment without the user's configuration.
func gitEnv(t *testing.T) []string {
	home := t.TempDir()
	return append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_CONFIG_NOSYSTEM=1")
}

// newRepo makes a repository with one commit on main: a.txt and
// sub/b.txt.
func newRepo(t *testing.T, env []string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	run(t, env, dir, "init", "--quiet", "--initial-branch=main")
	write(t, filepath.Join(dir, "a.txt"), "one\ntwo\nthree\n")
	write(t, filepath.Join(dir, "sub", "b.txt"), "b\n")
	run(t, env, dir, "add", ".")
	run(t, env, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "first")
	return dir
}

func run(t *testing.T, env []string, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// add finds the repository holding cwd and adds a worktree of it.
func add(g *worktree.Git, cwd, dir, branch, spare string) (store.Worktree, string, error) {
	ctx := context.Background()
	r, err := g.Find(ctx, cwd)
	if err != nil {
		return store.Worktree{}, "", err
	}
	return g.Add(ctx, r, dir, branch, spare)
}

func paths(c *worktree.Changes) []string {
	var ps []string
	for _, f := range c.Files {
		ps = append(ps, f.Status+" "+f.Path)
	}
	return ps
}

// TestWorktrees: two worktrees of one repository change the same file
// name apart, each sees only its own, the repository's tree is left
// alone; Changes shows each, committed and not; Merge brings one in, and
// refuses the other's conflict and a dirty base without changing
// anything; Remove removes worktree and branch.
func TestWorktrees(t *testing.T) {
	env := gitEnv(t)
	g := &worktree.Git{Env: env}
	ctx := context.Background()
	repo := newRepo(t, env)
	root := t.TempDir()
	wa, cwdA, err := add(g, filepath.Join(repo, "sub"), filepath.Join(root, "A"), "claudectl/a", "")
	if err != nil {
		t.Fatal(err)
	}
	if cwdA != filepath.Join(root, "A", "sub") || wa.BaseBranch != "main" || wa.Repo != repo || wa.Branch != "claudectl/a" {
		t.Errorf("Add = %+v, cwd %s", wa, cwdA)
	}
	wb, _, err := add(g, repo, filepath.Join(root, "B"), "claudectl/b", "")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(wa.Path, "notes.txt"), "from A\n")
	write(t, filepath.Join(wb.Path, "notes.txt"), "from B\n")
	write(t, filepath.Join(wa.Path, "a.txt"), "one\nTWO\nthree\n")
	run(t, env, wa.Path, "add", "a.txt")
	run(t, env, wa.Path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "A's edit") // committed
	os.Remove(filepath.Join(wa.Path, "sub", "b.txt"))
	if got := read(t, filepath.Join(wa.Path, "notes.txt")); got != "from A\n" {
		t.Errorf("A sees %q", got)
	}
	if _, err := os.Stat(filepath.Join(repo, "notes.txt")); err == nil {
		t.Error("the repository's own tree got notes.txt")
	}
	if st := run(t, env, repo, "status", "--porcelain"); st != "" {
		t.Errorf("the repository's status: %q", st)
	}

	ca, err := g.Changes(ctx, wa)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"modified a.txt", "added notes.txt", "deleted sub/b.txt"}; !slices.Equal(paths(ca), want) {
		t.Errorf("A's changes %v, want %v", paths(ca), want)
	}
	if !strings.Contains(ca.Diff, "+from A") || !strings.Contains(ca.Diff, "-two\n+TWO") || ca.Files[0].Additions != 1 || ca.Files[0].Deletions != 1 {
		t.Errorf("A's diff:\n%s\nfiles %+v", ca.Diff, ca.Files)
	}
	if st := run(t, env, wa.Path, "status", "--porcelain"); !strings.Contains(st, "?? notes.txt") {
		t.Errorf("Changes touched A's index: status %q", st)
	}

	// A dirty base refuses, changing nothing.
	write(t, filepath.Join(repo, "a.txt"), "dirty\n")
	_, err = g.Merge(ctx, wa, "merge A")
	var we *worktree.Error
	if !errors.Is(err, worktree.ErrDirtyBase) || !errors.As(err, &we) || !slices.Equal(we.Files, []string{"a.txt"}) ||
		!strings.Contains(err.Error(), "checked out in "+repo) {
		t.Fatalf("Merge into a dirty base = %v", err)
	}
	run(t, env, repo, "checkout", "--quiet", "a.txt")

	m, err := g.Merge(ctx, wa, "merge A")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.txt", "notes.txt", "sub/b.txt"}; m.BaseBranch != "main" || !slices.Equal(m.Files, want) {
		t.Errorf("Merge = %+v, want files %v", m, want)
	}
	if got := read(t, filepath.Join(repo, "notes.txt")); got != "from A\n" {
		t.Errorf("after the merge the repository's notes.txt is %q", got)
	}
	if st := run(t, env, repo, "status", "--porcelain"); st != "" {
		t.Errorf("after the merge the repository's status: %q", st)
	}

	// B's notes.txt now conflicts with main's.
	head := run(t, env, repo, "rev-parse", "HEAD")
	_, err = g.Merge(ctx, wb, "merge B")
	if !errors.Is(err, worktree.ErrConflict) || !errors.As(err, &we) || !slices.Equal(we.Files, []string{"notes.txt"}) {
		t.Fatalf("Merge of a conflict = %v", err)
	}
	if got := run(t, env, repo, "rev-parse", "HEAD"); got != head || read(t, filepath.Join(repo, "notes.txt")) != "from A\n" {
		t.Error("a conflicting merge changed the base")
	}

	if err := g.Remove(ctx, wb); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wb.Path); err == nil {
		t.Error("the worktree is still there")
	}
	if out := run(t, env, repo, "branch", "--list", "claudectl/b"); out != "" {
		t.Errorf("the branch is still there: %q", out)
	}
	if err := g.Remove(ctx, wb); err != nil {
		t.Errorf("removing it again: %v", err)
	}
}

// TestFork: a fork's worktree starts as its source is, uncommitted
// changes included, on its own branch, with its source's base.
func TestFork(t *testing.T) {
	env := gitEnv(t)
	g := &worktree.Git{Env: env}
	ctx := context.Background()
	repo := newRepo(t, env)
	root := t.TempDir()
	src, _, err := add(g, repo, filepath.Join(root, "S"), "claudectl/s", "")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(src.Path, "new.txt"), "new\n")
	write(t, filepath.Join(src.Path, "a.txt"), "changed\n")
	os.Remove(filepath.Join(src.Path, "sub", "b.txt"))
	f, err := g.Fork(ctx, src, filepath.Join(root, "F"), "claudectl/f")
	if err != nil {
		t.Fatal(err)
	}
	if f.BaseCommit != src.BaseCommit || f.BaseBranch != "main" || f.Branch != "claudectl/f" {
		t.Errorf("Fork = %+v", f)
	}
	if read(t, filepath.Join(f.Path, "new.txt")) != "new\n" || read(t, filepath.Join(f.Path, "a.txt")) != "changed\n" {
		t.Error("the fork lacks its source's changes")
	}
	if _, err := os.Stat(filepath.Join(f.Path, "sub", "b.txt")); err == nil {
		t.Error("the fork has the file its source deleted")
	}
	if st := run(t, env, f.Path, "status", "--porcelain"); !strings.Contains(st, "M a.txt") || !strings.Contains(st, "?? new.txt") ||
		run(t, env, f.Path, "diff", "--cached", "--name-only") != "" {
		t.Errorf("the fork's changes are not uncommitted: %q", st)
	}
	write(t, filepath.Join(f.Path, "a.txt"), "the fork's\n")
	if read(t, filepath.Join(src.Path, "a.txt")) != "changed\n" {
		t.Error("the fork's write reached its source")
	}
}

// TestErrors: each failure in the person's words.
func TestErrors(t *testing.T) {
	env := gitEnv(t)
	repo := newRepo(t, env)
	g := &worktree.Git{Env: env}
	for _, tc := range []struct {
		name, cwd, branch string
		g                 *worktree.Git
		kind              error
		says              string
	}{
		{"not a repository", t.TempDir(), "x", g, worktree.ErrNotARepo, "is not in a git repository"},
		{"branch exists", repo, "main", g, worktree.ErrBranchExists, "the branch main exists in " + repo},
		{"bad branch", repo, "no spaces", g, worktree.ErrBadBranch, `"no spaces" is not a branch name git accepts`},
		{"option-like branch", repo, "-f", g, worktree.ErrBadBranch, "is not a branch name"},
		{"git missing", repo, "x", &worktree.Git{Path: "no-such-git", Env: env}, worktree.ErrGitMissing, `cannot find "no-such-git" on its PATH`},
	} {
		_, _, err := add(tc.g, tc.cwd, filepath.Join(t.TempDir(), "w"), tc.branch, "")
		if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.kind, tc.says)
		}
	}
	empty := t.TempDir()
	run(t, env, empty, "init", "--quiet")
	if _, _, err := add(g, empty, filepath.Join(t.TempDir(), "w"), "x", ""); !errors.Is(err, worktree.ErrNoCommit) {
		t.Errorf("a repository without a commit: %v", err)
	}
}

// TestSpare: a spare worktree made ahead of time is taken by Add (moved,
// on the new branch, no file written), also after the repository moved
// on; a directory that is no spare is not taken.
func TestSpare(t *testing.T) {
	env := gitEnv(t)
	g := &worktree.Git{Env: env}
	ctx := context.Background()
	repo := newRepo(t, env)
	root := t.TempDir()
	spare := filepath.Join(root, ".spare")
	r, err := g.Find(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.MakeSpare(ctx, r, spare); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(spare, "a.txt")
	os.Chtimes(marker, time.Unix(1, 0), time.Unix(1, 0)) // a file rewritten would lose this time
	wt, _, err := g.Add(ctx, r, filepath.Join(root, "A"), "claudectl/a", spare)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(spare); err == nil {
		t.Error("the spare is still there: it was not taken")
	}
	if fi, err := os.Stat(filepath.Join(wt.Path, "a.txt")); err != nil || fi.ModTime().Unix() != 1 {
		t.Errorf("the worktree's a.txt was written anew (%v): the spare was not moved", err)
	}
	if b := run(t, env, wt.Path, "symbolic-ref", "--short", "HEAD"); b != "claudectl/a" {
		t.Errorf("the taken spare is on %q", b)
	}
	if st := run(t, env, wt.Path, "status", "--porcelain"); st != "" {
		t.Errorf("the taken spare's status: %q", st)
	}

	// The repository moves on: the next spare is brought along.
	if err := g.MakeSpare(ctx, r, spare); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(repo, "c.txt"), "c\n")
	run(t, env, repo, "add", "c.txt")
	run(t, env, repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "second")
	r2, _ := g.Find(ctx, repo)
	wt2, _, err := g.Add(ctx, r2, filepath.Join(root, "B"), "claudectl/b", spare)
	if err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(wt2.Path, "c.txt")) != "c\n" || wt2.BaseCommit != r2.Commit {
		t.Errorf("the spare taken after a new commit lacks it: %+v", wt2)
	}

	// No spare there: a worktree all the same.
	wt3, _, err := g.Add(ctx, r2, filepath.Join(root, "C"), "claudectl/c", filepath.Join(root, "none"))
	if err != nil || read(t, filepath.Join(wt3.Path, "c.txt")) != "c\n" {
		t.Errorf("without a spare: %+v, %v", wt3, err)
	}
}
