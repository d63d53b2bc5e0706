package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// The commands of a session run in a git worktree of its own (claudectl
// run --server --worktree): what it changed (diff), its changes brought
// into the branch it started from (merge), its worktree and branch
// removed (discard).

// DiffCommand is "claudectl diff SESSION_ID".
type DiffCommand struct{ Env *Env }

// Name implements Command.
func (*DiffCommand) Name() string { return "diff" }

// Summary implements Command.
func (*DiffCommand) Summary() string { return "show what a worktree session changed" }

const diffUsage = `Usage: claudectl diff [flags] SESSION_ID

Shows what a daemon session run in a git worktree of its own (run
--worktree) changed against the commit it started from, committed on its
branch or not, new files included: the files (status, lines added and
removed), then the unified diff. SESSION_ID may be a unique start of the
id. claudectl merge brings the changes into the branch the session
started from; claudectl discard throws them away.

  --stat   the files only
  --json   the files and the diff as JSON
` + clientFlagsHelp

// Run implements Command.
func (c *DiffCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var stat, asJSON bool
	fs := newFlagSet("diff")
	fs.BoolVar(&stat, "stat", false, "list the changed files only")
	fs.BoolVar(&asJSON, "json", false, "print the changes as JSON")
	cf.register(fs)
	pos, help, err := parseClient(env, diffUsage, fs, args)
	if help || err != nil {
		return err
	}
	switch {
	case len(pos) == 0 || strings.TrimSpace(pos[0]) == "":
		return usagef("missing SESSION_ID: diff needs the id of a daemon session (see claudectl sessions)")
	case len(pos) > 1:
		return usagef("unexpected argument %q: diff takes one SESSION_ID", pos[1])
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	id, err := resolveSession(ctx, dc, pos[0])
	if err != nil {
		return err
	}
	res, err := dc.sessions.GetChanges(ctx, connect.NewRequest(&v1.GetChangesRequest{SessionId: id}))
	if err != nil {
		return worktreeError(dc, err, "reading the changes of session "+id, id)
	}
	ch := res.Msg
	if asJSON {
		return writeJSON(env.Stdout, ch)
	}
	printChanges(env.Stdout, id, ch, !stat)
	return nil
}

// printChanges writes a session's changes: where and against what, the
// files, and the diff when withDiff.
func printChanges(w io.Writer, id string, ch *v1.GetChangesResponse, withDiff bool) {
	wt := ch.GetWorktree()
	base := wt.GetBaseBranch()
	if base == "" {
		base = "detached HEAD"
	}
	fmt.Fprintf(w, "Session %s: branch %s in %s, against %s at %.12s\n", id, wt.GetBranch(), wt.GetPath(), base, wt.GetBaseCommit())
	if len(ch.Files) == 0 {
		fmt.Fprintln(w, "No changes.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var add, del int64
	for _, f := range ch.Files {
		lines := fmt.Sprintf("+%d -%d", f.Additions, f.Deletions)
		if f.Binary {
			lines = "binary"
		}
		name := f.Path
		if f.OldPath != "" {
			name = f.OldPath + " → " + f.Path
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.Status, lines, name)
		add, del = add+f.Additions, del+f.Deletions
	}
	tw.Flush()
	fmt.Fprintf(w, "%d files changed, %d insertions(+), %d deletions(-)\n", len(ch.Files), add, del)
	if withDiff {
		fmt.Fprintln(w)
		io.WriteString(w, ch.Diff)
		if ch.Truncated {
			fmt.Fprintln(w, "… (the diff was cut at 4 MiB: claudectl diff --json has the same; git diff in the worktree has it all)")
		}
	}
}

// worktreeError says why a worktree call failed, in the daemon's words.
func worktreeError(dc *daemonClient, err error, what, id string) error {
	if connect.CodeOf(err) == connect.CodeNotFound {
		return noSession(id)
	}
	return dc.explain(err, what)
}

// MergeCommand is "claudectl merge SESSION_ID".
type MergeCommand struct{ Env *Env }

// Name implements Command.
func (*MergeCommand) Name() string { return "merge" }

// Summary implements Command.
func (*MergeCommand) Summary() string {
	return "bring a worktree session's changes into the branch it started from"
}

const mergeUsage = `Usage: claudectl merge [flags] SESSION_ID

Brings what a daemon session run in a git worktree of its own changed into
the branch it started from: its uncommitted changes are committed on its
branch, then the branch is merged (a merge commit naming the session).
Nothing changes, and merge says why, when the two conflict (the files) or
while that branch is checked out with uncommitted changes of its own.
The worktree and its branch stay (claudectl discard removes them).
` + clientFlagsHelp

// Run implements Command.
func (c *MergeCommand) Run(ctx context.Context, args []string) error {
	return runSessionCall(ctx, c.Env, "merge", mergeUsage, args, func(ctx context.Context, dc *daemonClient, id string) (string, error) {
		res, err := dc.sessions.MergeChanges(ctx, connect.NewRequest(&v1.MergeChangesRequest{SessionId: id, Client: clientName("merge")}))
		if err != nil {
			return "", err
		}
		m := res.Msg
		return fmt.Sprintf("Merged session %s into %s (commit %.12s): %s.", id, m.BaseBranch, m.Commit, countFiles(m.Files)), nil
	})
}

// countFiles names the files merged: "2 files: a.txt, b.go".
func countFiles(files []string) string {
	switch n := len(files); {
	case n == 0:
		return "no file changed"
	case n == 1:
		return "1 file: " + files[0]
	case n <= 5:
		return fmt.Sprintf("%d files: %s", n, strings.Join(files, ", "))
	default:
		return fmt.Sprintf("%d files: %s, …", n, strings.Join(files[:5], ", "))
	}
}

// DiscardCommand is "claudectl discard SESSION_ID".
type DiscardCommand struct{ Env *Env }

// Name implements Command.
func (*DiscardCommand) Name() string { return "discard" }

// Summary implements Command.
func (*DiscardCommand) Summary() string { return "remove a worktree session's worktree and branch" }

const discardUsage = `Usage: claudectl discard [flags] SESSION_ID

Removes the git worktree and the branch of a daemon session run in a
worktree of its own, with every change in them that was not merged. The
session must have no CLI (claudectl close first); it stays in the list,
with its history, and can no longer be resumed or forked.
` + clientFlagsHelp

// Run implements Command.
func (c *DiscardCommand) Run(ctx context.Context, args []string) error {
	return runSessionCall(ctx, c.Env, "discard", discardUsage, args, func(ctx context.Context, dc *daemonClient, id string) (string, error) {
		s, err := dc.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
		if err != nil {
			return "", err
		}
		if _, err := dc.sessions.DiscardWorktree(ctx, connect.NewRequest(&v1.DiscardWorktreeRequest{SessionId: id, Client: clientName("discard")})); err != nil {
			return "", err
		}
		wt := s.Msg.Session.GetWorktree()
		return fmt.Sprintf("Discarded session %s's worktree %s and its branch %s.", id, wt.GetPath(), wt.GetBranch()), nil
	})
}
