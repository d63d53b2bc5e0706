package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/worktree"
	"github.com/claudectl/claudectl/store"
)

// Sessions in a git worktree of their own (SessionOptions.worktree): the
// daemon makes the worktree, on a branch of the session's, under
// Options.WorktreeRoot before the session is stored, and runs its CLI
// there; the session's cwd stays the directory the client named (its
// project, for rules and budgets). Resume goes on in the same worktree, a
// fork gets its own, made from its source's state. Closing a session
// keeps both until MergeChanges or DiscardWorktree. Git runs in package
// internal/worktree, which words its errors.

// Worktree option values.
const worktreeAuto = "auto" // a new branch claudectl/<short session id>

// newSessionID is a session id made by the daemon rather than the store:
// a worktree's directory and branch are named after it before the session
// is stored. The store's own form (crypto/rand.Text).
func newSessionID() string { return rand.Text() }

// shortID is the start of a session id that names its branch.
func shortID(id string) string { return strings.ToLower(id[:min(len(id), 8)]) }

// worktreeBranch is the branch the worktree option asks for.
func worktreeBranch(option, id string) string {
	if option == worktreeAuto {
		return worktree.Prefix + shortID(id)
	}
	return option
}

// makeWorktree makes session id's worktree as o asks; the zero Worktree
// when it asks for none. Errors name the option.
func (d *Daemon) makeWorktree(ctx context.Context, id string, o *SessionOptions) (store.Worktree, error) {
	opt := o.GetWorktree()
	if opt == "" {
		return store.Worktree{}, nil
	}
	if d.worktreeRoot == "" {
		return store.Worktree{}, &InvalidArgumentError{Field: "options.worktree", Value: opt,
			Reason: "this daemon makes no worktrees (it was started without a worktree root)"}
	}
	if (o.GetWorker() != "" && o.GetWorker() != WorkerLocal) || len(o.GetWorkerLabels()) > 0 {
		return store.Worktree{}, &InvalidArgumentError{Field: "options.worktree", Value: opt,
			Reason: "a worktree is made on the daemon's machine, for a session whose CLI runs there: leave worker empty or \"local\""}
	}
	r, err := d.git.Find(ctx, o.GetCwd())
	if err != nil {
		return store.Worktree{}, worktreeOptionError(opt, o.GetCwd(), err)
	}
	spare := d.spares.take(r.Top)
	wt, _, err := d.git.Add(ctx, r, filepath.Join(d.worktreeRoot, id), worktreeBranch(opt, id), spare)
	d.spares.refill(d, r, spare)
	if err != nil {
		return store.Worktree{}, worktreeOptionError(opt, o.GetCwd(), err)
	}
	d.log.Info("worktree made", "session", id, "path", wt.Path, "branch", wt.Branch, "repo", wt.Repo,
		"base", wt.BaseBranch, "commit", wt.BaseCommit)
	return wt, nil
}

// worktreeOptionError says which option a worktree's failure is about.
func worktreeOptionError(opt, cwd string, err error) error {
	var we *worktree.Error
	if !errors.As(err, &we) {
		return err
	}
	switch {
	case errors.Is(err, worktree.ErrNotARepo), errors.Is(err, worktree.ErrNoCommit):
		return &InvalidArgumentError{Field: "options.cwd", Value: cwd, Reason: "worktree " + opt + ": " + we.Msg}
	case errors.Is(err, worktree.ErrBadBranch), errors.Is(err, worktree.ErrBranchExists):
		return &InvalidArgumentError{Field: "options.worktree", Value: opt, Reason: we.Msg}
	}
	return err
}

// spares keeps one spare worktree (worktree.Git.MakeSpare) of each
// repository that had a worktree session, made in the background after
// each worktree a session takes, so that the next session of that
// repository starts without writing every file of its checkout (a
// repository of 10,000 files took seconds on a busy machine). A spare is
// WORKTREE_ROOT/.spares/<hash of the repository's path>; it outlives the
// daemon and is taken by its next run.
type spares struct {
	root string // WORKTREE_ROOT/.spares

	mu     sync.Mutex
	busy   map[string]bool // spare directories being taken or made
	closed bool
	wg     sync.WaitGroup // refills under way
}

// dir is the spare directory of the repository at top.
func (sp *spares) dir(top string) string {
	h := sha256.Sum256([]byte(top))
	return filepath.Join(sp.root, hex.EncodeToString(h[:8]))
}

