package serve_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/internal/serve"
)

func start(t *testing.T, s *serve.Settings, stderr *bytes.Buffer) (*serve.Server, error) {
	if s.Listen == "" {
		s.Listen = "127.0.0.1:0"
	}
	s.DataDir = t.TempDir()
	return serve.Start(context.Background(), s, &serve.Options{Stderr: stderr, Getenv: func(string) string { return "" }})
}

func TestMainServesAndCloses(t *testing.T) {
	var stderr bytes.Buffer
	m, err := start(t, &serve.Settings{CLI: claudetest.CLIPath(t)}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !strings.Contains(stderr.String(), "Detected Claude Code v"+claudetest.CLIVersion(t)) || !strings.Contains(stderr.String(), "Starting the daemon (compatibility: fully compatible)...") {
		t.Errorf("start-up notice:\n%s", stderr.String())
	}
	httpc := &http.Client{Transport: &http.Transport{}}
	defer httpc.CloseIdleConnections()
	hc := claudectlv1connect.NewHealthServiceClient(httpc, "http://"+m.Addr)
	req := connect.NewRequest(&v1.HealthRequest{})
	if _, err := hc.Health(context.Background(), req); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("Health without the token: %v, want Unauthenticated (a token always, loopback too)", err)
	}
	req.Header().Set("Authorization", "Bearer "+m.Token)
	res, err := hc.Health(context.Background(), req)
	if err != nil || !res.Msg.Ok {
		t.Fatalf("Health: %v, %v", res, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMainExitCodes(t *testing.T) {
	var stderr bytes.Buffer
	_, err := start(t, &serve.Settings{CLI: filepath.Join(t.TempDir(), "no-claude")}, &stderr)
	var ee *serve.StartError
	if !errors.As(err, &ee) || ee.Code != serve.ExitCLIMissing {
		t.Errorf("missing CLI: %v, want exit %d", err, serve.ExitCLIMissing)
	}

	old := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(old, []byte("#!/bin/sh\necho '1.0.22 (Claude Code)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	_, err = start(t, &serve.Settings{CLI: old}, &stderr)
	if !errors.As(err, &ee) || ee.Code != serve.ExitCLITooOld {
		t.Errorf("old CLI: %v, want exit %d", err, serve.ExitCLITooOld)
	}
	if !strings.Contains(stderr.String(), "COMPATIBILITY NOTICE") {
		t.Errorf("no compatibility notice for an old CLI:\n%s", stderr.String())
	}

	m, err := start(t, &serve.Settings{CLI: claudetest.CLIPath(t), Listen: "0.0.0.0:0"}, &stderr)
	if !errors.Is(err, apiserver.ErrTokenRequired) {
		if m != nil {
			m.Close()
		}
		t.Errorf("non-loopback without a token: %v", err)
	}
}

// TestOneDaemonPerDataDir: a second daemon on the same data directory is
// refused before it touches anything, naming the first one's pid and
// address; once the first stops, the directory is free.
func TestOneDaemonPerDataDir(t *testing.T) {
	var stderr bytes.Buffer
	dir := t.TempDir()
	s := &serve.Settings{CLI: claudetest.CLIPath(t), Listen: "127.0.0.1:0", DataDir: dir}
	opts := &serve.Options{Stderr: &stderr, Getenv: func(string) string { return "" }}
	first, err := serve.Start(context.Background(), s, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = serve.Start(context.Background(), s, opts)
	var le *serve.LockedError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d, serving on %s", os.Getpid(), first.Addr)) {
		t.Fatalf("second daemon: %v, want a LockedError naming pid and %s", err, first.Addr)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := serve.Start(context.Background(), s, opts)
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	again.Close()
}

// TestAddressInUse: an address in use is a *ListenError that says so,
// and whether a claudectl daemon (with another data directory) answers
// there or another program does.
func TestAddressInUse(t *testing.T) {
	var stderr bytes.Buffer
	foreign := httptest.NewServer(http.NotFoundHandler())
	defer foreign.Close()
	addr := strings.TrimPrefix(foreign.URL, "http://")
	_, err := start(t, &serve.Settings{CLI: claudetest.CLIPath(t), Listen: addr}, &stderr)
	var le *serve.ListenError
	if !errors.As(err, &le) || !le.InUse || le.Daemon || err.Error() != addr+" is in use by another program" {
		t.Errorf("an address another program serves: %v (%#v)", err, le)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("%v does not wrap EADDRINUSE", err)
	}

	first, err := start(t, &serve.Settings{CLI: claudetest.CLIPath(t)}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, err = start(t, &serve.Settings{CLI: claudetest.CLIPath(t), Listen: first.Addr}, &stderr)
	if !errors.As(err, &le) || !le.InUse || !le.Daemon || err.Error() != first.Addr+" is in use: another claudectl daemon serves there" {
		t.Errorf("an address a claudectl daemon serves: %v (%#v)", err, le)
	}
}

// TestDataDirModes: the data directory is private (a loose one is
// tightened) and so are the database and its WAL.
func TestDataDirModes(t *testing.T) {
	var stderr bytes.Buffer
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	db := filepath.Join(dir, "claudectl.db")
	if err := os.WriteFile(db, nil, 0o644); err != nil { // left by an older claudectl
		t.Fatal(err)
	}
	os.Chmod(db, 0o644)
	m, err := serve.Start(context.Background(), &serve.Settings{CLI: claudetest.CLIPath(t), Listen: "127.0.0.1:0", DataDir: dir},
		&serve.Options{Stderr: &stderr, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for path, want := range map[string]os.FileMode{dir: 0o700, db: 0o600, db + "-wal": 0o600, filepath.Join(dir, "claudectl.lock"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", path, got, want)
		}
	}
	if !strings.Contains(stderr.String(), "tightened the data directory to 0700") {
		t.Errorf("no log line for the tightened directory:\n%s", stderr.String())
	}
}
