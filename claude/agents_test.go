package claude_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/google/go-cmp/cmp"
)

// Lines as the CLI (2.1.329) prints them around a background sub-agent.
func stateLine(state string) map[string]any {
	return map[string]any{"type": "system", "subtype": "session_state_changed", "state": state, "sdk_host_only": true, "session_id": "s"}
}

func resultLine(text string) map[string]any {
	return map[string]any{"type": "result", "subtype": "success", "is_error": false, "result": text, "session_id": "s"}
}

func textLine(parent, agent, text string) map[string]any {
	m := map[string]any{"type": "assistant", "message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}}},
		"parent_tool_use_id": nil, "session_id": "s"}
	if parent != "" {
		m["parent_tool_use_id"], m["agent_id"] = parent, agent
	}
	return m
}

// describe summarises a message for comparing sequences.
func describe(m claude.Message) string {
	switch m := m.(type) {
	case *claude.SessionStateChanged:
		return "state:" + m.State
	case *claude.ResultMessage:
		return "result:" + m.Result
	case *claude.AssistantMessage:
		th := claude.ThreadOf(m)
		if th.IsMain() {
			return "main:" + m.Text()
		}
		return fmt.Sprintf("%s/%s:%s", th.ParentToolUseID, th.AgentID, m.Text())
	case *claude.SystemInit:
		return "init"
	}
	return m.Kind()
}

func collectSeq(t *testing.T, seq func(func(claude.Message, error) bool)) (got []string, err error) {
	t.Helper()
	for m, e := range seq {
		if e != nil {
			return got, e
		}
		got = append(got, describe(m))
	}
	return got, nil
}

func TestUntilIdleReadsBackgroundTurns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, c := startMem(t, nil)
	if err := s.SendText(ctx, "start a background agent"); err != nil {
		t.Fatal(err)
	}
	for _, l := range []map[string]any{
		stateLine("running"),
		{"type": "system", "subtype": "init", "session_id": "s", "tools": []string{"Agent"}},
		textLine("", "", "launching"),
		textLine("toolu_task", "a1", "sub working"),
		resultLine("first"),
		textLine("toolu_task", "a1", "sub done"),
		{"type": "system", "subtype": "init", "session_id": "s", "tools": []string{"Agent"}},
		textLine("", "", "the agent says done"),
		resultLine("second"),
		stateLine("idle"),
	} {
		c.print(l)
	}
	// Turn stops at the first result ...
	got, err := collectSeq(t, s.Turn(ctx))
	want := []string{"state:running", "init", "main:launching", "toolu_task/a1:sub working", "result:first"}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("Turn (-want +got):\n%s (err %v)", diff, err)
	}
	// ... and UntilIdle reads the background turn that follows.
	got, err = collectSeq(t, s.UntilIdle(ctx))
	want = []string{"toolu_task/a1:sub done", "init", "main:the agent says done", "result:second", "state:idle"}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("UntilIdle (-want +got):\n%s (err %v)", diff, err)
	}
	// Already idle, nothing sent since: nothing to read.
	if got, err = collectSeq(t, s.UntilIdle(ctx)); len(got) != 0 || err != nil {
		t.Errorf("UntilIdle when idle = %v, %v", got, err)
	}

	// The next prompt: Turn stops at its result, leaving the "idle" after it
	// unread; after another prompt, UntilIdle must not stop at that stale idle.
	if err := s.SendText(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	for _, l := range []map[string]any{stateLine("running"), textLine("", "", "two"), resultLine("third"), stateLine("idle")} {
		c.print(l)
	}
	if got, err = collectSeq(t, s.Turn(ctx)); err != nil || got[len(got)-1] != "result:third" {
		t.Errorf("Turn = %v, %v", got, err)
	}
	if err := s.SendText(ctx, "and again"); err != nil {
		t.Fatal(err)
	}
	for _, l := range []map[string]any{stateLine("running"), textLine("", "", "three"), resultLine("fourth"), stateLine("idle")} {
		c.print(l)
	}
	got, err = collectSeq(t, s.UntilIdle(ctx))
	want = []string{"state:idle", "state:running", "main:three", "result:fourth", "state:idle"}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("UntilIdle after a stale idle (-want +got):\n%s (err %v)", diff, err)
	}

	// A clean exit after the last result ends the iteration without error.
	if err := s.SendText(ctx, "last"); err != nil {
		t.Fatal(err)
	}
	c.print(stateLine("running"))
	c.print(resultLine("fifth"))
	c.end()
	got, err = collectSeq(t, s.UntilIdle(ctx))
	if diff := cmp.Diff([]string{"state:running", "result:fifth"}, got); err != nil || diff != "" {
		t.Errorf("UntilIdle to the end (-want +got):\n%s (err %v)", diff, err)
	}
}

