package postgres

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

// cutBatch writes evs of session id in a transaction it leaves open, as the
// writer does, and returns the transaction and its mark.
func cutBatch(t *testing.T, db *DB, evs ...*store.Event) (pgx.Tx, mark) {
	t.Helper()
	ctx := context.Background()
	if err := db.prepareAll(evs); err != nil {
		t.Fatal(err)
	}
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m mark
	if err := appendEvents(ctx, tx, evs, db, &m); err != nil {
		t.Fatal(err)
	}
	if m.xid == "" || m.data == nil {
		t.Fatalf("appendEvents left the mark %+v", m)
	}
	return tx, m
}

func newTestSession(t *testing.T, db *DB) string {
	t.Helper()
	s := &store.Session{Cwd: "/tmp", Status: store.StatusRunning}
	if err := db.CreateSession(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s.ID
}

func ev(id string) *store.Event {
	return &store.Event{SessionID: id, Direction: store.FromCLI, Type: "x", Raw: []byte(`{}`)}
}

// TestOutcomeOfACutCommit: what the writer concludes of a transaction whose
// COMMIT it never heard back from. One the server committed is committed;
// one still open is waited for; one rolled back is aborted; one whose id
// the server has not reached (it came back from a crash with its next id
// at or below it: nothing of it reached the disk) is aborted, so the batch
// is written again instead of failing.
func TestOutcomeOfACutCommit(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, pgtest.New(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	id := newTestSession(t, db)
	until := func() time.Time { return time.Now().Add(5 * time.Second) }

	tx, m := cutBatch(t, db, ev(id), ev(id))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := db.app.outcome(m, until()); got != "committed" {
		t.Errorf("outcome of a committed batch %+v = %q", m, got)
	}

	tx, m = cutBatch(t, db, ev(id))
	if got := db.app.outcome(m, time.Now().Add(300*time.Millisecond)); got != "" {
		t.Errorf("outcome of a batch still open, once the time is spent = %q, want unknown", got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := db.app.outcome(m, until()); got != "aborted" {
		t.Errorf("outcome of a batch rolled back = %q", got)
	}

	m.xid = "999999999"
	if got := db.app.outcome(m, until()); got != "aborted" {
		t.Errorf("outcome of an id the server has not reached = %q, want aborted", got)
	}
	if got := db.app.outcome(mark{xid: "999999999"}, until()); got != "aborted" {
		t.Errorf("outcome of a batch that kept no event = %q, want aborted", got)
	}
}

// TestOutcomeOfACutCommitWhoseIDCameBack: the server crashes before any of
// a batch's transaction reached its disk, comes back, and gives the
// transaction's id to another one, which commits. The id's status says
// "committed"; the batch was not stored, and the writer must say so (and
// write it again) rather than acknowledge events the log does not hold.
func TestOutcomeOfACutCommitWhoseIDCameBack(t *testing.T) {
	srv := pgtest.Own(t)
	ctx := context.Background()
	db, err := Open(ctx, srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	id := newTestSession(t, db)
	tx, m := cutBatch(t, db, ev(id), ev(id))
	srv.Down() // the COMMIT never reaches it
	tx.Rollback(ctx)
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	want, err := strconv.ParseUint(m.xid, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// Other clients' transactions, after the restart, until the server's
	// next id is past the cut one's.
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	reused := false
	for {
		var got uint64
		if err := conn.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		reused = reused || got == want
		if got >= want {
			break
		}
	}
	if !reused {
		t.Logf("the server kept the cut transaction's id %s (some of it reached the disk)", m.xid)
	}
	if got := db.app.outcome(m, time.Now().Add(10*time.Second)); got != "aborted" {
		t.Fatalf("outcome of the cut batch whose id %s came back (given again: %v) = %q, want aborted", m.xid, reused, got)
	}
	if s, err := db.Session(ctx, id); err != nil || s.LastSeq != 0 {
		t.Fatalf("the session after the cut batch: %+v, %v; want no event", s, err)
	}
}
