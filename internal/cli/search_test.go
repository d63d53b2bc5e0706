package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// A phrase of a closed session's tool output is found by claudectl
// search, one match a line (session id, seq, time, snippet) and as JSON
// lines; the sessions show the title Claude Code gave them (--name), else
// their first prompt. The real CLI and the scripted model.
func TestSearchFindsClosedSessionsToolOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the wombat-quoll migration broke on Tuesday\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// --name is how a person gives a session its title; Claude Code prints
	// it (system/session_title_changed).
	d, _ := startDaemonModel(t, &daemontest.Options{Policy: daemon.SessionPolicy{ExtraArgs: []string{"--name"}}},
		// Both sessions run this script: each reads its own notes.txt.
		claudetest.Reply(claudetest.ToolUse("Read", map[string]any{"file_path": "notes.txt"})),
		claudetest.Reply(claudetest.Text("Done.")))
	res, err := d.sessions.CreateSession(d.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: dir, ExtraArgs: []string{"--name=Hunt the quoll"}}, Prompt: "read notes.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	named := res.Msg.Session.Id
	d.waitIdle(t, named)
	d.closeSession(t, named)
	otherDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(otherDir, "notes.txt"), []byte("nothing to see\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := d.create(t, otherDir, "say hello\nin one word")
	d.waitIdle(t, other)

	inv := d.inv()
	var o outcome
	waitFor(t, "the tool output found", func() bool {
		o = claudectl(t, inv, "search", "Wombat", `"quoll`)
		return o.code == 0
	})
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if len(lines) != 1 {
		t.Fatalf("search: %d lines, want 1:\n%s", len(lines), o.stdout)
	}
	f := strings.Fields(lines[0])
	if len(f) < 5 || f[0] != named || !strings.Contains(lines[0], "wombat-quoll migration") {
		t.Fatalf("search: %q, want the session's id, seq, time and the output", lines[0])
	}
	seq, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || seq < 2 {
		t.Errorf("search: seq %q", f[1])
	}

	o = claudectl(t, inv, "search", "--json", "wombat")
	var hit searchJSON
	if err := json.Unmarshal([]byte(strings.TrimSpace(o.stdout)), &hit); o.code != 0 || err != nil {
		t.Fatalf("search --json: exit %d, %v, %q", o.code, err, o.stdout)
	}
	if hit.SessionID != named || hit.Seq != seq || hit.Kind != "tool_output" || !strings.Contains(hit.Snippet, "[[wombat]]") ||
		hit.SessionTitle != "Hunt the quoll" || hit.Time.IsZero() {
		t.Errorf("search --json: %+v", hit)
	}

	// No match, no word, and a session to search.
	if o = claudectl(t, inv, "search", "platypus"); o.code != 1 || !strings.Contains(o.stderr, `no match for "platypus"`) {
		t.Errorf("search platypus: exit %d, stderr %q", o.code, o.stderr)
	}
	if o = claudectl(t, inv, "search", "--", "***"); o.code != 2 || !strings.Contains(o.stderr, "no word to look for") {
		t.Errorf("search ***: exit %d, stderr %q", o.code, o.stderr)
	}
	if o = claudectl(t, inv, "search", "--session", other, "wombat"); o.code != 1 {
		t.Errorf("search --session OTHER wombat: exit %d, stdout %q", o.code, o.stdout)
	}

	waitFor(t, "the titles", func() bool {
		o = claudectl(t, inv, "sessions")
		return strings.Contains(o.stdout, "Hunt the quoll") && strings.Contains(o.stdout, "“say hello in one word”")
	})
	if head := strings.Fields(strings.SplitN(o.stdout, "\n", 2)[0]); len(head) < 6 || head[5] != "TITLE" {
		t.Errorf("sessions: no TITLE column after COST:\n%s", o.stdout)
	}
	o = claudectl(t, inv, "sessions", "--json")
	var list []sessionJSON
	if err := json.Unmarshal([]byte(o.stdout), &list); err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == named && (s.Title != "Hunt the quoll" || s.FirstPrompt != "read notes.txt") {
			t.Errorf("sessions --json: %+v", s)
		}
	}
}
