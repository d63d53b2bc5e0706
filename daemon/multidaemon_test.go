package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestTwoDaemonsOneStore: two daemons on one PostgreSQL. A session runs
// under daemon A. Through daemon B: a subscriber follows it live and gets
// exactly A's log (every event once, in order); a prompt sent to B runs on
// A's CLI (B starts no CLI of its own); the permission request of that
// turn, held by A, is approved through B (the file is written); a model
// change through B reaches A's CLI. A decision on a request nobody holds
// fails fast as not pending. Once A stops, B may run the session itself.
func TestTwoDaemonsOneStore(t *testing.T) {
	url := pgtest.New(t)
	dir := t.TempDir()
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text("streamed from daemon A, word by word")},
		ChunkSize: 4, DeltaDelay: 15 * time.Millisecond}
	write := claudetest.Reply(claudetest.ToolUseID("toolu_w1", "Bash", map[string]any{
		"command": "touch " + filepath.Join(dir, "made-through-b.txt"), "description": "make a file"}))
	a := daemontest.Start(t, &daemontest.Options{StoreURL: url, DaemonName: "daemon-a"},
		slow, write, claudetest.Reply(claudetest.Text("Made it.")), claudetest.Turn{})
	b := daemontest.Start(t, &daemontest.Options{StoreURL: url, DaemonName: "daemon-b"}, claudetest.Turn{})
	ctx := a.Ctx
	s, err := a.D.Create(ctx, &daemon.SessionOptions{Cwd: dir}, "")
	if err != nil {
		t.Fatal(err)
	}
	subCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// follow collects, through B, the events after seq after up to the
	// next result, approving through B the permission requests it meets.
	type got struct {
		evs []store.Event
		err error
	}
	follow := func(after int64, approve bool) <-chan got {
		out := make(chan got, 1)
		go func() {
			var g got
			defer func() { out <- g }()
			for ev, err := range b.D.Subscribe(subCtx, s.ID, after) {
				if err != nil {
					g.err = err
					return
				}
				g.evs = append(g.evs, ev.Event)
				if ev.Type == "permission_request" && approve {
					var pr daemon.PermissionRequest
					json.Unmarshal(ev.Raw, &pr)
					// B lists the request A holds (A publishes it).
					listed := false
					for deadline := time.Now().Add(30 * time.Second); !listed && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
						for _, p := range b.D.Pending("") {
							listed = listed || (p.Request.RequestID == pr.RequestID && p.SessionID == s.ID && p.Request.ToolName == "Bash")
						}
					}
					if !listed {
						t.Errorf("B's Pending does not list request %s of A's session", pr.RequestID)
					}
					p, _, err := b.D.Decide(subCtx, daemon.Decision{RequestID: pr.RequestID, Allow: true, Client: "bob"})
					if err != nil {
						g.err = err
						return
					}
					if p.SessionID != s.ID || p.ToolName != "Bash" || p.Behavior != "allow" || p.By != "client:bob" {
						t.Errorf("the decision through B settled %+v", p)
					}
				}
				if ev.Type == "result" {
					return
				}
			}
		}()
		return out
	}
	followed := follow(0, false)
	time.Sleep(200 * time.Millisecond) // B's subscriber waits on the store
	if err := a.D.Send(ctx, s.ID, "hello"); err != nil {
		t.Fatal(err)
	}
	g := <-followed
	if g.err != nil {
		t.Fatalf("following through B: %v", g.err)
	}
	var stored []store.Event
	for ev, err := range a.DB().Events(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, ev)
		if ev.Type == "result" {
			break
		}
	}
	if len(g.evs) != len(stored) || len(g.evs) < 5 {
		t.Fatalf("B's subscriber got %d events, A stored %d up to the result", len(g.evs), len(stored))
	}
	for i := range g.evs {
		if g.evs[i].Seq != int64(i+1) || string(g.evs[i].Raw) != string(stored[i].Raw) {
			t.Fatalf("event %d through B: seq %d %s; stored: %s", i, g.evs[i].Seq, g.evs[i].Raw, stored[i].Raw)
		}
	}

	// A prompt through B runs on A's CLI; its request is approved through B,
	// and B's inbox (WatchPending) shows it waiting, then settled by bob.
	watchCtx, stopWatch := context.WithCancel(subCtx)
	inbox := make(chan []daemon.PendingChange, 1)
	go func() {
		var chs []daemon.PendingChange
		defer func() { inbox <- chs }()
		for ch, err := range b.D.WatchPending(watchCtx, "") {
			if err != nil {
				return
			}
			chs = append(chs, ch)
			if ch.Settled != nil {
				return
			}
		}
	}()
	last := g.evs[len(g.evs)-1].Seq
	followed = follow(last, true)
	if err := b.D.Send(ctx, s.ID, "make a file"); err != nil {
		t.Fatalf("Send through B: %v", err)
	}
	if g = <-followed; g.err != nil {
		t.Fatalf("the turn sent through B: %v", g.err)
	}
	if _, err := os.Stat(filepath.Join(dir, "made-through-b.txt")); err != nil {
		t.Errorf("the command approved through B did not run: %v", err)
	}
	var changes []daemon.PendingChange
	select {
	case changes = <-inbox:
	case <-time.After(30 * time.Second):
		stopWatch()
		changes = <-inbox
	}
	stopWatch()
	sawPending, settledBy := false, ""
	for _, ch := range changes {
		for _, p := range ch.Pending {
			sawPending = sawPending || p.SessionID == s.ID
		}
		if ch.Settled != nil {
			settledBy = ch.Settled.By
		}
	}
	if !sawPending || settledBy != "client:bob" {
		t.Errorf("B's inbox: saw the request %v, settled by %q; want true, client:bob (%+v)", sawPending, settledBy, changes)
	}
	if b.D.Running() != 0 || a.D.Running() != 1 {
		t.Errorf("CLIs: %d on A, %d on B; want the one on A", a.D.Running(), b.D.Running())
	}
	if err := b.D.SetModel(ctx, s.ID, "claude-opus-4-5"); err != nil {
		t.Fatalf("SetModel through B: %v", err)
	}
	if got, _ := b.D.Session(ctx, s.ID); got.Model != "claude-opus-4-5" {
		t.Errorf("the model after SetModel through B: %q", got.Model)
	}
	if mode, err := b.D.SetPermissionMode(ctx, s.ID, "plan"); err != nil || mode != "plan" {
		t.Errorf("SetPermissionMode through B = %q, %v; want plan, the mode in effect A's CLI reports", mode, err)
	}
	if got, _ := b.D.Session(ctx, s.ID); got.PermissionMode != "plan" {
		t.Errorf("the mode after SetPermissionMode through B: %q", got.PermissionMode)
	}
	start := time.Now()
	if _, _, err := b.D.Decide(ctx, daemon.Decision{RequestID: "no-such-request", Allow: true}); !errors.Is(err, permission.ErrNotPending) {
		t.Errorf("a decision nobody holds: %v, want ErrNotPending", err)
	} else if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a decision nobody holds took %v", d)
	}

	// A stops (its CLI ends, the lease is released): B may run it.
	if err := a.D.Close(); err != nil {
		t.Fatal(err)
	}
	cur, _ := b.D.Session(ctx, s.ID)
	if err := b.D.Send(ctx, s.ID, "from B"); err != nil {
		t.Fatalf("Send through B after A stopped: %v", err)
	}
	if evs := untilIdle(t, b.D, ctx, s.ID, cur.LastSeq); len(evs) == 0 {
		t.Fatal("no events of B's own turn")
	}
	if b.D.Running() != 1 {
		t.Errorf("B runs %d CLIs, want 1", b.D.Running())
	}
}

