package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/postgres"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

// TestStaleOwnerIsFenced: daemon A holds a session's lease, is "paused"
// past it, daemon B takes the session over; A's writes (appends, updates,
// a new process) are then refused with ErrNotOwner naming B, B's go on at
// the next seq, and the log holds no write of A after B took over. A's
// other session, whose lease it still holds, is not disturbed.
func TestStaleOwnerIsFenced(t *testing.T) {
	url := pgtest.New(t)
	ctx := context.Background()
	open := func(owner string) *postgres.DB {
		db, err := postgres.Open(ctx, url, &postgres.Options{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open("daemon-a"), open("daemon-b")
	s, other := newSession(t, a), newSession(t, a)
	ev := func(id, what string) *store.Event {
		return &store.Event{SessionID: id, Direction: store.FromCLI, Type: "x", Raw: []byte(`{"by":"` + what + `"}`)}
	}
	// Long enough that B's first try meets A's lease on a loaded machine;
	// B then takes the session as soon as the lease has expired.
	const ttl = 2 * time.Second
	if f, err := a.Acquire(ctx, s.ID, ttl); err != nil || f != 1 {
		t.Fatalf("A acquires: fence %d, %v", f, err)
	}
	if _, err := a.Acquire(ctx, other.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, ev(s.ID, "a")); err != nil {
		t.Fatal(err)
	}
	var held *postgres.LeaseHeldError
	if _, err := b.Acquire(ctx, s.ID, ttl); !errors.As(err, &held) || held.Owner != "daemon-a" || !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("B acquires a lease A holds: %v", err)
	}
	// A is paused past its lease: B tries until it has expired.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		f, err := b.Acquire(ctx, s.ID, time.Minute)
		if errors.As(err, &held) && held.Owner == "daemon-a" && time.Now().Before(deadline) {
			continue
		}
		if err != nil || f != 2 {
			t.Fatalf("B takes over: fence %d, %v", f, err)
		}
		break
	}
	if seq, err := b.Append(ctx, ev(s.ID, "b")); err != nil || seq != 2 {
		t.Fatalf("B appends: seq %d, %v", seq, err)
	}

	// A wakes up and writes as if nothing happened.
	done := make(chan error, 1)
	if err := a.AppendAsync(ctx, func(err error) { done <- err }, ev(other.ID, "a")); err != nil {
		t.Fatal(err)
	}
	_, err := a.Append(ctx, ev(s.ID, "a-stale"))
	if !errors.Is(err, store.ErrNotOwner) || !errors.As(err, &held) || held.Owner != "daemon-b" {
		t.Fatalf("A's stale append: %v, want ErrNotOwner naming daemon-b", err)
	}
	t.Logf("the stale append: %v", err)
	if err := <-done; err != nil {
		t.Errorf("A's append to the session it still owns, beside the refused one: %v", err)
	}
	st := store.StatusFailed
	if _, err := a.UpdateSession(ctx, s.ID, store.SessionUpdate{Status: &st}); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("A's stale update: %v, want ErrNotOwner", err)
	}
	if _, err := a.NewProcess(ctx, s.ID); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("A's stale NewProcess: %v, want ErrNotOwner", err)
	}
	if err := a.AppendUpdateAsync(ctx, func(err error) { done <- err }, ev(s.ID, "a-stale"), store.SessionUpdate{Status: &st}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("A's stale append with an update: %v, want ErrNotOwner", err)
	}
	lost, err := a.Renew(ctx, time.Minute)
	if err != nil || len(lost) != 1 || lost[0] != s.ID {
		t.Fatalf("A renews: lost %v, %v; want [%s]", lost, err, s.ID)
	}
	if _, err := a.Append(ctx, ev(s.ID, "a-stale")); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("A's append after it learnt the loss: %v, want ErrNotOwner", err)
	}
	if seq, err := b.Append(ctx, ev(s.ID, "b")); err != nil || seq != 3 {
		t.Fatalf("B goes on: seq %d, %v; want 3", seq, err)
	}
	got, err := b.Session(ctx, s.ID)
	if err != nil || got.Status == store.StatusFailed || got.LastSeq != 3 {
		t.Fatalf("the session after A's stale writes: %+v, %v", got, err)
	}
	evs := replay(t, b, s.ID)
	for i, want := range []string{`{"by":"a"}`, `{"by":"b"}`, `{"by":"b"}`} {
		if string(evs[i].Raw) != want {
			t.Errorf("event %d = %s, want %s", i+1, evs[i].Raw, want)
		}
	}
	if h := a.WriteHealth(); !h.OK() {
		t.Errorf("a fenced write made A's store unhealthy: %v", h.Err)
	}
	// B releases; A may take it back.
	if err := b.Release(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if f, err := a.Acquire(ctx, s.ID, time.Minute); err != nil || f != 3 {
		t.Fatalf("A acquires after B released: fence %d, %v", f, err)
	}
	if seq, err := a.Append(ctx, ev(s.ID, "a")); err != nil || seq != 4 {
		t.Fatalf("A appends again: seq %d, %v", seq, err)
	}
}

