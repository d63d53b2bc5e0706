package daemon_test

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// rssKB returns the process's resident set size in KB (Linux), 0 when it
// cannot be read.
func rssKB() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// BenchmarkTenThousandSessions: 10,000 sessions, each with one turn, on
// one daemon (in-process stand-in CLIs). "suspend" is this daemon's
// defaults, scaled down: at most 100 CLIs at once (sessions.max_running)
// and idle ones suspended (sessions.idle_timeout, 200ms here); "keep" is
// the daemon before them: every session keeps its CLI. It reports the
// daemon's memory with all sessions created (heap and the process's RSS,
// which includes the test's own), the time to list them, and per b.N the
// time to resume one suspended session with a prompt until its turn ends.
//
//	go test -run '^$' -bench TenThousandSessions -benchtime 20x ./daemon/
func BenchmarkTenThousandSessions(b *testing.B) {
	for _, c := range []struct {
		name       string
		idle       time.Duration
		maxRunning int
	}{
		{"suspend", 200 * time.Millisecond, 100},
		{"keep", 0, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			const n = 10_000
			td := daemontest.Start(b, &daemontest.Options{Transport: &daemontest.InProcessCLI{},
				IdleTimeout: c.idle, MaxRunning: c.maxRunning})
			d := td.D
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			dir := b.TempDir()
			base := heapInUse()
			baseRSS := rssKB()
			ids := make([]string, n)
			var wg sync.WaitGroup
			work := make(chan int)
			for range 16 {
				wg.Go(func() {
					for i := range work {
						s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir}, "hello")
						if err != nil {
							b.Error(err)
							continue
						}
						ids[i] = s.ID
					}
				})
			}
			start := time.Now()
			for i := range n {
				work <- i
			}
			close(work)
			wg.Wait()
			created := time.Since(start)
			if b.Failed() {
				return
			}
			if c.idle > 0 { // let the last ones go idle and be suspended
				deadline := time.Now().Add(time.Minute)
				for d.Running() > 0 && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
			}
			heap, rss := heapInUse(), rssKB()
			start = time.Now()
			all, err := d.Sessions(ctx, store.SessionFilter{})
			list := time.Since(start)
			if err != nil || len(all) != n {
				b.Fatalf("listed %d sessions, %v", len(all), err)
			}
			live := d.Running()

			b.ResetTimer()
			for i := range b.N {
				id := ids[(i*7919)%n]
				s, err := d.Session(ctx, id)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Send(ctx, id, "again"); err != nil {
					b.Fatal(err)
				}
				for ev, err := range d.Subscribe(ctx, id, s.LastSeq) {
					if err != nil {
						b.Fatal(err)
					}
					if ev.Type == "result" {
						break
					}
				}
			}
			b.StopTimer()
			// After the loop: ResetTimer deletes metrics reported before it.
			b.ReportMetric(float64(created.Milliseconds()), "create-all-ms")
			b.ReportMetric(float64(live), "live-CLIs")
			b.ReportMetric(float64(int64(heap)-int64(base))/(1<<20), "heap-MB")
			b.ReportMetric(float64(rss-baseRSS)/1024, "rss-MB")
			b.ReportMetric(float64(list.Microseconds())/1000, "list-ms")
		})
	}
}
