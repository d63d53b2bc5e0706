package daemon_test

import (
	"context"
	"errors"
	"strings"
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

// A full store stops the session loudly: the prompt is refused before it
// reaches the CLI, subscribers get the error, Health says why; once the
// store writes again the log records the gap and the next prompt resumes
// the session.
func TestFullStoreStopsSessionLoudly(t *testing.T) {
	td := daemontest.Start(t, nil,
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
	select {
	case err := <-subErr:
		if !errors.Is(err, store.ErrWriteFailed) {
			t.Errorf("the subscriber ended with %v, want the store's failure", err)
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
	var last int64
	rctx, cancel := context.WithCancel(ctx)
	for ev, err := range d.Subscribe(rctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq != last+1 {
			t.Errorf("seq %d after %d", ev.Seq, last)
		}
		last = ev.Seq
		if g, ok := ev.Body.(*daemon.Gap); ok {
			gap = g
		}
		if ev.Seq >= got.LastSeq {
			break
		}
	}
	cancel()
	if gap == nil || gap.Lost < 1 || gap.From.IsZero() || gap.To.Before(gap.From) || !strings.Contains(gap.Reason, "disk full") {
		t.Fatalf("gap record: %+v", gap)
	}
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
