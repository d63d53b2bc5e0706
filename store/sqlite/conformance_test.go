package sqlite_test

import (
	"testing"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
	"github.com/claudectl/claudectl/store/storetest"
)

// TestStore runs the engine-neutral conformance suite on SQLite.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store {
		db, _ := mustOpen(t, &sqlite.Options{MaxRules: o.MaxRules, MaxTokens: o.MaxTokens})
		return db
	})
}