// TestWatchEventsAcrossStores: a store watching a session wakes when
// another store (another daemon) appends to it, and only then.
func TestWatchEventsAcrossStores(t *testing.T) {
	url := pgtest.New(t)
	ctx := context.Background()
	a, err := postgres.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := postgres.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, quiet := newSession(t, a), newSession(t, a)
	ch, stop := b.WatchEvents(s.ID)
	defer stop()
	other, stopOther := b.WatchEvents(quiet.ID)
	defer stopOther()
	// The listener wakes everyone once it listens: drain that.
	for _, c := range []<-chan struct{}{ch, other} {
		select {
		case <-c:
		case <-time.After(30 * time.Second):
			t.Fatal("the listener never started")
		}
	}
	start := time.Now()
	if _, err := a.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x", Raw: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Logf("woken %v after the append returned", time.Since(start))
	case <-time.After(30 * time.Second):
		t.Fatal("no notification of the other store's append")
	}
	select {
	case <-other:
		t.Error("a watcher of another session was woken")
	case <-time.After(200 * time.Millisecond):
	}
}

// TestWatchRules: a rule added or removed through one store wakes the
// rule watchers of another.
func TestWatchRules(t *testing.T) {
	url := pgtest.New(t)
	ctx := context.Background()
	a, b := mustOpenURL(t, url), mustOpenURL(t, url)
	ch, stop := b.WatchRules()
	defer stop()
	wait := func(what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("no notification of %s", what)
		}
	}
	wait("the listener's start")
	r := &store.Rule{Spec: "Bash(ls:*)", Behavior: "allow"}
	if err := a.CreateRule(ctx, r); err != nil {
		t.Fatal(err)
	}
	wait("a rule added")
	if err := a.DeleteRule(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	wait("a rule removed")
	if err := a.DeleteRule(ctx, r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting it again: %v", err)
	}
}

func mustOpenURL(t *testing.T, url string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestWatchTokens: a token created or revoked through one store wakes the
// token watchers of another, within a second.
func TestWatchTokens(t *testing.T) {
	url := pgtest.New(t)
	ctx := context.Background()
	a, b := mustOpenURL(t, url), mustOpenURL(t, url)
	ch, stop := b.WatchTokens()
	defer stop()
	wait := func(what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(time.Second):
			t.Fatalf("no notification of %s within a second", what)
		}
	}
	wait("the listener's start")
	h := make([]byte, 32)
	if err := a.CreateToken(ctx, &store.Token{Name: "phone", User: "alice", Role: "approver", Hash: h}); err != nil {
		t.Fatal(err)
	}
	wait("a token created")
	if _, err := a.RevokeToken(ctx, "phone", "admin"); err != nil {
		t.Fatal(err)
	}
	wait("a token revoked")
}

// TestDeadOwnersLeaseIsFree: daemon A holds a session's lease for a
// minute and its process ends (its connections close, as the kernel closes
// a killed daemon's sockets): daemon B sees the lease free and takes the
// session at once, not after the minute, with the next fence.
func TestDeadOwnersLeaseIsFree(t *testing.T) {
	url := pgtest.New(t)
	ctx := context.Background()
	a, b := openOwner(t, url, "daemon-a"), openOwner(t, url, "daemon-b")
	s := newSession(t, a)
	if f, err := a.Acquire(ctx, s.ID, time.Minute); err != nil || f != 1 {
		t.Fatalf("A acquires: fence %d, %v", f, err)
	}
	var held *postgres.LeaseHeldError
	if _, err := b.Acquire(ctx, s.ID, time.Minute); !errors.As(err, &held) || held.Owner != "daemon-a" {
		t.Fatalf("B acquires the lease of a live A: %v, want a LeaseHeldError naming daemon-a", err)
	}
	if owner, _, err := b.LeaseOf(ctx, s.ID); err != nil || owner != "daemon-a" {
		t.Fatalf("LeaseOf through B while A lives: %q, %v", owner, err)
	}
	a.Close()
	gone := time.Now()
	// The server ends A's backends as soon as it reads the end of their
	// connections: a moment, not the lease.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		owner, _, err := b.LeaseOf(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if owner == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("LeaseOf through B 30 s after A ended: still %q", owner)
		}
	}
	f, err := b.Acquire(ctx, s.ID, time.Minute)
	if err != nil || f != 2 {
		t.Fatalf("B takes the dead A's session: fence %d, %v", f, err)
	}
	if took := time.Since(gone); took > 30*time.Second {
		t.Errorf("B took over %v after A ended, want well under the minute's lease", took)
	} else {
		t.Logf("B took over %v after A ended (lease 1m)", took.Round(time.Millisecond))
	}
}

