package daemon_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

// The daemon's benchmarks run 100 sessions of a stand-in CLI that streams
// fast (daemon/internal/standin) in one in-process daemon. Run them with
//
//	go test -run '^$' -bench Daemon -benchtime 1x -count 3 ./daemon/
//
// A 30 ms mode's p99 is that of its worst turn edges, which vary from turn
// to turn: compare them on runs of ten turns (-benchtime 10x), paired.
//
// Each stream_event line of the stand-in carries the time it was written
// ("standin_ns"); every session has one subscriber (Daemon.Subscribe) for
// the whole run, which times the lines against it.

// benchSessions is the number of concurrent sessions: 100, or
// CLAUDECTL_BENCH_SESSIONS to explore how the figures scale.
var benchSessions = func() int {
	if n, err := strconv.Atoi(os.Getenv("CLAUDECTL_BENCH_SESSIONS")); err == nil && n > 0 {
		return n
	}
	return 100
}()

// BenchmarkDaemon100Sessions sends one prompt to each of the 100 sessions
// at once per iteration and waits until every session is idle again. It
// reports
//
//   - events/s: events persisted (everything in the log: the CLI's lines
//     and the daemon's own text_delta, usage_report and status events) over
//     the wall time of the turns; lines/s counts the CLI's lines alone.
//   - p50_ms, p99_ms, max_ms: from the stand-in writing a stream_event line
//     to the session's subscriber receiving it; append_p99_ms is the part
//     from the daemon's append of the line (the event's Time, taken by the
//     actor's reader as it queues the line to the store's writer) to the
//     subscriber: group commit, publish and wake-up. The rest is the pipe,
//     the SDK's reading and parsing, and the scheduling of 100 processes.
//     mid_p99_ms is p99_ms without the first and last turnEdge stream
//     events of each turn: in lockstep, the tail is where the 100 turns
//     start and end at the same moment.
//   - drops: subscriptions dropped for falling behind (each subscriber
//     then subscribes again from the last seq it saw; the replayed events
//     are timed too).
//
// The sub-benchmarks differ in how the stand-in streams (30ms/lockstep/32:
// as 30ms/lockstep, with 32 sessions, as many as sessions.max_running runs
// by default). burst writes each
// turn's 1,000 deltas as fast as the pipe takes them: the throughput
// figure (latency then measures the backlog, it is no target). 10ms paces
// each session at 100 lines/s, 10,000 lines/s in all, several times what
// 100 models stream; 30ms/lockstep at about a real model's rate. Their
// prompts go out all at once, so each turn starts and ends with 100
// stand-in processes waking on the same 2 cores as the daemon, and they
// stream in step: each 30 ms, 100 lines at once. They run under
// SCHED_BATCH, as serve runs CLIs by default (sessions.cli_scheduling);
// CLAUDECTL_BENCH_CLI_SCHEDULING=normal runs them as any process.
// 30ms/staggered spreads the prompts over a turn's length, as sessions
// that are not in lockstep are;
// 30ms/inprocess is 30ms with the CLIs in the daemon's process (no process,
// no pipe; each line stamped as the session's reader takes it): what is
// left is the daemon's own part, from its reader to the subscriber.
func BenchmarkDaemon100Sessions(b *testing.B) {
	standin := buildStandin(b)
	for _, c := range []struct {
		name     string
		deltas   int
		interval time.Duration
		stagger  bool // prompts spread over one turn's length instead of all at once
		sessions int  // 0: benchSessions
	}{
		{"stream=burst", 1000, 0, false, 0},
		{"stream=10ms", 100, 10 * time.Millisecond, false, 0},
		{"stream=30ms/lockstep", 40, 30 * time.Millisecond, false, 0}, // about the rate of a real CLI streaming tokens
		// As many sessions as sessions.max_running (default 32) runs at once.
		{"stream=30ms/lockstep/32", 40, 30 * time.Millisecond, false, 32},
		{"stream=30ms/staggered", 40, 30 * time.Millisecond, true, 0},
		// The CLIs in this process (stampCLI): the same turns and pacing
		// with no process to schedule, no pipe and the lines stamped as the
		// session's reader takes them: the daemon's own part of the
		// latency.
		{"stream=30ms/inprocess", 40, 30 * time.Millisecond, false, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			n := cmp.Or(c.sessions, benchSessions)
			var f *fleet
			if strings.HasSuffix(c.name, "/inprocess") {
				cli := &stampCLI{inner: &daemontest.InProcessCLI{Script: func(int) [][]byte { return benchTurn(c.deltas) }}, interval: c.interval}
				f = createSessions(b, daemontest.Start(b, &daemontest.Options{Transport: cli}), n, c.deltas)
				f.subscribe()
			} else {
				f = startFleet(b, standin, n, c.deltas, c.interval)
			}
			if c.stagger {
				f.stagger = time.Duration(c.deltas) * c.interval / time.Duration(n)
			}
			elapsed := f.run()
			b.ReportMetric(float64(b.N*n*(c.deltas+8))/elapsed, "lines/s") // + init, assistant, result, 5 other stream events
			lat := f.latencies()
			if want := b.N * n * (c.deltas + 5); len(lat) != want {
				b.Fatalf("%d stream events timed, want %d", len(lat), want)
			}
			logged := sortedAll(f.logged)
			b.ReportMetric(ms(logged[len(logged)*99/100]), "append_p99_ms")
			if mid := sortedAll(f.mid); len(mid) > 0 {
				b.ReportMetric(ms(mid[len(mid)*99/100]), "mid_p99_ms")
			}
			b.ReportMetric(float64(f.drops.Load()), "drops")
		})
	}
}

