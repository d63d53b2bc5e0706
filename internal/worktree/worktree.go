// Package worktree runs git for the daemon's worktree sessions: a worktree
// and a branch of its own for each (Add, Fork), what it changed against the
// commit it started from (Changes), its changes brought into the branch it
// started from (Merge), and its removal (Remove).
//
// Every git command runs with the caller's context, in the C locale, with
// its stderr captured; what goes wrong is translated here, once, into the
// person's words (*Error, matched with errors.Is against ErrNotARepo and
// the other sentinels).
package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/claudectl/claudectl/store"
)

// What can go wrong, for errors.Is.
var (
	ErrGitMissing   = errors.New("worktree: git missing")
	ErrNotARepo     = errors.New("worktree: not a git repository")
	ErrNoCommit     = errors.New("worktree: repository without a commit")
	ErrBadBranch    = errors.New("worktree: not a branch name")
	ErrBranchExists = errors.New("worktree: branch exists")
	ErrNoBaseBranch = errors.New("worktree: no base branch")
	ErrDirtyBase    = errors.New("worktree: base branch checked out with changes")
	ErrConflict     = errors.New("worktree: merge conflict")
	ErrGone         = errors.New("worktree: worktree gone")
	ErrGitFailed    = errors.New("worktree: git failed")
)

// An Error is what went wrong, in the person's words (Msg), with what git
// said when it said something.
type Error struct {
	Kind   error  // one of the sentinels above
	Msg    string // what happened and what to do
	Stderr string // git's own words, trimmed ("" when none)
	// Files are the files concerned: in conflict, or changed in the base's
	// working tree.
	Files []string
}

func (e *Error) Error() string {
	if e.Stderr != "" && e.Kind == ErrGitFailed {
		return e.Msg + ": " + e.Stderr
	}
	return e.Msg
}

// Is makes errors.Is(err, e.Kind) hold.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Git runs git. Its zero value runs "git" found on PATH.
type Git struct {
	// Path is the git executable; "" means "git" on PATH.
	Path string
	// Env is git's environment; nil means this process's.
	Env []string
}

// Prefix starts the branch a session's worktree gets for "auto":
// claudectl/<the start of the session's id>.
const Prefix = "claudectl/"

// run runs git in dir with args and returns its stdout; extraEnv is added
// to its environment.
func (g *Git) run(ctx context.Context, dir string, extraEnv []string, args ...string) ([]byte, error) {
	path := g.Path
	if path == "" {
		path = "git"
	}
	exe, err := exec.LookPath(path)
	if err != nil {
		return nil, &Error{Kind: ErrGitMissing, Msg: fmt.Sprintf(
			"worktrees need git, and the daemon cannot find %q on its PATH (%s): install git, or give the daemon a PATH that has it",
			path, os.Getenv("PATH"))}
	}
	// The repository's hooks do not run (git worktree add runs
	// post-checkout): the daemon works for the session, and a hook is the
	// repository's code, not the daemon's. The checkout writes its files
	// with a worker per CPU: a worktree of a large repository is most of
	// a session's start.
	args = append([]string{"-c", "core.hooksPath=/dev/null", "-c", "checkout.workers=0"}, args...)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = dir
	env := g.Env
	if env == nil {
		env = os.Environ()
	}
	// The C locale: messages this package recognises. No prompt for
	// credentials, no pager, no editor: nobody is at git's terminal.
	cmd.Env = append(append(env[:len(env):len(env)], "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat",
		"GIT_EDITOR=true", "GIT_MERGE_AUTOEDIT=no"), extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return stdout.Bytes(), &gitError{args: args, stderr: strings.TrimSpace(stderr.String()), err: err}
	}
	return stdout.Bytes(), nil
}

// A gitError is a git command that failed, before translation.
type gitError struct {
	args   []string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.args, " "), e.err, e.stderr)
}

// exitCode is the exit status of a failed git command, -1 when it did not
// exit.
func exitCode(err error) int {
	var ge *gitError
	var xe *exec.ExitError
	if errors.As(err, &ge) && errors.As(ge.err, &xe) {
		return xe.ExitCode()
	}
	return -1
}

