//go:build unix && !linux

package claude

import (
	"os"
	"syscall"
)

// procAttr puts the CLI in its own process group.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func growPipe(*os.File) {}
