package claude_test

import (
	"syscall"
	"unsafe"
)

// stdinWaiting returns how many bytes wait unread in the stand-in's stdin
// (a pipe).
func stdinWaiting() int {
	var n int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
		return 0
	}
	return int(n)
}