// failed translates a git command's failure that has no words of its own
// here: what was being done, and git's reason.
func failed(what string, err error) error {
	var e *Error
	if errors.As(err, &e) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ge *gitError
	stderr := err.Error()
	if errors.As(err, &ge) {
		stderr = ge.stderr
	}
	return &Error{Kind: ErrGitFailed, Msg: what, Stderr: stderr}
}

func trim(b []byte) string { return strings.TrimSpace(string(b)) }

// Repo is the repository that holds a directory: its top level (the
// worktree the directory is in), the directory's path in it, and the
// commit and branch checked out there.
type Repo struct {
	Top    string
	Rel    string // "." at the top
	Commit string
	Branch string // "" for a detached HEAD
}

// Find finds the repository holding dir. Errors: ErrNotARepo, ErrNoCommit,
// ErrGitMissing.
func (g *Git) Find(ctx context.Context, dir string) (*Repo, error) {
	out, err := g.run(ctx, dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		var ge *gitError
		if errors.As(err, &ge) && strings.Contains(ge.stderr, "not a git repository") {
			return nil, &Error{Kind: ErrNotARepo, Msg: fmt.Sprintf(
				"%s is not in a git repository: a worktree is made from one (git init and a first commit there, or leave worktree empty)", dir)}
		}
		return nil, failed(fmt.Sprintf("finding the git repository of %s", dir), err)
	}
	r := &Repo{Top: trim(out)}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	topReal, err := filepath.EvalSymlinks(r.Top)
	if err != nil {
		topReal = r.Top
	}
	if r.Rel, err = filepath.Rel(topReal, real); err != nil || strings.HasPrefix(r.Rel, "..") {
		r.Rel = "."
	}
	out, err = g.run(ctx, r.Top, nil, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return nil, &Error{Kind: ErrNoCommit, Msg: fmt.Sprintf(
			"the git repository %s has no commit yet: a worktree branches from one, so commit something first", r.Top)}
	}
	r.Commit = trim(out)
	if out, err := g.run(ctx, r.Top, nil, "symbolic-ref", "--quiet", "--short", "HEAD"); err == nil {
		r.Branch = trim(out)
	}
	return r, nil
}

