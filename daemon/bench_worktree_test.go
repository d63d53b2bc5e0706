package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// BenchmarkWorktreeStart measures what a worktree of its own adds to a
// session's start on a repository of 10,000 files: each iteration starts
// a plain session and a worktree: auto one in the same repository, in
// turn (so that the machine's load weighs on both alike), each until its
// CLI runs (Create), and closes them; the worktree is discarded, and the
// repository's spare worktree made again, untimed. It reports both starts
// and the difference (the figure of issue 41: at most 300 ms), and the
// first worktree's start, which had no spare to take.
func BenchmarkWorktreeStart(b *testing.B) {
	repo, git := gitRepo(b)
	for d := range 100 {
		dir := filepath.Join(repo, fmt.Sprintf("d%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.go", f)), fmt.Appendf(nil, "package d%03d\n\n// file %d\n", d, f), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	git("add", ".")
	git("commit", "--quiet", "-m", "10,000 files")
	td := daemontest.Start(b, nil)
	d, ctx := td.D, td.Ctx
	start := func(worktree string) time.Duration {
		t0 := time.Now()
		s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: repo, Worktree: worktree}, "")
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(t0)
		b.StopTimer()
		defer b.StartTimer()
		if err := d.CloseSession(ctx, s.ID, "bench"); err != nil {
			b.Fatal(err)
		}
		if worktree != "" {
			if err := d.DiscardWorktree(ctx, s.ID, "bench"); err != nil {
				b.Fatal(err)
			}
			daemon.WaitSparesForTest(d)
		}
		return took
	}
	first := start("auto") // no spare yet: every file checked out
	var plain, wt time.Duration
	b.ResetTimer()
	for range b.N {
		plain += start("")
		wt += start("auto")
	}
	ms := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	b.ReportMetric(ms(plain, b.N), "plain-ms/start")
	b.ReportMetric(ms(wt, b.N), "worktree-ms/start")
	b.ReportMetric(ms(wt-plain, b.N), "extra-ms/start")
	b.ReportMetric(ms(first, 1), "first-worktree-ms")
}
