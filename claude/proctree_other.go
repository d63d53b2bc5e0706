//go:build unix && !linux

package claude

import "syscall"

// forceTreeMech, when set (by tests), is the only mechanism tried; here
// there is only the process group.
var forceTreeMech string

const mechGroup = "process-group"

// procTree is a no-op outside Linux: only the CLI's process group is
// killed (see ProcessTransport).
type procTree struct{ mech string }

func newProcTree(bool) *procTree                  { return &procTree{mech: mechGroup} }
func (t *procTree) environ(env []string) []string { return env }
func (t *procTree) apply(*syscall.SysProcAttr)    {}
func (t *procTree) startFailed() bool             { return false }
func (t *procTree) started(int)                   {}
func (t *procTree) abandon()                      {}
func (t *procTree) kill()                         {}

// KillLeftovers does nothing outside Linux (see the Linux version).
func KillLeftovers() {}