// TestDeadDaemonsSessionResumesElsewhere: a session stored as running
// under a daemon that died (its lease expired) is resumed by a prompt
// through another daemon that reaches its transcript (one machine, one
// home), its log saying it was interrupted, and the conversation goes on.
func TestDeadDaemonsSessionResumesElsewhere(t *testing.T) {
	url := pgtest.New(t)
	// One home for both daemons' CLIs: with a home each, B's claude --resume
	// found no conversation and the turn failed, which the test missed while
	// B's failing CLI was still running when it looked (not on a busy machine).
	home := map[string]string{"HOME": t.TempDir()}
	a := daemontest.Start(t, &daemontest.Options{StoreURL: url, DaemonName: "daemon-a", CLIEnv: home}, claudetest.Reply(claudetest.Text("first")))
	ctx := a.Ctx
	s, err := a.D.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "hello")
	if err != nil {
		t.Fatal(err)
	}
	untilIdle(t, a.D, ctx, s.ID, 0)
	if err := a.D.Close(); err != nil {
		t.Fatal(err)
	}
	// B is up before A dies: its start leaves A's sessions alone.
	b := daemontest.Start(t, &daemontest.Options{StoreURL: url, DaemonName: "daemon-b", CLIEnv: home}, claudetest.Reply(claudetest.Text("second")))
	// As a kill -9 of daemon A mid-turn leaves it, once its lease ran out.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE sessions SET status = 'running', owner = 'daemon-a', lease_until = 1 WHERE id = $1`, s.ID); err != nil {
		t.Fatal(err)
	}
	cur, _ := b.D.Session(ctx, s.ID)
	if err := b.D.Send(ctx, s.ID, "again"); err != nil {
		t.Fatalf("a prompt through B to the dead daemon's session: %v", err)
	}
	evs := untilIdle(t, b.D, ctx, s.ID, cur.LastSeq)
	if len(evs) == 0 {
		t.Fatal("no events of the turn through B")
	}
	for _, ev := range evs {
		if ev.Type == "error" || ev.Type == "result" && strings.Contains(string(ev.Raw), `"is_error":true`) {
			t.Fatalf("the turn through B failed: %s", ev.Raw)
		}
	}
	// B's CLI went on with A's conversation: the model saw A's reply.
	reqs := b.Model.Requests()
	if len(reqs) != 1 || !hasText(reqs[0], "first") {
		t.Fatalf("B's model got %d requests, want one holding A's reply", len(reqs))
	}
	// B marked it interrupted at the prompt.
	interrupted := false
	for ev, err := range b.DB().Events(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "status" && strings.Contains(string(ev.Raw), `"interrupted"`) {
			interrupted = true
		}
	}
	if !interrupted {
		t.Error("the log does not say the session was interrupted")
	}
	if b.D.Running() != 1 {
		t.Errorf("B runs %d CLIs, want 1", b.D.Running())
	}
}

