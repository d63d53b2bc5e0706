package credentials

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	defer func(old string) { managedSettings = old }(managedSettings)
	for _, tc := range []struct {
		name  string
		env   map[string]string
		files map[string]string // relative to HOME
		want  string            // Source, with HOME as ~
	}{
		{"nothing", nil, nil, ""},
		{"key", map[string]string{"ANTHROPIC_API_KEY": "sk-x"}, nil, "ANTHROPIC_API_KEY"},
		{"oauth token", map[string]string{"CLAUDE_CODE_OAUTH_TOKEN": "t"}, nil, "CLAUDE_CODE_OAUTH_TOKEN"},
		{"auth token", map[string]string{"ANTHROPIC_AUTH_TOKEN": "t"}, nil, "ANTHROPIC_AUTH_TOKEN"},
		{"bedrock", map[string]string{"CLAUDE_CODE_USE_BEDROCK": "1"}, nil, "CLAUDE_CODE_USE_BEDROCK"},
		{"vertex off", map[string]string{"CLAUDE_CODE_USE_VERTEX": "0"}, nil, ""},
		{"login", nil, map[string]string{".claude/.credentials.json": `{"claudeAiOauth":{}}`}, "~/.claude/.credentials.json"},
		{"account (keychain)", nil, map[string]string{".claude.json": `{"oauthAccount":{"emailAddress":"a@b"}}`}, "~/.claude.json (oauthAccount)"},
		{"login key", nil, map[string]string{".claude.json": `{"primaryApiKey":"sk-x"}`}, "~/.claude.json (primaryApiKey)"},
		{"first run only", nil, map[string]string{".claude.json": `{"firstStartTime":"2026-01-01","userID":"x"}`}, ""},
		{"helper", nil, map[string]string{".claude/settings.json": `{"apiKeyHelper":"/bin/key"}`}, "~/.claude/settings.json (apiKeyHelper)"},
		{"settings env", nil, map[string]string{".claude/settings.json": `{"env":{"ANTHROPIC_API_KEY":"sk-x"}}`}, "~/.claude/settings.json (env ANTHROPIC_API_KEY)"},
		{"config dir", map[string]string{"CLAUDE_CONFIG_DIR": "~/cfg"}, map[string]string{"cfg/.credentials.json": `{}`}, "~/cfg/.credentials.json"},
		{"config dir's global", map[string]string{"CLAUDE_CONFIG_DIR": "~/cfg"},
			map[string]string{".claude/.credentials.json": `{}`, "cfg/.claude.json": `{"oauthAccount":{}}`}, "~/cfg/.claude.json (oauthAccount)"},
		{"managed", nil, map[string]string{"managed.json": `{"apiKeyHelper":"x"}`}, "~/managed.json (apiKeyHelper)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			managedSettings = filepath.Join(home, "managed.json")
			for name, body := range tc.files {
				path := filepath.Join(home, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			env := map[string]string{"HOME": home}
			for k, v := range tc.env {
				env[k] = strings.Replace(v, "~", home, 1)
			}
			f := Find(func(k string) string { return env[k] })
			if got := strings.Replace(f.Source, home, "~", 1); got != tc.want {
				t.Errorf("Source %q, want %q (looked at %v)", got, tc.want, f.Looked)
			}
			if tc.want == "" && !slices.Contains(f.Looked, filepath.Join(home, ".claude", ".credentials.json")) &&
				!slices.Contains(f.Looked, filepath.Join(home, "cfg", ".credentials.json")) {
				t.Errorf("Looked %v lacks the login's file", f.Looked)
			}
		})
	}
}
