package claude

import (
	"fmt"
	"strings"
)

// Limits of the command line exec passes to the CLI.
const (
	// maxArgBytes is the longest argument Linux passes to a program: 32
	// pages (MAX_ARG_STRLEN, 131072 bytes) counting the NUL that ends it.
	// A longer one makes exec fail with "argument list too long", after
	// everything else about the session was set up.
	maxArgBytes = 128<<10 - 1
	// maxArgvBytes bounds the whole argument list as exec counts it (each
	// argument, its NUL and its pointer): the kernel takes at most a
	// quarter of the stack limit for the arguments and the environment
	// together (ARG_MAX, 2 MiB with the default 8 MiB stack); half of that
	// is left to the environment.
	maxArgvBytes = 1 << 20
)

// argFields names the Options field that each flag of args comes from,
// for the errors of checkArgs; a flag missing here is named as a flag.
var argFields = map[string]string{
	"model":              "Model",
	"fallback-model":     "FallbackModel",
	"tools":              "Tools",
	"allowedTools":       "AllowedTools",
	"disallowedTools":    "DisallowedTools",
	"add-dir":            "AddDirs",
	"mcp-config":         "MCPConfig",
	"settings":           "Settings",
	"setting-sources":    "SettingSources",
	"betas":              "Betas",
	"resume":             "Resume",
	"resume-session-at":  "ResumeSessionAt",
	"session-id":         "SessionID",
	"json-schema":        "JSONSchema",
	"agent":              "Agent",
	"system-prompt-file": "SystemPrompt",
	"debug-file":         "DebugFile",
	"plugin-dir":         "Plugins",
	"plugin-dir-no-mcp":  "Plugins",
	"managed-settings":   "ManagedSettings",
}

// checkArgs builds the CLI's arguments as Start does and refuses them,
// naming the option, when exec could not pass them: one longer than
// maxArgBytes (a list such as AllowedTools is joined into one argument,
// which can be too long although each of its elements is short), or all
// of them over maxArgvBytes (many short AddDirs, each an argument).
// Measuring what args built keeps the check from drifting from it.
func (o *Options) checkArgs() error {
	args, err := o.args()
	if err != nil {
		return err
	}
	extra := len(args) - len(o.ExtraArgs) // args ends with ExtraArgs
	field := func(i int) string {
		if i >= extra {
			return "ExtraArgs"
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(args[i], "--"), "=")
		if f, ok := argFields[name]; ok {
			return f
		}
		return "--" + name
	}
	total := 0
	share := map[string]int{}
	for i, a := range args {
		if len(a) > maxArgBytes {
			name, _, _ := strings.Cut(a, "=")
			return &OptionError{field(i), fmt.Sprintf("%s=… (%d bytes)", name, len(a)),
				fmt.Sprintf("makes a command-line argument of %d bytes; exec takes at most %d (a list is passed as one argument, its elements joined by commas)", len(a), maxArgBytes)}
		}
		n := len(a) + 1 + 8 // the argument, its NUL, its pointer
		total += n
		share[field(i)] += n
	}
	if total > maxArgvBytes {
		most := ""
		for f, n := range share {
			if most == "" || n > share[most] || (n == share[most] && f < most) {
				most = f
			}
		}
		return &OptionError{most, fmt.Sprintf("%d bytes of %d", share[most], total),
			fmt.Sprintf("the command line would be %d bytes (with a NUL and a pointer for each argument); exec takes at most %d", total, maxArgvBytes)}
	}
	return nil
}
