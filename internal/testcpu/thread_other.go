//go:build !linux

package testcpu

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }
