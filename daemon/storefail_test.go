package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
	"github.com/claudectl/claudectl/store/sqlite/sqlitetest"
)

// fillStore makes the daemon's store full: once sqlitetest.Fill is on, it
// writes to a scratch session until a write fails, so that no free page is
// left for the test's own writes.
func fillStore(t *testing.T, td *daemontest.Daemon) {
	t.Helper()
	db, ok := td.DB().(*sqlite.DB)
	if !ok {
		t.Skip("a full disk is staged on SQLite; the PostgreSQL store's server failures are TestPostgresRestartUnderLoad's")
	}
	scratch := &store.Session{Cwd: t.TempDir(), Status: store.StatusClosed}
	if err := db.CreateSession(td.Ctx, scratch); err != nil {
		t.Fatal(err)
	}
	if err := sqlitetest.Fill(db, true); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{4000, 1000, 300, 100, 30, 1} { // the free space in pages too
		pad := []byte(`{"type":"pad","x":"` + strings.Repeat("x", size) + `"}`)
		for i := 0; ; i++ {
			_, err := db.Append(td.Ctx, &store.Event{SessionID: scratch.ID, Direction: store.FromDaemon, Type: "pad", Raw: pad})
			if errors.Is(err, store.ErrWriteFailed) {
				break
			}
			if err != nil || i > 100_000 {
				t.Fatalf("filling the store: %d writes, %v", i, err)
			}
		}
	}
}

// inUserWords fails the test if msg, which a client shows, names the
// daemon's internal layers (a package, the store's call) or says a
// consequence (a cancelled write) instead of the store's failure.
func inUserWords(t *testing.T, what, msg string) {
	t.Helper()
	msg = strings.TrimPrefix(msg, "daemon: ") // the API strips a leading package name
	for _, internal := range []string{"sqlite:", "postgres:", "daemon:", "claude:", "append:", "context canceled", "not running"} {
		if strings.Contains(msg, internal) {
			t.Errorf("%s says %q: %s", what, internal, msg)
		}
	}
}

// A full store stops the session loudly: the prompt is refused before it
// reaches the CLI, subscribers get the error, Health says why; once the
// store writes again the log records the gap and the next prompt resumes
// the session.
func TestFullStoreStopsSessionLoudly(t *testing.T) {
	logs := new(daemontest.LogBuffer)
	td := daemontest.Start(t, &daemontest.Options{Log: logs},
		claudetest.Reply(claudetest.Text("Hello.")),
		claudetest.Reply(claudetest.Text("Back again.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "hi")
	if err != nil {
		t.Fatal(err)
	}
	before := waitStatus(t, d, ctx, s.ID, store.StatusIdle)
	subErr := make(chan error, 1)
	go func() {
		for _, err := range d.Subscribe(ctx, s.ID, before.LastSeq) {
			if err != nil {
				subErr <- err
				return
			}
		}
		subErr <- nil
	}()
	time.Sleep(100 * time.Millisecond) // subscribed
	requests := len(td.Model.Requests())

	fillStore(t, td)
	err = d.Send(ctx, s.ID, "this prompt cannot be stored")
	if !errors.Is(err, store.ErrWriteFailed) {
		t.Fatalf("Send on a full store: %v, want an error wrapping store.ErrWriteFailed", err)
	}
	if !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Send's error does not say why: %v", err)
	}
	inUserWords(t, "Send's error", err.Error())
	select {
	case err := <-subErr:
		if !errors.Is(err, store.ErrWriteFailed) {
			t.Errorf("the subscriber ended with %v, want the store's failure", err)
		} else {
			inUserWords(t, "the subscriber's error", err.Error())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the subscriber was not told")
	}
	if h, _ := d.StoreHealth(); h.Err == nil || h.Since.IsZero() {
		t.Errorf("store health while full: %+v", h)
	}
	// Decisions and other sessions' prompts are refused too.
	if _, _, err := d.Decide(ctx, daemon.Decision{RequestID: "nope", Allow: true}); err == nil {
		t.Error("Decide succeeded on a full store")
	}
	for d.Running() > 0 { // the CLI is closed
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(td.Model.Requests()); n != requests {
		t.Errorf("the model got %d requests after the store filled: the prompt reached the CLI", n-requests)
	}
	if err := d.Send(ctx, s.ID, "still full"); !errors.Is(err, store.ErrWriteFailed) {
		t.Errorf("Send to the stopped session while still full: %v", err)
	} else {
		inUserWords(t, "Send's error while still full", err.Error())
	}

	// The store is tried again every 50 ms (daemontest): one warning,
	// not one a try. The first comes with the first try, whenever a busy
	// machine runs it; 15 more tries' time must add none.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logs.String(), "the store still cannot write"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no warning that the store still cannot write in 30 s")
		}
	}
	time.Sleep(15 * 50 * time.Millisecond)
	if n := strings.Count(logs.String(), "the store still cannot write"); n != 1 {
		t.Errorf("the daemon warned %d times in 15 tries that the store still cannot write, want once (then once a minute)", n)
	}

	if err := sqlitetest.Fill(td.DB().(*sqlite.DB), false); err != nil {
		t.Fatal(err)
	}
	for { // the daemon tries the store again and records the gap
		h, waiting := d.StoreHealth()
		if h.Err == nil && waiting == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the store did not recover: %v, %d sessions wait for their gap record", h.Err, waiting)
		case <-time.After(20 * time.Millisecond):
		}
	}
	got := waitStatus(t, d, ctx, s.ID, store.StatusSuspended)
	var gap *daemon.Gap
	for _, ev := range readLog(t, d, ctx, got) {
		if g, ok := ev.Body.(*daemon.Gap); ok {
			gap = g
		}
	}
	if gap == nil || gap.Lost < 1 || gap.From.IsZero() || gap.To.Before(gap.From) || !strings.Contains(gap.Reason, "disk full") {
		t.Fatalf("gap record: %+v", gap)
	}
	inUserWords(t, "the gap record's reason", gap.Reason)
	// The next prompt resumes the session.
	if err := d.Send(ctx, s.ID, "are you back?"); err != nil {
		t.Fatal(err)
	}
	after := waitStatus(t, d, ctx, s.ID, store.StatusIdle)
	if after.Totals.Turns != 2 {
		t.Errorf("turns after the resume: %d", after.Totals.Turns)
	}
	reqs := td.Model.Requests()
	if conv := reqs[len(reqs)-1].Transcript(); strings.Contains(conv, "cannot be stored") || !strings.Contains(conv, "are you back?") {
		t.Errorf("the resumed conversation:\n%s", conv)
	}
}

// readLog returns session s's log up to s.LastSeq, failing the test if
// its seqs are not 1, 2, 3…
func readLog(t *testing.T, d *daemon.Daemon, ctx context.Context, s *store.Session) []daemon.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var evs []daemon.Event
	for ev, err := range d.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(len(evs)) + 1; ev.Seq != want {
			t.Fatalf("seq %d where %d was due", ev.Seq, want)
		}
		evs = append(evs, ev)
		if ev.Seq >= s.LastSeq {
			break
		}
	}
	return evs
}

