//go:build unix

package daemon_test

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// BenchmarkDaemonFanoutCost measures what a live subscriber costs the
// machine per event it gets: the process's CPU time (user and system,
// getrusage) over 3 s while session A streams a line every 10 ms to 2,000
// subscribers, less the CPU time of the same daemon streaming the same
// turn without them, divided by the events delivered (cpu_ns/delivery).
// It is the fan-out's cost alone: BenchmarkDaemonFanout's turn times swing
// from run to run by more than this cost changes them, and this figure
// varies by about a fifth between runs.
func BenchmarkDaemonFanoutCost(b *testing.B) {
	const subs, window = 2000, 3 * time.Second
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var perDelivery, perSecond float64
	for range b.N {
		// 800 lines at 10 ms: the turn outlasts both measurements.
		cli := &pacedCLI{inner: &daemontest.InProcessCLI{Script: func(int) [][]byte { return benchTurn(800) }},
			interval: 10 * time.Millisecond}
		td := daemontest.Start(b, &daemontest.Options{Transport: cli})
		d, ctx := td.D, context.Background()
		a, err := d.Create(ctx, &daemon.SessionOptions{Cwd: b.TempDir(), IncludePartialMessages: true}, "")
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Send(ctx, a.ID, "stream"); err != nil {
			b.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		c0 := cpu()
		time.Sleep(window)
		alone := cpu() - c0 // the daemon streaming A, nobody watching

		s, err := d.Session(ctx, a.ID)
		if err != nil {
			b.Fatal(err)
		}
		var got atomic.Int64
		var wg sync.WaitGroup
		sctx, cancel := context.WithCancel(ctx)
		watchers(sctx, d, a.ID, s.LastSeq, subs, &wg, &got)
		time.Sleep(100 * time.Millisecond) // the attaching's garbage collected
		g0, c0 := got.Load(), cpu()
		time.Sleep(window)
		delivered, watched := got.Load()-g0, cpu()-c0
		cancel()
		wg.Wait()
		if delivered == 0 {
			b.Fatal("no event reached the subscribers")
		}
		if s, err := d.Session(ctx, a.ID); err != nil {
			b.Fatal(err)
		} else if s.Status != "running" {
			b.Fatalf("A's turn ended before the measurements did (status %s)", s.Status)
		}
		perDelivery += float64((watched - alone).Nanoseconds()) / float64(delivered)
		perSecond += float64(delivered) / window.Seconds()
		for { // the turn's end, for the daemon to close
			s, err := d.Session(ctx, a.ID)
			if err != nil {
				b.Fatal(err)
			}
			if s.Status == "idle" {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	b.ReportMetric(perDelivery/float64(b.N), "cpu_ns/delivery")
	b.ReportMetric(perSecond/float64(b.N), "deliveries/s")
}