// checkBranch refuses a name git would not take for a branch, and one that
// exists in the repository at top.
func (g *Git) checkBranch(ctx context.Context, top, branch string) error {
	if strings.HasPrefix(branch, "-") {
		return &Error{Kind: ErrBadBranch, Msg: fmt.Sprintf("%q is not a branch name git accepts", branch)}
	}
	if _, err := g.run(ctx, top, nil, "check-ref-format", "--branch", branch); err != nil {
		if exitCode(err) > 0 {
			return &Error{Kind: ErrBadBranch, Msg: fmt.Sprintf(
				"%q is not a branch name git accepts (no spaces, \"..\", \"~\", \"^\", \":\" or leading \"-\"; see git check-ref-format)", branch)}
		}
		return failed("checking the branch name", err)
	}
	if _, err := g.run(ctx, top, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err == nil {
		return &Error{Kind: ErrBranchExists, Msg: fmt.Sprintf(
			"the branch %s exists in %s: give a new branch name, or \"auto\"", branch, top)}
	}
	return nil
}

// Add makes a worktree at dir of repository r (Find), on a new branch
// from the commit checked out there (uncommitted changes stay where they
// are). It returns the worktree and the directory within it that
// corresponds to the directory r was found from. When spare names a
// spare worktree of the repository (MakeSpare), it is moved into place
// instead of checking out every file anew. Errors: ErrBadBranch,
// ErrBranchExists, ErrGitMissing, ErrGitFailed.
func (g *Git) Add(ctx context.Context, r *Repo, dir, branch, spare string) (store.Worktree, string, error) {
	if err := g.checkBranch(ctx, r.Top, branch); err != nil {
		return store.Worktree{}, "", err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return store.Worktree{}, "", &Error{Kind: ErrGitFailed, Msg: "making the worktrees' directory", Stderr: err.Error()}
	}
	if spare == "" || !g.takeSpare(ctx, r, spare, dir, branch) {
		if _, err := g.run(ctx, r.Top, nil, "worktree", "add", "--quiet", "-b", branch, dir, r.Commit); err != nil {
			return store.Worktree{}, "", failed(fmt.Sprintf("making the worktree %s of %s", dir, r.Top), err)
		}
	}
	wt := store.Worktree{Path: dir, Branch: branch, BaseBranch: r.Branch, BaseCommit: r.Commit, Repo: r.Top}
	return wt, filepath.Join(dir, r.Rel), nil
}

// MakeSpare makes a spare worktree of repository r at dir, its HEAD
// detached at r's commit, for a later Add to take: most of a worktree's
// cost is writing its files, paid here ahead of time. A spare already
// there at that commit is kept; one at another is brought to it (only the
// files that differ are written).
func (g *Git) MakeSpare(ctx context.Context, r *Repo, dir string) error {
	if g.spareOf(ctx, r, dir) {
		if _, err := g.run(ctx, dir, nil, "checkout", "--quiet", "--detach", r.Commit); err == nil {
			return nil
		}
	}
	if _, err := os.Stat(dir); err == nil {
		g.run(ctx, r.Top, nil, "worktree", "remove", "--force", "--force", dir)
		os.RemoveAll(dir)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if _, err := g.run(ctx, r.Top, nil, "worktree", "add", "--quiet", "--detach", dir, r.Commit); err != nil {
		return failed(fmt.Sprintf("making a spare worktree of %s", r.Top), err)
	}
	return nil
}

// spareOf reports whether dir is a worktree of r's repository whose HEAD
// is detached (a spare, as MakeSpare leaves it).
func (g *Git) spareOf(ctx context.Context, r *Repo, dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		return false
	}
	common := func(d string) string {
		out, err := g.run(ctx, d, nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
		if err != nil {
			return ""
		}
		return trim(out)
	}
	if c := common(dir); c == "" || c != common(r.Top) {
		return false
	}
	_, err := g.run(ctx, dir, nil, "symbolic-ref", "--quiet", "HEAD")
	return exitCode(err) == 1 // detached
}

// takeSpare moves the spare worktree at spare to dir, at r's commit, on
// the new branch; false (nothing changed, or the spare given up) when it
// cannot. The spare's files are already r's commit's, and nobody writes
// in a spare: its index is taken as it is.
func (g *Git) takeSpare(ctx context.Context, r *Repo, spare, dir, branch string) bool {
	if !g.spareOf(ctx, r, spare) {
		return false
	}
	out, err := g.run(ctx, spare, nil, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return false
	}
	if trim(out) != r.Commit {
		// The repository moved on since the spare was made: bring it
		// along (the files that differ), unless that fails.
		if _, err := g.run(ctx, spare, nil, "checkout", "--quiet", "--detach", r.Commit); err != nil {
			return false
		}
	}
	if _, err := g.run(ctx, r.Top, nil, "worktree", "move", spare, dir); err != nil {
		return false
	}
	// The branch, created only if it is not there (an empty old value),
	// and the worktree's HEAD on it: no file is read or written.
	if _, err := g.run(ctx, dir, nil, "update-ref", "refs/heads/"+branch, r.Commit, ""); err != nil {
		g.run(ctx, r.Top, nil, "worktree", "remove", "--force", "--force", dir)
		return false
	}
	if _, err := g.run(ctx, dir, nil, "symbolic-ref", "HEAD", "refs/heads/"+branch); err != nil {
		g.run(ctx, r.Top, nil, "worktree", "remove", "--force", "--force", dir)
		g.run(ctx, r.Top, nil, "branch", "--quiet", "-D", branch)
		return false
	}
	return true
}

// Fork makes a worktree at dir on a new branch that starts as src is now:
// its branch's commit, with src's uncommitted changes (new files included)
// uncommitted on top. Its base is src's: its changes are shown against,
// and merged into, what src started from.
func (g *Git) Fork(ctx context.Context, src store.Worktree, dir, branch string) (store.Worktree, error) {
	if _, err := os.Stat(src.Path); err != nil {
		return store.Worktree{}, &Error{Kind: ErrGone, Msg: fmt.Sprintf("the worktree %s is gone", src.Path)}
	}
	if err := g.checkBranch(ctx, src.Repo, branch); err != nil {
		return store.Worktree{}, err
	}
	out, err := g.run(ctx, src.Path, nil, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return store.Worktree{}, failed("reading the worktree's commit", err)
	}
	tip := trim(out)
	tree, err := g.snapshot(ctx, src.Path)
	if err != nil {
		return store.Worktree{}, err
	}
	if _, err := g.run(ctx, src.Repo, nil, "worktree", "add", "--quiet", "-b", branch, dir, tip); err != nil {
		return store.Worktree{}, failed(fmt.Sprintf("making the worktree %s of %s", dir, src.Repo), err)
	}
	// The snapshot's files over the branch's (a two-tree read-tree
	// deletes what the snapshot lacks), then the index back to the
	// branch: the changes are uncommitted there as they were in src.
	if _, err := g.run(ctx, dir, nil, "read-tree", "-u", "-m", "HEAD", tree); err != nil {
		return store.Worktree{}, failed("copying the worktree's uncommitted changes", err)
	}
	if _, err := g.run(ctx, dir, nil, "reset", "--quiet"); err != nil {
		return store.Worktree{}, failed("copying the worktree's uncommitted changes", err)
	}
	return store.Worktree{Path: dir, Branch: branch, BaseBranch: src.BaseBranch, BaseCommit: src.BaseCommit, Repo: src.Repo}, nil
}

// snapshot writes the tree of the worktree at dir as it is now, committed
// or not, new files included (ignored ones left out), and returns its id.
// The worktree's own index is left alone: a copy of it is used, which
// also spares re-reading the files it knows unchanged.
func (g *Git) snapshot(ctx context.Context, dir string) (string, error) {
	out, err := g.run(ctx, dir, nil, "rev-parse", "--path-format=absolute", "--git-path", "index")
	if err != nil {
		return "", failed("finding the worktree's index", err)
	}
	tmp, err := os.CreateTemp("", "claudectl-index-*")
	if err != nil {
		return "", &Error{Kind: ErrGitFailed, Msg: "making a temporary index", Stderr: err.Error()}
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if b, err := os.ReadFile(trim(out)); err == nil {
		os.WriteFile(tmp.Name(), b, 0o600)
	} else {
		os.Remove(tmp.Name()) // git makes it
	}
	env := []string{"GIT_INDEX_FILE=" + tmp.Name()}
	if _, err := g.run(ctx, dir, env, "add", "--all", "--", "."); err != nil {
		return "", failed("reading the worktree's files", err)
	}
	out, err = g.run(ctx, dir, env, "write-tree")
	if err != nil {
		return "", failed("reading the worktree's files", err)
	}
	return trim(out), nil
}

// Remove removes the worktree and its branch, changes and all. A worktree
// already gone is pruned.
func (g *Git) Remove(ctx context.Context, wt store.Worktree) error {
	if _, err := os.Stat(wt.Path); err == nil {
		if _, err := g.run(ctx, wt.Repo, nil, "worktree", "remove", "--force", "--force", wt.Path); err != nil {
			return failed(fmt.Sprintf("removing the worktree %s", wt.Path), err)
		}
	} else if _, err := g.run(ctx, wt.Repo, nil, "worktree", "prune"); err != nil {
		return failed("pruning the worktrees of "+wt.Repo, err)
	}
	if _, err := g.run(ctx, wt.Repo, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+wt.Branch); err != nil {
		return nil // gone already
	}
	if _, err := g.run(ctx, wt.Repo, nil, "branch", "--quiet", "-D", wt.Branch); err != nil {
		return failed(fmt.Sprintf("deleting the branch %s", wt.Branch), err)
	}
	return nil
}