// BenchmarkDaemonIdleMemory measures what an idle session costs the
// daemon, as growth over the daemon before the sessions were made, after
// forced garbage collections:
//
//   - fresh_KB/session: right after Create, before any turn;
//   - idle_KB/session: after one burst turn each (1,000 deltas), with no
//     subscriber left; both count the Go heap in use and goroutine
//     stacks (HeapInuse + StackInuse), which includes the OS thread each
//     session's blocked wait for its CLI holds (its g0 and signal stacks);
//   - sub_KB/subscriber: what a live subscription adds;
//   - idle_rss_KB/session: the VmRSS growth of the process at the idle
//     point, which also counts SQLite's page caches (outside the Go heap;
//     bounded for the whole daemon: 64 MiB for the writer, 16 MiB per
//     reader, which the burst turn fills), thread stacks and heap the
//     runtime has not returned; fresh_rss_KB/session is the same growth
//     right after Create.
//
// The CLI processes are separate and not counted. Every figure comes from
// a fresh process (the test binary run again): the runtime never ends the
// threads it made, so a second measurement in one process would find them
// already there and miss their cost.
func BenchmarkDaemonIdleMemory(b *testing.B) {
	if bin := os.Getenv(idleMemChildEnv); bin != "" {
		m := measureIdleMemory(b, bin)
		out, _ := json.Marshal(m)
		fmt.Printf("%s%s\n", idleMemPrefix, out)
		return
	}
	standin := buildStandin(b)
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var sum map[string]float64
	for range b.N {
		cmd := exec.Command(self, "-test.run=^$", "-test.bench=^BenchmarkDaemonIdleMemory$", "-test.benchtime=1x", "-test.count=1")
		cmd.Env = append(os.Environ(), idleMemChildEnv+"="+standin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("measuring in a child process: %v\n%s", err, out)
		}
		var m map[string]float64
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if js, ok := strings.CutPrefix(sc.Text(), idleMemPrefix); ok {
				if err := json.Unmarshal([]byte(js), &m); err != nil {
					b.Fatal(err)
				}
			}
		}
		if m == nil {
			b.Fatalf("no figures from the child process:\n%s", out)
		}
		if sum == nil {
			sum = map[string]float64{}
		}
		for k, v := range m {
			sum[k] += v
		}
	}
	for k, v := range sum {
		b.ReportMetric(v/float64(b.N), k)
	}
}

const (
	idleMemChildEnv = "CLAUDECTL_BENCH_IDLEMEM_STANDIN"
	idleMemPrefix   = "idlemem: "
)