// sessionFull is a store on which, while armed, no event of session id
// can be stored; every other write goes through. With it a test stages
// the store failing again right after the daemon's retry stored a
// session's gap record (as a full disk does that has room for a small
// commit only: SQLite reuses the WAL's blocks). Nothing on SQLite
// implements the optional store interfaces the wrapper hides.
type sessionFull struct {
	store.Store
	id    string
	armed atomic.Bool
}

var errSessionFull = fmt.Errorf("%w: disk full (staged)", store.ErrWriteFailed)

func (f *sessionFull) refuse(evs ...*store.Event) error {
	if !f.armed.Load() {
		return nil
	}
	for _, ev := range evs {
		if ev.SessionID == f.id {
			return errSessionFull
		}
	}
	return nil
}

func (f *sessionFull) Append(ctx context.Context, ev *store.Event) (int64, error) {
	if err := f.refuse(ev); err != nil {
		return 0, err
	}
	return f.Store.Append(ctx, ev)
}

func (f *sessionFull) AppendBatch(ctx context.Context, evs ...*store.Event) error {
	if err := f.refuse(evs...); err != nil {
		return err
	}
	return f.Store.AppendBatch(ctx, evs...)
}

func (f *sessionFull) AppendAsync(ctx context.Context, done func(error), evs ...*store.Event) error {
	if err := f.refuse(evs...); err != nil {
		return err
	}
	return f.Store.AppendAsync(ctx, done, evs...)
}

func (f *sessionFull) AppendUpdateAsync(ctx context.Context, done func(error), ev *store.Event, upd store.SessionUpdate) error {
	if err := f.refuse(ev); err != nil {
		return err
	}
	return f.Store.AppendUpdateAsync(ctx, done, ev, upd)
}

func (f *sessionFull) AppendResultAsync(ctx context.Context, done func(*store.UsageRecord, *store.Session, error), ev *store.Event, in store.UsageInput, follow *store.ResultFollow) error {
	if err := f.refuse(ev); err != nil {
		return err
	}
	return f.Store.AppendResultAsync(ctx, done, ev, in, follow)
}

