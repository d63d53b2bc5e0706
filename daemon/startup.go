package daemon

import (
	"strings"

	"github.com/claudectl/claudectl/claude"
)

// A CLI that refuses to start for a known reason prints a result saying
// why (claude.ResultMessage.StartupFailureReason) and exits. The daemon
// says it in the person's words, as the session's error event and its
// failed status, and does not start the CLI again: the session is failed,
// which no prompt resumes. The reasons a session's own options can cause
// say which option; the others say what the CLI said.

// startupWords are the person's words for the reasons a session's options
// or the daemon's machine cause, with what to do.
var startupWords = map[claude.StartupFailureReason]string{
	claude.StartupSideloadFlagsDisabled: "an administrator's policy forbids per-session MCP servers, plugins and agents " +
		"(the managed setting disableSideloadFlags), and this session's extra_args name some; " +
		"start a session without them, or ask the administrator to allow them",
	claude.StartupBypassRoot: "the bypassPermissions mode cannot be used while the daemon runs as root; " +
		"start the session in another mode, or run the daemon as another user",
	claude.StartupCwdUnavailable: "the session's directory was deleted, moved or cannot be read; " +
		"start a session in a directory that exists",
	claude.StartupCLIVersionTooOld: "this Claude Code is older than the minimum Anthropic requires; " +
		"install a newer one (claudectl doctor says which the daemon runs)",
	claude.StartupConfigFileInvalid: "a Claude Code configuration file of the daemon's user is not valid JSON; " +
		"repair it (Claude Code's message names the file)",
}

// startupFailureText says why the CLI refused to start, from its result.
func startupFailureText(m *claude.ResultMessage) string {
	said := strings.TrimSpace(strings.Join(m.Errors, "; "))
	if said == "" {
		said = m.Result
	}
	var b strings.Builder
	b.WriteString("Claude Code refused to start: ")
	if words, ok := startupWords[m.StartupFailureReason]; ok {
		b.WriteString(words)
	} else {
		b.WriteString(string(m.StartupFailureReason))
	}
	if m.StartupFailureReason.Retryable() {
		b.WriteString(". It may start if tried again")
	} else {
		b.WriteString(". Trying again as it is will not help")
	}
	if said != "" {
		b.WriteString(" (Claude Code said: " + said + ")")
	}
	return b.String()
}
