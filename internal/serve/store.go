package serve

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/postgres"
	"github.com/claudectl/claudectl/store/sqlite"
)

// The store.url schemes: the embedded SQLite file (the default, in the
// data dir) or a PostgreSQL server.
const (
	sqliteScheme = "sqlite:"
)

// StoreKind says which engine a store.url names: "sqlite" or "postgres",
// or "" when it names neither.
func StoreKind(url string) string {
	switch {
	case url == "" || strings.HasPrefix(url, sqliteScheme):
		return "sqlite"
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return "postgres"
	}
	return ""
}

// CheckStoreURL says what is wrong with a store.url, in the words of the
// setting's allowed values.
func CheckStoreURL(url string) error {
	switch StoreKind(url) {
	case "sqlite":
		if strings.TrimPrefix(url, sqliteScheme) == "" {
			return fmt.Errorf("sqlite: needs the database file's path, as in sqlite:/var/lib/claudectl/claudectl.db")
		}
		return nil
	case "postgres":
		return postgres.CheckURL(url)
	}
	return fmt.Errorf(`must be "sqlite:PATH" or "postgres://USER@HOST:PORT/DATABASE"`)
}

// openStore opens the store s names: store.url, else claudectl.db in the
// data dir. It returns where the store is, without credentials, for logs.
func openStore(ctx context.Context, s *Settings, dataDir string, log *slog.Logger) (store.Store, string, error) {
	url := s.StoreURL
	if StoreKind(url) == "postgres" {
		// The daemon's name in leases: stable across its restarts (so it
		// takes its own sessions back at once), distinct between daemons.
		host, _ := os.Hostname()
		owner := cmp.Or(s.DaemonName, host+":"+dataDir)
		db, err := postgres.Open(ctx, url, &postgres.Options{MaxPayloadBytes: s.MaxPayloadBytes, Owner: owner, Logger: log})
		if err != nil {
			return nil, "", err
		}
		return db, "postgres " + db.Server(), nil
	}
	path := filepath.Join(dataDir, "claudectl.db")
	if url != "" {
		path = strings.TrimPrefix(url, sqliteScheme)
	}
	if err := privateFile(path); err != nil {
		return nil, "", fmt.Errorf("database %s: %w", path, err)
	}
	db, err := sqlite.Open(ctx, path, &sqlite.Options{MaxPayloadBytes: s.MaxPayloadBytes, FullSync: s.FullSync})
	if err != nil {
		return nil, "", err
	}
	return db, "sqlite " + path, nil
}