func measureIdleMemory(b *testing.B, standin string) map[string]float64 {
	const deltas = 1000
	b.Setenv("STANDIN_DELTAS", strconv.Itoa(deltas))
	b.Setenv("STANDIN_INTERVAL", "0")
	td := daemontest.Start(b, &daemontest.Options{CLIPath: standin})
	base := measureMem()
	f := createSessions(b, td, benchSessions, deltas)
	fresh := measureMem()
	f.subscribe()
	f.turn()
	withSubs := measureMem()
	f.stopSubs()
	idle := measureMem()
	per := func(v int64) float64 { return float64(v) / 1024 / float64(benchSessions) }
	return map[string]float64{
		"fresh_KB/session":     per(fresh.goBytes - base.goBytes),
		"idle_KB/session":      per(idle.goBytes - base.goBytes),
		"sub_KB/subscriber":    per(withSubs.goBytes - idle.goBytes),
		"idle_rss_KB/session":  per(idle.rss - base.rss),
		"fresh_rss_KB/session": per(fresh.rss - base.rss),
	}
}

// BenchmarkDaemonTwoDaemons is BenchmarkDaemon100Sessions's persisted
// events and line-to-subscriber latency with the store on PostgreSQL,
// the sessions run by one daemon and subscribed to through it ("1daemon")
// or through a second daemon on the same database ("2daemons": the events
// reach the subscriber by LISTEN/NOTIFY and a read of the table). Compare
// with BenchmarkDaemon100Sessions on SQLite and, with
// CLAUDECTL_TEST_STORE=postgres, on PostgreSQL.
func BenchmarkDaemonTwoDaemons(b *testing.B) {
	standin := buildStandin(b)
	for _, c := range []struct {
		name     string
		deltas   int
		interval time.Duration
		stagger  bool
	}{
		{"stream=burst", 1000, 0, false},
		{"stream=30ms/staggered", 40, 30 * time.Millisecond, true},
	} {
		for _, daemons := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/%ddaemon", c.name, daemons), func(b *testing.B) {
				url := pgtest.New(b)
				b.Setenv("STANDIN_DELTAS", strconv.Itoa(c.deltas))
				b.Setenv("STANDIN_INTERVAL", c.interval.String())
				f := createSessions(b, daemontest.Start(b, &daemontest.Options{CLIPath: standin, StoreURL: url, DaemonName: "a"}),
					benchSessions, c.deltas)
				if daemons == 2 {
					f.subD = daemontest.Start(b, &daemontest.Options{CLIPath: standin, StoreURL: url, DaemonName: "b"}).D
				}
				f.subscribe()
				if c.stagger {
					f.stagger = time.Duration(c.deltas) * c.interval / time.Duration(benchSessions)
				}
				f.run()
			})
		}
	}
}

// buildStandin builds the stand-in CLI into a temporary directory.
func buildStandin(b *testing.B) string {
	b.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		b.Skip("no go command to build the stand-in CLI:", err)
	}
	bin := filepath.Join(b.TempDir(), "standin")
	cmd := exec.Command(gobin, "build", "-o", bin, "github.com/claudectl/claudectl/daemon/internal/standin")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building the stand-in CLI: %v\n%s", err, out)
	}
	return bin
}

// A fleet is a daemon's sessions and their subscribers.
type fleet struct {
	b       *testing.B
	d       *daemon.Daemon
	subD    *daemon.Daemon // subscribers go through it when set: another daemon on the same store
	ids     []string
	deltas  int
	stagger time.Duration // between two sessions' prompts; 0: all at once

	subCtx context.Context
	cancel context.CancelFunc
	subs   sync.WaitGroup
	turns  chan error   // a subscriber saw its session idle after a result, or failed
	lats   [][]int64    // per session, written when its subscriber returns
	logged [][]int64    // per session: from the event's append (its Time) to the subscriber
	mid    [][]int64    // per session: lat of the stream events not among the first or last turnEdge of a turn
	drops  atomic.Int64 // subscriptions dropped for falling behind
}

