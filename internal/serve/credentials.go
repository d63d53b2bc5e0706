package serve

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/claudectl/claudectl/internal/credentials"
)

// checkCredentials looks where the daemon's CLIs would find credentials
// (credentials.Find, in their environment: the daemon's, with the
// settings' env over it) and warns at start when there are none: every
// turn would fail with the CLI's bare "Not logged in". It returns the hint
// the daemon attaches to such a turn, and whether none were found. A
// demo's CLIs have the demo's key, so the demo is never warned.
func checkCredentials(s *Settings, getenv func(string) string, stderr io.Writer, log *slog.Logger) (hint string, none bool) {
	env := func(k string) string {
		if v, ok := s.Env[k]; ok {
			return v // "" removes it
		}
		return getenv(k)
	}
	w := credentials.Where{Daemon: true, SettingsFile: cmp.Or(s.File, DefaultPath(getenv)), Home: homeDir(env)}
	hint = credentials.Hint(w)
	found := credentials.Find(env)
	if found.Source != "" {
		return hint, false
	}
	var vars, files []string
	for _, l := range found.Looked {
		if strings.HasPrefix(l, "/") {
			files = append(files, l)
		} else {
			vars = append(vars, l)
		}
	}
	looked := strings.Join(vars, ", ") + " (the daemon's environment and the settings' env), " + strings.Join(files, ", ")
	fix := fmt.Sprintf("set ANTHROPIC_API_KEY in the daemon's environment (ANTHROPIC_API_KEY=sk-ant-… make run) or in \"env\" of the settings file (%s), or log in once with `claude /login` as this user (HOME %s); claudectl serve --demo (make demo) needs no key",
		w.SettingsFile, w.Home)
	if s.LogFormat == "json" { // every line a JSON object
		log.Warn("Claude Code has no credentials: every turn will fail with \"Not logged in\"", "looked", looked, "fix", fix)
		return hint, true
	}
	fmt.Fprintf(stderr, "\nWARNING: Claude Code has no credentials here: every turn will fail with \"Not logged in · Please run /login\".\n  Looked in: %s\n  To fix: %s.\n\n", looked, fix)
	return hint, true
}
