package claude_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claude"
	"github.com/google/go-cmp/cmp"
)

func TestArgs(t *testing.T) {
	base := []string{"--output-format", "stream-json", "--input-format", "stream-json", "--verbose"}
	o := &claude.Options{
		Model: "opus", FallbackModel: "sonnet", PermissionMode: claude.PermissionAcceptEdits,
		AllowDangerouslySkipPermissions: true,
		CanUseTool:                      claude.AnswerQuestions(nil, nil),
		Tools:                           []string{"Bash", "Read"}, AllowedTools: []string{"Bash(git status:*)", "Read"},
		DisallowedTools: []string{"WebFetch"}, AddDirs: []string{"/a b", "-weird"},
		MCPConfig: []string{`{"mcpServers":{}}`}, StrictMCPConfig: true, Settings: `{"a":1}`,
		SettingSources: []string{}, MaxTurns: 3, MaxBudgetUSD: 1.5, MaxThinkingTokens: 1000, Effort: "high",
		Betas: []string{"context-1m-2025-08-07"}, Resume: "abc", ForkSession: true, ResumeSessionAt: "u1",
		SessionID: "00000000-0000-0000-0000-000000000000", NoSessionPersistence: true,
		JSONSchema: []byte(`{ "type": "object" }`), IncludePartialMessages: true, IncludeHookEvents: true,
		ReplayUserMessages: true, SystemPrompt: claude.CustomPrompt("-be brief"),
		Agents:    map[string]claude.AgentDefinition{"rev": {Description: "reviews", Prompt: "review"}},
		ExtraArgs: []string{"--debug"},
	}
	got, err := o.Args()
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(base),
		"--permission-prompt-tool=stdio", "--model=opus", "--fallback-model=sonnet", "--permission-mode=acceptEdits",
		"--allow-dangerously-skip-permissions", "--tools=Bash,Read", "--allowedTools=Bash(git status:*),Read",
		"--disallowedTools=WebFetch", "--add-dir=/a b", "--add-dir=-weird", `--mcp-config={"mcpServers":{}}`,
		"--strict-mcp-config", `--settings={"a":1}`, "--setting-sources=", "--max-turns=3", "--max-budget-usd=1.5",
		"--max-thinking-tokens=1000", "--effort=high", "--betas=context-1m-2025-08-07", "--resume=abc",
		"--fork-session", "--resume-session-at=u1", "--session-id=00000000-0000-0000-0000-000000000000",
		"--no-session-persistence", `--json-schema={"type":"object"}`, "--include-partial-messages",
		"--include-hook-events", "--replay-user-messages",
		"--debug") // Agents and the system prompt go in initialize
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	got, _ = (&claude.Options{}).Args()
	if diff := cmp.Diff(base, got); diff != "" {
		t.Errorf("zero options (-want +got):\n%s", diff)
	}
	got, _ = (&claude.Options{Tools: []string{}, Thinking: claude.ThinkingDisabled}).Args()
	if !slices.Contains(got, "--tools=") || !slices.Contains(got, "--thinking=disabled") {
		t.Errorf("empty tools / thinking: %v", got)
	}
}

func TestOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		o     claude.Options
		field string
	}{
		{claude.Options{PermissionMode: "yolo"}, "PermissionMode"},
		{claude.Options{Model: "a", FallbackModel: "a"}, "FallbackModel"},
		{claude.Options{Thinking: "sometimes"}, "Thinking"},
		{claude.Options{MaxTurns: -1}, "MaxTurns"},
		{claude.Options{MaxBudgetUSD: -1}, "MaxBudgetUSD"},
		{claude.Options{MaxPayloadBytes: 10}, "MaxPayloadBytes"},
		{claude.Options{Effort: "extreme"}, "Effort"},
		{claude.Options{JSONSchema: []byte("{nope")}, "JSONSchema"},
		{claude.Options{ForkSession: true}, "ForkSession"},
		{claude.Options{Resume: "x", Continue: true}, "Continue"},
	} {
		_, err := claude.Start(t.Context(), &tc.o)
		var oe *claude.OptionError
		if !errors.As(err, &oe) || oe.Field != tc.field {
			t.Errorf("%+v: err = %v, want an OptionError for %s", tc.o, err, tc.field)
		}
	}
	_, err := claude.Start(t.Context(), &claude.Options{PermissionMode: "yolo"})
	if !strings.Contains(err.Error(), "acceptEdits") {
		t.Errorf("message does not list the allowed modes: %v", err)
	}
}

// An argument exec could not pass is refused by Validate, naming its
// option: a list joined into one argument over MAX_ARG_STRLEN (131072
// bytes with its NUL) although each element is short, or a command line
// over 1 MiB in all.
func TestOptionArgvLimits(t *testing.T) {
	names := func(joined int) []string { // names of 7 bytes and one shorter, joined in that many bytes
		n := (joined + 1) / 8
		l := slices.Repeat([]string{"Bash(x)"}, n)
		if rest := joined - (8*n - 1); rest > 0 {
			l = append(l, strings.Repeat("y", rest-1))
		}
		return l
	}
	const arg = 131071 // MAX_ARG_STRLEN less the NUL
	for i, tc := range []struct {
		o     claude.Options
		field string // "": valid
	}{
		{claude.Options{AllowedTools: names(arg - len("--allowedTools="))}, ""},
		{claude.Options{AllowedTools: names(arg + 1 - len("--allowedTools="))}, "AllowedTools"},
		{claude.Options{DisallowedTools: names(arg + 1 - len("--disallowedTools="))}, "DisallowedTools"},
		{claude.Options{Tools: names(arg + 1 - len("--tools="))}, "Tools"},
		{claude.Options{Betas: names(arg + 1 - len("--betas="))}, "Betas"},
		{claude.Options{ExtraArgs: []string{"--x=" + strings.Repeat("y", arg+1-len("--x="))}}, "ExtraArgs"},
		{claude.Options{AddDirs: slices.Repeat([]string{"/"}, 60_000)}, "AddDirs"}, // 20 bytes each with NUL and pointer
	} {
		err := tc.o.Validate()
		var oe *claude.OptionError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("case %d: %v, want valid", i, err)
		case tc.field != "" && (!errors.As(err, &oe) || oe.Field != tc.field):
			t.Errorf("case %d: err = %.300v, want an OptionError for %s", i, err, tc.field)
		case tc.field != "" && len(err.Error()) > 500:
			t.Errorf("%s: the error is %d bytes long: %.300s…", tc.field, len(err.Error()), err)
		}
	}
}

func TestEnviron(t *testing.T) {
	t.Setenv("CLAUDECODE", "1")
	t.Setenv("KEEP_ME", "yes")
	t.Setenv("DROP_ME", "x")
	env := (&claude.Options{Env: map[string]string{"ADDED": "a b", "DROP_ME": ""}}).Environ()
	has := func(kv string) bool { return slices.Contains(env, kv) }
	if !has("KEEP_ME=yes") || !has("ADDED=a b") || !has("CLAUDE_CODE_ENTRYPOINT=sdk-go") {
		t.Errorf("env lacks expected entries")
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "CLAUDECODE=") || strings.HasPrefix(kv, "DROP_ME=") {
			t.Errorf("env has %s", kv)
		}
	}
}