// run times b.N turns of the fleet and reports the events persisted per
// second and the line-to-subscriber latencies (p50, p99, max); it returns
// the seconds the turns took.
func (f *fleet) run() float64 {
	b := f.b
	seq0 := f.persisted()
	cpu0 := processCPU()
	b.ResetTimer()
	for range b.N {
		f.turn()
	}
	b.StopTimer()
	elapsed := b.Elapsed().Seconds()
	b.ReportMetric(float64(f.persisted()-seq0)/elapsed, "events/s")
	b.ReportMetric(ms(int64(processCPU()-cpu0)/int64(b.N)), "cpu_ms/turn")
	lat := f.latencies()
	b.ReportMetric(ms(lat[len(lat)/2]), "p50_ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99_ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max_ms")
	return elapsed
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// processCPU returns the CPU time this process has used, user and system,
// its threads' and not its children's: with stand-in CLIs, the daemon's
// own (and the subscribers'). Per turn (cpu_ms/turn) it is the work the
// daemon does for the 100 sessions' turns, a steadier figure than the
// latencies, which the machine's other work moves from run to run.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startFleet starts a daemon running standin with sessions sessions, each
// subscribed to.
func startFleet(b *testing.B, standin string, sessions, deltas int, interval time.Duration) *fleet {
	b.Setenv("STANDIN_DELTAS", strconv.Itoa(deltas))
	b.Setenv("STANDIN_INTERVAL", interval.String())
	sched := claude.Scheduling(os.Getenv("CLAUDECTL_BENCH_CLI_SCHEDULING"))
	f := createSessions(b, daemontest.Start(b, &daemontest.Options{CLIPath: standin, CLIScheduling: sched}), sessions, deltas)
	f.subscribe()
	return f
}

func createSessions(b *testing.B, td *daemontest.Daemon, sessions, deltas int) *fleet {
	f := &fleet{b: b, d: td.D, deltas: deltas, turns: make(chan error), lats: make([][]int64, sessions), logged: make([][]int64, sessions), mid: make([][]int64, sessions)}
	f.subCtx, f.cancel = context.WithCancel(context.Background())
	b.Cleanup(f.stopSubs) // before the daemon closes
	cwd := b.TempDir()
	for range sessions {
		s, err := f.d.Create(context.Background(), &daemon.SessionOptions{Cwd: cwd, IncludePartialMessages: true}, "")
		if err != nil {
			b.Fatal(err)
		}
		f.ids = append(f.ids, s.ID)
	}
	return f
}

// subscribe starts one subscriber per session. A subscriber that is
// dropped for falling behind subscribes again after the last seq it saw, as
// the Subscribe contract asks of a client.
func (f *fleet) subscribe() {
	for i, id := range f.ids {
		lat := make([]int64, 0, (f.deltas+5)*f.b.N)
		logged := make([]int64, 0, (f.deltas+5)*f.b.N)
		f.subs.Go(func() {
			var mid []int64
			var dump []lineTimes
			if benchDump != "" {
				dump = make([]lineTimes, 0, (f.deltas+5)*f.b.N)
			}
			defer func() { f.lats[i], f.logged[i], f.mid[i] = lat, logged, mid; f.dumpLines(dump) }()
			report := func(err error) {
				select {
				case f.turns <- err:
				case <-f.subCtx.Done():
				}
			}
			sawResult := false
			pos := 0 // of the stream event in its turn
			var last int64
			for dropped := true; dropped; {
				dropped = false
				for ev, err := range cmp.Or(f.subD, f.d).Subscribe(f.subCtx, id, last) {
					now := time.Now().UnixNano()
					if errors.Is(err, daemon.ErrSlowSubscriber) {
						f.drops.Add(1)
						dropped = true
						break
					}
					if err != nil {
						if f.subCtx.Err() == nil {
							report(fmt.Errorf("session %s: %w", id, err))
						}
						return
					}
					last = ev.Seq
					if ns, ok := standinNS(ev.Raw); ok {
						if dump != nil {
							dump = append(dump, lineTimes{session: i, pos: pos, written: ns, appended: ev.Time.UnixNano(), received: now})
						}
						lat = append(lat, now-ns)
						logged = append(logged, now-ev.Time.UnixNano())
						if pos >= turnEdge && pos < f.deltas+5-turnEdge {
							mid = append(mid, now-ns)
						}
						pos++
					}
					switch {
					case ev.Type == "result":
						sawResult = true
						pos = 0
					case sawResult && ev.Type == "status" && bytes.Contains(ev.Raw, []byte(`"idle"`)):
						sawResult = false
						report(nil)
					}
				}
			}
			if f.subCtx.Err() == nil {
				report(fmt.Errorf("session %s: subscription ended", id))
			}
		})
	}
}

// stopSubs ends the subscriptions and waits for their goroutines.
func (f *fleet) stopSubs() {
	f.cancel()
	f.subs.Wait()
}

// turn sends a prompt to every session at once and waits until each is
// idle again.
func (f *fleet) turn() {
	b := f.b
	var sends sync.WaitGroup
	for i, id := range f.ids {
		sends.Go(func() {
			time.Sleep(time.Duration(i) * f.stagger)
			if err := f.d.Send(context.Background(), id, "Stream something."); err != nil {
				b.Error(err)
			}
		})
	}
	sends.Wait()
	timeout := time.After(2 * time.Minute)
	for range f.ids {
		select {
		case err := <-f.turns:
			if err != nil {
				b.Fatal(err)
			}
		case <-timeout:
			b.Fatal("timed out waiting for the turns to end")
		}
	}
}

// persisted returns how many events are stored for the sessions.
func (f *fleet) persisted() int64 {
	var n int64
	for _, id := range f.ids {
		s, err := f.d.Session(context.Background(), id)
		if err != nil {
			f.b.Fatal(err)
		}
		n += s.LastSeq
	}
	return n
}

// latencies ends the subscriptions and returns every latency measured, in
// nanoseconds, sorted.
func (f *fleet) latencies() []int64 {
	f.stopSubs()
	return sortedAll(f.lats)
}

// sortedAll returns the latencies of every session in one sorted slice
// (after latencies, which ends the subscriptions).
func sortedAll(per [][]int64) []int64 {
	var all []int64
	for _, l := range per {
		all = append(all, l...)
	}
	slices.Sort(all)
	return all
}

// turnEdge is how many stream events at each end of a turn mid_p99_ms
// leaves out: those of the moments when, in lockstep, the 100 stand-ins
// start or end their turns together.
const turnEdge = 5

var standinKey = []byte(`"standin_ns":`)

// standinNS returns the stand-in's write time carried by a line.
func standinNS(raw []byte) (int64, bool) {
	i := bytes.LastIndex(raw, standinKey)
	if i < 0 {
		return 0, false
	}
	raw = raw[i+len(standinKey):]
	n := 0
	for n < len(raw) && '0' <= raw[n] && raw[n] <= '9' {
		n++
	}
	v, err := strconv.ParseInt(string(raw[:n]), 10, 64)
	return v, err == nil
}

type memSample struct {
	goBytes int64 // HeapInuse + StackInuse
	rss     int64
}

// measureMem collects garbage, returns freed memory to the OS and samples
// the Go heap and stacks in use and the process's resident set.
func measureMem() memSample {
	for range 4 { // a GC halves an idle goroutine's stack at most
		runtime.GC()
	}
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{goBytes: int64(ms.HeapInuse + ms.StackInuse), rss: vmRSS()}
}

// vmRSS returns VmRSS from /proc/self/status in bytes (0 where there is
// none).
func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// BenchmarkDaemonFanout times burst turns of session B (1,000 deltas each,
// no subscriber) while session A streams at a fast model's rate (a line
// every 10 ms), in rounds that alternate between A having no subscriber
// and A having 2,000 that read everything, as attached clients do (each
// with a context of its own, as each client's stream has). Both CLIs are
// in-process stand-ins (daemontest.InProcessCLI), so the figure is the
// daemon's own. Alternating in one daemon keeps both sides under the same
// conditions: run one after the other, two runs of B's turns alone
// differed by more than the effect measured.
//
// It reports B_turn_ms and B_turn_p50_ms (from Send to the logging of B's
// idle status, the time the event carries: the mean and the median)
// without and with the subscribers, and slowdown_pct, the mean's increase.
// Fan-out off the writer's path keeps it under 10 %.
func BenchmarkDaemonFanout(b *testing.B) {
	const subs, deltas, rounds, bTurns = 2000, 1000, 10, 40
	cli := &pacedCLI{inner: &daemontest.InProcessCLI{Script: func(int) [][]byte { return benchTurn(deltas) }},
		interval: 10 * time.Millisecond}
	td := daemontest.Start(b, &daemontest.Options{Transport: cli})
	d := td.D
	ctx := context.Background()
	dir := b.TempDir()
	a, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir, IncludePartialMessages: true}, "") // the first CLI: paced
	if err != nil {
		b.Fatal(err)
	}
	bs, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir, IncludePartialMessages: true}, "")
	if err != nil {
		b.Fatal(err)
	}
	session := func(id string) *store.Session {
		s, err := d.Session(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	waitTurn := func(id string, n int64) *store.Session {
		for {
			if s := session(id); s.Totals.Turns >= n && s.Status == "idle" {
				return s
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	// idleAt returns when s's last event, its idle status, was logged: a
	// turn is timed to it, not to when waitTurn's polling saw it (to the
	// millisecond, a tenth of B's turn).
	idleAt := func(s *store.Session) time.Time {
		for ev, err := range d.Subscribe(ctx, s.ID, s.LastSeq-1) {
			if err != nil {
				b.Fatal(err)
			}
			if ev.Type != "status" {
				b.Fatalf("session %s's last event is a %s, not its idle status", s.ID, ev.Type)
			}
			return ev.Time
		}
		b.Fatalf("session %s has no event %d", s.ID, s.LastSeq)
		return time.Time{}
	}
	if err := d.Send(ctx, bs.ID, "warm up"); err != nil {
		b.Fatal(err)
	}
	waitTurn(bs.ID, 1)
	var got atomic.Int64
	var turns [2][]time.Duration // B's turns without, with the subscribers
	bDone := int64(1)
	b.ResetTimer()
	for i := range b.N {
		if err := d.Send(ctx, a.ID, "stream"); err != nil { // A streams for 10 s
			b.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		for r := range rounds {
			with := r%2 == 1
			var wg sync.WaitGroup
			sctx, cancel := context.WithCancel(ctx)
			if with {
				// Timed once every subscriber has had a live event: what
				// attaching costs (a replay each) is not the fan-out's.
				watchers(sctx, d, a.ID, session(a.ID).LastSeq, subs, &wg, &got)
				time.Sleep(20 * time.Millisecond)
			}
			for range bTurns {
				start := time.Now()
				if err := d.Send(ctx, bs.ID, "burst"); err != nil {
					b.Fatal(err)
				}
				bDone++
				end := idleAt(waitTurn(bs.ID, bDone))
				k := 0
				if with {
					k = 1
				}
				turns[k] = append(turns[k], end.Sub(start))
			}
			cancel()
			wg.Wait()
		}
		if session(a.ID).Status != "running" {
			b.Fatal("A's turn ended before B's: the rounds did not all run beside A's stream")
		}
		waitTurn(a.ID, int64(i)+1)
	}
	b.StopTimer()
	mean := func(ds []time.Duration) float64 {
		var t time.Duration
		for _, d := range ds {
			t += d
		}
		return float64(t.Microseconds()) / 1e3 / float64(len(ds))
	}
	for k, name := range []string{"subs=0", "subs=2000"} {
		slices.Sort(turns[k])
		b.ReportMetric(mean(turns[k]), "B_turn_ms/"+name)
		b.ReportMetric(float64(turns[k][len(turns[k])/2].Microseconds())/1e3, "B_turn_p50_ms/"+name)
	}
	b.ReportMetric((mean(turns[1])/mean(turns[0])-1)*100, "slowdown_pct")
	b.ReportMetric(float64(got.Load())/float64(subs*b.N*rounds/2), "A_events/sub/round")
}

// watchers starts n subscribers of session id after seq from on wg, each
// with a context of its own under ctx (as each client's stream has),
// counting the events they get in got; it returns once every one has had
// its first event.
func watchers(ctx context.Context, d *daemon.Daemon, id string, from int64, n int, wg *sync.WaitGroup, got *atomic.Int64) {
	var live sync.WaitGroup
	live.Add(n)
	for range n {
		wg.Go(func() {
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			first := true
			for _, err := range d.Subscribe(cctx, id, from) {
				if first {
					live.Done()
					first = false
				}
				if err != nil {
					return
				}
				got.Add(1)
			}
		})
	}
	live.Wait()
}

// benchTurn is a streamed turn for the in-process CLI: an init, deltas
// text deltas between their stream events, the assistant message and a
// result.
func benchTurn(deltas int) [][]byte {
	const sid = `"session_id":"$SESSION_ID"`
	ev := func(event string) []byte {
		return fmt.Appendf(nil, `{"type":"stream_event","event":%s,%s,"parent_tool_use_id":null,"uuid":"u"}`, event, sid)
	}
	lines := [][]byte{
		fmt.Appendf(nil, `{"type":"system","subtype":"init",%s,"model":"stand-in","tools":["Bash","Edit","Read","Write"],"cwd":"/","permissionMode":"default","claude_code_version":"2.1.330"}`, sid),
		ev(`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"stand-in","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}`),
		ev(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
	}
	for range deltas {
		lines = append(lines, ev(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The quick brown fox jumps over the lazy dog. "}}`))
	}
	return append(lines,
		fmt.Appendf(nil, `{"type":"assistant","message":{"id":"m","type":"message","role":"assistant","model":"stand-in","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":1,"output_tokens":1}},"parent_tool_use_id":null,%s,"uuid":"a"}`, sid),
		ev(`{"type":"content_block_stop","index":0}`),
		ev(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`),
		ev(`{"type":"message_stop"}`),
		fmt.Appendf(nil, `{"type":"result","subtype":"success","is_error":false,"result":"ok",%s,"total_cost_usd":0.001,"duration_ms":1,"num_turns":1}`, sid),
	)
}

// stampCLI is inner whose CLIs print their stream events one per
// interval, each stamped with "standin_ns" as the session's reader takes
// it (BenchmarkDaemon100Sessions/stream=30ms/inprocess).
type stampCLI struct {
	inner    *daemontest.InProcessCLI
	interval time.Duration
}

func (p *stampCLI) Start(ctx context.Context, cmd *claude.Command) (claude.Conn, error) {
	c, err := p.inner.Start(ctx, cmd)
	if err != nil {
		return c, err
	}
	return &stampConn{Conn: c, interval: p.interval}, nil
}

type stampConn struct {
	claude.Conn
	interval time.Duration
}

func (c *stampConn) ReadLine() (claude.Line, error) {
	l, err := c.Conn.ReadLine()
	if err == nil && bytes.HasPrefix(l.Data, streamEventPrefix) {
		time.Sleep(c.interval)
		d := append(bytes.Clone(bytes.TrimSuffix(l.Data, []byte("}"))), `,"standin_ns":`...)
		d = strconv.AppendInt(d, time.Now().UnixNano(), 10)
		l.Data = append(d, '}')
	}
	return l, err
}

// pacedCLI is inner whose first CLI prints its stream events one per
// interval (a model streaming); the others print as fast as they are read.
type pacedCLI struct {
	inner    *daemontest.InProcessCLI
	interval time.Duration
	started  atomic.Int64
}

func (p *pacedCLI) Start(ctx context.Context, cmd *claude.Command) (claude.Conn, error) {
	c, err := p.inner.Start(ctx, cmd)
	if err != nil || p.started.Add(1) != 1 {
		return c, err
	}
	return &pacedConn{Conn: c, interval: p.interval}, nil
}

type pacedConn struct {
	claude.Conn
	interval time.Duration
}

var streamEventPrefix = []byte(`{"type":"stream_event"`)

func (c *pacedConn) ReadLine() (claude.Line, error) {
	l, err := c.Conn.ReadLine()
	if err == nil && bytes.HasPrefix(l.Data, streamEventPrefix) {
		time.Sleep(c.interval)
	}
	return l, err
}

// benchDump, from CLAUDECTL_BENCH_DUMP, is a file the 100-session
// benchmarks write every timed line to, one per row: session index,
// position of the stream event in its turn, and the times (UnixNano) the
// stand-in wrote it, the daemon appended it and its subscriber received
// it. For finding where a run's slow lines are; appended to, so that a
// run of several sub-benchmarks keeps them all.
var benchDump = os.Getenv("CLAUDECTL_BENCH_DUMP")

type lineTimes struct {
	session, pos                int
	written, appended, received int64
}

var dumpMu sync.Mutex

// dumpLines appends lines to benchDump.
func (f *fleet) dumpLines(lines []lineTimes) {
	if benchDump == "" || len(lines) == 0 {
		return
	}
	var b []byte
	for _, l := range lines {
		b = fmt.Appendf(b, "%d %d %d %d %d\n", l.session, l.pos, l.written, l.appended, l.received)
	}
	dumpMu.Lock()
	defer dumpMu.Unlock()
	fh, err := os.OpenFile(benchDump, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		f.b.Error(err)
		return
	}
	defer fh.Close()
	if _, err := fh.Write(b); err != nil {
		f.b.Error(err)
	}
}
