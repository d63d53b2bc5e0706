package daemon_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// TestTerminalHookLeavesDaemonSessionsAlone: a hook run by the CLI of a
// session of the daemon's own (the person's settings hold claudectl's
// hook, and the daemon's CLIs read them) is refused at once, so the hook
// answers nothing and the request reaches the daemon the usual way; a
// hook's input without a session id or with a relative directory is
// refused naming the field.
func TestTerminalHookLeavesDaemonSessionsAlone(t *testing.T) {
	td := daemontest.Start(t, nil, claudetest.Reply(claudetest.Text("Hello.")))
	s, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "hi")
	if err != nil {
		t.Fatal(err)
	}
	s = waitStatus(t, td.D, td.Ctx, s.ID, store.StatusIdle)
	if s.ClaudeSessionID == "" {
		t.Fatal("the session has no Claude session id")
	}
	h, err := daemon.ParseTerminalHook([]byte(`{"session_id":"` + s.ClaudeSessionID + `","cwd":"` + s.Cwd +
		`","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"ls"}}`))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = td.D.AskTerminal(td.Ctx, h, time.Minute)
	var se *daemon.StateError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "a session of the daemon's own") || time.Since(start) > 10*time.Second {
		t.Errorf("AskTerminal for a session of the daemon's own: %v after %s", err, time.Since(start))
	}
	if ps := td.D.Pending(""); len(ps) != 0 {
		t.Errorf("it was held: %+v", ps)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"cwd":"/x","hook_event_name":"Stop"}`, "hook_input.session_id"},
		{`{"session_id":"a","cwd":"x","hook_event_name":"Stop"}`, "hook_input.cwd"},
		{`{"session_id":"a","cwd":"/x","hook_event_name":"PermissionRequest"}`, "hook_input.tool_name"},
		{`not json`, "not a hook's JSON input"},
	} {
		if _, err := daemon.ParseTerminalHook([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseTerminalHook(%s): %v, want %q", tc.in, err, tc.want)
		}
	}
}
