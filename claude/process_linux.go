package claude

import (
	"os"
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
