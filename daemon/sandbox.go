package daemon

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The sandbox the daemon enforces (sessions.sandbox): Claude Code's own
// "sandbox" settings object, given to every session's CLI as the SDK's
// Sandbox option (claude.Options.Sandbox, merged into --settings). A
// client cannot weaken it: no session option sets it, and the flags that
// could override flag settings are refused in extra_args whatever
// sessions.allowed_extra_args allows.

// sandboxFlags are the CLI flags that could undo the enforced sandbox: a
// later --settings replaces keys of ours; --managed-settings sits above
// flag settings.
var sandboxFlags = []string{"--settings", "--managed-settings"}

// EnforcedSandbox returns the sandbox settings object the daemon gives
// every session for raw, the sessions.sandbox setting: raw with, unless it
// says otherwise, "enabled": true and "allowUnsandboxedCommands": false
// (the model may not ask to run a command outside it), and the SDK's
// "failIfUnavailable": true (a session whose sandbox cannot start fails
// rather than run unsandboxed). Nil for none.
func EnforcedSandbox(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var sb map[string]any
	if err := json.Unmarshal(raw, &sb); err != nil || sb == nil {
		return nil, fmt.Errorf("the sandbox must be a JSON object of Claude Code's sandbox settings, such as {\"enabled\": true}")
	}
	for k, v := range map[string]any{"enabled": true, "allowUnsandboxedCommands": false, "failIfUnavailable": true} {
		if _, set := sb[k]; !set {
			sb[k] = v
		}
	}
	return json.Marshal(sb)
}

// checkSandboxArgs refuses, when a sandbox is enforced, extra_args that
// could override it, even when sessions.allowed_extra_args lists them.
func (p *SessionPolicy) checkSandboxArgs(args []string) error {
	if len(p.Sandbox) == 0 {
		return nil
	}
	for i, arg := range args {
		name, _, _ := strings.Cut(arg, "=")
		if slices.Contains(sandboxFlags, name) {
			return &InvalidArgumentError{Field: fmt.Sprintf("options.extra_args[%d]", i), Value: clipValue(arg),
				Reason: fmt.Sprintf("the flag %s could change the sandbox the daemon enforces (sessions.sandbox in its settings.json), so it is refused", name)}
		}
	}
	return nil
}