// take reserves the spare of the repository at top for an Add, which
// refill then replaces; "" when there is no room for spares or another
// Add or a refill holds it (that Add checks its files out itself).
func (sp *spares) take(top string) string {
	if sp.root == "" {
		return ""
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	dir := sp.dir(top)
	if sp.busy[dir] || sp.closed {
		return ""
	}
	sp.busy[dir] = true
	return dir
}

// refill makes a new spare at dir, reserved by take, in the background;
// nothing when dir is "".
func (sp *spares) refill(d *Daemon, r *worktree.Repo, dir string) {
	if dir == "" {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		delete(sp.busy, dir)
		return
	}
	sp.wg.Go(func() {
		defer func() {
			sp.mu.Lock()
			delete(sp.busy, dir)
			sp.mu.Unlock()
		}()
		if err := d.git.MakeSpare(d.ctx, r, dir); err != nil && d.ctx.Err() == nil {
			d.log.Warn("making a spare worktree", "repo", r.Top, "path", dir, "err", err)
		}
	})
}

// close waits for the refills under way (the daemon's context, ended
// first, stops their git) and takes no more.
func (sp *spares) close() {
	sp.mu.Lock()
	sp.closed = true
	sp.mu.Unlock()
	sp.wg.Wait()
}

// forkWorktree makes the worktree of session id, a fork of src: its
// source's state, on a branch of its own.
func (d *Daemon) forkWorktree(ctx context.Context, id string, src *store.Session) (store.Worktree, error) {
	if src.Worktree.Path == "" {
		return store.Worktree{}, nil
	}
	if src.Worktree.Discarded {
		return store.Worktree{}, &StateError{SessionID: src.ID, Status: src.Status,
			Msg: "cannot fork it: its worktree was discarded"}
	}
	wt, err := d.git.Fork(ctx, src.Worktree, filepath.Join(d.worktreeRoot, id), worktreeBranch(worktreeAuto, id))
	if err != nil {
		return store.Worktree{}, err
	}
	d.log.Info("worktree made", "session", id, "path", wt.Path, "branch", wt.Branch, "fork_of", src.ID)
	return wt, nil
}

// removeWorktree undoes makeWorktree when the session could not be stored.
func (d *Daemon) removeWorktree(wt store.Worktree) {
	if wt.Path == "" {
		return
	}
	if err := d.git.Remove(context.WithoutCancel(d.ctx), wt); err != nil {
		d.log.Error("removing the worktree of a session not stored", "path", wt.Path, "err", err)
	}
}

// cliDir is the directory session s's CLI runs in: for a session in a
// worktree, the worktree's counterpart of its cwd; else its cwd.
func cliDir(s *store.Session, cwd string) string {
	wt := s.Worktree
	if wt.Path == "" {
		return cwd
	}
	real := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	rel, err := filepath.Rel(real(wt.Repo), real(cwd))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return wt.Path
	}
	return filepath.Join(wt.Path, rel)
}

// worktreeOf returns session id with its worktree, or why it has none to
// show or change.
func (d *Daemon) worktreeOf(ctx context.Context, id string) (*store.Session, error) {
	s, err := d.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	switch {
	case s.Worktree.Path == "":
		return nil, &StateError{SessionID: id, Status: s.Status,
			Msg: "it has no worktree of its own (it was created without the worktree option): its changes are in " + s.Cwd}
	case s.Worktree.Discarded:
		return nil, &StateError{SessionID: id, Status: s.Status, Msg: "its worktree was discarded"}
	}
	return s, nil
}

// Changes returns what session id changed in its worktree against the
// commit it started from, committed or not, and the session.
func (d *Daemon) Changes(ctx context.Context, id string) (*worktree.Changes, *store.Session, error) {
	s, err := d.worktreeOf(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	c, err := d.git.Changes(ctx, s.Worktree)
	return c, s, err
}

// MergeChanges brings session id's changes into the branch it started
// from; by names the client. Refused while a turn runs (its files are
// being written), on a conflict and while that branch's working tree has
// changes of its own (worktree.ErrConflict, worktree.ErrDirtyBase): then
// nothing changed.
func (d *Daemon) MergeChanges(ctx context.Context, id, by string) (*worktree.Merged, error) {
	s, err := d.worktreeOf(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.Status == store.StatusRunning || s.Status == store.StatusWaiting || s.Status == store.StatusStarting {
		return nil, &StateError{SessionID: id, Status: s.Status, Msg: "its turn is still writing its files: merge once it is idle"}
	}
	by = clientName(by)
	msg := fmt.Sprintf("claudectl: merge session %s (%s)\n\nMerged by %s.", id, s.Worktree.Branch, by)
	m, err := d.git.Merge(ctx, s.Worktree, msg)
	if err != nil {
		return nil, err
	}
	d.log.Info("worktree merged", "session", id, "branch", s.Worktree.Branch, "into", m.BaseBranch, "commit", m.Commit,
		"files", len(m.Files), "by", by)
	return m, nil
}

// DiscardWorktree removes session id's worktree and its branch, changes
// and all; by names the client. The session must have no CLI.
func (d *Daemon) DiscardWorktree(ctx context.Context, id, by string) error {
	s, err := d.worktreeOf(ctx, id)
	if err != nil {
		return err
	}
	d.mu.Lock()
	a := d.actors[id]
	d.mu.Unlock()
	if a != nil || d.runsElsewhere(s) {
		return &StateError{SessionID: id, Status: s.Status, Msg: "its CLI runs in the worktree: close the session first (claudectl close " + id + ")"}
	}
	if err := d.git.Remove(ctx, s.Worktree); err != nil {
		return err
	}
	wt := s.Worktree
	wt.Discarded = true
	if _, err := d.db.UpdateSession(ctx, id, store.SessionUpdate{Worktree: &wt}); err != nil {
		return err
	}
	d.feed.changed(id)
	d.log.Info("worktree discarded", "session", id, "path", wt.Path, "branch", wt.Branch, "by", clientName(by))
	return nil
}

// inProject returns req as the rules see it. A session in a worktree
// names its files in the worktree; its project's path rules
// (Edit(./src/**)) are written for the repository: the paths its tools
// name inside the worktree are given as the repository's counterparts,
// for the rules only (the CLI's request is left as it is).
func inProject(req *claude.PermissionRequest, wt store.Worktree) *claude.PermissionRequest {
	if wt.Path == "" || !json.Valid(req.Input) {
		return req
	}
	var in map[string]any
	if json.Unmarshal(req.Input, &in) != nil {
		return req
	}
	changed := false
	for _, key := range []string{"file_path", "notebook_path", "path"} {
		p, ok := in[key].(string)
		if !ok || !filepath.IsAbs(p) {
			continue
		}
		rel, err := filepath.Rel(wt.Path, filepath.Clean(p))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		in[key], changed = filepath.Join(wt.Repo, rel), true
	}
	if !changed {
		return req
	}
	b, err := json.Marshal(in)
	if err != nil {
		return req
	}
	r := *req
	r.Input = b
	return &r
}
