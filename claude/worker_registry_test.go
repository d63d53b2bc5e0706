package claude_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/linkcut"
	"github.com/claudectl/claudectl/internal/relay"
)

// hostHarness runs registered workers (relay.Host) in-process, each CLI a
// fakeCLI printing n lines.
type hostHarness struct {
	t      *testing.T
	l      *claude.WorkerListener
	logger *slog.Logger
	wg     sync.WaitGroup
}

func newHostHarness(t *testing.T) *hostHarness {
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l := &claude.WorkerListener{Token: "tok", Logger: logger}
	claude.SetWorkerPing(l, 50*time.Millisecond, 500*time.Millisecond)
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	h := &hostHarness{t: t, l: l, logger: logger}
	t.Cleanup(func() {
		l.Close()
		h.wg.Wait()
	})
	return h
}

// run starts a host on url (the listener's by default) until the test
// ends or cancel is called; its Run error comes on the channel.
func (h *hostHarness) run(url string, reg relay.Registration, lines int) (cancel context.CancelFunc, errc chan error) {
	if url == "" {
		url = h.l.URL()
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	host := &relay.Host{URLs: []string{url}, Token: "tok", Registration: reg, Logger: h.logger,
		PingInterval: 50 * time.Millisecond, PingTimeout: 500 * time.Millisecond, StopTimeout: 2 * time.Second,
		Start: func(ctx context.Context, _ *relay.Command, stderr func(string)) (relay.Process, error) {
			return startFakeCLI(ctx, lines, stderr), nil
		}}
	errc = make(chan error, 1)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		errc <- host.Run(ctx)
	}()
	return cancel, errc
}

