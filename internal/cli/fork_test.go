package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claudetest"
)

func TestFork(t *testing.T) {
	t.Parallel()
	d, model := startDaemonModel(t, nil,
		claudetest.Reply(claudetest.Text("Noted: 42.")),
		claudetest.Reply(claudetest.Text("It was 42.")))
	id := d.create(t, t.TempDir(), "Remember 42.")
	d.waitResults(t, id, 1)

	// The original still runs: a fork goes on apart from it.
	o := claudectl(t, d.inv(), "fork", id, "Which number?")
	m := regexp.MustCompile(`^Forked session ` + id + ` as (\S+) \(\w+\)\.\n$`).FindStringSubmatch(o.stdout)
	if o.code != 0 || m == nil {
		t.Fatalf("fork: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	fork := m[1]
	if fork == id {
		t.Fatalf("the fork has the original's id %s", id)
	}
	d.waitResults(t, fork, 1)
	conv := lastConversation(t, model)
	for _, want := range []string{"user: Remember 42.", "assistant: Noted: 42.", "user: Which number?"} {
		if !strings.Contains(conv, want) {
			t.Errorf("the fork's request lacks %q:\n%s", want, conv)
		}
	}
	if s := d.session(t, fork); s.ParentId != id || s.ClaudeSessionId == "" || s.ClaudeSessionId == d.session(t, id).ClaudeSessionId {
		t.Errorf("fork: parent %q, CLI session %q (original's %q)", s.ParentId, s.ClaudeSessionId, d.session(t, id).ClaudeSessionId)
	}

	// --json prints the new session, for scripts.
	o = claudectl(t, d.inv(), "fork", "--json", id)
	var js sessionJSON
	if err := json.Unmarshal([]byte(o.stdout), &js); o.code != 0 || err != nil || js.ID == "" || js.ID == id || js.ID == fork || js.ParentID != id {
		t.Fatalf("fork --json: exit %d, %+v (%v), stderr %q", o.code, js, err, o.stderr)
	}

	// sessions shows where each fork came from.
	o = claudectl(t, d.inv(), "sessions")
	if o.code != 0 || !strings.Contains(o.stdout, "PARENT") || strings.Contains(o.stdout, "ERROR") {
		t.Fatalf("sessions: exit %d, stdout:\n%s", o.code, o.stdout)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(o.stdout), "\n")[1:] {
		f := strings.Fields(l)
		rows[f[0]] = f
	}
	// PARENT is the last column; a TITLE column before it (once the search
	// indexer has noted a session's first prompt) holds spaces.
	if r := rows[fork]; len(r) < 6 || r[len(r)-1] != id {
		t.Errorf("the fork's row %q does not name its parent %s", r, id)
	}
	if r := rows[id]; len(r) < 6 || r[len(r)-1] != "-" {
		t.Errorf("the original's row %q has a parent", r)
	}
	o = claudectl(t, d.inv(), "sessions", "--json")
	var list []sessionJSON
	if err := json.Unmarshal([]byte(o.stdout), &list); err != nil || len(list) != 3 {
		t.Fatalf("sessions --json: %v, %d sessions", err, len(list))
	}
	for _, s := range list {
		if want := map[bool]string{true: "", false: id}[s.ID == id]; s.ParentID != want {
			t.Errorf("sessions --json: %s has parent %q, want %q", s.ID, s.ParentID, want)
		}
	}

	o = claudectl(t, d.inv(), "fork", "no-such-session")
	if o.code != 1 || o.stderr != "claudectl fork: no session no-such-session (claudectl sessions lists them)\n" {
		t.Errorf("fork of an unknown session: exit %d, stderr %q", o.code, o.stderr)
	}
}
