package daemon_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// BenchmarkFirstToken times a prompt to its first streamed token (the
// first text_delta event, by the time the daemon stored it) with the real
// CLI against the scripted model, which answers at once: what is left is
// the daemon's and the CLI's own time. Run it with
//
//	go test -run '^$' -bench FirstToken -benchtime 10x ./daemon/
//
// Each iteration measures the four cases one after the other, so that
// before and after share the machine's load:
//
//   - new/cold: a session created (with its prompt) in a directory, no
//     spare CLIs (sessions.spare_clis 0): the CLI starts for it.
//   - new/spare: the same on a second daemon with sessions.spare_clis 1,
//     once the spare for that directory's options is ready (a session was
//     created there just before: the pool's case).
//   - resume/prompt: a prompt to a suspended session, which it resumes.
//   - resume/typing: the same after Typing, once the CLI it started has
//     answered its initialize request (a person who types for longer than
//     the CLI takes to start, about a second); typing_to_ready_ms is how
//     long that took.
//
// Each reports p50 and p99 in ms (with 10 iterations p99 is the worst).
func BenchmarkFirstToken(b *testing.B) {
	var asked atomic.Int64 // when the scripted model last got a request (unix ns)
	ok := claudetest.ResponderFunc(func(*claudetest.Request) claudetest.Turn {
		asked.Store(time.Now().UnixNano())
		return claudetest.Reply(claudetest.Text("A short answer from the scripted model."))
	})
	var spareAsk []time.Duration // prompt stored → the model asked, from a spare
	// CLI requests other than the turn's (none seen so far) would count too.
	cold := daemontest.Start(b, &daemontest.Options{Responder: ok, IdleTimeout: time.Hour})
	warm := daemontest.Start(b, &daemontest.Options{Responder: ok, IdleTimeout: time.Hour, Spares: 1, SpareLifetime: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute) // past daemontest's 90 s
	defer cancel()
	opts := func(dir string) *daemon.SessionOptions {
		return &daemon.SessionOptions{Cwd: dir, IncludePartialMessages: true}
	}
	coldDir, warmDir, resumeDir := b.TempDir(), b.TempDir(), b.TempDir()
	// The pool's case: a session was created there just now.
	if _, err := warm.D.Create(ctx, opts(warmDir), ""); err != nil {
		b.Fatal(err)
	}
	prompted, err := cold.D.Create(ctx, opts(resumeDir), "hello")
	if err != nil {
		b.Fatal(err)
	}
	typed, err := cold.D.Create(ctx, opts(resumeDir), "hello")
	if err != nil {
		b.Fatal(err)
	}
	var newCold, newSpare, resPrompt, resTyping, typingReady []time.Duration
	var coldSent, spareSent, typingSent []time.Duration // to the prompt stored
	b.ResetTimer()
	for range b.N {
		// new/cold
		t0 := time.Now()
		s, err := cold.D.Create(ctx, opts(coldDir), "hello")
		if err != nil {
			b.Fatal(err)
		}
		var sent time.Time
		newCold = append(newCold, firstToken(b, ctx, cold.D, s.ID, 0, &sent).Sub(t0))
		coldSent = append(coldSent, sent.Sub(t0))
		closeSession(b, ctx, cold.D, s.ID)

		// new/spare
		for ready, _ := warm.D.Spares(); ready == 0; ready, _ = warm.D.Spares() {
			sleepCtx(b, ctx, 10*time.Millisecond)
		}
		_, taken := warm.D.Spares()
		t0 = time.Now()
		s, err = warm.D.Create(ctx, opts(warmDir), "hello")
		if err != nil {
			b.Fatal(err)
		}
		sent = time.Time{}
		newSpare = append(newSpare, firstToken(b, ctx, warm.D, s.ID, 0, &sent).Sub(t0))
		spareSent = append(spareSent, sent.Sub(t0))
		spareAsk = append(spareAsk, time.Unix(0, asked.Load()).Sub(sent))
		if _, now := warm.D.Spares(); now != taken+1 {
			b.Fatal("the session did not take the spare")
		}
		closeSession(b, ctx, warm.D, s.ID)

		// resume/prompt
		last := suspend(b, ctx, cold.D, prompted.ID)
		t0 = time.Now()
		if err := cold.D.Send(ctx, prompted.ID, "again"); err != nil {
			b.Fatal(err)
		}
		sent = time.Time{}
		resPrompt = append(resPrompt, firstToken(b, ctx, cold.D, prompted.ID, last.LastSeq, &sent).Sub(t0))

		// resume/typing
		last = suspend(b, ctx, cold.D, typed.ID)
		t1 := time.Now()
		if resuming, err := cold.D.Typing(ctx, typed.ID); err != nil || !resuming {
			b.Fatalf("Typing: %v, %v", resuming, err)
		}
		if err := daemon.InitializedForTest(ctx, cold.D, typed.ID); err != nil {
			b.Fatal(err)
		}
		typingReady = append(typingReady, time.Since(t1))
		t0 = time.Now()
		if err := cold.D.Send(ctx, typed.ID, "again"); err != nil {
			b.Fatal(err)
		}
		sent = time.Time{}
		resTyping = append(resTyping, firstToken(b, ctx, cold.D, typed.ID, last.LastSeq, &sent).Sub(t0))
		typingSent = append(typingSent, sent.Sub(t0))
	}
	b.StopTimer()
	for name, ds := range map[string][]time.Duration{"new_cold": newCold, "new_spare": newSpare,
		"resume_prompt": resPrompt, "resume_typing": resTyping} {
		p50, p99 := percentiles(ds)
		b.ReportMetric(p50, name+"_p50_ms")
		b.ReportMetric(p99, name+"_p99_ms")
	}
	var p50 float64
	for name, ds := range map[string][]time.Duration{"new_cold": coldSent, "new_spare": spareSent, "resume_typing": typingSent} {
		p50, _ = percentiles(ds)
		b.ReportMetric(p50, name+"_sent_p50_ms")
	}
	p50, _ = percentiles(spareAsk)
	b.ReportMetric(p50, "new_spare_sent_to_model_p50_ms")
	p50, _ = percentiles(typingReady)
	b.ReportMetric(p50, "typing_to_ready_ms")
}

// firstToken returns when the first text_delta after seq was stored, and
// notes in sent when the prompt was (the daemon's part before the CLI's).
func firstToken(b *testing.B, ctx context.Context, d *daemon.Daemon, id string, after int64, sent *time.Time) time.Time {
	b.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for ev, err := range d.Subscribe(ctx, id, after) {
		if err != nil {
			b.Fatal(err)
		}
		if ev.Direction == store.ToCLI && ev.Type == "user" && sent.IsZero() {
			*sent = ev.Time
		}
		if _, ok := ev.Body.(*daemon.TextDelta); ok {
			return ev.Time
		}
	}
	b.Fatal("no text delta")
	return time.Time{}
}

// suspend waits for session id's turn to end, suspends it and returns it
// as stored then.
func suspend(b *testing.B, ctx context.Context, d *daemon.Daemon, id string) *store.Session {
	b.Helper()
	for {
		s, err := d.Session(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if s.Status == store.StatusSuspended {
			return s
		}
		// Again until it is: the idle status is stored a moment before
		// the actor counts the turn as over, and suspends nothing before.
		daemon.SuspendForTest(d, id, "suspended by the benchmark")
		sleepCtx(b, ctx, 20*time.Millisecond)
	}
}

func closeSession(b *testing.B, ctx context.Context, d *daemon.Daemon, id string) {
	b.Helper()
	waitFor(b, ctx, d, id, store.StatusIdle)
	if err := d.CloseSession(ctx, id, "bench"); err != nil {
		b.Fatal(err)
	}
}

func waitFor(b *testing.B, ctx context.Context, d *daemon.Daemon, id string, want store.SessionStatus) *store.Session {
	b.Helper()
	for {
		s, err := d.Session(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if s.Status == want {
			return s
		}
		sleepCtx(b, ctx, 5*time.Millisecond)
	}
}

func sleepCtx(b *testing.B, ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
		b.Fatal(ctx.Err())
	case <-time.After(d):
	}
}

// percentiles returns the p50 and p99 of ds in ms (nearest rank).
func percentiles(ds []time.Duration) (p50, p99 float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q*float64(len(s))+0.5) - 1
		return ms(int64(s[min(max(i, 0), len(s)-1)]))
	}
	return at(0.50), at(0.99)
}
