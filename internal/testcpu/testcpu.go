// Package testcpu measures the CPU time a piece of work takes, for tests
// that bound how costly something is: wall time is what a busy machine
// stretches (a 40 ms decision took over a second under stress-ng), while
// the CPU time the work's own thread spends is not.
package testcpu

import (
	"runtime"
	"time"
)

// Of runs f on the calling goroutine, locked to its thread, and returns
// the CPU time (user and system) that thread spent in it. Where a
// thread's CPU time cannot be read (not Linux), it returns f's wall time.
// Work f hands to other goroutines is not counted.
func Of(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	before, ok := threadCPU()
	f()
	after, _ := threadCPU()
	if !ok {
		return time.Since(start)
	}
	return after - before
}