// A session stopped by the store and resumed by a prompt right after the
// daemon's retry stored its gap record, while the store still cannot take
// its events, is stopped again by the first of them (the resume's status).
// The prompt is refused as the store's failure (store.ErrWriteFailed,
// saying why), never as a session that is not running, and never reaches
// the model; once the store takes the session's events again the next
// prompt resumes it, with a gap record for each stop.
func TestResumeStoppedAgainByTheStore(t *testing.T) {
	if daemontest.OnPostgres() {
		t.Skip("staged on SQLite: the wrapper would hide the PostgreSQL store's optional interfaces (leases, tails)")
	}
	full := &sessionFull{}
	td := daemontest.Start(t, &daemontest.Options{WrapStore: func(s store.Store) store.Store { full.Store = s; return full }},
		claudetest.Reply(claudetest.Text("Hello.")),
		claudetest.Reply(claudetest.Text("Back again.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "hi")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, ctx, s.ID, store.StatusIdle)
	requests := len(td.Model.Requests())
	// recovered disarms the failure and waits until the daemon's retry
	// stored the session's gap record and its suspended status.
	recovered := func() {
		t.Helper()
		full.armed.Store(false)
		for {
			if _, waiting := d.StoreHealth(); waiting == 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatal("the session's gap record was never stored")
			case <-time.After(20 * time.Millisecond):
			}
		}
		waitStatus(t, d, ctx, s.ID, store.StatusSuspended)
		for d.Running() > 0 { // its CLI is closed
			time.Sleep(10 * time.Millisecond)
		}
	}

	full.id = s.ID
	full.armed.Store(true)
	if err := d.Send(ctx, s.ID, "PROMPT-ONE"); !errors.Is(err, store.ErrWriteFailed) {
		t.Fatalf("Send to a session whose events cannot be stored: %v", err)
	}
	recovered()

	full.armed.Store(true)
	err = d.Send(ctx, s.ID, "PROMPT-TWO")
	if !errors.Is(err, store.ErrWriteFailed) || errors.Is(err, daemon.ErrNotRunning) {
		t.Fatalf("Send resuming a session the store stops again: %v; want the store's failure, not %v", err, daemon.ErrNotRunning)
	}
	for _, want := range []string{s.ID, "stopped again", "disk full"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Send's error does not say %q: %v", want, err)
		}
	}
	recovered()
	if n := len(td.Model.Requests()); n != requests {
		t.Errorf("the model got %d requests while the store failed: a refused prompt reached it", n-requests)
	}

	if err := d.Send(ctx, s.ID, "are you back?"); err != nil {
		t.Fatalf("Send once the store takes the session's events again: %v", err)
	}
	after := waitStatus(t, d, ctx, s.ID, store.StatusIdle)
	reqs := td.Model.Requests()
	if conv := reqs[len(reqs)-1].Transcript(); strings.Contains(conv, "PROMPT-") || !strings.Contains(conv, "are you back?") {
		t.Errorf("the resumed conversation:\n%s", conv)
	}
	// The log: neither refused prompt, a gap record for each stop saying
	// why.
	var gaps int
	for _, ev := range readLog(t, d, ctx, after) {
		if strings.Contains(string(ev.Raw), "PROMPT-") {
			t.Errorf("a refused prompt is in the log: seq %d, %s", ev.Seq, ev.Raw)
		}
		if g, ok := ev.Body.(*daemon.Gap); ok {
			gaps++
			if g.Lost < 1 || !strings.Contains(g.Reason, "disk full") {
				t.Errorf("gap record %d: %+v", gaps, g)
			}
		}
	}
	if gaps != 2 {
		t.Errorf("%d gap records, want one for each stop", gaps)
	}
}

// While the store cannot write, a session it stopped mid-turn is shown as
// what it is: suspended, saying why, to Session, Sessions and the session
// watchers, not as the running its last stored status says (the status
// change that would say suspended could not be stored). Once the store
// writes again the stored status says suspended.
func TestFullStoreShowsStoppedSessionSuspended(t *testing.T) {
	td := daemontest.Start(t, nil,
		claudetest.Reply(claudetest.ToolUseID("toolu_f1", "Bash", map[string]any{"command": "rm -rf /tmp/x", "description": "clean"})),
		claudetest.Reply(claudetest.Text("Stopped.")))
	d, ctx := td.D, td.Ctx
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "clean")
	if err != nil {
		t.Fatal(err)
	}
	waitPending(t, d, ctx, s.ID) // mid-turn: stored running
	watched := make(chan *store.Session, 64)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for ch, err := range d.WatchSessions(wctx) {
			if err != nil {
				return
			}
			for _, ws := range ch.Sessions {
				if ws.ID == s.ID {
					select {
					case watched <- ws:
					case <-wctx.Done():
						return
					}
				}
			}
		}
	}()

	fillStore(t, td)
	// The interrupt's line to the CLI cannot be logged: the session stops.
	if err := d.Interrupt(ctx, s.ID, "test"); !errors.Is(err, store.ErrWriteFailed) {
		t.Fatalf("Interrupt on a full store: %v", err)
	} else {
		inUserWords(t, "Interrupt's error", err.Error())
	}
	for d.Running() > 0 { // the CLI is closed
		time.Sleep(10 * time.Millisecond)
	}
	// A subscriber that comes now gets the stored events, then the
	// store's failure: not a wait for a CLI that cannot start.
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	var subErr error
	for _, err := range d.Subscribe(sctx, s.ID, 0) {
		if err != nil {
			subErr = err
			break
		}
	}
	scancel()
	if !errors.Is(subErr, store.ErrWriteFailed) {
		t.Errorf("Subscribe to the stopped session while the store is full ended with %v, want the store's failure", subErr)
	} else {
		inUserWords(t, "the new subscriber's error", subErr.Error())
	}
	if _, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "hello"); !errors.Is(err, store.ErrWriteFailed) {
		t.Errorf("Create on a full store: %v", err)
	} else {
		inUserWords(t, "Create's error", err.Error())
	}
	if h, waiting := d.StoreHealth(); h.Err == nil || waiting < 1 {
		t.Fatalf("the store recovered by itself (%v, %d waiting): the test stages nothing", h.Err, waiting)
	}
	if st, err := td.DB().Session(ctx, s.ID); err != nil || st.Status != store.StatusRunning {
		t.Fatalf("stored status while full: %+v, %v; the test wants running, as the store could not record the stop", st, err)
	}
	got, err := d.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusSuspended || !strings.Contains(got.Error, "disk full") {
		t.Errorf("Session while the store is full: status %s, error %q; want suspended, saying the disk is full", got.Status, got.Error)
	}
	inUserWords(t, "the stopped session's error", got.Error)
	all, err := d.Sessions(ctx, store.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ls := range all {
		if ls.ID == s.ID && ls.Status != store.StatusSuspended {
			t.Errorf("Sessions while the store is full: %s is %s, want suspended", ls.ID, ls.Status)
		}
	}
	deadline := time.After(30 * time.Second)
	for seen := false; !seen; {
		select {
		case ws := <-watched:
			seen = ws.Status == store.StatusSuspended
		case <-deadline:
			t.Fatal("WatchSessions never showed the stopped session suspended")
		}
	}

	if err := sqlitetest.Fill(td.DB().(*sqlite.DB), false); err != nil {
		t.Fatal(err)
	}
	for {
		if h, waiting := d.StoreHealth(); h.Err == nil && waiting == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the gap record was never stored")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if got, err := td.DB().Session(ctx, s.ID); err != nil || got.Status != store.StatusSuspended {
		t.Errorf("stored status once the store writes again: %+v, %v", got, err)
	}
}