func TestUntilIdleWithoutStateReports(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, c := startMem(t, nil)
	s.SendText(ctx, "hi")
	// A CLI that does not report its state: the result ends it.
	c.print(textLine("", "", "hello"))
	c.print(resultLine("one"))
	c.print(textLine("", "", "not yet"))
	got, err := collectSeq(t, s.UntilIdle(ctx))
	if diff := cmp.Diff([]string{"main:hello", "result:one"}, got); err != nil || diff != "" {
		t.Errorf("UntilIdle (-want +got):\n%s (err %v)", diff, err)
	}
	// The session ending before any result is an error (io.EOF).
	s.SendText(ctx, "again")
	c.end()
	got, err = collectSeq(t, s.UntilIdle(ctx))
	if !errors.Is(err, io.EOF) || len(got) != 1 {
		t.Errorf("UntilIdle at the end = %v, %v", got, err)
	}
}

func TestThreadOf(t *testing.T) {
	for _, tc := range []struct {
		line string
		want claude.Thread
	}{
		{`{"type":"assistant","message":{"content":[]},"parent_tool_use_id":"toolu_1","agent_id":"a1"}`, claude.Thread{ParentToolUseID: "toolu_1", AgentID: "a1"}},
		{`{"type":"assistant","message":{"content":[]},"parent_tool_use_id":null}`, claude.Thread{}},
		{`{"type":"user","message":{"role":"user","content":"x"},"parent_tool_use_id":"toolu_2","agent_id":"a2"}`, claude.Thread{ParentToolUseID: "toolu_2", AgentID: "a2"}},
		{`{"type":"stream_event","event":{"type":"message_stop"},"parent_tool_use_id":"toolu_3","agent_id":"a3"}`, claude.Thread{ParentToolUseID: "toolu_3", AgentID: "a3"}},
		{`{"type":"tool_progress","tool_use_id":"t","tool_name":"Bash","parent_tool_use_id":"toolu_4","elapsed_time_seconds":1}`, claude.Thread{ParentToolUseID: "toolu_4"}},
		{`{"type":"system","subtype":"permission_denied","tool_name":"Bash","tool_use_id":"t","agent_id":"a5"}`, claude.Thread{AgentID: "a5"}},
		{`{"type":"system","subtype":"task_started","task_id":"a6","tool_use_id":"toolu_6"}`, claude.Thread{}},
		{`{"type":"result","subtype":"success"}`, claude.Thread{}},
	} {
		m, err := claude.DecodeMessage([]byte(tc.line))
		if err != nil {
			t.Fatal(err)
		}
		if got := claude.ThreadOf(m); got != tc.want || got.IsMain() != (tc.want == claude.Thread{}) {
			t.Errorf("ThreadOf(%s) = %+v, want %+v", tc.line, got, tc.want)
		}
	}
}

func TestEnvironAsksForSessionState(t *testing.T) {
	has := func(env []string, kv string) bool {
		for _, e := range env {
			if e == kv {
				return true
			}
		}
		return false
	}
	if env := (&claude.Options{}).Environ(); !has(env, "CLAUDE_CODE_SDK_READS_SESSION_STATE=1") {
		t.Error("the CLI is not asked for session_state_changed messages")
	}
	if env := (&claude.Options{}).Environ(); !has(env, "CLAUDE_CODE_STARTUP_FAILURE_RESULTS=1") {
		t.Error("the CLI is not asked for startup failure results")
	}
	// An empty value in Env removes it.
	env := (&claude.Options{Env: map[string]string{"CLAUDE_CODE_SDK_READS_SESSION_STATE": ""}}).Environ()
	for _, e := range env {
		if strings.HasPrefix(e, "CLAUDE_CODE_SDK_READS_SESSION_STATE=") {
			t.Errorf("environment has %s", e)
		}
	}
}