// TestOwnerWithoutLockIsFenced: the server ends daemon A's liveness
// connection while A lives (paused, or an administrator's
// pg_terminate_backend): B may take A's session at once, and A's writes of
// it are refused from then on with ErrNotOwner naming B, exactly as after
// a lease expired; A's other session is not disturbed, and A takes its
// liveness lock again.
func TestOwnerWithoutLockIsFenced(t *testing.T) {
	url := pgtest.New(t)
	ctx := context.Background()
	a, b := openOwner(t, url, "daemon-a"), openOwner(t, url, "daemon-b")
	s, other := newSession(t, a), newSession(t, a)
	ev := func(id, what string) *store.Event {
		return &store.Event{SessionID: id, Direction: store.FromCLI, Type: "x", Raw: []byte(`{"by":"` + what + `"}`)}
	}
	for _, id := range []string{s.ID, other.ID} {
		if _, err := a.Acquire(ctx, id, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	const lockOf = `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid = ((hashtextextended($1, 0) >> 32) & 4294967295)::oid AND objid = (hashtextextended($1, 0) & 4294967295)::oid`
	var pid int
	if err := admin.QueryRow(ctx, lockOf, "daemon-a").Scan(&pid); err != nil {
		t.Fatalf("A's liveness lock: %v", err)
	}
	release := postgres.HoldLiveness(a)
	var ok bool
	if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend($1, 30000)`, pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("ending A's liveness connection: %v, %v", ok, err)
	}
	f, err := b.Acquire(ctx, s.ID, time.Minute)
	if err != nil || f != 2 {
		t.Fatalf("B takes over while A has no liveness lock: fence %d, %v", f, err)
	}
	var held *postgres.LeaseHeldError
	if _, err := a.Append(ctx, ev(s.ID, "a-stale")); !errors.As(err, &held) || held.Owner != "daemon-b" || !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("A's append after B took over: %v, want ErrNotOwner naming daemon-b", err)
	}
	st := store.StatusFailed
	if _, err := a.UpdateSession(ctx, s.ID, store.SessionUpdate{Status: &st}); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("A's update after B took over: %v, want ErrNotOwner", err)
	}
	if seq, err := b.Append(ctx, ev(s.ID, "b")); err != nil || seq != 1 {
		t.Fatalf("B appends: seq %d, %v", seq, err)
	}
	if _, err := a.Append(ctx, ev(other.ID, "a")); err != nil {
		t.Errorf("A's append to the session it still holds: %v", err)
	}
	lost, err := a.Renew(ctx, time.Minute)
	if err != nil || len(lost) != 1 || lost[0] != s.ID {
		t.Fatalf("A renews: lost %v, %v; want [%s]", lost, err, s.ID)
	}
	// A holds its lock again: its other session is no longer free.
	release()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if admin.QueryRow(ctx, lockOf, "daemon-a").Scan(&pid) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("A did not take its liveness lock again")
		}
	}
	if _, err := b.Acquire(ctx, other.ID, time.Minute); !errors.As(err, &held) || held.Owner != "daemon-a" {
		t.Fatalf("B acquires A's other session once A holds its lock again: %v, want a LeaseHeldError", err)
	}
	evs := replay(t, b, s.ID)
	if len(evs) != 1 || string(evs[0].Raw) != `{"by":"b"}` {
		t.Errorf("the session's log after A's refused writes: %d events", len(evs))
	}
}

func openOwner(t *testing.T, url, owner string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), url, &postgres.Options{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
