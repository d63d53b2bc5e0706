package postgres_test

import (
	"testing"

	"github.com/claudectl/claudectl/store/storetest"
)

// BenchmarkAppend is the SQLite store's BenchmarkAppend on PostgreSQL (a
// throwaway server on loopback, on the same machine as the benchmark):
//
//	go test -run '^$' -bench Append -benchtime 300000x ./store/sqlite/ ./store/postgres/
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct {
		name          string
		batch, window int
	}{
		{name: "sync/batch=1", batch: 1},
		{name: "sync/batch=16", batch: 16},
		{name: "async/window=64", window: 64},
	} {
		b.Run("sessions=100/"+c.name, func(b *testing.B) {
			storetest.BenchAppend(b, mustOpen(b, nil), 100, c.batch, c.window)
		})
	}
}