// TestPostgresRestartUnderLoad: PostgreSQL restarts (connections cut)
// while a session streams; the daemon's writes wait for it and go on, so
// the turn completes, a subscriber gets every event once, and the log has
// no gap record and no hole.
func TestPostgresRestartUnderLoad(t *testing.T) {
	srv := pgtest.Own(t) // stopped after the cleanups registered later (the daemon's, which writes)
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("streaming through a restart ", 20))},
		ChunkSize: 6, DeltaDelay: 20 * time.Millisecond}
	td := daemontest.Start(t, &daemontest.Options{StoreURL: srv.URL()}, slow)
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir(), IncludePartialMessages: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []store.Event, 1)
	go func() { done <- untilIdle(t, d, ctx, s.ID, 0) }()
	if err := d.Send(ctx, s.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond) // mid-turn
	start := time.Now()
	if err := srv.Restart(time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL was down for %v", time.Since(start).Round(time.Millisecond))
	got := <-done
	t.Logf("the turn ended %v after the restart began", time.Since(start).Round(time.Millisecond))
	var stored []store.Event
	for ev, err := range td.DB().Events(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "gap" {
			t.Errorf("a gap record: %s", ev.Raw)
		}
		stored = append(stored, ev)
	}
	if len(got) == 0 || len(got) > len(stored) {
		t.Fatalf("the subscriber got %d events, %d stored", len(got), len(stored))
	}
	for i, ev := range got {
		if ev.Seq != int64(i+1) || string(ev.Raw) != string(stored[i].Raw) {
			t.Fatalf("event %d: seq %d; the subscriber's and the stored differ", i, ev.Seq)
		}
	}
	if sess, _ := d.Session(ctx, s.ID); sess.Status != store.StatusIdle {
		t.Errorf("after the turn: %s (%s)", sess.Status, sess.Error)
	}
	t.Logf("%d events across the restart", len(got))
}

