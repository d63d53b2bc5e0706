package permission_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/permission"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func pendingReq(id, tool string) *claude.PermissionRequest {
	return &claude.PermissionRequest{RequestID: id, ToolName: tool, Input: json.RawMessage(`{"command":"make"}`)}
}

// next returns the next notice, failing if none is ready.
func next(t *testing.T, s *permission.Subscription) permission.Notice {
	t.Helper()
	select {
	case n, ok := <-s.C():
		if !ok {
			t.Fatalf("subscription closed: %v", s.Err())
		}
		return n
	default:
		t.Fatal("no notice")
	}
	panic("unreachable")
}

func TestBrokerFirstDecisionWins(t *testing.T) {
	b := permission.NewBroker(nil)
	defer b.Close()
	sub, pending := b.Subscribe("s1")
	defer sub.Close()
	if len(pending) != 0 {
		t.Fatalf("pending at start: %v", pending)
	}
	ch, err := b.Submit(context.Background(), "s1", pendingReq("r1", "Bash"))
	if err != nil {
		t.Fatal(err)
	}
	if n := next(t, sub); n.Resolution != nil || n.Pending.Request.RequestID != "r1" || n.Pending.SessionID != "s1" {
		t.Fatalf("first notice: %+v", n)
	}
	if _, err := b.Submit(context.Background(), "s1", pendingReq("r1", "Bash")); !errors.Is(err, permission.ErrDuplicate) {
		t.Errorf("second Submit of r1: %v", err)
	}

	// Two clients answer at once: one wins, the other is told who did.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, by := range []string{"client:alice", "client:bob"} {
		wg.Go(func() {
			res := claude.Allow()
			if i == 1 {
				res = claude.Deny("no")
			}
			errs[i] = b.Resolve("r1", res, by)
		})
	}
	wg.Wait()
	r := <-ch
	if _, ok := <-ch; ok {
		t.Error("channel not closed after the resolution")
	}
	winner, loser := 0, 1
	if errs[0] != nil {
		winner, loser = 1, 0
	}
	var re *permission.ResolvedError
	if errs[winner] != nil || !errors.As(errs[loser], &re) || !errors.Is(errs[loser], permission.ErrAlreadyResolved) {
		t.Fatalf("Resolve errors %v: want one nil and one ResolvedError", errs)
	}
	if re.By != r.By || r.Outcome != permission.Decided || r.Result.Allow != (winner == 0) {
		t.Errorf("resolution %+v; loser told %+v", r, re)
	}
	if n := next(t, sub); n.Resolution == nil || n.Resolution.By != r.By {
		t.Errorf("resolved notice: %+v", n)
	}
	if err := b.Resolve("nope", claude.Allow(), "client:alice"); !errors.Is(err, permission.ErrNotPending) {
		t.Errorf("Resolve of an unknown id: %v", err)
	}
	if len(b.Pending("")) != 0 {
		t.Errorf("still pending: %v", b.Pending(""))
	}
}

