package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
	"github.com/google/go-cmp/cmp"
)

func waitStatus(t *testing.T, d *daemon.Daemon, ctx context.Context, id string, want store.SessionStatus) *store.Session {
	t.Helper()
	for {
		s, err := d.Session(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if s.Status == want {
			return s
		}
		select {
		case <-ctx.Done():
			t.Fatalf("session %s is %s, want %s", id, s.Status, want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestRestartThenResume(t *testing.T) {
	td := daemontest.Start(t, nil,
		claudetest.Reply(claudetest.Text("I will remember 42.")),
		claudetest.Reply(claudetest.Text("You said 42.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "Remember the number 42.")
	if err != nil {
		t.Fatal(err)
	}
	first := untilIdle(t, d, ctx, s.ID, 0)
	before, _ := d.Session(ctx, s.ID)

	td.Restart()
	d = td.D
	after, err := d.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != store.StatusSuspended || after.ClaudeSessionID != before.ClaudeSessionID {
		t.Fatalf("after restart: status %s, claude id %q (was %q)", after.Status, after.ClaudeSessionID, before.ClaudeSessionID)
	}
	// A prompt resumes it (claude --resume): the model sees the first exchange.
	if err := d.Send(ctx, s.ID, "Which number?"); err != nil {
		t.Fatal(err)
	}
	evs := untilIdle(t, d, ctx, s.ID, after.LastSeq)
	if evs[0].Seq != after.LastSeq+1 {
		t.Errorf("first event after the resume has seq %d, want %d", evs[0].Seq, after.LastSeq+1)
	}
	reqs := td.Model.Requests()
	conv := reqs[len(reqs)-1].Transcript()
	if !strings.Contains(conv, "Remember the number 42.") || !strings.Contains(conv, "I will remember 42.") ||
		!strings.Contains(conv, "Which number?") {
		t.Errorf("resumed request lacks the first exchange:\n%s", conv)
	}
	got := waitStatus(t, d, ctx, s.ID, store.StatusIdle)
	if got.Process != 2 || got.Totals.Turns != 2 || got.ClaudeSessionID != before.ClaudeSessionID {
		t.Errorf("after the resumed turn: process %d, turns %d, claude id %q", got.Process, got.Totals.Turns, got.ClaudeSessionID)
	}
	// The whole log replays gap-free across both processes, and holds the
	// lines written to the CLI (the prompts).
	var prompts []string
	n := int64(0)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for ev, err := range d.Subscribe(rctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if ev.Seq != n {
			t.Fatalf("replay: event %d has seq %d", n, ev.Seq)
		}
		if ev.Direction == store.ToCLI && ev.Type == "user" {
			prompts = append(prompts, string(ev.Raw))
		}
		if ev.Seq == got.LastSeq {
			break
		}
	}
	if len(prompts) != 2 || !strings.Contains(prompts[0], "Remember the number 42.") || !strings.Contains(prompts[1], "Which number?") {
		t.Errorf("prompts logged to the CLI = %q", prompts)
	}
	if len(first) == 0 {
		t.Fatal("no events in the first turn")
	}
}

func TestResumeAndForkExplicitly(t *testing.T) {
	td := daemontest.Start(t, nil,
		claudetest.Reply(claudetest.Text("Noted: blue.")),
		claudetest.Reply(claudetest.Text("It was blue.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "My colour is blue.")
	if err != nil {
		t.Fatal(err)
	}
	untilIdle(t, d, ctx, s.ID, 0)
	if _, err := d.Resume(ctx, s.ID, ""); !errors.Is(err, daemon.ErrAlreadyRunning) {
		t.Fatalf("Resume of a running session: %v, want ErrAlreadyRunning", err)
	}

	// Fork while the original still runs: a new session with the history.
	f, err := d.Fork(ctx, s.ID, "What was my colour?")
	if err != nil {
		t.Fatal(err)
	}
	if f.ID == s.ID || f.ParentID != s.ID {
		t.Fatalf("fork: id %s parent %q (original %s)", f.ID, f.ParentID, s.ID)
	}
	untilIdle(t, d, ctx, f.ID, 0)
	fs := waitStatus(t, d, ctx, f.ID, store.StatusIdle)
	orig, _ := d.Session(ctx, s.ID)
	if fs.ClaudeSessionID == "" || fs.ClaudeSessionID == orig.ClaudeSessionID {
		t.Errorf("fork's CLI session id %q, original's %q: want a new one", fs.ClaudeSessionID, orig.ClaudeSessionID)
	}
	reqs := td.Model.Requests()
	if conv := reqs[len(reqs)-1].Transcript(); !strings.Contains(conv, "My colour is blue.") || !strings.Contains(conv, "What was my colour?") {
		t.Errorf("fork's request lacks the history:\n%s", conv)
	}

	// Closed: a prompt is refused with a message that says what to do; an
	// explicit resume works.
	if err := d.CloseSession(ctx, s.ID, "test"); err != nil {
		t.Fatal(err)
	}
	err = d.Send(ctx, s.ID, "hello?")
	var se *daemon.StateError
	if !errors.As(err, &se) || se.Status != store.StatusClosed || !strings.Contains(err.Error(), "Resume") {
		t.Fatalf("Send to a closed session: %v", err)
	}
	r, err := d.Resume(ctx, s.ID, "Still there?")
	if err != nil {
		t.Fatal(err)
	}
	untilIdle(t, d, ctx, s.ID, r.LastSeq)
	if got := waitStatus(t, d, ctx, s.ID, store.StatusIdle); got.Process != 2 {
		t.Errorf("process after resume = %d", got.Process)
	}

	// A session whose CLI never reported an id cannot be resumed.
	if _, err := td.DB().UpdateSession(ctx, f.ID, store.SessionUpdate{ClaudeSessionID: new(string)}); err != nil {
		t.Fatal(err)
	}
	d.CloseSession(ctx, f.ID, "test")
	if _, err := d.Resume(ctx, f.ID, ""); !errors.As(err, &se) || !strings.Contains(err.Error(), "create a new session") {
		t.Errorf("Resume without a CLI session id: %v", err)
	}
}

func askTurn() claudetest.Turn {
	return claudetest.Reply(claudetest.ToolUseID("toolu_ask_d1", "AskUserQuestion", map[string]any{
		"questions": []map[string]any{{
			"question": "Which database?", "header": "DB", "multiSelect": false,
			"options": []map[string]any{{"label": "PostgreSQL", "description": "a server"}, {"label": "SQLite", "description": "a file"}},
		}},
	}))
}

// TestAskUserQuestionAnsweredByClient: a client's answers reach the CLI,
// and everything that reports the decision reports the answer, not an
// "allow": the Decide result, the event, the inbox, the log, the audit.
func TestAskUserQuestionAnsweredByClient(t *testing.T) {
	logs := new(daemontest.LogBuffer)
	td := daemontest.Start(t, &daemontest.Options{Log: logs}, askTurn(), claudetest.Reply(claudetest.Text("SQLite it is.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "pick a database")
	if err != nil {
		t.Fatal(err)
	}
	// The inbox, watched from before the question.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watching, settled := make(chan struct{}), make(chan *daemon.Settled, 1)
	go func() {
		for ch, err := range d.WatchPending(wctx, s.ID) {
			if err != nil {
				return
			}
			if ch.Snapshot {
				close(watching)
			}
			if ch.Settled != nil {
				settled <- ch.Settled
				return
			}
		}
	}()
	<-watching
	var reqID string
	var decided *store.Decision
	var resolved daemon.PermissionResolved
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var statuses []string
	for ev, err := range d.Subscribe(sctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "status" {
			var st daemon.StatusChange
			json.Unmarshal(ev.Raw, &st)
			statuses = append(statuses, string(st.Status))
		}
		if ev.Type == "permission_request" {
			var pr daemon.PermissionRequest
			json.Unmarshal(ev.Raw, &pr)
			if pr.ToolName != "AskUserQuestion" {
				t.Fatalf("permission request for %s", pr.ToolName)
			}
			reqID = pr.RequestID
		}
		if reqID != "" && ev.Type == "status" && strings.Contains(string(ev.Raw), `"waiting"`) {
			if got, _ := d.Session(ctx, s.ID); got.Status != store.StatusWaiting {
				t.Errorf("session status while asking = %s, want waiting", got.Status)
			}
			// An answer that is not one of the options is refused.
			_, _, err := d.Decide(ctx, daemon.Decision{RequestID: reqID, Allow: true, Answers: map[string]string{"Which colour?": "red"}})
			var ia *daemon.InvalidArgumentError
			if !errors.As(err, &ia) || ia.Field != "answers" {
				t.Errorf("bad answers: %v", err)
			}
			if decided, _, err = d.Decide(ctx, daemon.Decision{RequestID: reqID, Allow: true, Client: "alice",
				Answers: map[string]string{"Which database?": "SQLite"}}); err != nil {
				t.Fatal(err)
			}
		}
		if ev.Type == "permission_resolved" {
			json.Unmarshal(ev.Raw, &resolved)
		}
		if ev.Type == "result" {
			break
		}
	}
	reqs := td.Model.Requests()
	content, isErr, ok := reqs[len(reqs)-1].ToolResult("toolu_ask_d1")
	if !ok || isErr || !strings.Contains(content, "SQLite") {
		t.Errorf("tool_result = %q is_error=%v found=%v", content, isErr, ok)
	}
	decs, err := d.Decisions(ctx, store.DecisionFilter{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(decs) != 1 || decs[0].By != "client:alice" || !strings.Contains(string(decs[0].UpdatedInput), "SQLite") {
		t.Errorf("audit = %+v", decs)
	}
	if want := "running waiting running"; !strings.Contains(strings.Join(statuses, " "), want) {
		t.Errorf("statuses = %v, want to contain %q", statuses, want)
	}
	want := map[string]string{"Which database?": "SQLite"}
	if got := permission.Answers(decided.UpdatedInput); !maps.Equal(got, want) {
		t.Errorf("Decide's decision carries the answers %v, want %v", got, want)
	}
	if !maps.Equal(resolved.Answers, want) || resolved.Behavior != "allow" {
		t.Errorf("permission_resolved %+v, want behavior allow with the answers %v", resolved, want)
	}
	select {
	case st := <-settled:
		if st.Outcome != "answered" || st.By != "client:alice" {
			t.Errorf("the inbox says %+v, want answered by client:alice", st)
		}
	case <-time.After(30 * time.Second):
		t.Error("the answer never reached the inbox")
	}
	var line string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "request="+reqID) && strings.Contains(l, "permission decided") {
			line = l
		}
	}
	if !strings.Contains(line, "outcome=answered answer=SQLite by=client:alice") || strings.Contains(line, "allow=") {
		t.Errorf("the log's line for the question: %q, want the answer", line)
	}
}

func TestPermissionExpires(t *testing.T) {
	td := daemontest.Start(t, &daemontest.Options{Broker: &permission.BrokerOptions{
		WatchedTimeout: 300 * time.Millisecond, UnwatchedTimeout: 300 * time.Millisecond}},
		claudetest.Reply(claudetest.ToolUseID("toolu_rm_1", "Bash", map[string]any{"command": "rm -rf build", "description": "clean"})),
		claudetest.Reply(claudetest.Text("Could not clean.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "clean up")
	if err != nil {
		t.Fatal(err)
	}
	var resolved *daemon.PermissionResolved
	var toolUses []daemon.ToolUse
	for ev, err := range d.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "tool_use" && ev.Direction == store.FromDaemon {
			var tu daemon.ToolUse
			json.Unmarshal(ev.Raw, &tu)
			toolUses = append(toolUses, tu)
		}
		if ev.Type == "permission_resolved" {
			resolved = new(daemon.PermissionResolved)
			json.Unmarshal(ev.Raw, resolved)
		}
		if ev.Type == "result" {
			break
		}
	}
	if resolved == nil || resolved.Behavior != "deny" || resolved.By != "timeout" || !strings.Contains(resolved.Message, "expired") {
		t.Fatalf("resolution = %+v", resolved)
	}
	// Partial messages are off: the tool_use event comes from the assistant message.
	if len(toolUses) != 1 || toolUses[0].ToolUseID != "toolu_rm_1" || toolUses[0].Name != "Bash" ||
		!strings.Contains(string(toolUses[0].Input), "rm -rf build") {
		t.Errorf("tool_use events = %+v", toolUses)
	}
	reqs := td.Model.Requests()
	content, isErr, ok := reqs[len(reqs)-1].ToolResult("toolu_rm_1")
	if !ok || !isErr || !strings.Contains(content, "expired") {
		t.Errorf("tool_result = %q is_error=%v found=%v", content, isErr, ok)
	}
	decs, _ := d.Decisions(ctx, store.DecisionFilter{SessionID: s.ID})
	if len(decs) != 1 || decs[0].By != "timeout" || decs[0].Behavior != "deny" {
		t.Errorf("audit = %+v", decs)
	}
}

func TestTwoSubscribersOneSlow(t *testing.T) {
	long := claudetest.Reply(claudetest.Text(strings.Repeat("many small words ", 200)))
	long.ChunkSize = 8
	td := daemontest.Start(t, &daemontest.Options{SubscriberBuffer: 16}, long)
	d, ctx := td.D, td.Ctx
	s, start := idleStreamingSession(t, td)

	var wg sync.WaitGroup
	var fast []store.Event
	var fastErr error
	var fastLast atomic.Int64
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	subscribed := make(chan struct{}, 1)
	wg.Go(func() {
		// One commit may publish more than the ring holds: the reader
		// then reads the rest from the store, and is never dropped.
		for ev, err := range d.Subscribe(fctx, s.ID, start) {
			if err != nil {
				if fctx.Err() == nil {
					fastErr = err
				}
				return
			}
			fast = append(fast, ev.Event)
			fastLast.Store(ev.Seq)
		}
	})
	// The slow one reads one event, then stalls until the turn is over,
	// then reads on: it gets everything, in order, from the store.
	var slowErr error
	var slow []int64
	turnDone := make(chan struct{})
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	wg.Go(func() {
		for ev, err := range d.Subscribe(sctx, s.ID, start) {
			if err != nil {
				if sctx.Err() == nil {
					slowErr = err
				}
				return
			}
			if len(slow) == 0 {
				subscribed <- struct{}{}
				<-turnDone
			}
			slow = append(slow, ev.Seq)
			if ev.Seq >= start+(fastLast.Load()-start)/2 { // the fast one has stopped: its last is final
				scancel()
			}
		}
	})
	if err := d.Send(ctx, s.ID, "talk a lot"); err != nil {
		t.Fatal(err)
	}
	<-subscribed
	end := waitTurns(t, d, ctx, s.ID, 1).LastSeq
	for fastLast.Load() < end && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	fcancel()
	close(turnDone)
	wg.Wait()
	if fastErr != nil {
		t.Fatalf("fast subscriber: %v", fastErr)
	}
	if slowErr != nil {
		t.Fatalf("slow subscriber: %v", slowErr)
	}
	for i, seq := range slow {
		if seq != start+int64(i)+1 {
			t.Fatalf("slow subscriber: event %d has seq %d", i, seq)
		}
	}
	if len(slow) < 100 {
		t.Fatalf("slow subscriber got %d events, want half the turn's", len(slow))
	}
	for i, ev := range fast {
		if ev.Seq != start+int64(i)+1 {
			t.Fatalf("fast subscriber: event %d has seq %d", i, ev.Seq)
		}
	}
	// The CLI may print after the result (session_state_changed): the log
	// is read again now that the fast subscriber has stopped.
	got, err := d.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if last := fast[len(fast)-1].Seq; last < end || last > got.LastSeq || len(fast) < 200 {
		t.Errorf("fast subscriber got %d events up to seq %d; the turn ended at %d, the log at %d", len(fast), last, end, got.LastSeq)
	}
	// A new subscription picks up where the slow one stopped (half way).
	slowLast := slow[len(slow)-1]
	end = got.LastSeq
	rest := untilIdleFrom(t, d, ctx, s.ID, slowLast, end)
	if len(rest) != int(end-slowLast) {
		t.Errorf("resubscribed from %d: %d events, want %d", slowLast, len(rest), end-slowLast)
	}
}

// waitTurns waits until the session is idle after n turns.
func waitTurns(t *testing.T, d *daemon.Daemon, ctx context.Context, id string, n int64) *store.Session {
	t.Helper()
	for {
		got, err := d.Session(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == store.StatusIdle && got.Totals.Turns == n {
			return got
		}
		select {
		case <-ctx.Done():
			t.Fatalf("session %s: %s after %d turns, want idle after %d", id, got.Status, got.Totals.Turns, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// untilIdleFrom reads from after up to seq end.
func untilIdleFrom(t *testing.T, d *daemon.Daemon, ctx context.Context, id string, after, end int64) []store.Event {
	t.Helper()
	var evs []store.Event
	for ev, err := range d.Subscribe(ctx, id, after) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq != after+int64(len(evs))+1 {
			t.Fatalf("event %d has seq %d", len(evs), ev.Seq)
		}
		evs = append(evs, ev.Event)
		if ev.Seq == end {
			break
		}
	}
	return evs
}

func TestBudgetStopsSession(t *testing.T) {
	turn := claudetest.Reply(claudetest.Text("That was expensive."))
	turn.InputTokens, turn.OutputTokens = 200000, 50000
	td := daemontest.Start(t, nil, turn, turn)
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir(), MaxBudgetUsd: 0.01}, "spend")
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for ev, err := range d.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "error" {
			var e daemon.ErrorReport
			json.Unmarshal(ev.Raw, &e)
			errs = append(errs, e.Message)
		}
	} // ends with the session
	got, err := d.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusClosed || !strings.Contains(got.Error, "budget") || got.Totals.CostUSD < 0.01 {
		t.Fatalf("after spending: status %s, error %q, cost %v", got.Status, got.Error, got.Totals.CostUSD)
	}
	if len(errs) == 0 || !strings.Contains(errs[len(errs)-1], "budget of $0.0100 spent") {
		t.Errorf("error events = %q", errs)
	}
	var se *daemon.StateError
	if _, err := d.Resume(ctx, s.ID, "more"); !errors.As(err, &se) || !strings.Contains(err.Error(), "budget") {
		t.Errorf("Resume after the budget is spent: %v", err)
	}
}

func TestAlwaysAllowBecomesRule(t *testing.T) {
	bash := func(id string) claudetest.Turn {
		return claudetest.Reply(claudetest.ToolUseID(id, "Bash", map[string]any{"command": "touch made.txt", "description": "make a file"}))
	}
	td := daemontest.Start(t, nil,
		bash("toolu_a1"), claudetest.Reply(claudetest.Text("Made it.")),
		bash("toolu_a2"), claudetest.Reply(claudetest.Text("Again.")),
		bash("toolu_a3"), claudetest.Reply(claudetest.Text("Third.")),
		bash("toolu_a4"), claudetest.Reply(claudetest.Text("Other session.")))
	d, ctx := td.D, td.Ctx
	cwd := t.TempDir()
	// turn sends prompt to session id (creating one when id is "") and
	// follows it to its result, answering permission requests with allow
	// (always when asked); it returns the requests and resolutions seen.
	turn := func(id string, always bool) (string, []daemon.PermissionRequest, []daemon.PermissionResolved) {
		var after int64
		if id == "" {
			s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: cwd}, "make a file")
			if err != nil {
				t.Fatal(err)
			}
			id = s.ID
		} else {
			s, err := d.Session(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			after = s.LastSeq
			if err := d.Send(ctx, id, "make it again"); err != nil {
				t.Fatal(err)
			}
		}
		var asked []daemon.PermissionRequest
		var resolved []daemon.PermissionResolved
		for ev, err := range d.Subscribe(ctx, id, after) {
			if err != nil {
				t.Fatal(err)
			}
			switch b := ev.Body.(type) {
			case *daemon.PermissionRequest:
				asked = append(asked, *b)
				if _, _, err := d.Decide(ctx, daemon.Decision{RequestID: b.RequestID, Allow: true, Always: always, Client: "bob"}); err != nil {
					t.Fatal(err)
				}
			case *daemon.PermissionResolved:
				resolved = append(resolved, *b)
			}
			if ev.Type == "result" {
				break
			}
		}
		return id, asked, resolved
	}

	id, asked, res := turn("", true)
	if len(asked) != 1 || len(res) != 1 || res[0].By != "client:bob" {
		t.Fatalf("first turn: asked %+v, resolutions %+v", asked, res)
	}
	// The person was shown the exact rules "always" stores: the CLI's
	// suggestions (a localSettings rule, and acceptEdits for the session).
	rules, err := d.Rules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var stored []daemon.RuleSpec
	var bashRule *store.Rule
	for _, r := range rules {
		stored = append(stored, daemon.RuleSpec{Pattern: r.Spec, Behavior: r.Behavior, ProjectDir: r.ProjectDir, SessionID: r.SessionID})
		if r.Spec == "Bash(touch made.txt)" {
			bashRule = r
		}
	}
	if diff := cmp.Diff(stored, asked[0].AlwaysRules); diff != "" {
		t.Errorf("rules shown with the request differ from those stored (-stored +shown):\n%s", diff)
	}
	if r := bashRule; r == nil || r.Behavior != "allow" || r.ProjectDir != cwd || r.SessionID != "" {
		t.Fatalf("stored rules %+v: want Bash(touch made.txt) allowed in project %s (the CLI suggests localSettings)", stored, cwd)
	}
	// The daemon keeps the rule: the CLI wrote nothing to the project.
	if b, err := os.ReadFile(filepath.Join(cwd, ".claude", "settings.local.json")); err == nil {
		t.Fatalf("the CLI kept the permission in the project's settings.local.json: %s", b)
	}
	// The same session: the daemon's rule settles it, audited.
	if _, asked, res := turn(id, false); len(asked) != 0 || len(res) != 1 || res[0].By != "rule" || res[0].RuleID != bashRule.ID {
		t.Fatalf("second turn: asked %+v, resolutions %+v", asked, res)
	}
	// "rules rm" takes effect in the running session: it asks again.
	if err := d.RemoveRule(ctx, bashRule.ID); err != nil {
		t.Fatal(err)
	}
	if _, asked, res := turn(id, false); len(asked) != 1 || len(res) != 1 || res[0].By != "client:bob" {
		t.Fatalf("after rules rm: asked %+v, resolutions %+v", asked, res)
	}
	// A new session in the project asks too: nothing was left behind.
	if _, asked, _ := turn("", false); len(asked) != 1 {
		t.Fatalf("a new session after rules rm: asked %+v", asked)
	}
}

func TestInterruptWithdrawsPendingRequest(t *testing.T) {
	td := daemontest.Start(t, nil,
		claudetest.Reply(claudetest.ToolUseID("toolu_w1", "Bash", map[string]any{"command": "rm -rf /tmp/x", "description": "clean"})),
		claudetest.Reply(claudetest.Text("Stopped.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "clean")
	if err != nil {
		t.Fatal(err)
	}
	// The withdrawal (the request's handler, its context cancelled) and
	// the turn's result (the reader) are logged by two goroutines: either
	// may come first.
	var resolved *daemon.PermissionResolved
	sawResult := false
	for ev, err := range d.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "permission_request" {
			if err := d.Interrupt(ctx, s.ID, "test"); err != nil {
				t.Fatal(err)
			}
		}
		if ev.Type == "permission_resolved" {
			resolved = new(daemon.PermissionResolved)
			json.Unmarshal(ev.Raw, resolved)
		}
		sawResult = sawResult || ev.Type == "result"
		if sawResult && resolved != nil {
			break
		}
	}
	if resolved == nil || resolved.Behavior != "withdrawn" {
		t.Fatalf("resolution after the interrupt = %+v, want withdrawn", resolved)
	}
	if p := d.Pending(s.ID); len(p) != 0 {
		t.Errorf("still pending after the interrupt: %+v", p)
	}
}

// An interrupt from a client ends the turn as interrupted by that client,
// not as a failure: the watchers get the interrupted event naming it, and
// no error report of the result the CLI ends the turn with (its internal
// diagnostic); the next turn runs, and a failure after it is still
// reported.
func TestInterruptIsNoError(t *testing.T) {
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("slow ", 2000))}, ChunkSize: 5, DeltaDelay: 20 * time.Millisecond}
	td := daemontest.Start(t, nil, slow, claudetest.Reply(claudetest.Text("Again.")), claudetest.Error(400, "invalid_request_error", "bad"))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir(), IncludePartialMessages: true}, "go slowly")
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	// turn collects the types of the events up to the turn's idle status,
	// interrupting the turn at its first text delta when asked.
	turn := func(interrupt bool) (types []string, by, errMsg string) {
		t.Helper()
		sawResult := false
		for ev, err := range d.Subscribe(ctx, s.ID, last) {
			if err != nil {
				t.Fatal(err)
			}
			last = ev.Seq
			types = append(types, ev.Type)
			switch ev.Type {
			case "text_delta":
				if interrupt {
					interrupt = false
					if err := d.Interrupt(ctx, s.ID, "alice"); err != nil {
						t.Fatal(err)
					}
				}
			case "interrupted":
				var i daemon.Interrupted
				json.Unmarshal(ev.Raw, &i)
				by = i.By
			case "error":
				var e daemon.ErrorReport
				json.Unmarshal(ev.Raw, &e)
				errMsg = e.Message
			case "result":
				sawResult = true
			case "status":
				if sawResult && strings.Contains(string(ev.Raw), `"idle"`) {
					return types, by, errMsg
				}
			}
		}
		t.Fatal("the subscription ended")
		return
	}
	if _, by, errMsg := turn(true); by != "client:alice" || errMsg != "" {
		t.Errorf("interrupted turn: interrupted by %q, error report %q; want client:alice and none", by, errMsg)
	}
	if err := d.Send(ctx, s.ID, "again"); err != nil {
		t.Fatal(err)
	}
	if types, by, errMsg := turn(false); by != "" || errMsg != "" || !slices.Contains(types, "result") {
		t.Errorf("the turn after: %v, interrupted by %q, error %q", types, by, errMsg)
	}
	if err := d.Send(ctx, s.ID, "fail"); err != nil {
		t.Fatal(err)
	}
	if _, _, errMsg := turn(false); errMsg == "" {
		t.Error("a failed turn after an interrupted one has no error report")
	}
}

// TestSendToFailedSessionAdvises: a prompt to a failed session whose CLI
// never began a conversation (here a CLI that exits at once) said "ResumeSession
// (claudectl resume) starts one", and the resume then refused; it now gives
// the resume's reason and what to do instead.
func TestSendToFailedSessionAdvises(t *testing.T) {
	cli := filepath.Join(t.TempDir(), "claude")
	script := "#!/bin/sh\n[ \"$1\" = --version ] && echo '2.1.330 (Claude Code)' && exit 0\nexit 1\n"
	if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	td := daemontest.Start(t, &daemontest.Options{CLIPath: cli})
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "")
	if err != nil {
		t.Logf("Create: %v", err) // the session may fail while it starts
		ss, lerr := d.Sessions(ctx, store.SessionFilter{})
		if lerr != nil || len(ss) != 1 {
			t.Fatalf("sessions: %v, %v", ss, lerr)
		}
		s = ss[0]
	}
	waitStatus(t, d, ctx, s.ID, store.StatusFailed)
	_, rerr := d.Resume(ctx, s.ID, "")
	err = d.Send(ctx, s.ID, "hello")
	var se *daemon.StateError
	if !errors.As(err, &se) || strings.Contains(err.Error(), "claudectl resume") || !strings.Contains(err.Error(), "create a new session") {
		t.Errorf("Send to a failed session that never began a conversation: %v; want the advice that applies (Resume says: %v)", err, rerr)
	}
	t.Logf("Send: %v", err)
}

// A CLI that closes its stdout but keeps running fails its session, with
// the SDK's reason, once the grace period is over: it does not stay
// running for ever.
func TestCLIThatClosesItsOutputFails(t *testing.T) {
	cli := filepath.Join(t.TempDir(), "claude")
	script := `#!/bin/sh
[ "$1" = --version ] && echo '2.1.330 (Claude Code)' && exit 0
read -r line
id=$(printf '%s' "$line" | sed -n 's/.*"request_id":"\([^"]*\)".*/\1/p')
printf '{"type":"control_response","response":{"subtype":"success","request_id":"%s","response":{"commands":[]}}}\n' "$id"
printf '{"type":"system","subtype":"init","session_id":"s-closeout","model":"m","tools":[],"cwd":"/"}\n'
exec 1>&-
echo "closed stdout" >&2
exec sleep 1000
`
	if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	td := daemontest.Start(t, &daemontest.Options{CLIPath: cli,
		Transport: &claude.ProcessTransport{GracePeriod: 300 * time.Millisecond, KillDelay: 300 * time.Millisecond}})
	d := td.D
	s, err := d.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := d.Session(td.Ctx, s.ID)
	for ; err == nil && got.Status != store.StatusFailed; got, err = d.Session(td.Ctx, s.ID) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("session %s is still %s 20s after its CLI closed its output (a grace period of 300ms)", s.ID, got.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failed after %v: %s", time.Since(start).Round(time.Millisecond), got.Error)
	if want := "CLI closed its output but kept running; it was stopped after 300ms"; !strings.Contains(got.Error, want) || !strings.Contains(got.Error, "closed stdout") {
		t.Errorf("the session's error = %q, want %q and the stderr tail", got.Error, want)
	}
}
