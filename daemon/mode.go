package daemon

import (
	"context"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/store"
)

// The permission mode a session stores and shows is the one its CLI says
// is in effect, which need not be the one a client asked for: the answer
// to set_permission_mode names it (since 2.1.332 the CLI documents that
// it can differ), and the CLI reports the mode again in each system/init
// and in the system/status line that follows a change, including the
// changes it makes by itself (a plan approved, an "always" that switches
// modes).

// modeName is how a mode is compared: "" is the CLI's default mode.
func modeName(mode string) string {
	if mode == "" {
		return string(claude.PermissionDefault)
	}
	return mode
}

// setMode asks the CLI to switch to mode and records the mode it says is
// now in effect (mode itself when its answer names none: the best guess,
// which the next system/init corrects), which it returns. A mode the CLI
// refuses is its error, and nothing is recorded.
func (a *actor) setMode(ctx context.Context, mode string) (string, error) {
	a.modeMu.Lock()
	a.switching++
	a.modeMu.Unlock()
	defer func() {
		a.modeMu.Lock()
		a.switching--
		a.modeMu.Unlock()
	}()
	var inEffect claude.PermissionMode
	err := a.call(ctx, func(ctx context.Context, s *claude.Session) error {
		var err error
		inEffect, err = s.SetPermissionMode(ctx, claude.PermissionMode(mode))
		return err
	})
	if err != nil {
		return "", err
	}
	got := string(inEffect)
	if got == "" {
		got = mode
	}
	return got, a.noteMode(ctx, got, mode, false)
}

// noteMode records mode, which the CLI says is in effect, when it is not
// the mode recorded: the session's stored mode and a permission_mode
// event, requested being the mode a client asked for ("" when the CLI
// changed it by itself). The reader's reports (byCLI, not waited for)
// are left to a switch under way, which records its own answer; an empty
// mode (a line that names none) is no report.
func (a *actor) noteMode(ctx context.Context, mode, requested string, byCLI bool) error {
	if mode == "" {
		return nil
	}
	a.modeMu.Lock()
	if byCLI && a.switching > 0 || modeName(mode) == a.mode {
		a.modeMu.Unlock()
		return nil
	}
	a.mode = modeName(mode)
	a.modeMu.Unlock()
	a.d.log.Info("permission mode in effect", "session", a.id, "mode", mode, "requested", requested)
	ev, err := a.daemonEvent(&PermissionModeChange{Mode: mode, Requested: requested})
	if err == nil {
		err = a.record(ctx, ev, &store.SessionUpdate{PermissionMode: &mode}, !byCLI)
	}
	if err != nil {
		a.d.log.Error("recording the permission mode", "session", a.id, "mode", mode, "err", err)
	}
	return err
}
