package claude

import "syscall"

// procAttr puts the CLI in its own process group and has the kernel kill it
// if this process dies (PR_SET_PDEATHSIG).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
