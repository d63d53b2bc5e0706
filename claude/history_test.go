package claude_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claude"
)

func TestProjectDirName(t *testing.T) {
	long := "/home/user/" + strings.Repeat("a", 250)
	for dir, want := range map[string]string{
		"/tmp/TestX123/002":  "-tmp-TestX123-002",
		"/home/me/my_proj.x": "-home-me-my-proj-x",
		"/tmp/été/😀":         "-tmp--t----", // one "-" per UTF-16 unit, as the CLI does
		long:                 strings.ReplaceAll(long, "/", "-")[:200] + "-f2vpct",
	} {
		if got := claude.ProjectDirName(dir); got != want {
			t.Errorf("ProjectDirName(%q) = %q, want %q", dir, got, want)
		}
	}
}

// The history functions read what the real CLI wrote: a session with a
// sub-agent, renamed while it ran, then renamed, tagged and deleted offline.
func TestE2EHistory(t *testing.T) {
	e := newE2EResponder(t, subagentResponder(0))
	subagentOptions(e)
	opts := &claude.HistoryOptions{Dir: e.opts.Cwd, ConfigDir: filepath.Join(e.opts.Env["HOME"], ".claude")}
	s := e.start()
	msgs, _ := e.turn(s, "delegate it")
	var agentID string
	for m, err := range s.UntilIdle(e.ctx) {
		if err != nil {
			t.Fatalf("UntilIdle: %v", err)
		}
		msgs = append(msgs, m)
	}
	for _, m := range msgs {
		if a, ok := m.(*claude.AssistantMessage); ok && a.AgentID != "" {
			agentID = a.AgentID
		}
	}
	if err := s.RenameSession(e.ctx, "Renamed while running"); err != nil {
		t.Fatalf("Session.RenameSession: %v", err)
	}
	sid := s.SessionID()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	list, err := claude.ListSessions(opts)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListSessions = %+v, %v; want one session", list, err)
	}
	got := list[0]
	if got.SessionID != sid || got.CustomTitle != "Renamed while running" || got.Summary != got.CustomTitle ||
		got.FirstPrompt != "delegate it" || got.Cwd != e.opts.Cwd || got.CreatedAt.IsZero() || got.FileSize == 0 {
		t.Errorf("ListSessions: %+v", got)
	}
	// Every project: the same session.
	all, err := claude.ListSessions(&claude.HistoryOptions{ConfigDir: opts.ConfigDir})
	if err != nil || len(all) != 1 || all[0].SessionID != sid {
		t.Errorf("ListSessions(all projects) = %+v, %v", all, err)
	}

	history, err := claude.GetSessionMessages(sid, opts)
	if err != nil {
		t.Fatalf("GetSessionMessages: %v", err)
	}
	var texts, tools []string
	for _, m := range history {
		if m.SessionID != sid || m.UUID == "" || m.Timestamp.IsZero() || m.Role != m.Type {
			t.Errorf("message %+v", m)
		}
		for _, b := range m.Content.Blocks {
			if tu, ok := b.(*claude.ToolUseBlock); ok {
				tools = append(tools, tu.Name)
			}
		}
		if tx := m.Content.String(); tx != "" {
			texts = append(texts, m.Type+":"+tx)
		}
	}
	if len(history) < 4 || history[0].Type != "user" || history[0].Content.String() != "delegate it" {
		t.Fatalf("GetSessionMessages: %d messages, first %+v", len(history), history[0])
	}
	joined := strings.Join(texts, "|")
	if !strings.Contains(joined, "assistant:main: agent launched") || !strings.HasSuffix(joined, "assistant:main: the agent reported back") || len(tools) != 1 || tools[0] != "Agent" {
		t.Errorf("conversation: %s; tools %v", joined, tools)
	}
	if strings.Contains(joined, "SUBTASK") {
		t.Errorf("the sub-agent's conversation is in the main one: %s", joined)
	}
	page, err := claude.GetSessionMessages(sid, &claude.HistoryOptions{Dir: opts.Dir, ConfigDir: opts.ConfigDir, Offset: 1, Limit: 2})
	if err != nil || len(page) != 2 || page[0].UUID != history[1].UUID {
		t.Errorf("page of messages = %d, %v", len(page), err)
	}

	agents, err := claude.ListSubagents(sid, opts)
	if err != nil || len(agents) != 1 || agentID == "" || agents[0] != agentID {
		t.Fatalf("ListSubagents = %v, %v; the live messages named agent %q", agents, err, agentID)
	}
	sub, err := claude.GetSubagentMessages(sid, agentID, opts)
	if err != nil || len(sub) < 3 {
		t.Fatalf("GetSubagentMessages = %d messages, %v", len(sub), err)
	}
	if sub[0].Type != "user" || !strings.Contains(sub[0].Content.String(), "SUBTASK: run echo") ||
		sub[len(sub)-1].Content.String() != "sub-agent finished" || sub[0].ParentToolUseID != "toolu_task" {
		t.Errorf("sub-agent messages: first %+v, last %q", sub[0], sub[len(sub)-1].Content.String())
	}

	// Offline: rename and tag, then check the CLI still resumes the session.
	if err := claude.RenameSession(sid, "  Renamed offline ", opts); err != nil {
		t.Fatalf("RenameSession: %v", err)
	}
	if err := claude.TagSession(sid, "experiment", opts); err != nil {
		t.Fatalf("TagSession: %v", err)
	}
	info, err := claude.GetSessionInfo(sid, opts)
	if err != nil || info.CustomTitle != "Renamed offline" || info.Tag != "experiment" {
		t.Errorf("GetSessionInfo after rename and tag = %+v, %v", info, err)
	}
	if err := claude.TagSession(sid, "", opts); err != nil {
		t.Fatal(err)
	}
	if info, _ := claude.GetSessionInfo(sid, opts); info == nil || info.Tag != "" {
		t.Errorf("tag not cleared: %+v", info)
	}
	e.opts.Resume = sid
	r := e.start()
	if _, res := e.turn(r, "still there?"); res.IsError || res.SessionID != sid {
		t.Errorf("resuming the edited session: %s", res.Raw())
	}
	r.Close()
	if info, _ := claude.GetSessionInfo(sid, opts); info == nil || info.CustomTitle != "Renamed offline" {
		t.Errorf("after resuming: %+v", info)
	}

	if err := claude.DeleteSession(sid, opts); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	if list, err := claude.ListSessions(opts); err != nil || len(list) != 0 {
		t.Errorf("ListSessions after delete = %+v, %v", list, err)
	}
	if _, err := claude.GetSessionMessages(sid, opts); !errors.Is(err, claude.ErrSessionNotFound) {
		t.Errorf("GetSessionMessages after delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(opts.ConfigDir, "projects", claude.ProjectDirName(e.opts.Cwd), sid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sub-agent transcripts left: %v", err)
	}
}

func TestHistoryErrors(t *testing.T) {
	opts := &claude.HistoryOptions{ConfigDir: t.TempDir()}
	if _, err := claude.GetSessionMessages("not-a-uuid", opts); err == nil || !strings.Contains(err.Error(), "not a UUID") {
		t.Errorf("bad id: %v", err)
	}
	const id = "00000000-0000-4000-8000-000000000000"
	for name, err := range map[string]error{
		"GetSessionMessages": func() error { _, err := claude.GetSessionMessages(id, opts); return err }(),
		"RenameSession":      claude.RenameSession(id, "x", opts),
		"DeleteSession":      claude.DeleteSession(id, opts),
	} {
		if !errors.Is(err, claude.ErrSessionNotFound) {
			t.Errorf("%s of an unknown session: %v", name, err)
		}
	}
	if list, err := claude.ListSessions(opts); err != nil || len(list) != 0 {
		t.Errorf("ListSessions with no projects = %v, %v", list, err)
	}
	if err := claude.RenameSession(id, "  ", opts); err == nil {
		t.Error("empty title accepted")
	}
}
