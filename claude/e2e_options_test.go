package claude_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
)

// systemSeen runs one turn with the given system prompt and returns the
// system prompt of the model request, and the session's working directory.
func systemSeen(t *testing.T, p *claude.SystemPrompt) (system, cwd string) {
	t.Helper()
	e := newE2E(t, claudetest.Reply(claudetest.Text("ok")))
	e.opts.SystemPrompt = p
	s := e.start()
	e.turn(s, "hi")
	for _, r := range e.srv.Requests() {
		if r.LastUserText() == "hi" {
			return r.System, e.opts.Cwd
		}
	}
	t.Fatalf("no model request for the prompt")
	return "", ""
}

const (
	agentSDKIdentity  = "You are a Claude agent, built on Anthropic's Claude Agent SDK."
	claudeCodeHarness = "# Harness"
	// dynamicMemorySection starts a per-user section of Claude Code's prompt
	// (it names the user's memory directory).
	dynamicMemorySection = "# Memory"
)

func TestE2ESystemPromptForms(t *testing.T) {
	t.Run("default is minimal", func(t *testing.T) {
		sys, cwd := systemSeen(t, nil)
		// The official SDKs' default: no Claude Code prompt, only the CLI's
		// one-line identity.
		if !strings.Contains(sys, agentSDKIdentity) || strings.Contains(sys, claudeCodeHarness) || strings.Contains(sys, cwd) || len(sys) > 400 {
			t.Errorf("default system prompt is not the minimal one (%d chars):\n%s", len(sys), sys)
		}
	})
	t.Run("explicitly empty", func(t *testing.T) {
		sys, _ := systemSeen(t, claude.CustomPrompt())
		if !strings.Contains(sys, agentSDKIdentity) || strings.Contains(sys, claudeCodeHarness) || len(sys) > 400 {
			t.Errorf("empty system prompt (%d chars):\n%s", len(sys), sys)
		}
	})
	t.Run("custom blocks", func(t *testing.T) {
		sys, _ := systemSeen(t, claude.CustomPrompt("You are a release bot.", claude.SystemPromptDynamicBoundary, "Today is release day."))
		if !strings.Contains(sys, "You are a release bot.") || !strings.Contains(sys, "Today is release day.") ||
			strings.Contains(sys, claudeCodeHarness) || strings.Contains(sys, claude.SystemPromptDynamicBoundary) {
			t.Errorf("custom system prompt:\n%s", sys)
		}
	})
	t.Run("claude_code preset with append", func(t *testing.T) {
		sys, _ := systemSeen(t, claude.ClaudeCodePrompt("Always answer in haiku."))
		if !strings.Contains(sys, "You are Claude Code") || !strings.Contains(sys, claudeCodeHarness) ||
			!strings.Contains(sys, dynamicMemorySection) || !strings.HasSuffix(strings.TrimSpace(sys), "Always answer in haiku.") {
			t.Errorf("preset system prompt lacks Claude Code's prompt, its memory section or the appended text at its end (%d chars): %s", len(sys), sys)
		}
	})
	t.Run("claude_code preset without dynamic sections", func(t *testing.T) {
		sys, _ := systemSeen(t, &claude.SystemPrompt{Preset: claude.PresetClaudeCode, ExcludeDynamicSections: true})
		if !strings.Contains(sys, claudeCodeHarness) || strings.Contains(sys, dynamicMemorySection) {
			t.Errorf("preset without dynamic sections: has the harness %v, has the per-user memory section %v",
				strings.Contains(sys, claudeCodeHarness), strings.Contains(sys, dynamicMemorySection))
		}
	})
}

// A failing hook blocks the tool when its matcher says OnFailure block; the
// same failure with the default lets the tool run.
func TestE2EHookOnFailureBlock(t *testing.T) {
	for _, tc := range []struct {
		name      string
		onFailure claude.HookFailure
		ran       bool
	}{
		{"block", claude.HookFailureBlock, false},
		{"default", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newE2E(t,
				claudetest.Reply(claudetest.ToolUseID("toolu_fail", "Bash", map[string]any{"command": "touch ran.txt", "description": "make a file"})),
				claudetest.Reply(claudetest.Text("done")))
			e.opts.AllowedTools = []string{"Bash"}
			e.opts.Hooks = map[claude.HookEventName][]claude.HookMatcher{
				claude.HookPreToolUse: {{Matcher: "Bash", OnFailure: tc.onFailure, Hooks: []claude.HookFunc{
					func(context.Context, claude.HookInput) (*claude.HookOutput, error) {
						return nil, errors.New("policy service unreachable")
					}}}},
			}
			s := e.start()
			e.turn(s, "make a file")
			_, err := os.Stat(filepath.Join(e.opts.Cwd, "ran.txt"))
			if ran := err == nil; ran != tc.ran {
				t.Errorf("OnFailure %q: the tool ran = %v, want %v", tc.onFailure, ran, tc.ran)
			}
			if !tc.ran {
				content, isErr := toolResult(t, e.srv, "toolu_fail")
				if !isErr {
					t.Errorf("blocked call's tool_result = %q, not an error", content)
				}
			}
		})
	}
}