func TestBrokerAskUserQuestion(t *testing.T) {
	b := permission.NewBroker(nil)
	defer b.Close()
	q := &claude.PermissionRequest{RequestID: "q1", ToolName: "AskUserQuestion",
		Input: json.RawMessage(`{"questions":[{"question":"Which database?","options":["PostgreSQL","SQLite"]}]}`)}
	ch, err := b.Submit(context.Background(), "s1", q)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []claude.PermissionResult{
		claude.Allow(),
		{Allow: true, UpdatedInput: json.RawMessage(`[1]`)},
		{Allow: true, UpdatedInput: json.RawMessage(`{"answers":{}}`)},
	} {
		if err := b.Resolve("q1", bad, "client:alice"); !errors.Is(err, permission.ErrInvalidDecision) {
			t.Errorf("Resolve(%+v): %v, want ErrInvalidDecision", bad, err)
		}
	}
	if err := b.Resolve("q1", claude.Deny("x"), ""); !errors.Is(err, permission.ErrInvalidDecision) {
		t.Errorf("Resolve without a decider: %v", err)
	}
	if len(b.Pending("s1")) != 1 {
		t.Fatal("an invalid decision settled the request")
	}
	res, err := permission.Answer(q, map[string]string{"Which database?": "SQLite"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Resolve("q1", res, "client:alice"); err != nil {
		t.Fatal(err)
	}
	var in struct {
		Questions []json.RawMessage
		Answers   map[string]string
	}
	r := <-ch
	if err := json.Unmarshal(r.Result.UpdatedInput, &in); err != nil || len(in.Questions) != 1 || in.Answers["Which database?"] != "SQLite" {
		t.Errorf("updated input %s (%v)", r.Result.UpdatedInput, err)
	}
	// Answers reads them back; other results carry none.
	if got := permission.Answers(r.Result.UpdatedInput); len(got) != 1 || got["Which database?"] != "SQLite" {
		t.Errorf("Answers(%s) = %v", r.Result.UpdatedInput, got)
	}
	for _, in := range []json.RawMessage{nil, json.RawMessage(`{"command":"ls"}`), json.RawMessage(`{"answers":{}}`), json.RawMessage(`[1]`)} {
		if got := permission.Answers(in); got != nil {
			t.Errorf("Answers(%s) = %v, want nil", in, got)
		}
	}
}

func TestBrokerWithdraw(t *testing.T) {
	b := permission.NewBroker(nil)
	defer b.Close()
	ch, _ := b.Submit(context.Background(), "s1", pendingReq("r1", "Bash"))
	if err := b.Withdraw("r1"); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.Outcome != permission.Withdrawn || r.By != "cli" || r.Result.Allow {
		t.Errorf("resolution %+v", r)
	}
	var re *permission.ResolvedError
	if err := b.Resolve("r1", claude.Allow(), "client:alice"); !errors.As(err, &re) || re.Outcome != permission.Withdrawn {
		t.Errorf("Resolve after Withdraw: %v", err)
	}

	// The request's context ending withdraws it too.
	ctx, cancel := context.WithCancel(context.Background())
	ch, _ = b.Submit(ctx, "s1", pendingReq("r2", "Bash"))
	cancel()
	if r := <-ch; r.Outcome != permission.Withdrawn || r.By != "context" {
		t.Errorf("resolution after cancel: %+v", r)
	}

	// An id may come back once resolved (the CLI replays a request).
	if _, err := b.Submit(context.Background(), "s1", pendingReq("r1", "Bash")); err != nil {
		t.Errorf("Submit of a resolved id: %v", err)
	}
}

// TestBrokerExpiry checks the two waiting tiers with a fake clock.
func TestBrokerExpiry(t *testing.T) {
	opts := &permission.BrokerOptions{WatchedTimeout: time.Minute, UnwatchedTimeout: 10 * time.Minute}
	t.Run("unwatched", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := permission.NewBroker(opts)
			defer b.Close()
			ch, _ := b.Submit(context.Background(), "s1", pendingReq("r1", "Write"))
			time.Sleep(10*time.Minute - time.Second)
			synctest.Wait()
			if len(b.Pending("s1")) != 1 {
				t.Fatal("expired early")
			}
			time.Sleep(time.Second)
			r := <-ch
			want := "Permission request expired: no decision within 10m0s (nobody was watching the session), so Write was denied."
			if r.Outcome != permission.Expired || r.By != "timeout" || r.Result.Allow || r.Result.Message != want {
				t.Errorf("resolution %+v, want message %q", r, want)
			}
		})
	})
	t.Run("watched", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := permission.NewBroker(opts)
			defer b.Close()
			sub, _ := b.Subscribe("")
			defer sub.Close()
			start := time.Now()
			ch, _ := b.Submit(context.Background(), "s1", pendingReq("r1", "Write"))
			r := <-ch
			if time.Since(start) != time.Minute || !strings.Contains(r.Result.Message, "1m0s (a client was watching the session)") {
				t.Errorf("expired after %v: %+v", time.Since(start), r)
			}
		})
	})
	t.Run("tier change restarts the clock", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := permission.NewBroker(opts)
			defer b.Close()
			start := time.Now()
			ch, _ := b.Submit(context.Background(), "s1", pendingReq("r1", "Write"))
			time.Sleep(5 * time.Minute)
			sub, pending := b.Subscribe("s1") // someone looks: one minute from now
			if len(pending) != 1 {
				t.Fatalf("Subscribe returned %v", pending)
			}
			time.Sleep(30 * time.Second)
			sub.Close() // and leaves: ten minutes from now
			other, _ := b.Subscribe("s2")
			defer other.Close() // watching another session does not count
			r := <-ch
			if got := time.Since(start); got != 5*time.Minute+30*time.Second+10*time.Minute || r.Outcome != permission.Expired {
				t.Errorf("expired after %v: %+v", got, r)
			}
		})
	})
}

func TestBrokerSlowSubscriber(t *testing.T) {
	b := permission.NewBroker(&permission.BrokerOptions{SubscriberBuffer: 2})
	defer b.Close()
	slow, _ := b.Subscribe("s1")
	fast, _ := b.Subscribe("")
	defer fast.Close()
	for _, id := range []string{"r1", "r2", "r3"} {
		if _, err := b.Submit(context.Background(), "s1", pendingReq(id, "Bash")); err != nil { // never blocks
			t.Fatal(err)
		}
		next(t, fast)
	}
	n := 0
	for range slow.C() {
		n++
	}
	if n != 2 || !errors.Is(slow.Err(), permission.ErrDropped) {
		t.Errorf("slow subscriber got %d notices, Err %v; want 2 and ErrDropped", n, slow.Err())
	}
	slow.Close() // harmless after a drop
	again, pending := b.Subscribe("s1")
	defer again.Close()
	if len(pending) != 3 || pending[0].Request.RequestID != "r1" {
		t.Errorf("re-subscribing: pending %v", pending)
	}
}