// auditFull is a store that, while armed, cannot hold a decision in its
// audit trail; every other write goes through (as on a full disk whose
// small writes still fit in the WAL's reused blocks: the daemon's probe
// write succeeds, the decision's does not).
type auditFull struct {
	store.Store
	armed atomic.Bool
}

func (f *auditFull) AddDecision(ctx context.Context, d *store.Decision) error {
	if f.armed.Load() {
		return fmt.Errorf("sqlite: AddDecision %q: %w", d.RequestID, errSessionFull)
	}
	return f.Store.AddDecision(ctx, d)
}

// A decision the audit trail cannot hold is refused to its client as the
// store's failure (Unavailable), not acknowledged as allowed while the CLI
// is denied the tool.
func TestDecisionNotAuditedIsRefused(t *testing.T) {
	if daemontest.OnPostgres() {
		t.Skip("staged on SQLite: the wrapper would hide the PostgreSQL store's optional interfaces")
	}
	full := &auditFull{}
	td := daemontest.Start(t, &daemontest.Options{WrapStore: func(s store.Store) store.Store { full.Store = s; return full }},
		claudetest.Reply(claudetest.ToolUseID("toolu_a1", "Bash", map[string]any{"command": "touch audited.txt", "description": "touch"})),
		claudetest.Reply(claudetest.Text("Done.")))
	d, ctx := td.D, td.Ctx
	dir := t.TempDir()
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: dir}, "touch")
	if err != nil {
		t.Fatal(err)
	}
	waitPending(t, d, ctx, s.ID)
	req := d.Pending(s.ID)[0].Request.RequestID
	full.armed.Store(true)
	got, _, err := d.Decide(ctx, daemon.Decision{RequestID: req, Allow: true, Client: "test"})
	if !errors.Is(err, store.ErrWriteFailed) {
		t.Fatalf("Decide whose decision the audit trail cannot hold: %+v, %v; want the store's failure", got, err)
	}
	inUserWords(t, "Decide's error", err.Error())
	if !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Decide's error does not say why: %v", err)
	}
	full.armed.Store(false)
	for d.Running() > 0 { // the store stopped the session
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, "audited.txt")); err == nil {
		t.Error("the tool ran although its decision was never recorded")
	}
}
