package api_test

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
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/api"
)

func newMain(t *testing.T, cli string, stderr *bytes.Buffer) *daemon.Main {
	return &daemon.Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), CLIPath: cli, Stderr: stderr,
		Getenv:     func(string) string { return "" },
		NewHandler: func(d *daemon.Daemon) http.Handler { return api.NewHandler(&api.Service{D: d}) },
		NewServer:  api.NewServer}
}

func TestMainServesAndCloses(t *testing.T) {
	var stderr bytes.Buffer
	m := newMain(t, claudetest.CLIPath(t), &stderr)
	if err := m.Run(context.Background()); err != nil {
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
	err := newMain(t, filepath.Join(t.TempDir(), "no-claude"), &stderr).Run(context.Background())
	var ee *daemon.ExitError
	if !errors.As(err, &ee) || ee.Code != daemon.ExitCLIMissing {
		t.Errorf("missing CLI: %v, want exit %d", err, daemon.ExitCLIMissing)
	}

	old := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(old, []byte("#!/bin/sh\necho '1.0.22 (Claude Code)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	err = newMain(t, old, &stderr).Run(context.Background())
	if !errors.As(err, &ee) || ee.Code != daemon.ExitCLITooOld {
		t.Errorf("old CLI: %v, want exit %d", err, daemon.ExitCLITooOld)
	}
	if !strings.Contains(stderr.String(), "COMPATIBILITY NOTICE") {
		t.Errorf("no compatibility notice for an old CLI:\n%s", stderr.String())
	}

	m := newMain(t, claudetest.CLIPath(t), &stderr)
	m.Listen = "0.0.0.0:0"
	if err := m.Run(context.Background()); !errors.Is(err, api.ErrTokenRequired) {
		m.Close()
		t.Errorf("non-loopback without a token: %v", err)
	}
}
