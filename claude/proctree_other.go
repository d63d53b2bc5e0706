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

func newProcTree(_ bool, limits ResourceLimits) (*procTree, error) {
	if !limits.IsZero() {
		return nil, &LimitsError{Limits: limits, Reason: "resource limits need Linux cgroups"}
	}
	return &procTree{mech: mechGroup}, nil
}
func (t *procTree) environ(env []string) []string { return env }
func (t *procTree) apply(*syscall.SysProcAttr)    {}
func (t *procTree) startFailed() bool             { return false }
func (t *procTree) started(int) error             { return nil }
func (t *procTree) abandon()                      {}
func (t *procTree) kill()                         {}
func (t *procTree) memoryKills() int64            { return 0 }
func (t *procTree) killedByMemory() (int64, bool) { return 0, false }

// CheckLimits reports that resource limits cannot be applied outside
// Linux (see the Linux version).
func CheckLimits(l ResourceLimits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	_, err := newProcTree(false, l)
	return err
}

// KillLeftovers does nothing outside Linux (see the Linux version).
func KillLeftovers() {}
