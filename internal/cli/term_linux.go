package cli

import (
	"os"
	"syscall"
	"unsafe"
)

// hasTermAttrs reports whether f has terminal attributes (TCGETS succeeds):
// true for a terminal, false for other character devices such as /dev/null.
func hasTermAttrs(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	var errno syscall.Errno
	err = rc.Control(func(fd uintptr) {
		var t syscall.Termios
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	})
	return err == nil && errno == 0
}
