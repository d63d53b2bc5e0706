package daemon_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.M(m)) }

// newDaemon starts a daemon whose sessions run the real CLI against a
// scripted fake API.
func newDaemon(t *testing.T, turns ...claudetest.Turn) (*daemon.Daemon, context.Context) {
	t.Helper()
	return newDaemonBuf(t, 0, turns...)
}

func newDaemonBuf(t *testing.T, subBuf int, turns ...claudetest.Turn) (*daemon.Daemon, context.Context) {
	t.Helper()
	d := daemontest.Start(t, &daemontest.Options{SubscriberBuffer: subBuf}, turns...)
	return d.D, d.Ctx
}

// untilIdle reads events until the status after a result is idle.
func untilIdle(t *testing.T, d *daemon.Daemon, ctx context.Context, id string, after int64) []store.Event {
	t.Helper()
	var evs []store.Event
	sawResult := false
	for ev, err := range d.Subscribe(ctx, id, after) {
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		evs = append(evs, ev.Event)
		if ev.Type == "result" {
			sawResult = true
		}
		if sawResult && ev.Type == "status" && strings.Contains(string(ev.Raw), `"idle"`) {
			return evs
		}
	}
	t.Fatalf("subscription ended before idle; got %d events", len(evs))
	return nil
}

func TestCreateReplyAndReplay(t *testing.T) {
	d, ctx := newDaemon(t, claudetest.Reply(claudetest.Text("Hello from the fake.")))
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir(), IncludePartialMessages: true}, "Say hello")
	if err != nil {
		t.Fatal(err)
	}
	evs := untilIdle(t, d, ctx, s.ID, 0)
	var text, streamed string
	var report *daemon.UsageReport
	resultSeq := int64(0)
	for i, ev := range evs {
		switch {
		case ev.Type == "result":
			resultSeq = ev.Seq
		case ev.Type == "text_delta" && ev.Direction == store.FromDaemon:
			var td daemon.TextDelta
			if err := json.Unmarshal(ev.Raw, &td); err != nil {
				t.Fatal(err)
			}
			streamed += td.Text
			// Stored with the stream line it was made of, right after it.
			if i == 0 || evs[i-1].Type != "stream_event" || evs[i-1].Direction != store.FromCLI ||
				!strings.Contains(string(evs[i-1].Raw), "text_delta") {
				t.Errorf("text_delta (seq %d) does not follow its stream line", ev.Seq)
			}
		case ev.Type == "usage_report" && ev.Direction == store.FromDaemon:
			report = new(daemon.UsageReport)
			if err := json.Unmarshal(ev.Raw, report); err != nil {
				t.Fatal(err)
			}
			if resultSeq == 0 {
				t.Errorf("usage_report (seq %d) before the result", ev.Seq)
			}
		}
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d, want %d", i, ev.Seq, i+1)
		}
		if ev.Type == "assistant" {
			var m struct {
				Message struct {
					Content []struct{ Text string }
				}
			}
			json.Unmarshal(ev.Raw, &m)
			for _, c := range m.Message.Content {
				text += c.Text
			}
		}
	}
	if text != "Hello from the fake." {
		t.Errorf("assistant text = %q", text)
	}
	if streamed != text {
		t.Errorf("text_delta events = %q, want %q", streamed, text)
	}
	if report == nil {
		t.Errorf("no usage_report event")
	} else if report.Turn.Turn != 1 || report.Turn.EventSeq != resultSeq || report.Totals.Turns != 1 ||
		report.Totals.OutputTokens != report.Turn.OutputTokens || report.Turn.OutputTokens == 0 {
		t.Errorf("usage_report = %+v, result seq %d", report, resultSeq)
	}
	got, err := d.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ClaudeSessionID == "" || got.Totals.Turns != 1 {
		t.Errorf("session after the turn: claude id %q, turns %d", got.ClaudeSessionID, got.Totals.Turns)
	}
	// Replay from the middle gives the same events.
	var replay []store.Event
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for ev, err := range d.Subscribe(rctx, s.ID, 2) {
		if err != nil {
			t.Fatal(err)
		}
		replay = append(replay, ev.Event)
		if ev.Seq == evs[len(evs)-1].Seq {
			break
		}
	}
	if len(replay) != len(evs)-2 || replay[0].Seq != 3 || string(replay[0].Raw) != string(evs[2].Raw) {
		t.Errorf("replay after 2: %d events, want %d", len(replay), len(evs)-2)
	}
	if err := d.CloseSession(ctx, s.ID, "test"); err != nil {
		t.Fatal(err)
	}
	got, _ = d.Session(ctx, s.ID)
	if got.Status != store.StatusClosed {
		t.Errorf("status after close = %s", got.Status)
	}
}

// TestSlowSubscriberCatchesUp: a subscriber that stalls while a turn runs,
// with a ring of one event, is not dropped: it reads what it missed from
// the store and goes on live, every seq once, in order, with no error.
func TestSlowSubscriberCatchesUp(t *testing.T) {
	d, ctx := newDaemonBuf(t, 1, claudetest.Reply(claudetest.Text("Hello from the fake.")))
	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "")
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	sawResult := false
	for ev, err := range d.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			t.Fatalf("after seq %v: %v", seqs[len(seqs)-1:], err)
		}
		seqs = append(seqs, ev.Seq)
		if ev.Seq == 2 { // replayed: starting, idle; now stall while a turn runs
			if err := d.Send(ctx, s.ID, "Say hello"); err != nil {
				t.Fatal(err)
			}
			waitTurns(t, d, ctx, s.ID, 1)
		}
		if ev.Type == "result" {
			sawResult = true
		}
		if sawResult && ev.Type == "status" && strings.Contains(string(ev.Raw), `"idle"`) {
			break
		}
	}
	if !sawResult {
		t.Fatalf("the subscription ended before the result; got seqs %v", seqs)
	}
	for i, seq := range seqs {
		if seq != int64(i)+1 {
			t.Fatalf("event %d has seq %d, want %d (seqs %v)", i, seq, i+1, seqs)
		}
	}
}

// TestNoPayloadLimit: with daemon.max_payload_bytes -1 a 12 MiB line reaches
// the log and the subscribers whole (the SDK gets the same limit as the
// store); with the default it is cut at 10 MiB.
func TestNoPayloadLimit(t *testing.T) {
	huge := strings.Repeat("0123456789abcdef", (12<<20)/16) // 12 MiB
	for _, tc := range []struct {
		limit int
		whole bool
	}{{-1, true}, {0, false}} {
		td := daemontest.Start(t, &daemontest.Options{MaxPayloadBytes: tc.limit}, claudetest.Reply(claudetest.Text(huge)))
		d, ctx := td.D, td.Ctx
		s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "say it all")
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, ev := range untilIdle(t, d, ctx, s.ID, 0) {
			if ev.Type != "assistant" {
				continue
			}
			found = true
			whole := strings.Contains(string(ev.Raw), huge) && !ev.Truncated()
			if whole != tc.whole || (!tc.whole && ev.OriginalSize <= 12<<20) {
				t.Errorf("limit %d: assistant line of %d bytes (original %d), whole %v; want whole %v",
					tc.limit, len(ev.Raw), ev.OriginalSize, whole, tc.whole)
			}
		}
		if !found {
			t.Errorf("limit %d: no assistant line", tc.limit)
		}
		d.CloseSession(ctx, s.ID, "test")
	}
}
