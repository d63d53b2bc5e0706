package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/serve"
)

// DoctorCommand is "claudectl doctor": it finds the Claude Code CLI, asks its
// version and checks it against the SDK's compatibility matrix.
type DoctorCommand struct {
	Env *Env
}

// Name implements Command.
func (*DoctorCommand) Name() string { return "doctor" }

// Summary implements Command.
func (*DoctorCommand) Summary() string {
	return "check that the Claude Code CLI is installed and compatible"
}

const doctorUsage = `Usage: claudectl doctor [flags]

Finds the Claude Code CLI, asks its version and checks that claudectl can
work with it. With --server, asks a running daemon instead: its Claude
Code's level, lowered by what its sessions' CLIs printed (unknown message
types, lines that failed to decode, a system/init without what the daemon
relies on), the reasons with when each was last seen, each CLI version
(remote workers' too), the sessions that are degraded, and its store:
whether it writes and can be read (a database server that is down, a
full disk), and why not.

Exit status: 0 compatible (also when it works degraded, with a warning),
69 the CLI does not run or its version is unknown, 72 the CLI is not
installed, 78 the CLI is too old, 2 bad usage; with --server, 69 also
when the daemon's store cannot write or be read, and 1 the daemon is
unreachable or refused the request.
`

// doctorReport is what doctor found; --json prints it as it is.
type doctorReport struct {
	// CLIPath is the executable found, CLISource where it was found:
	// "--cli", "CLAUDE_BIN", "~/.claude/local", "/usr/local/bin" or "PATH".
	CLIPath   string `json:"cli_path,omitempty"`
	CLISource string `json:"cli_source,omitempty"`
	Found     bool   `json:"found"`
	// Version is the parsed version ("2.1.329"), VersionOutput what
	// `claude --version` printed.
	Version       string `json:"version,omitempty"`
	VersionOutput string `json:"version_output,omitempty"`
	// Compatibility is "fully compatible", "likely compatible", "degraded",
	// "incompatible" or "unknown"; Message explains it.
	Compatibility string `json:"compatibility"`
	Message       string `json:"message,omitempty"`
	Warning       string `json:"warning,omitempty"`
	Error         string `json:"error,omitempty"`
	// Advice is what to do.
	Advice string `json:"advice"`
	// OK is true when claudectl can work with the CLI (exit status 0).
	OK       bool `json:"ok"`
	ExitCode int  `json:"exit_code"`
}

const installHint = "npm install -g @anthropic-ai/claude-code"

// Run implements Command.
func (c *DoctorCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cliPath string
	var asJSON bool
	fs := newFlagSet("doctor")
	fs.StringVar(&cliPath, "cli", "", "check the claude executable at `PATH` instead of searching for one")
	fs.BoolVar(&asJSON, "json", false, "print the report as a JSON object")
	var cf clientFlags
	cf.register(fs)
	pos, err := parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(env.Stdout, doctorUsage, fs)
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: doctor takes no arguments", pos[0])
	}

	if cf.server != "" {
		if cliPath != "" {
			return usagef("--cli and --server do not go together: --server asks the daemon about its own CLI")
		}
		return doctorDaemon(ctx, env, &cf, asJSON)
	}
	rep := diagnose(ctx, env, cliPath)
	if asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.print(env.Stdout)
	}
	if rep.ExitCode != ExitOK {
		return exitSilently(rep.ExitCode)
	}
	return nil
}

// doctorDaemon is doctor --server.
func doctorDaemon(ctx context.Context, env *Env, cf *clientFlags, asJSON bool) error {
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	rep, err := diagnoseDaemon(ctx, dc)
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(env.Stdout, rep); err != nil {
			return err
		}
	} else {
		rep.print(env.Stdout)
	}
	if rep.ExitCode != ExitOK {
		return exitSilently(rep.ExitCode)
	}
	return nil
}

