package serve_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/internal/serve"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestReload: a reload applies what changed that can change live (the
// log level, the limits), names what needs a restart and leaves it; a
// broken file changes nothing and the error says where it is.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "settings.json")
	write := func(text string) {
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	load := func() (*serve.Settings, error) {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		s, err := serve.Parse(file, dir, data, func(string) string { return "" })
		if err != nil {
			return nil, err
		}
		s.CLI, s.DataDir = claudetest.CLIPath(t), filepath.Join(dir, "data")
		s.Listen = cmpOr(s.Listen, "127.0.0.1:0")
		return s, nil
	}
	write(`{"log_level": "info", "sessions": {"max_running": 4}, "daemon": {"max_streams": 100}}`)
	first, err := load()
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	srv, err := serve.Start(context.Background(), first, &serve.Options{Stderr: &logs, Load: load, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if srv.Daemon.MaxRunning() != 4 || srv.Log.Enabled(context.Background(), slog.LevelDebug) {
		t.Fatalf("at start: max_running %d, debug %v", srv.Daemon.MaxRunning(), srv.Log.Enabled(context.Background(), slog.LevelDebug))
	}

	write(`{"log_level": "debug", "sessions": {"max_running": 2,}}`) // a trailing comma
	_, err = srv.Reload(context.Background())
	var se *serve.SettingsError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "settings.json:1:") {
		t.Fatalf("reload of a broken file: %v, want a SettingsError with its line", err)
	}
	if srv.Daemon.MaxRunning() != 4 || srv.Log.Enabled(context.Background(), slog.LevelDebug) || srv.Settings().MaxRunning != 4 {
		t.Errorf("a broken file changed the settings: max_running %d, debug %v", srv.Daemon.MaxRunning(),
			srv.Log.Enabled(context.Background(), slog.LevelDebug))
	}
	if !strings.Contains(logs.String(), "reload: the settings were not changed") || !strings.Contains(logs.String(), "settings.json:1:") {
		t.Errorf("the log does not say why the reload changed nothing:\n%s", logs.String())
	}

	write(`{"log_level": "debug", "listen": "127.0.0.1:1", "sessions": {"max_running": 2}, "daemon": {"max_streams": 100},
		"store": {"retention": {"closed_sessions": "30d"}}}`)
	rep, err := srv.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rep.Applied)
	if want := []string{"log_level", "sessions.max_running", "store.retention"}; !slices.Equal(rep.Applied, want) {
		t.Errorf("applied %v, want %v", rep.Applied, want)
	}
	if want := []string{"listen"}; !slices.Equal(rep.Restart, want) {
		t.Errorf("restart %v, want %v", rep.Restart, want)
	}
	if srv.Daemon.MaxRunning() != 2 || !srv.Log.Enabled(context.Background(), slog.LevelDebug) ||
		srv.Settings().Retention.ClosedSessions != 30*24*time.Hour {
		t.Errorf("after the reload: max_running %d, debug %v, retention %v", srv.Daemon.MaxRunning(),
			srv.Log.Enabled(context.Background(), slog.LevelDebug), srv.Settings().Retention)
	}
	if got := srv.Settings().Listen; got != "127.0.0.1:0" {
		t.Errorf("listen in force %q: a restart-only setting changed without a restart", got)
	}
	if !strings.Contains(logs.String(), "restart_needed=listen") {
		t.Errorf("the log does not name what needs a restart:\n%s", logs.String())
	}
	rep, err = srv.Reload(context.Background())
	if err != nil || len(rep.Applied) != 0 || !slices.Equal(rep.Restart, []string{"listen"}) {
		t.Errorf("reloading the same file: %+v, %v", rep, err)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
