package worktree

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/claudectl/claudectl/store"
)

// MaxDiffBytes bounds the unified diff Changes returns; the rest is cut
// (Changes.Truncated), the files are all listed.
const MaxDiffBytes = 4 << 20

// A FileChange is one file a worktree changed against its base.
type FileChange struct {
	Path string
	// Status is "added", "modified", "deleted", "renamed" (from OldPath)
	// or "type" (a file became a link, or back).
	Status    string
	OldPath   string
	Additions int64 // lines; 0 for a binary file
	Deletions int64
	Binary    bool
}

// Changes is what a worktree changed against its base commit: committed
// on its branch or not, new files included.
type Changes struct {
	Files     []FileChange
	Diff      string // git's unified diff, binary files named
	Truncated bool   // Diff was cut at MaxDiffBytes
}

// Changes returns what the worktree changed against its base commit.
func (g *Git) Changes(ctx context.Context, wt store.Worktree) (*Changes, error) {
	if _, err := os.Stat(wt.Path); err != nil {
		return nil, &Error{Kind: ErrGone, Msg: fmt.Sprintf("the worktree %s is gone", wt.Path)}
	}
	tree, err := g.snapshot(ctx, wt.Path)
	if err != nil {
		return nil, err
	}
	return g.diff(ctx, wt.Path, wt.BaseCommit, tree)
}

// diff compares two trees (or commits) in dir.
func (g *Git) diff(ctx context.Context, dir, from, to string) (*Changes, error) {
	out, err := g.run(ctx, dir, nil, "diff", "--no-color", "--no-ext-diff", "-M", "--name-status", "-z", from, to)
	if err != nil {
		return nil, failed("listing the changes", err)
	}
	c := &Changes{}
	byPath := map[string]int{}
	f := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	for i := 0; i+1 < len(f); {
		st := f[i]
		fc := FileChange{Path: f[i+1]}
		i += 2
		switch st[0] {
		case 'A':
			fc.Status = "added"
		case 'D':
			fc.Status = "deleted"
		case 'T':
			fc.Status = "type"
		case 'R', 'C':
			if i >= len(f) {
				break
			}
			fc.Status, fc.OldPath, fc.Path = "renamed", fc.Path, f[i]
			if st[0] == 'C' {
				fc.Status = "added" // a copy: a new file
			}
			i++
		default:
			fc.Status = "modified"
		}
		byPath[fc.Path] = len(c.Files)
		c.Files = append(c.Files, fc)
	}
	out, err = g.run(ctx, dir, nil, "diff", "--no-color", "--no-ext-diff", "-M", "--numstat", "-z", from, to)
	if err != nil {
		return nil, failed("counting the changes", err)
	}
	// "added\tdeleted\tpath\0", or for a rename "added\tdeleted\t\0old\0new\0".
	rest := string(out)
	for rest != "" {
		var line string
		line, rest, _ = strings.Cut(rest, "\x00")
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) != 3 {
			continue
		}
		path := parts[2]
		if path == "" { // a rename: the old and the new path follow
			_, rest, _ = strings.Cut(rest, "\x00")
			path, rest, _ = strings.Cut(rest, "\x00")
		}
		i, ok := byPath[path]
		if !ok {
			continue
		}
		if parts[0] == "-" {
			c.Files[i].Binary = true
			continue
		}
		c.Files[i].Additions, _ = strconv.ParseInt(parts[0], 10, 64)
		c.Files[i].Deletions, _ = strconv.ParseInt(parts[1], 10, 64)
	}
	out, err = g.run(ctx, dir, nil, "diff", "--no-color", "--no-ext-diff", "-M", from, to)
	if err != nil {
		return nil, failed("making the diff", err)
	}
	if len(out) > MaxDiffBytes {
		cut := bytes.LastIndexByte(out[:MaxDiffBytes], '\n')
		out, c.Truncated = out[:cut+1], true
	}
	c.Diff = string(out)
	return c, nil
}

// Merged is what Merge brought into the base branch.
type Merged struct {
	BaseBranch string
	Commit     string // the base branch's commit after the merge
	Files      []string
}

