package testcpu

import (
	"crypto/sha256"
	"runtime"
	"testing"
	"time"
)

// TestOf: waiting costs no CPU; work costs some, and never more than the
// wall time it took (one thread).
func TestOf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a thread's CPU time is read on Linux only")
	}
	if d := Of(func() { time.Sleep(300 * time.Millisecond) }); d > 100*time.Millisecond {
		t.Errorf("a 300 ms sleep took %v of CPU", d)
	}
	start := time.Now()
	d := Of(func() {
		b := make([]byte, 1<<20)
		for range 200 {
			sum := sha256.Sum256(b)
			b[0] = sum[0]
		}
	})
	wall := time.Since(start)
	if d <= 0 || d > wall+10*time.Millisecond { // the kernel counts in ticks
		t.Errorf("hashing 200 MiB: %v of CPU in %v", d, wall)
	}
	t.Logf("hashing 200 MiB: %v of CPU in %v", d, wall)
}
