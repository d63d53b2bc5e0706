package claude

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// procAttr puts the CLI in its own process group and has the kernel kill it
// if this process dies (PR_SET_PDEATHSIG).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// growPipe asks for a 1 MiB pipe buffer (the default is 64 KiB); it is only
// an optimisation, so a refusal is ignored.
func growPipe(f *os.File) {
	if sc, err := f.SyscallConn(); err == nil {
		sc.Control(func(fd uintptr) {
			unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20)
		})
	}
}

// startCmd starts cmd under scheduling s, in tree's cgroup v1 limits if
// it has any. A child inherits the policy and the cgroup v1 memberships of
// the thread that forks it, so the goroutine is locked to its thread, the
// thread switched to SCHED_BATCH (for SchedulingBatch) and moved into the
// limits' cgroups for the fork, and back after it: the CLI is born inside
// its limits, with no moment outside them in which to fork. The thread
// must outlive the child (PR_SET_PDEATHSIG counts the forking thread as
// the parent), so it is unlocked, never left to exit. Any other policy of
// ours (real-time, idle) is someone's choice: kept.
func startCmd(cmd *exec.Cmd, s Scheduling, tree *procTree) error {
	v1 := tree.lim != nil && len(tree.lim.v1) > 0
	if s != SchedulingBatch && !v1 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if v1 {
		leave, err := tree.lim.enterThread()
		if err != nil {
			return err
		}
		defer leave()
	}
	if s != SchedulingBatch {
		return cmd.Start()
	}
	old, err := unix.SchedGetAttr(0, 0)
	if err != nil || old.Policy != unix.SCHED_NORMAL {
		return cmd.Start()
	}
	batch := *old // its nice value too
	batch.Policy = unix.SCHED_BATCH
	if unix.SchedSetAttr(0, &batch, 0) != nil {
		return cmd.Start()
	}
	err = cmd.Start()
	// Back to SCHED_OTHER at the same nice value: always allowed. Were it
	// refused, the thread would run this process's goroutines as batch,
	// slower to get the CPU back, never wrong.
	unix.SchedSetAttr(0, old, 0)
	return err
}
