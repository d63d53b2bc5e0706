package postgres_test

import (
	"context"
	"os"
	"testing"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/postgres"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
	"github.com/claudectl/claudectl/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// mustOpen opens a store on a new database of the test server, closed
// when the test ends.
func mustOpen(tb testing.TB, opts *postgres.Options) *postgres.DB {
	tb.Helper()
	db, err := postgres.Open(context.Background(), pgtest.New(tb), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// TestStore runs the engine-neutral conformance suite on PostgreSQL.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store {
		return mustOpen(t, &postgres.Options{MaxRules: o.MaxRules, MaxTokens: o.MaxTokens})
	})
}
