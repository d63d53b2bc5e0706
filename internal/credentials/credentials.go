// Package credentials knows where the Claude Code CLI finds the
// credentials it calls the API with, and what claudectl tells a person
// whose turn failed without them. It is the one place for both: the local
// run's hint, the daemon's (attached to the turn's error event, which
// run --server, attach, send and the web page show) and serve's warning
// at start all come from here.
//
// The CLI reports a turn it could not send for lack of credentials (none
// at all: "Not logged in · Please run /login") or with credentials the API
// refused (401, after its retries) the same way: an assistant message
// whose error is "authentication_failed", then a result with is_error set
// and subtype "success". [Refused] recognises it.
package credentials

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/claudectl/claudectl/claude"
)

// Refused reports whether m, a model reply the CLI printed, says its turn
// failed because the CLI has no credentials the API accepts.
func Refused(m *claude.AssistantMessage) bool { return m.Error == "authentication_failed" }

// keyVars are the environment variables that hold a credential, and
// providerVars those that send the CLI to another provider, whose
// credentials are that cloud's (the CLI does not ask for a login then).
var (
	keyVars      = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}
	providerVars = []string{"CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY"}
)

// Found says where a CLI would find its credentials.
type Found struct {
	// Source is where they are: a variable ("ANTHROPIC_API_KEY"), a
	// provider's switch ("CLAUDE_CODE_USE_BEDROCK"), or a file with what
	// in it ("/home/u/.claude/.credentials.json", "/home/u/.claude.json
	// (oauthAccount)", "/home/u/.claude/settings.json (apiKeyHelper)");
	// "" when none was found.
	Source string
	// Looked lists where Find looked, in order: for a warning that says
	// none was found.
	Looked []string
}

// Find reports where a CLI started with the environment getenv looks up
// would find credentials, as the CLI looks: the variables, then its
// config directory ($CLAUDE_CONFIG_DIR, else ~/.claude) for the login's
// .credentials.json, its global config (.claude.json beside it, or in
// HOME) for a login's account or key, and its user and managed settings
// for an apiKeyHelper or a key in their env. It reads files but returns
// no secret. A login kept in the macOS keychain is found by its account
// in .claude.json. Find errs on the side of finding: an empty Source means
// none of the usual places holds any.
func Find(getenv func(string) string) Found {
	var f Found
	for _, k := range keyVars {
		f.Looked = append(f.Looked, k)
		if getenv(k) != "" {
			f.Source = k
			return f
		}
	}
	for _, k := range providerVars {
		f.Looked = append(f.Looked, k)
		if v := getenv(k); v != "" && v != "0" && !strings.EqualFold(v, "false") {
			f.Source = k
			return f
		}
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	dir := getenv("CLAUDE_CONFIG_DIR")
	global := filepath.Join(home, ".claude.json")
	if dir != "" {
		global = filepath.Join(dir, ".claude.json")
	} else {
		dir = filepath.Join(home, ".claude")
	}
	look := func(path string, what func([]byte) string) bool {
		f.Looked = append(f.Looked, path)
		b, err := os.ReadFile(path)
		if err != nil || len(b) == 0 {
			return false
		}
		if w := what(b); w != "" {
			f.Source = path
			if w != path {
				f.Source += " (" + w + ")"
			}
			return true
		}
		return false
	}
	exists := func(path string) func([]byte) string { return func([]byte) string { return path } }
	settings := func(b []byte) string {
		var s struct {
			APIKeyHelper string            `json:"apiKeyHelper"`
			Env          map[string]string `json:"env"`
		}
		if json.Unmarshal(b, &s) != nil {
			return ""
		}
		if s.APIKeyHelper != "" {
			return "apiKeyHelper"
		}
		for _, k := range append(append([]string{}, keyVars...), providerVars...) {
			if s.Env[k] != "" {
				return "env " + k
			}
		}
		return ""
	}
	creds := filepath.Join(dir, ".credentials.json")
	switch {
	case look(creds, exists(creds)):
	case look(global, func(b []byte) string {
		var g struct {
			PrimaryAPIKey string          `json:"primaryApiKey"`
			OAuthAccount  json.RawMessage `json:"oauthAccount"`
		}
		switch {
		case json.Unmarshal(b, &g) != nil:
		case g.PrimaryAPIKey != "":
			return "primaryApiKey"
		case len(g.OAuthAccount) > 0 && string(g.OAuthAccount) != "null":
			return "oauthAccount"
		}
		return ""
	}):
	case look(filepath.Join(dir, "settings.json"), settings):
	case look(managedSettings, settings):
	}
	return f
}

// managedSettings is the settings file an administrator manages, which
// the CLI reads before the user's (Linux's place; macOS has its own).
var managedSettings = "/etc/claude-code/managed-settings.json"

// Where says whose CLI lacks the credentials, for Hint.
type Where struct {
	// Daemon is set for the CLIs a daemon runs itself: the key goes in
	// the daemon's environment or its settings' env.
	Daemon bool
	// SettingsFile is the daemon's settings file (its default path when
	// it reads none).
	SettingsFile string
	// Home is the HOME the daemon's CLIs run with: a login is kept there.
	Home string
	// Worker names the remote worker whose CLI it is: the key goes in the
	// worker's environment.
	Worker string
}

// Hint is what to do about a turn that failed because the CLI at w has no
// credentials the API accepts: what the local run prints after "hint: ",
// and what the daemon attaches to the error event of such a turn.
func Hint(w Where) string {
	switch {
	case w.Worker != "":
		return "the Claude Code of worker " + w.Worker + " has no credentials the API accepts: set ANTHROPIC_API_KEY in the environment of its claudectl worker, or log in once with `claude /login` as the worker's user"
	case w.Daemon:
		where := "in its settings' \"env\""
		if w.SettingsFile != "" {
			where = "in \"env\" of its settings file (" + w.SettingsFile + ")"
		}
		as := "as the daemon's user"
		if w.Home != "" {
			as += " (HOME " + w.Home + ")"
		}
		return "the daemon's Claude Code has no credentials the API accepts: set ANTHROPIC_API_KEY in the daemon's environment or " + where +
			" and restart it, or log in once with `claude /login` " + as + "; claudectl serve --demo (make demo) needs no key"
	}
	return "set ANTHROPIC_API_KEY, or log in once with `claude /login`"
}
