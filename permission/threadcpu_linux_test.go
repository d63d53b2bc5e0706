package permission_test

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling thread has used (user and
// system): what a goroutine locked to it spent, however busy the machine.
func threadCPU(time.Time) time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
