//go:build !linux

package permission_test

import "time"

// threadCPU returns the wall time since start: without a thread's CPU
// time to read, a busy machine stretches what decideWithin measures.
func threadCPU(start time.Time) time.Duration { return time.Since(start) }
