package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"time"

	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claude"
)

// VersionCommand is "claudectl version" (and "claudectl --version"):
// claudectl's version, the Claude Code CLI it would run, and the API
// version its daemon serves.
type VersionCommand struct {
	Env *Env
}

// Name implements Command.
func (*VersionCommand) Name() string { return "version" }

// Summary implements Command.
func (*VersionCommand) Summary() string {
	return "print the versions of claudectl, of the Claude Code CLI it finds and of the API"
}

const versionUsage = `Usage: claudectl version [flags]

Prints claudectl's version (from its build: a module version, or the
repository revision it was built from), the version and path of the Claude
Code CLI it finds (as "claudectl run" and "claudectl serve" look for it),
and the version of the API the daemon serves. Also "claudectl --version".

Exit status: 0, also when no CLI is found ("not found"); 2 bad usage.
`

// versionInfo is what version prints, also as JSON.
type versionInfo struct {
	Claudectl string `json:"claudectl"`
	Go        string `json:"go"`
	Platform  string `json:"platform"`
	// CLIVersion is "" when no CLI was found or it did not run; CLIError says why.
	CLIVersion string `json:"claude_code_version,omitempty"`
	CLIPath    string `json:"claude_code_path,omitempty"`
	CLIError   string `json:"claude_code_error,omitempty"`
	API        string `json:"api"`
}

// Run implements Command.
func (c *VersionCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cliPath string
	var asJSON bool
	fs := newFlagSet("version")
	fs.StringVar(&cliPath, "cli", "", "report the claude executable at `PATH` instead of searching for one")
	fs.BoolVar(&asJSON, "json", false, "print the versions as a JSON object")
	pos, err := parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(env.Stdout, versionUsage, fs)
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: version takes no arguments", pos[0])
	}
	info := versionInfo{Claudectl: apiserver.Version, Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, API: apiserver.APIVersion}
	path, err := claude.FindBinary(&claude.FindOptions{Path: cliPath, Env: env.Getenv})
	if err == nil {
		info.CLIPath = path
		vctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		v, verr := claude.VersionOf(vctx, path)
		cancel()
		if verr != nil {
			info.CLIError = "does not run: " + verr.Error()
		} else {
			info.CLIVersion = v.String()
		}
	} else {
		info.CLIError = "not found (claudectl doctor says where it looked and what to do)"
	}
	if asJSON {
		return writeJSON(env.Stdout, info)
	}
	cli := info.CLIVersion + " at " + info.CLIPath
	switch {
	case info.CLIPath == "":
		cli = info.CLIError
	case info.CLIError != "":
		cli = info.CLIPath + " " + info.CLIError
	}
	fmt.Fprintf(env.Stdout, "claudectl    %s (%s, %s)\nClaude Code  %s\nAPI          %s\n",
		info.Claudectl, info.Go, info.Platform, cli, info.API)
	return nil
}
