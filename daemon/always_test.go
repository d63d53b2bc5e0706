package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// alwaysFaults is a store whose CreateRule runs a hook first (which may
// refuse the rule), and whose Session fails for a context carrying
// failSessionKey.
type alwaysFaults struct {
	store.Store
	beforeCreateRule *atomic.Pointer[func(*store.Rule) error]
}

type failSessionKey struct{}

func (s alwaysFaults) CreateRule(ctx context.Context, r *store.Rule) error {
	if f := s.beforeCreateRule.Load(); f != nil {
		if err := (*f)(r); err != nil {
			return err
		}
	}
	return s.Store.CreateRule(ctx, r)
}

func (s alwaysFaults) Session(ctx context.Context, id string) (*store.Session, error) {
	if ctx.Value(failSessionKey{}) != nil {
		return nil, errors.New("injected: the session cannot be read")
	}
	return s.Store.Session(ctx, id)
}

// An "always" that does not take effect stores no rule: not when another
// client decided the request first, not when the store refuses the second
// of its rules, not when the session's directory (which scopes a project
// rule) cannot be read. Each would leave a rule nobody agreed to: a
// denied request's, or, for the last, one that applies everywhere.
func TestAlwaysThatFailsStoresNoRule(t *testing.T) {
	cases := []struct {
		name string
		// decide answers "always" to the request in its own way and
		// checks the error; it returns whether the request is still
		// pending (allowed once afterwards).
		decide func(t *testing.T, td *daemontest.Daemon, hook *atomic.Pointer[func(*store.Rule) error], id string) bool
	}{
		{"lost to another client", func(t *testing.T, td *daemontest.Daemon, hook *atomic.Pointer[func(*store.Rule) error], id string) bool {
			// Alice denies while Bob's always is storing its first rule.
			f := func(*store.Rule) error {
				hook.Store(nil)
				_, _, err := td.D.Decide(td.Ctx, daemon.Decision{RequestID: id, Client: "alice"})
				return err
			}
			hook.Store(&f)
			_, stored, err := td.D.Decide(td.Ctx, daemon.Decision{RequestID: id, Allow: true, Always: true, Client: "bob"})
			if !errors.Is(err, permission.ErrAlreadyResolved) {
				t.Errorf("Bob's always after Alice's deny: rules %v, %v; want ErrAlreadyResolved", stored, err)
			}
			return false
		}},
		{"second rule refused", func(t *testing.T, td *daemontest.Daemon, hook *atomic.Pointer[func(*store.Rule) error], id string) bool {
			n := 0
			f := func(r *store.Rule) error {
				if n++; n == 2 {
					return fmt.Errorf("sqlite: CreateRule %q: %w", r.Spec, &store.LimitError{What: "rules", Max: 1})
				}
				return nil
			}
			hook.Store(&f)
			defer hook.Store(nil)
			_, stored, err := td.D.Decide(td.Ctx, daemon.Decision{RequestID: id, Allow: true, Always: true, Client: "bob"})
			if le := (*store.LimitError)(nil); !errors.As(err, &le) || n != 2 {
				t.Errorf("always whose second rule is refused: rules %v, %v (%d rules tried); want a LimitError on the second", stored, err, n)
			}
			return true
		}},
		{"cwd unreadable", func(t *testing.T, td *daemontest.Daemon, hook *atomic.Pointer[func(*store.Rule) error], id string) bool {
			ctx := context.WithValue(td.Ctx, failSessionKey{}, true)
			_, stored, err := td.D.Decide(ctx, daemon.Decision{RequestID: id, Allow: true, Always: true, Client: "bob"})
			if err == nil {
				t.Errorf("always while the session cannot be read: stored %v, no error; want an error", stored)
			}
			return err != nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hook := new(atomic.Pointer[func(*store.Rule) error])
			td := daemontest.Start(t, &daemontest.Options{WrapStore: func(s store.Store) store.Store { return alwaysFaults{s, hook} }},
				claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "touch made.txt", "description": "make a file"})),
				claudetest.Reply(claudetest.Text("Done.")))
			s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "make a file")
			if err != nil {
				t.Fatal(err)
			}
			asked := 0
			for ev, err := range td.D.Subscribe(td.Ctx, s.ID, 0) {
				if err != nil {
					t.Fatal(err)
				}
				if pr, ok := ev.Body.(*daemon.PermissionRequest); ok {
					asked++
					if len(pr.AlwaysRules) < 2 {
						t.Fatalf("always would store %v: this test needs two rules (the CLI's suggestions changed?)", pr.AlwaysRules)
					}
					pending := c.decide(t, td, hook, pr.RequestID)
					rules, err := td.D.Rules(td.Ctx)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range rules {
						t.Errorf("an always that failed left the rule %s (project %q, session %q)", r.Spec, r.ProjectDir, r.SessionID)
					}
					if got := len(td.D.Pending(s.ID)); got != map[bool]int{true: 1}[pending] {
						t.Errorf("%d requests pending after the always, want pending=%v", got, pending)
					}
					if pending {
						if _, _, err := td.D.Decide(td.Ctx, daemon.Decision{RequestID: pr.RequestID, Allow: true, Client: "bob"}); err != nil {
							t.Fatalf("allow once after the failed always: %v", err)
						}
					}
				}
				if ev.Type == "result" {
					break
				}
			}
			if asked != 1 {
				t.Fatalf("asked %d times, want 1", asked)
			}
		})
	}
}

