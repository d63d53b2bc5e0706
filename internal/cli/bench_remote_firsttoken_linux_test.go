package cli

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// BenchmarkRemoteFirstToken times a new session's prompt to its first
// streamed token (the first text_delta stored) on a registered worker
// ("claudectl worker", the built binary, the real CLI, the scripted
// model), each iteration both ways one after the other:
//
//   - remote_cold: on a worker without --spares: the CLI starts for it.
//   - remote_spare: on a worker started with --spares, once the spare for
//     the options is ready (a session like it was created just before).
//
// Run it with
//
//	go test -run '^$' -bench RemoteFirstToken -benchtime 10x ./internal/cli/
func BenchmarkRemoteFirstToken(b *testing.B) {
	bin := buildClaudectl(b)
	const token = "worker-s3cret"
	ok := claudetest.ResponderFunc(func(*claudetest.Request) claudetest.Turn {
		return claudetest.Reply(claudetest.Text("A short answer from the scripted model."))
	})
	dd := daemontest.Start(b, &daemontest.Options{WorkerToken: token, Responder: ok, IdleTimeout: time.Hour,
		Spares: 1, SpareLifetime: time.Hour})
	defer dd.Stop()
	apiURL, _ := dd.Serve()
	endpoint := "ws://" + strings.TrimPrefix(apiURL, "http://") + apiserver.WorkerPath
	startRegWorker(b, bin, endpoint, token, "--name", "cold", "--label", "pool=cold", "--capacity", "4")
	startRegWorker(b, bin, endpoint, token, "--name", "warm", "--label", "pool=warm", "--capacity", "4", "--spares")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir := b.TempDir()
	opts := func(pool string) *daemon.SessionOptions {
		return &daemon.SessionOptions{Cwd: dir, WorkerLabels: map[string]string{"pool": pool}, IncludePartialMessages: true}
	}
	create := func(pool, prompt string) *store.Session {
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			s, err := dd.D.Create(ctx, opts(pool), prompt)
			if err == nil {
				return s
			}
			if time.Now().After(deadline) {
				b.Fatalf("a session on worker pool %s: %v", pool, err)
			}
		}
	}
	create("warm", "") // the pool's case: a session like it was created just now
	var cold, spare []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		s := create("cold", "hello")
		cold = append(cold, remoteFirstToken(b, ctx, dd.D, s.ID).Sub(t0))
		closeRemote(b, ctx, dd.D, s.ID)

		for ready, _ := dd.D.Spares(); ready == 0; ready, _ = dd.D.Spares() {
			if ctx.Err() != nil {
				b.Fatal("no spare CLI became ready on the worker started with --spares")
			}
			time.Sleep(10 * time.Millisecond)
		}
		_, taken := dd.D.Spares()
		t0 = time.Now()
		s = create("warm", "hello")
		spare = append(spare, remoteFirstToken(b, ctx, dd.D, s.ID).Sub(t0))
		if _, now := dd.D.Spares(); now != taken+1 {
			b.Fatal("the session did not take the spare")
		}
		closeRemote(b, ctx, dd.D, s.ID)
	}
	b.StopTimer()
	for name, ds := range map[string][]time.Duration{"remote_cold": cold, "remote_spare": spare} {
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, name+"_p50_ms")
		b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, name+"_max_ms")
	}
}

// remoteFirstToken returns when session id's first text_delta was stored.
func remoteFirstToken(b *testing.B, ctx context.Context, d *daemon.Daemon, id string) time.Time {
	b.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for ev, err := range d.Subscribe(ctx, id, 0) {
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := ev.Body.(*daemon.TextDelta); ok {
			return ev.Time
		}
	}
	b.Fatal("no text delta")
	return time.Time{}
}

// closeRemote closes session id once its turn is over.
func closeRemote(b *testing.B, ctx context.Context, d *daemon.Daemon, id string) {
	b.Helper()
	for {
		s, err := d.Session(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if s.Status == store.StatusIdle {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := d.CloseSession(ctx, id, "bench"); err != nil {
		b.Fatal(err)
	}
}
