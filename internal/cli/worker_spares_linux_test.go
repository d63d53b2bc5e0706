package cli

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// TestDaemonRemoteWorkerSpares: spare CLIs run on a registered worker
// only when it was started with --spares. A session with a recent one's
// options takes the spare, under the id its relay is tagged with (so that
// another daemon could take it over); a worker without --spares never gets
// one; a session that finds the worker full because of a spare gets the
// spare's slot.
func TestDaemonRemoteWorkerSpares(t *testing.T) {
	t.Parallel()
	bin := buildClaudectl(t)
	const token = "worker-s3cret"
	logs := &syncBuffer{}
	dd := daemontest.Start(t, &daemontest.Options{WorkerToken: token, Spares: 2, SpareLifetime: 2 * time.Minute, Log: logs},
		claudetest.Reply(claudetest.Text("Warm answer.")))
	defer dd.Stop() // before the workers go: their CLIs end with the daemon's close
	apiURL, httpc := dd.Serve()
	ctx := dd.Ctx
	sessions := claudectlv1connect.NewSessionServiceClient(httpc, apiURL)
	workersAPI := claudectlv1connect.NewWorkerServiceClient(httpc, apiURL)
	endpoint := "ws://" + strings.TrimPrefix(apiURL, "http://") + apiserver.WorkerPath
	opted := startRegWorker(t, bin, endpoint, token, "--name", "opted", "--label", "pool=s", "--capacity", "3", "--spares")
	startRegWorker(t, bin, endpoint, token, "--name", "plain", "--label", "pool=p", "--capacity", "2")
	startRegWorker(t, bin, endpoint, token, "--name", "small", "--label", "pool=t", "--capacity", "2", "--spares")
	worker := func(name string) *v1.Worker {
		t.Helper()
		res, err := workersAPI.ListWorkers(ctx, connect.NewRequest(&v1.ListWorkersRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range res.Msg.Workers {
			if w.Name == name {
				return w
			}
		}
		return nil
	}
	waitWorker := func(name, what string, ok func(*v1.Worker) bool) *v1.Worker {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			w := worker(name)
			if w != nil && ok(w) {
				return w
			}
			if time.Now().After(deadline) {
				t.Fatalf("worker %s: %s: %v\ndaemon log:\n%s", name, what, w, logs.String())
			}
		}
	}
	for _, name := range []string{"opted", "plain", "small"} {
		waitWorker(name, "not connected", func(w *v1.Worker) bool { return w.State == v1.WorkerState_WORKER_STATE_CONNECTED })
	}
	if w := worker("opted"); !w.TakesSpares {
		t.Errorf("the worker started with --spares: takes_spares false")
	}
	if w := worker("plain"); w.TakesSpares {
		t.Errorf("the worker started without --spares: takes_spares true")
	}
	dir := t.TempDir()
	create := func(o *v1.SessionOptions, prompt string) *v1.Session {
		t.Helper()
		o.Cwd = dir
		res, err := sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: o, Prompt: prompt}))
		if err != nil {
			t.Fatalf("CreateSession %v: %v", o, err)
		}
		return res.Msg.Session
	}

	// A session on the worker that takes spares: a spare follows.
	a := create(&v1.SessionOptions{WorkerLabels: map[string]string{"pool": "s"}}, "")
	w := waitWorker("opted", "no spare CLI started", func(w *v1.Worker) bool { return w.Spares == 1 })
	if len(w.SessionIds) != 1 || w.SessionIds[0] != a.Id {
		t.Errorf("the worker's sessions %v, want only %s (the spare is not a session)", w.SessionIds, a.Id)
	}
	waitReady := func() {
		t.Helper()
		for ready, _ := dd.D.Spares(); ready != 1; ready, _ = dd.D.Spares() {
			select {
			case <-ctx.Done():
				t.Fatalf("the spare never became ready; daemon log:\n%s", logs.String())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitReady() // its CLI runs: a spare counts on the worker from its placement, before its CLI starts
	if n := len(children(opted.cmd.Process.Pid)); n != 2 {
		t.Errorf("%d CLIs on the worker, want 2: the session's and the spare", n)
	}

	// The next session like it takes the spare.
	b := create(&v1.SessionOptions{WorkerLabels: map[string]string{"pool": "s"}}, "hello")
	if _, taken := dd.D.Spares(); taken != 1 {
		t.Fatalf("%d spares taken, want 1", taken)
	}
	if b.WorkerName != "opted" {
		t.Errorf("the session on the spare runs on %q, want opted", b.WorkerName)
	}
	waitStatus(t, sessions, ctx, b.Id, v1.SessionStatus_SESSION_STATUS_IDLE, 60*time.Second)
	stored, err := dd.DB().Session(ctx, b.Id)
	if err != nil {
		t.Fatal(err)
	}
	if tag := claude.RelayTag(stored.Relay.Session); tag != b.Id || stored.Relay.Worker != "opted" || stored.Relay.SecretHash == "" {
		t.Errorf("the stored relay of the session on the spare: session %q (tag %q), worker %q, secret hash set %v; want tag %s, worker opted: a daemon taking it over finds the session by the tag",
			stored.Relay.Session, tag, stored.Relay.Worker, stored.Relay.SecretHash != "", b.Id)
	}
	var first *store.Event
	var text bool
	for ev, err := range dd.DB().Events(ctx, b.Id, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if first == nil && ev.Direction == store.ToCLI {
			first = &ev
		}
		text = text || ev.Direction == store.FromCLI && strings.Contains(string(ev.Raw), "Warm answer.")
	}
	if first == nil || first.Subtype != "initialize" {
		t.Errorf("the first line written to the spare in its session's log: %+v, want the initialize request", first)
	}
	if !text {
		t.Errorf("the session on the spare never stored the model's answer")
	}

	// A worker without --spares gets none: the pool does not even try
	// (Create asks for the spare before it returns).
	plainOpts := &v1.SessionOptions{WorkerLabels: map[string]string{"pool": "p"}}
	c := create(plainOpts, "")
	if ready, starting := dd.D.SparesFor(&daemon.SessionOptions{Cwd: dir, WorkerLabels: map[string]string{"pool": "p"}}); ready+starting != 0 {
		t.Errorf("%d spares for the options of the worker without --spares, want 0", ready+starting)
	}
	if w := worker("plain"); w.Spares != 0 || len(w.SessionIds) != 1 || w.SessionIds[0] != c.Id {
		t.Errorf("the worker without --spares: %d spares, sessions %v; want none, and %s", w.Spares, w.SessionIds, c.Id)
	}

	// The opted worker is full (a, b and a new spare for their options):
	// a session with other options gets the spare's slot.
	waitWorker("opted", "no new spare after the first was taken", func(w *v1.Worker) bool { return w.Spares == 1 && len(w.SessionIds) == 2 })
	waitReady()
	e := create(&v1.SessionOptions{Worker: "opted"}, "")
	if e.WorkerName != "opted" {
		t.Errorf("the session that needed the spare's slot runs on %q, want opted", e.WorkerName)
	}
	waitWorker("opted", "the spare still holds a slot", func(w *v1.Worker) bool { return len(w.SessionIds) == 3 && w.Spares == 0 })

	// A worker full with a session and a spare: the next session like the
	// first takes the spare.
	x := create(&v1.SessionOptions{WorkerLabels: map[string]string{"pool": "t"}}, "")
	waitWorker("small", "no spare CLI started", func(w *v1.Worker) bool { return w.Spares == 1 && len(w.SessionIds) == 1 && w.SessionIds[0] == x.Id })
	waitReady()
	y := create(&v1.SessionOptions{WorkerLabels: map[string]string{"pool": "t"}}, "")
	if _, taken := dd.D.Spares(); taken != 2 || y.WorkerName != "small" {
		t.Errorf("a session like the last on a worker full with it and its spare: %d spares taken (want 2), on worker %q (want small)", taken, y.WorkerName)
	}
}