// TestRulesReachEveryDaemon: a rule added through daemon B settles the
// requests of a session daemon A runs; once removed through B, A asks a
// person again.
func TestRulesReachEveryDaemon(t *testing.T) {
	url := pgtest.New(t)
	dir := t.TempDir()
	touch := func(name string) claudetest.Turn {
		return claudetest.Reply(claudetest.ToolUseID("toolu_"+name, "Bash", map[string]any{
			"command": "touch " + filepath.Join(dir, name), "description": "make a file"}))
	}
	a := daemontest.Start(t, &daemontest.Options{StoreURL: url, DaemonName: "daemon-a"},
		touch("one"), claudetest.Reply(claudetest.Text("made one")), touch("two"), claudetest.Reply(claudetest.Text("not made")))
	b := daemontest.Start(t, &daemontest.Options{StoreURL: url, DaemonName: "daemon-b"})
	ctx := a.Ctx
	rule := &store.Rule{Spec: "Bash(touch:*)", Behavior: "allow", CreatedBy: "client:bob"}
	if err := b.D.AddRule(ctx, rule); err != nil {
		t.Fatal(err)
	}
	waitRule(t, a.D, rule.ID, true) // A's listener hears of it
	s, err := a.D.Create(ctx, &daemon.SessionOptions{Cwd: dir}, "make one")
	if err != nil {
		t.Fatal(err)
	}
	evs := untilIdle(t, a.D, ctx, s.ID, 0)
	for _, ev := range evs {
		if ev.Type == "permission_request" {
			t.Fatalf("A asked although B's rule allows it: %s", ev.Raw)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "one")); err != nil {
		t.Fatalf("the command B's rule allowed did not run: %v", err)
	}

	if err := b.D.RemoveRule(ctx, rule.ID); err != nil {
		t.Fatal(err)
	}
	waitRule(t, a.D, rule.ID, false)
	last := evs[len(evs)-1].Seq
	if err := a.D.Send(ctx, s.ID, "make two"); err != nil {
		t.Fatal(err)
	}
	asked := false
	for ev, err := range a.D.Subscribe(ctx, s.ID, last) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "permission_request" {
			asked = true
			var pr daemon.PermissionRequest
			json.Unmarshal(ev.Raw, &pr)
			if _, _, err := a.D.Decide(ctx, daemon.Decision{RequestID: pr.RequestID, Allow: false, Message: "no", Client: "alice"}); err != nil {
				t.Fatal(err)
			}
		}
		if ev.Type == "result" {
			break
		}
	}
	if !asked {
		t.Fatal("A did not ask after the rule was removed through B")
	}
	if _, err := os.Stat(filepath.Join(dir, "two")); err == nil {
		t.Error("the denied command ran")
	}
}

// waitRule waits until daemon d's permission engine holds stored rule id
// (or no longer does): another daemon's change reaches it through the
// store's rule watch, some time after the call that made it returned.
func waitRule(t *testing.T, d *daemon.Daemon, id int64, held bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); daemon.HasRuleForTest(d, id) != held; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("rule %d held by the daemon: %v after 30s, want %v", id, !held, held)
		}
	}
}

// hasText reports whether a message of the request has a text block
// holding text.
func hasText(r *claudetest.Request, text string) bool {
	for _, m := range r.Messages {
		for _, b := range m.Content {
			if b.Type == "text" && strings.Contains(b.Text, text) {
				return true
			}
		}
	}
	return false
}
