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

// termWidth returns f's terminal width in columns, 0 if unknown.
func termWidth(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	var ws struct{ row, col, x, y uint16 }
	var errno syscall.Errno
	err = rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws)))
	})
	if err != nil || errno != 0 {
		return 0
	}
	return int(ws.col)
}