// Merge brings the worktree's changes into its base branch: its
// uncommitted changes are committed on its branch first (message), then
// the branch is merged (a merge commit, message too). It changes nothing
// and fails with ErrConflict when the two conflict, with ErrDirtyBase when
// the base branch is checked out in a working tree with uncommitted
// changes of its own, with ErrNoBaseBranch when the worktree started from
// a detached HEAD.
func (g *Git) Merge(ctx context.Context, wt store.Worktree, message string) (*Merged, error) {
	if wt.BaseBranch == "" {
		return nil, &Error{Kind: ErrNoBaseBranch, Msg: fmt.Sprintf(
			"the session started from a detached HEAD (commit %.12s), so there is no branch to merge into: merge its branch %s yourself", wt.BaseCommit, wt.Branch)}
	}
	if _, err := os.Stat(wt.Path); err != nil {
		return nil, &Error{Kind: ErrGone, Msg: fmt.Sprintf("the worktree %s is gone", wt.Path)}
	}
	baseRef := "refs/heads/" + wt.BaseBranch
	out, err := g.run(ctx, wt.Repo, nil, "rev-parse", "--verify", "--quiet", baseRef)
	if err != nil {
		return nil, &Error{Kind: ErrNoBaseBranch, Msg: fmt.Sprintf("the branch %s it started from no longer exists in %s", wt.BaseBranch, wt.Repo)}
	}
	baseTip := trim(out)
	checkedOut, err := g.checkedOutIn(ctx, wt.Repo, baseRef)
	if err != nil {
		return nil, err
	}
	if checkedOut != "" {
		out, err := g.run(ctx, checkedOut, nil, "status", "--porcelain", "--untracked-files=no")
		if err != nil {
			return nil, failed("reading the status of "+checkedOut, err)
		}
		if dirty := statusFiles(out); len(dirty) > 0 {
			return nil, &Error{Kind: ErrDirtyBase, Files: dirty, Msg: fmt.Sprintf(
				"the branch %s is checked out in %s, which has uncommitted changes of its own (%s): commit or stash them there, then merge again",
				wt.BaseBranch, checkedOut, listFiles(dirty))}
		}
	}
	if err := g.commitAll(ctx, wt.Path, message); err != nil {
		return nil, err
	}
	out, err = g.run(ctx, wt.Path, nil, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return nil, failed("reading the worktree's commit", err)
	}
	tip := trim(out)
	// The merge, worked out without touching a working tree: a conflict
	// changes nothing.
	out, err = g.run(ctx, wt.Repo, nil, "merge-tree", "--write-tree", "--name-only", "--no-messages", baseTip, tip)
	switch {
	case err != nil && exitCode(err) == 1:
		lines := strings.Split(trim(out), "\n")
		files := lines[1:] // the tree first, then the conflicted files
		return nil, &Error{Kind: ErrConflict, Files: files, Msg: fmt.Sprintf(
			"the session's changes conflict with %s in %s: merge its branch %s yourself, or discard it",
			wt.BaseBranch, listFiles(files), wt.Branch)}
	case err != nil:
		return nil, failed("working out the merge (git merge-tree --write-tree needs git 2.38 or later)", err)
	}
	tree, _, _ := strings.Cut(trim(out), "\n")
	var commit string
	if checkedOut != "" {
		if _, err := g.run(ctx, checkedOut, g.identity(ctx, checkedOut), "merge", "--no-ff", "--no-edit", "--quiet", "-m", message, tip); err != nil {
			g.run(ctx, checkedOut, nil, "merge", "--abort")
			return nil, failed(fmt.Sprintf("merging into %s in %s", wt.BaseBranch, checkedOut), err)
		}
		out, err := g.run(ctx, checkedOut, nil, "rev-parse", "HEAD")
		if err != nil {
			return nil, failed("reading the merge", err)
		}
		commit = trim(out)
	} else {
		out, err := g.run(ctx, wt.Repo, g.identity(ctx, wt.Repo), "commit-tree", tree, "-p", baseTip, "-p", tip, "-m", message)
		if err != nil {
			return nil, failed("making the merge commit", err)
		}
		commit = trim(out)
		if _, err := g.run(ctx, wt.Repo, nil, "update-ref", "-m", "claudectl: merge "+wt.Branch, baseRef, commit, baseTip); err != nil {
			return nil, failed("moving the branch "+wt.BaseBranch, err)
		}
	}
	out, err = g.run(ctx, wt.Repo, nil, "diff", "--name-only", "-z", baseTip, commit)
	if err != nil {
		return nil, failed("listing the merged files", err)
	}
	m := &Merged{BaseBranch: wt.BaseBranch, Commit: commit}
	for _, f := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if f != "" {
			m.Files = append(m.Files, f)
		}
	}
	return m, nil
}

// commitAll commits everything uncommitted in the worktree at dir, new
// files included, on its branch; nothing when there is nothing. The
// repository's hooks do not run: the daemon commits for the session.
func (g *Git) commitAll(ctx context.Context, dir, message string) error {
	if _, err := g.run(ctx, dir, nil, "add", "--all", "--", "."); err != nil {
		return failed("staging the session's changes", err)
	}
	if _, err := g.run(ctx, dir, nil, "diff", "--cached", "--quiet"); err == nil {
		return nil // nothing to commit
	}
	if _, err := g.run(ctx, dir, g.identity(ctx, dir), "commit", "--quiet", "--no-verify", "-m", message); err != nil {
		return failed("committing the session's changes", err)
	}
	return nil
}

// identity is the committer to use in dir: git's configuration's, or
// claudectl's when it has none (a daemon's user often has no
// user.email).
func (g *Git) identity(ctx context.Context, dir string) []string {
	if out, err := g.run(ctx, dir, nil, "config", "user.email"); err == nil && trim(out) != "" {
		return nil
	}
	return []string{"GIT_AUTHOR_NAME=claudectl", "GIT_AUTHOR_EMAIL=claudectl@localhost",
		"GIT_COMMITTER_NAME=claudectl", "GIT_COMMITTER_EMAIL=claudectl@localhost"}
}

// checkedOutIn returns the working tree of repo in which ref is checked
// out, "" if none.
func (g *Git) checkedOutIn(ctx context.Context, repo, ref string) (string, error) {
	out, err := g.run(ctx, repo, nil, "worktree", "list", "--porcelain")
	if err != nil {
		return "", failed("listing the worktrees of "+repo, err)
	}
	var dir string
	for line := range strings.SplitSeq(string(out), "\n") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok {
			dir = p
		}
		if b, ok := strings.CutPrefix(line, "branch "); ok && b == ref {
			return dir, nil
		}
	}
	return "", nil
}

// statusFiles lists the paths of git status --porcelain.
func statusFiles(out []byte) []string {
	var files []string
	for line := range strings.SplitSeq(strings.TrimRight(string(out), "\n"), "\n") {
		if len(line) > 3 {
			files = append(files, line[3:])
		}
	}
	return files
}

// listFiles names a few files: "a.txt, b.go and 3 more".
func listFiles(files []string) string {
	switch n := len(files); {
	case n == 0:
		return "no file"
	case n == 1:
		return files[0]
	case n <= 3:
		return strings.Join(files[:n-1], ", ") + " and " + files[n-1]
	default:
		return strings.Join(files[:3], ", ") + fmt.Sprintf(" and %d more", n-3)
	}
}
