//go:build unix && !linux

package claude

import (
	"os"
	"os/exec"
	"syscall"
)

// procAttr puts the CLI in its own process group.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func growPipe(*os.File) {}

// startCmd starts cmd: scheduling policies are Linux's alone.
func startCmd(cmd *exec.Cmd, _ Scheduling, _ *procTree) error { return cmd.Start() }