// diagnose finds the CLI and checks it.
func diagnose(ctx context.Context, env *Env, cliPath string) *doctorReport {
	rep := &doctorReport{Compatibility: claude.CompatibilityUnknown.String()}
	path, err := claude.FindBinary(&claude.FindOptions{Path: cliPath, Env: env.Getenv})
	if err != nil {
		rep.Error = err.Error()
		rep.ExitCode = ExitNotFound
		if cliPath != "" {
			rep.Advice = "check the --cli path, or leave --cli out to search the usual places; to install Claude Code: " + installHint
		} else {
			rep.Advice = "install Claude Code (" + installHint + "), or point claudectl at it with --cli PATH or the CLAUDE_BIN environment variable"
		}
		return rep
	}
	rep.Found = true
	rep.CLIPath = path
	rep.CLISource = cliSource(env, cliPath, path)

	v, err := claude.VersionOf(ctx, path)
	if err != nil {
		rep.Error = err.Error()
		rep.ExitCode = ExitUnavailable
		var ve *claude.VersionError
		if errors.As(err, &ve) {
			rep.VersionOutput = strings.TrimSpace(ve.Stdout)
			rep.Error = serve.VersionErrorText(ve)
		}
		rep.Advice = fmt.Sprintf("check that `%s --version` works and prints a version like \"%s (Claude Code)\"; reinstall with %s if it does not", path, claude.TestedMaxVersion, installHint)
		return rep
	}
	rep.Version = v.String()
	rep.VersionOutput = v.Raw
	cr := claude.CheckCompatibility(v)
	rep.Compatibility = cr.Level.String()
	rep.Message = cr.Message
	switch cr.Level {
	case claude.FullyCompatible:
		rep.OK = true
		rep.Advice = "nothing: claudectl works with this CLI"
	case claude.LikelyCompatible:
		rep.OK = true
		if v.Major > 2 {
			rep.Warning = strings.TrimPrefix(cr.Message, "warning: ")
		}
		rep.Advice = fmt.Sprintf("nothing needed; if sessions misbehave, install the tested version: %s@%s", installHint, claude.TestedMaxVersion)
	case claude.Degraded:
		rep.OK = true
		rep.Warning = cr.Message
		rep.Advice = fmt.Sprintf("upgrade to %s or newer for full support: %s", claude.FullVersion, installHint)
	case claude.Incompatible:
		rep.ExitCode = ExitConfig
		rep.Advice = fmt.Sprintf("upgrade Claude Code to %s or newer (tested: %s): %s", claude.MinVersion, claude.TestedMaxVersion, installHint)
	default:
		rep.ExitCode = ExitUnavailable
		rep.Advice = fmt.Sprintf("check that `%s --version` prints a version; reinstall with %s", path, installHint)
	}
	return rep
}

// cliSource says where FindBinary found path (it does not report it).
func cliSource(env *Env, flagPath, path string) string {
	if flagPath != "" {
		return "--cli"
	}
	if env.Getenv("CLAUDE_BIN") != "" {
		return claude.SourceEnv
	}
	if b := claude.BuiltInPath(); b != "" && filepath.Clean(path) == filepath.Clean(b) {
		return claude.SourceBuild
	}
	if home := env.Getenv("HOME"); home != "" && filepath.Clean(path) == filepath.Join(home, ".claude", "local", "claude") {
		return claude.SourceLocal
	}
	if filepath.Clean(path) == "/usr/local/bin/claude" {
		return claude.SourceSystem
	}
	return claude.SourcePATH
}

func (r *doctorReport) print(w io.Writer) {
	row := func(k, v string) {
		if k != "" {
			k += ":"
		}
		fmt.Fprintf(w, "%-15s %s\n", k, v)
	}
	if r.Found {
		row("Claude Code", r.CLIPath+" (from "+r.CLISource+")")
	} else {
		row("Claude Code", "not found")
	}
	if r.Version != "" {
		row("Version", r.Version)
	}
	if r.Found {
		row("Compatibility", r.Compatibility)
	}
	if r.Message != "" && (r.Warning == "" || !strings.HasSuffix(r.Message, r.Warning)) {
		row("", r.Message)
	}
	if r.Warning != "" {
		row("Warning", r.Warning)
	}
	if r.Error != "" {
		row("Error", r.Error)
	}
	row("What to do", r.Advice)
}
