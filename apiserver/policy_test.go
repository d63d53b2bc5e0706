package apiserver_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// TestSessionOptionsLeastPrivilege plays a client that asks for more than
// the settings allow: a --settings flag whose hook runs a command (the
// marker file must never appear), bypassPermissions, a directory outside
// the allowed roots, and malformed values. Each is InvalidArgument naming
// the option (and the setting that would allow it), and no session is
// stored for it.
func TestSessionOptionsLeastPrivilege(t *testing.T) {
	root := t.TempDir()
	d := daemontest.Start(t, &daemontest.Options{Policy: daemon.SessionPolicy{Roots: []string{root}}},
		claudetest.Reply(claudetest.Text("hi")))
	url, httpc := d.Serve()
	sessions := claudectlv1connect.NewSessionServiceClient(httpc, url)
	marker := filepath.Join(t.TempDir(), "pwned")
	hooks := `--settings={"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch ` + marker + `"}]}],` +
		`"UserPromptSubmit":[{"hooks":[{"type":"command","command":"touch ` + marker + `"}]}]}}`
	outside := t.TempDir()
	for _, tc := range []struct {
		name  string
		o     *v1.SessionOptions
		field string
		says  string
	}{
		{"hooks injection", &v1.SessionOptions{Cwd: root, ExtraArgs: []string{hooks}}, "options.extra_args[0]", "sessions.allowed_extra_args"},
		{"a value as its own argument", &v1.SessionOptions{Cwd: root, ExtraArgs: []string{"bare"}}, "options.extra_args[0]", `"--flag=value"`},
		{"bypassPermissions", &v1.SessionOptions{Cwd: root, PermissionMode: "bypassPermissions"}, "options.permission_mode", "sessions.allow_bypass_permissions"},
		{"outside the roots", &v1.SessionOptions{Cwd: outside}, "options.cwd", "sessions.allowed_roots"},
		{"add_dir outside the roots", &v1.SessionOptions{Cwd: root, AddDirs: []string{outside}}, "options.add_dirs[0]", "sessions.allowed_roots"},
		{"relative cwd", &v1.SessionOptions{Cwd: "src"}, "options.cwd", "absolute"},
		{"missing cwd", &v1.SessionOptions{Cwd: filepath.Join(root, "nope")}, "options.cwd", "no such directory"},
		{"NaN budget", &v1.SessionOptions{Cwd: root, MaxBudgetUsd: math.NaN()}, "options.max_budget_usd", "number of dollars"},
		{"NUL byte", &v1.SessionOptions{Cwd: root, Model: "son\x00net"}, "options.model", "NUL"},
		{"argv too long", &v1.SessionOptions{Cwd: root, AppendSystemPrompt: strings.Repeat("x", 200<<10)}, "options.append_system_prompt", "command-line argument"},
		// Each name is short, but the list is one argument: --allowedTools=a,b,…
		{"allowed_tools joined too long", &v1.SessionOptions{Cwd: root, AllowedTools: slices.Repeat([]string{"Bash(x)"}, 20_000)}, "options.allowed_tools", "command-line argument"},
		{"disallowed_tools joined too long", &v1.SessionOptions{Cwd: root, DisallowedTools: slices.Repeat([]string{"Bash(x)"}, 20_000)}, "options.disallowed_tools", "command-line argument"},
	} {
		_, err := sessions.CreateSession(d.Ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: tc.o, Prompt: "hello"}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want InvalidArgument naming %s and %q", tc.name, err, tc.field, tc.says)
		}
	}
	list, err := sessions.ListSessions(d.Ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
	if err != nil || len(list.Msg.Sessions) != 0 {
		t.Errorf("sessions stored for refused requests: %v, %v", list.Msg.GetSessions(), err)
	}

	// A session as allowed runs; switching it to bypassPermissions is refused too.
	s, err := sessions.CreateSession(d.Ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: root}}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sessions.SetPermissionMode(d.Ctx, connect.NewRequest(&v1.SetPermissionModeRequest{SessionId: s.Msg.Session.Id, Mode: "bypassPermissions"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "sessions.allow_bypass_permissions") {
		t.Errorf("SetPermissionMode bypassPermissions: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // a hook, had one run, would have had time
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the injected hook ran")
	}
}

// TestSessionOptionsArgvInAll: 120,000 add_dirs of "/" are 120 KB of
// options, under the 1 MiB they may hold in all, but 2.4 MB of command line
// (each "--add-dir=/", its NUL and its pointer): over what exec takes
// (ARG_MAX), the session was stored and failed with "argument list too
// long". It is refused up front, naming the option.
func TestSessionOptionsArgvInAll(t *testing.T) {
	d := daemontest.Start(t, nil, claudetest.Reply(claudetest.Text("hi")))
	url, httpc := d.Serve()
	sessions := claudectlv1connect.NewSessionServiceClient(httpc, url)
	o := &v1.SessionOptions{Cwd: t.TempDir(), AddDirs: slices.Repeat([]string{"/"}, 120_000)}
	_, err := sessions.CreateSession(d.Ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: o, Prompt: "hello"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "options.add_dirs") || !strings.Contains(err.Error(), "command line would be") {
		t.Errorf("%.300v; want InvalidArgument naming options.add_dirs", err)
	}
	list, err := sessions.ListSessions(d.Ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
	if err != nil || len(list.Msg.Sessions) != 0 {
		t.Errorf("sessions stored for a refused request: %v, %v", list.Msg.GetSessions(), err)
	}
}
