package daemon

import (
	"context"
	"time"

	"github.com/claudectl/claudectl/store"
)

// Search returns the events of every session whose text holds every word
// of q, newest first (see [store.Store.Search]).
func (d *Daemon) Search(ctx context.Context, q store.SearchQuery) ([]*store.SearchHit, error) {
	return d.db.Search(ctx, q)
}

// UsageSince returns the usage ledger of every session from since on,
// oldest first, at most limit entries (see [store.Store.UsageSince]).
func (d *Daemon) UsageSince(ctx context.Context, since time.Time, limit int) ([]*store.UsageRecord, error) {
	return d.db.UsageSince(ctx, since, limit)
}
