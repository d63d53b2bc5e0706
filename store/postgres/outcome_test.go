package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

// TestOutcomeOfACutCommit: what the writer concludes of a transaction whose
// COMMIT it never heard back from. One the server committed is committed;
// one whose id the server has not reached (it came back from a crash with
// its next id at or below it: nothing of it reached the disk) is aborted,
// so the batch is written again instead of failing.
func TestOutcomeOfACutCommit(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, pgtest.New(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var xid string
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(5 * time.Second)
	if got := db.app.outcome(xid, until); got != "committed" {
		t.Errorf("outcome of committed %s = %q", xid, got)
	}
	if got := db.app.outcome("999999999", until); got != "aborted" {
		t.Errorf("outcome of an id the server has not reached = %q, want aborted", got)
	}
}