func TestBrokerClose(t *testing.T) {
	b := permission.NewBroker(nil)
	sub, _ := b.Subscribe("s1")
	ch, _ := b.Submit(context.Background(), "s1", pendingReq("r1", "Bash"))
	b.Close()
	b.Close()
	if r := <-ch; r.Outcome != permission.Withdrawn || r.By != "broker" {
		t.Errorf("pending request at Close: %+v", r)
	}
	for range sub.C() {
	}
	if !errors.Is(sub.Err(), permission.ErrBrokerClosed) {
		t.Errorf("subscription after Close: %v", sub.Err())
	}
	if _, err := b.Submit(context.Background(), "s1", pendingReq("r2", "Bash")); !errors.Is(err, permission.ErrBrokerClosed) {
		t.Errorf("Submit after Close: %v", err)
	}
	if err := b.Resolve("r2", claude.Allow(), "x"); !errors.Is(err, permission.ErrBrokerClosed) {
		t.Errorf("Resolve after Close: %v", err)
	}
	if s, _ := b.Subscribe("s1"); !errors.Is(s.Err(), permission.ErrBrokerClosed) {
		t.Errorf("Subscribe after Close: %v", s.Err())
	}
}

func TestBrokerForgets(t *testing.T) {
	b := permission.NewBroker(&permission.BrokerOptions{Remember: 2})
	defer b.Close()
	for _, id := range []string{"r1", "r2", "r3"} {
		b.Submit(context.Background(), "s1", pendingReq(id, "Bash"))
		b.Resolve(id, claude.Allow(), "client:alice")
	}
	if err := b.Resolve("r1", claude.Allow(), "client:bob"); !errors.Is(err, permission.ErrNotPending) {
		t.Errorf("oldest tombstone kept: %v", err)
	}
	if err := b.Resolve("r3", claude.Allow(), "client:bob"); !errors.Is(err, permission.ErrAlreadyResolved) {
		t.Errorf("newest tombstone lost: %v", err)
	}
}

// TestBrokerConcurrent hammers the broker from many goroutines (run it
// with -race): submissions, decisions, withdrawals and subscribers.
func TestBrokerConcurrent(t *testing.T) {
	b := permission.NewBroker(&permission.BrokerOptions{SubscriberBuffer: 4})
	defer b.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			sub, _ := b.Subscribe("")
			defer sub.Close()
			for i := range 50 {
				id := string(rune('a'+w)) + "-" + string(rune('0'+i%10)) + string(rune('0'+i/10))
				ch, err := b.Submit(context.Background(), "s", pendingReq(id, "Bash"))
				if err != nil {
					t.Error(err)
					return
				}
				switch i % 3 {
				case 0:
					go b.Resolve(id, claude.Allow(), "client:x")
					go b.Resolve(id, claude.Deny("no"), "client:y")
				case 1:
					go b.Withdraw(id)
				case 2:
					b.Resolve(id, claude.Deny("no"), "client:z")
				}
				<-ch
			}
		})
	}
	wg.Wait()
	if p := b.Pending(""); len(p) != 0 {
		t.Errorf("%d still pending", len(p))
	}
}

// MaxWait is the longer of the two tiers, with their defaults.
func TestBrokerMaxWait(t *testing.T) {
	if got := permission.NewBroker(nil).MaxWait(); got != 24*time.Hour {
		t.Errorf("default MaxWait = %v, want 24h", got)
	}
	if got := permission.NewBroker(&permission.BrokerOptions{WatchedTimeout: 2 * time.Hour, UnwatchedTimeout: time.Hour}).MaxWait(); got != 2*time.Hour {
		t.Errorf("MaxWait = %v, want 2h", got)
	}
}

// Dismiss answers every question with the text and marks it unanswered.
func TestDismiss(t *testing.T) {
	q := &claude.PermissionRequest{RequestID: "q", ToolName: "AskUserQuestion",
		Input: json.RawMessage(`{"questions":[{"question":"A?","options":[]},{"question":"B?","options":[]}],"x":1}`)}
	res, err := permission.Dismiss(q, "Not answered: later")
	if err != nil || !res.Allow {
		t.Fatalf("Dismiss = %+v, %v", res, err)
	}
	var in struct {
		Answers     map[string]string
		Annotations map[string]struct{ Unanswered string }
		X           int
	}
	if err := json.Unmarshal(res.UpdatedInput, &in); err != nil || in.X != 1 || len(in.Answers) != 2 || in.Answers["B?"] != "Not answered: later" ||
		in.Annotations["A?"].Unanswered != "dismissed" || in.Annotations["B?"].Unanswered != "dismissed" {
		t.Errorf("updated input %s (%v)", res.UpdatedInput, err)
	}
	if _, err := permission.Dismiss(&claude.PermissionRequest{ToolName: "AskUserQuestion", Input: json.RawMessage(`{}`)}, "x"); err == nil {
		t.Error("Dismiss of a request without questions: no error")
	}
}