// waitConnected waits until the listener lists the workers as connected.
func (h *hostHarness) waitConnected(names ...string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := map[string]bool{}
		for _, w := range h.l.Workers() {
			got[w.Name] = w.State == claude.WorkerConnected
		}
		ok := true
		for _, n := range names {
			ok = ok && got[n]
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("workers %v not connected: %+v", names, h.l.Workers())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitWorkers waits until the listener's list of workers satisfies ok,
// and returns it: the registry learns of a link's drop from its own reader,
// some time after the other end has gone (a worker's Run may have returned).
func (h *hostHarness) waitWorkers(want string, ok func([]claude.WorkerInfo) bool) []claude.WorkerInfo {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ws := h.l.Workers()
		if ok(ws) {
			return ws
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("Workers: %+v, want %s", ws, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func workerName(t *testing.T, c claude.Conn) string {
	t.Helper()
	wn, ok := c.(interface{ WorkerName() string })
	if !ok {
		t.Fatalf("%T has no WorkerName", c)
	}
	return wn.WorkerName()
}

func TestWorkerPlacement(t *testing.T) {
	h := newHostHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h.run("", relay.Registration{Name: "alpha", Labels: map[string]string{"pool": "a", "gpu": "yes"}, Capacity: 2, CLIVersion: "2.1.330 (Claude Code)"}, 1)
	h.run("", relay.Registration{Name: "beta", Labels: map[string]string{"pool": "a"}, Capacity: 2}, 1)
	h.run("", relay.Registration{Name: "gamma", Labels: map[string]string{"pool": "b"}, Capacity: 1}, 1)
	h.waitConnected("alpha", "beta", "gamma")

	start := func(tr *claude.WorkerTransport) (claude.Conn, error) {
		tr.Listener = h.l
		c, err := tr.Start(ctx, &claude.Command{})
		if err == nil {
			t.Cleanup(func() { c.Close() })
			if _, err := c.ReadLine(); err != nil { // the CLI runs
				t.Fatalf("ReadLine: %v", err)
			}
		}
		return c, err
	}
	// By name.
	c, err := start(&claude.WorkerTransport{Name: "gamma", Tag: "s-gamma"})
	if err != nil || workerName(t, c) != "gamma" {
		t.Fatalf("by name gamma: %v", err)
	}
	// gamma is full now.
	_, err = start(&claude.WorkerTransport{Name: "gamma"})
	var busy *claude.WorkersBusyError
	if !errors.As(err, &busy) || !errors.Is(err, claude.ErrWorkersBusy) || !strings.Contains(err.Error(), "gamma (1/1)") {
		t.Errorf("gamma over capacity: %v, want *WorkersBusyError naming gamma (1/1)", err)
	}
	// By labels: gpu=yes is alpha only.
	c, err = start(&claude.WorkerTransport{Labels: map[string]string{"gpu": "yes"}, Tag: "s-gpu"})
	if err != nil || workerName(t, c) != "alpha" {
		t.Fatalf("by labels gpu=yes: %v", err)
	}
	// Least loaded among pool=a: alpha runs 1 of 2 and beta none, so beta;
	// then a tie (1 of 2 each) goes by name, and alpha is full.
	var got []string
	for i := range 3 {
		c, err := start(&claude.WorkerTransport{Labels: map[string]string{"pool": "a"}, Tag: fmt.Sprintf("s-pool-%d", i)})
		if err != nil {
			t.Fatalf("pool=a #%d: %v", i, err)
		}
		got = append(got, workerName(t, c))
	}
	if want := "beta alpha beta"; strings.Join(got, " ") != want {
		t.Errorf("pool=a placed on %v, want %s (least loaded first, never over capacity)", got, want)
	}
	// Every pool=a worker is full.
	if _, err := start(&claude.WorkerTransport{Labels: map[string]string{"pool": "a"}}); !errors.Is(err, claude.ErrWorkersBusy) {
		t.Errorf("pool=a when full: %v, want ErrWorkersBusy", err)
	}
	// No worker has these labels: the error lists the workers known.
	_, err = start(&claude.WorkerTransport{Labels: map[string]string{"pool": "z"}})
	var nw *claude.NoWorkerError
	if !errors.As(err, &nw) || !strings.Contains(err.Error(), "pool=z") || !strings.Contains(err.Error(), "beta (connected, pool=a)") {
		t.Errorf("pool=z: %v, want *NoWorkerError naming pool=z and the workers", err)
	}
	if err := h.l.CheckPlacement(claude.WorkerSelector{Name: "nobody"}); !errors.Is(err, claude.ErrNoWorker) {
		t.Errorf("CheckPlacement(nobody): %v", err)
	}

	ws := h.l.Workers()
	if len(ws) != 3 {
		t.Fatalf("Workers: %+v", ws)
	}
	a := ws[0]
	if a.Name != "alpha" || a.State != claude.WorkerConnected || a.Capacity != 2 || a.CLIVersion != "2.1.330 (Claude Code)" ||
		a.Labels["gpu"] != "yes" || strings.Join(a.Sessions, ",") != "s-gpu,s-pool-1" || a.Grace != relay.DefaultGrace {
		t.Errorf("alpha: %+v", a)
	}
	if g := ws[2]; g.Name != "gamma" || strings.Join(g.Sessions, ",") != "s-gamma" {
		t.Errorf("gamma: %+v", g)
	}
}

func TestWorkerNameTaken(t *testing.T) {
	h := newHostHarness(t)
	h.run("", relay.Registration{Name: "solo", Capacity: 1}, 1)
	h.waitConnected("solo")
	_, errc := h.run("", relay.Registration{Name: "solo", Capacity: 1}, 1)
	select {
	case err := <-errc:
		if !errors.Is(err, relay.ErrRejected) || !strings.Contains(err.Error(), `worker name "solo" is taken`) {
			t.Errorf("second worker named solo: %v, want rejected as taken", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second worker named solo was not refused")
	}
	// An invalid registration is refused by the worker itself, and would
	// be by the listener.
	_, errc = h.run("", relay.Registration{Name: "bad name!", Capacity: 1}, 1)
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "name") {
		t.Errorf("bad name: %v", err)
	}
}

// TestWorkerControlCut cuts every link of a registered worker (its control
// connection and its session's) again and again while the session relays
// lines: every line arrives once, in order, and the worker stays
// registered.
func TestWorkerControlCut(t *testing.T) {
	const lines = 3000
	h := newHostHarness(t)
	u, _ := url.Parse(h.l.URL())
	proxy, err := linkcut.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	h.run("ws://"+proxy.Addr+u.Path, relay.Registration{Name: "cut", Capacity: 1, GraceMillis: 20000}, lines)
	h.waitConnected("cut")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := (&claude.WorkerTransport{Listener: h.l, Name: "cut"}).Start(ctx, &claude.Command{})
	if err != nil {
		t.Fatal(err)
	}
	cuts := 0
	next := 0
	for {
		if next%(lines/6) == lines/12 {
			cuts += proxy.Cut()
		}
		ln, err := conn.ReadLine()
		if err != nil {
			t.Fatalf("ReadLine after %d lines: %v", next, err)
		}
		var m struct{ N int }
		if err := json.Unmarshal(ln.Data, &m); err != nil {
			t.Fatal(err)
		}
		if m.N != next {
			t.Fatalf("line %d, want %d", m.N, next)
		}
		if next++; next == lines {
			break
		}
	}
	conn.CloseWrite()
	if _, err := conn.ReadLine(); err != io.EOF {
		t.Errorf("after the last line: %v, want EOF", err)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if cuts < 4 || proxy.Accepted() < 4 {
		t.Errorf("%d cuts, %d connections: the links were not cut", cuts, proxy.Accepted())
	}
	h.waitConnected("cut")
}

// TestWorkerGraceExpires: a registered worker that never comes back has its
// session failed with a *WorkerLostError naming it and the time it was
// gone, and is listed as lost.
func TestWorkerGraceExpires(t *testing.T) {
	h := newHostHarness(t)
	u, _ := url.Parse(h.l.URL())
	proxy, err := linkcut.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	h.run("ws://"+proxy.Addr+u.Path, relay.Registration{Name: "doomed", Capacity: 1, GraceMillis: 1000}, 1)
	h.waitConnected("doomed")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := (&claude.WorkerTransport{Listener: h.l, Labels: nil, Name: "doomed"}).Start(ctx, &claude.Command{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ReadLine(); err != nil {
		t.Fatal(err)
	}
	proxy.Close() // the worker can never come back
	began := time.Now()
	err = conn.Wait()
	var lost *claude.WorkerLostError
	if !errors.As(err, &lost) || lost.Worker != "doomed" || !strings.Contains(err.Error(), "grace period of 1s") {
		t.Fatalf("Wait: %v, want *WorkerLostError for doomed after its grace period", err)
	}
	if d := time.Since(began); d < 900*time.Millisecond {
		t.Errorf("lost after %v, before the grace period", d)
	}
	// The session's link and the worker's control link each have their
	// grace timer: the worker is listed lost moments after its session.
	h.waitWorkers("doomed lost with no session", func(ws []claude.WorkerInfo) bool {
		return len(ws) == 1 && ws[0].State == claude.WorkerLost && len(ws[0].Sessions) == 0
	})
}

// TestWorkerHostStops: a registered worker told to stop closes its CLIs
// gracefully; the session sees the CLI's clean exit, and Run returns nil.
func TestWorkerHostStops(t *testing.T) {
	h := newHostHarness(t)
	stop, errc := h.run("", relay.Registration{Name: "stopper", Capacity: 2}, 1)
	h.waitConnected("stopper")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := (&claude.WorkerTransport{Listener: h.l, Name: "stopper"}).Start(ctx, &claude.Command{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ReadLine(); err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := conn.ReadLine(); err != io.EOF {
		t.Errorf("ReadLine after the worker stopped: %v, want EOF", err)
	}
	if err := conn.Wait(); err != nil {
		t.Errorf("Wait: %v, want the CLI's clean exit", err)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Run after stop: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not stop")
	}
	// Run has returned once the worker closed its control link; the
	// registry sees the link drop when its reader does (under load, after
	// Run returns). The grace period (2 min) keeps it reconnecting.
	h.waitWorkers("stopper reconnecting with no session", func(ws []claude.WorkerInfo) bool {
		return len(ws) == 1 && ws[0].State == claude.WorkerReconnecting && len(ws[0].Sessions) == 0
	})
}

// TestWorkerPlacedOnlyAfterWelcome: a registering worker is neither listed
// nor placeable until its welcome frame is written, so a placement's open
// frame can never reach a worker before its welcome (which made the worker
// drop the link and dial again, and the placement wait for ever).
func TestWorkerPlacedOnlyAfterWelcome(t *testing.T) {
	h := newHostHarness(t)
	var welcomes sync.WaitGroup
	welcomes.Add(1)
	var once sync.Once
	claude.SetBeforeWelcome(h.l, func(name string) {
		defer once.Do(welcomes.Done)
		for _, w := range h.l.Workers() {
			if w.Name == name {
				t.Errorf("before its welcome, %s is listed: %+v", name, w)
			}
		}
		var none *claude.NoWorkerError
		if err := h.l.CheckPlacement(claude.WorkerSelector{Name: name}); !errors.As(err, &none) {
			t.Errorf("before its welcome, placing a session on %s: %v, want *NoWorkerError", name, err)
		}
	})
	h.run("", relay.Registration{Name: "fresh", Capacity: 1}, 1)
	welcomes.Wait()
	h.waitConnected("fresh")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := (&claude.WorkerTransport{Listener: h.l, Name: "fresh"}).Start(ctx, &claude.Command{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ReadLine(); err != nil {
		t.Fatal(err)
	}
}