// decideRace is a store whose CreateRule runs a hook first and whose
// audit writes wait until release is closed.
type decideRace struct {
	store.Store
	beforeCreateRule func()
	release          chan struct{}
}

func (s decideRace) CreateRule(ctx context.Context, r *store.Rule) error {
	s.beforeCreateRule()
	return s.Store.CreateRule(ctx, r)
}

func (s decideRace) AddDecision(ctx context.Context, d *store.Decision) error {
	select {
	case <-s.release:
	case <-time.After(20 * time.Second):
	}
	return s.Store.AddDecision(ctx, d)
}

// Two clients decide one request at once (a desk and a phone): Bob's
// always is storing its rule when Alice's deny settles the request. Alice
// hears once her decision is audited, Bob that it was decided already.
// The audit is held until Bob has his answer, so that his Decide's
// bookkeeping has run by then: it once dropped Alice's wait for her
// audit, which left her to a 30 s timeout.
func TestConcurrentDecidesAnswerAtOnce(t *testing.T) {
	release := make(chan struct{})
	var (
		daemonOf  atomic.Pointer[daemon.Daemon]
		sessionID atomic.Value
	)
	bobStoring := make(chan struct{})
	var once sync.Once
	hook := func() { // Bob's rules wait until Alice has settled the request
		once.Do(func() { close(bobStoring) })
		for deadline := time.Now().Add(20 * time.Second); len(daemonOf.Load().Pending(sessionID.Load().(string))) > 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	td := daemontest.Start(t, &daemontest.Options{WrapStore: func(s store.Store) store.Store { return decideRace{s, hook, release} }},
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "touch made.txt", "description": "make a file"})),
		claudetest.Reply(claudetest.Text("Done.")))
	daemonOf.Store(td.D)
	s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "make a file")
	if err != nil {
		t.Fatal(err)
	}
	sessionID.Store(s.ID)
	waitPending(t, td.D, td.Ctx, s.ID)
	id := td.D.Pending(s.ID)[0].Request.RequestID

	bob := make(chan error, 1)
	go func() {
		_, _, err := td.D.Decide(td.Ctx, daemon.Decision{RequestID: id, Allow: true, Always: true, Client: "bob"})
		bob <- err
	}()
	<-bobStoring
	alice := make(chan error, 1)
	go func() {
		_, _, err := td.D.Decide(td.Ctx, daemon.Decision{RequestID: id, Client: "alice"})
		alice <- err
	}()
	select {
	case err := <-bob:
		if !errors.Is(err, permission.ErrAlreadyResolved) {
			t.Errorf("Bob's always after Alice's deny: %v, want ErrAlreadyResolved", err)
		}
	case err := <-alice:
		t.Fatalf("Alice was answered (%v) before her decision was audited", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Bob was not answered")
	}
	close(release) // Alice's audit goes on
	select {
	case err := <-alice:
		if err != nil {
			t.Errorf("Alice's deny: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Alice was not answered within 10 s of her audit")
	}
	decs, err := td.D.Decisions(td.Ctx, store.DecisionFilter{SessionID: s.ID})
	if err != nil || len(decs) != 1 || decs[0].By != "client:alice" {
		t.Errorf("audit trail: %v (%v), want Alice's decision", decs, err)
	}
}
