package serve_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
	if !strings.Contains(stderr.String(), "Detected Claude Code v2.1.329") || !strings.Contains(stderr.String(), "FULLY_COMPATIBLE") {
		t.Errorf("start-up notice:\n%s", stderr.String())
	}
	httpc := &http.Client{Transport: &http.Transport{}}
	defer httpc.CloseIdleConnections()
	hc := claudectlv1connect.NewHealthServiceClient(httpc, "http://"+m.Addr)
	res, err := hc.Health(context.Background(), connect.NewRequest(&v1.HealthRequest{}))
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
