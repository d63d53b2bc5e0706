package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/postgres"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

func newSession(t *testing.T, db store.Store) *store.Session {
	t.Helper()
	s := &store.Session{Cwd: "/src/app", Status: store.StatusRunning}
	if err := db.CreateSession(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

func replay(t *testing.T, db store.Store, id string) []store.Event {
	t.Helper()
	var evs []store.Event
	for e, err := range db.Events(context.Background(), id, 0) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	return evs
}

// TestTwoWritersOneSession: two stores (two daemons) on one database
// appending to the same session number its log without a gap or a repeat:
// the row lock on the session orders them.
func TestTwoWritersOneSession(t *testing.T) {
	url := pgtest.New(t)
	ctx := context.Background()
	var dbs [2]*postgres.DB
	for i := range dbs {
		db, err := postgres.Open(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		dbs[i] = db
	}
	s := newSession(t, dbs[0])
	const each = 300
	var wg sync.WaitGroup
	for w, db := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x", Raw: fmt.Appendf(nil, `{"w":%d,"i":%d}`, w, i)}
				if _, err := db.Append(ctx, e); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	evs := replay(t, dbs[1], s.ID)
	if len(evs) != 2*each {
		t.Fatalf("%d events, want %d", len(evs), 2*each)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
}

// TestOpenTogetherMigratesOnce: daemons starting together on a new
// database all open it (the advisory lock serialises the migration).
func TestOpenTogetherMigratesOnce(t *testing.T) {
	url := pgtest.New(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := postgres.Open(context.Background(), url, nil)
			if err == nil {
				db.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestSchemaTooNew: a database migrated by a newer claudectl is refused.
func TestSchemaTooNew(t *testing.T) {
	url := pgtest.New(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations VALUES (999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(ctx, url, nil); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open: %v, want ErrSchemaTooNew", err)
	}
}

// TestBadURLKeepsThePasswordOut: an error about the URL never repeats the
// password.
func TestBadURLKeepsThePasswordOut(t *testing.T) {
	_, err := postgres.Open(context.Background(), "postgres://u:s3cr3tpw@127.0.0.1:notaport/db", nil)
	if err == nil || !errors.Is(err, store.ErrInvalid) || strings.Contains(err.Error(), "s3cr3tpw") {
		t.Fatalf("Open with a bad URL: %v", err)
	}
}

// TestServerErrorsNameNoUser: what the server or the driver says of a
// failed login or of a server that went away names the database user
// ("failed to connect to `user=…`", `role "…" does not exist`); the
// store's errors say it in its own words, naming the server only, for
// reads (wrapping ErrReadFailed) and writes alike, and keep the driver's
// error for errors.As.
func TestServerErrorsNameNoUser(t *testing.T) {
	srv := pgtest.Own(t)
	ctx := context.Background()
	const user = "claudectl_nobody"
	bad := strings.Replace(srv.URL(), "postgres@", user+"@", 1)
	_, err := postgres.Open(ctx, bad, nil)
	if err == nil || strings.Contains(err.Error(), user) || !strings.Contains(err.Error(), "refused the login") {
		t.Errorf("Open as a role the server does not know: %v; want the refused login, without the user", err)
	}

	db, err := postgres.Open(ctx, srv.URL(), &postgres.Options{WriteTimeout: 3 * time.Second, RetryFor: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := newSession(t, db)
	srv.Stop()
	where := fmt.Sprintf("(PostgreSQL at 127.0.0.1:%d/postgres)", srv.Port)
	for _, tc := range []struct {
		op   string
		want error
		call func() error
	}{
		{"Session", store.ErrReadFailed, func() error { _, err := db.Session(ctx, s.ID); return err }},
		{"Sessions", store.ErrReadFailed, func() error { _, err := db.Sessions(ctx, store.SessionFilter{}); return err }},
		{"Events", store.ErrReadFailed, func() error {
			for _, err := range db.Events(ctx, s.ID, 0) {
				return err
			}
			return nil
		}},
		{"Rules", store.ErrReadFailed, func() error { _, err := db.Rules(ctx); return err }},
		{"UpdateSession", store.ErrWriteFailed, func() error {
			_, err := db.UpdateSession(ctx, s.ID, store.SessionUpdate{Error: new(string)})
			return err
		}},
	} {
		err := tc.call()
		msg := fmt.Sprint(err)
		if !errors.Is(err, tc.want) || !strings.Contains(msg, where) || strings.Contains(msg, "user=") || strings.Contains(msg, "`postgres`") {
			t.Errorf("%s with the server stopped: %v; want %v naming the server, not the user", tc.op, err, tc.want)
		}
	}
	// Once the pool's idle connections are spent, a read dials: the
	// driver's connect error is kept, out of the message.
	var ce *pgconn.ConnectError
	for i := 0; ; i++ {
		_, err := db.Sessions(ctx, store.SessionFilter{})
		if errors.As(err, &ce) {
			if msg := err.Error(); strings.Contains(msg, "user=") || !strings.Contains(msg, "cannot connect to the database server (connection refused)") {
				t.Errorf("Sessions failing to dial: %v", err)
			}
			break
		}
		if i == 20 {
			t.Fatalf("Sessions with the server stopped: %v; want the driver's ConnectError kept", err)
		}
	}
}

// TestServerDownFailsLoudlyAndRecovers: with the server stopped (and no
// retries), appends fail (not hang) with ErrWriteFailed saying why and
// where, WriteHealth says so; once it is back, the next append succeeds,
// at the next seq.
func TestServerDownFailsLoudlyAndRecovers(t *testing.T) {
	srv := pgtest.Own(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, srv.URL(), &postgres.Options{WriteTimeout: 3 * time.Second, RetryFor: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := newSession(t, db)
	if _, err := db.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x", Raw: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	srv.Down()
	start := time.Now()
	_, err = db.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x", Raw: []byte(`{}`)})
	if !errors.Is(err, store.ErrWriteFailed) || !strings.Contains(err.Error(), "PostgreSQL at 127.0.0.1:") {
		t.Fatalf("Append with the server down: %v, want ErrWriteFailed naming the server", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the failing append took %v", d)
	}
	if h := db.WriteHealth(); h.OK() || h.Since.IsZero() {
		t.Errorf("WriteHealth with the server down: %+v", h)
	}
	t.Logf("with the server down: %v", err)
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	var seq int64
	for deadline := time.Now().Add(20 * time.Second); ; {
		seq, err = db.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x", Raw: []byte(`{}`)})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || seq != 2 {
		t.Fatalf("Append after the server came back: seq %d, %v; want 2", seq, err)
	}
	if h := db.WriteHealth(); !h.OK() {
		t.Errorf("WriteHealth after recovery: %+v", h)
	}
	if evs := replay(t, db, s.ID); len(evs) != 2 {
		t.Errorf("%d events after recovery, want 2", len(evs))
	}
}

// TestServerRestartUnderLoadLosesNothing: the server restarts (an
// immediate shutdown: connections cut, crash recovery) while four writers
// append; the writer writes the batches again once it is back, so every
// append succeeds and the log holds each event once, without a gap.
func TestServerRestartUnderLoadLosesNothing(t *testing.T) {
	srv := pgtest.Own(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := newSession(t, db)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked, failed := 0, 0
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := db.Append(ctx, &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "x",
					Raw: fmt.Appendf(nil, `{"w":%d,"i":%d}`, w, i)})
				mu.Lock()
				if err != nil {
					failed++
					t.Errorf("append during the restart: %v", err)
				} else {
					acked++
				}
				mu.Unlock()
				if err != nil {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	if err := srv.Restart(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	evs := replay(t, db, s.ID)
	if len(evs) != acked || failed != 0 {
		t.Fatalf("%d appends acknowledged, %d failed; the log holds %d", acked, failed, len(evs))
	}
	seen := map[string]bool{}
	for i, e := range evs {
		if e.Seq != int64(i+1) || seen[string(e.Raw)] {
			t.Fatalf("event %d: seq %d %s (a gap or a repeat)", i, e.Seq, e.Raw)
		}
		seen[string(e.Raw)] = true
	}
	t.Logf("%d events appended across the restart, none lost or repeated", acked)
}
