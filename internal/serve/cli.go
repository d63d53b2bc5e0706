package serve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/claudectl/claudectl/claude"
)

// CheckCLI runs `path --version` and checks the version against the SDK's
// compatibility matrix, as claudectl serve does before it starts and
// claudectl run before a local turn. The report is zero when the version
// could not be read. Errors are *StartError: ExitCLIBroken for a CLI that
// does not run or prints no version, ExitCLITooOld for one too old.
func CheckCLI(ctx context.Context, path string) (claude.CompatibilityReport, error) {
	v, err := claude.VersionOf(ctx, path)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "claude: ")
		if ve := (*claude.VersionError)(nil); errors.As(err, &ve) {
			msg = VersionErrorText(ve)
		}
		return claude.CompatibilityReport{}, &StartError{Code: ExitCLIBroken, Err: errors.New(msg)}
	}
	rep := claude.CheckCompatibility(v)
	if rep.Level == claude.Incompatible || rep.Level == claude.CompatibilityUnknown {
		return rep, &StartError{Code: ExitCLITooOld, Err: fmt.Errorf("the Claude Code CLI at %s: %s", path, rep.Message)}
	}
	return rep, nil
}

// CLINotFound words claude.FindBinary's error for a person: without the
// SDK's package name. Its exit status is ExitCLIMissing.
func CLINotFound(err error) *StartError {
	return &StartError{Code: ExitCLIMissing, Err: trimmed{err, strings.TrimPrefix(err.Error(), "claude: ")}}
}

// trimmed is err said as msg.
type trimmed struct {
	err error
	msg string
}

func (t trimmed) Error() string { return t.msg }
func (t trimmed) Unwrap() error { return t.err }

// VersionErrorText says once what `PATH --version` did wrong: the error
// of VersionError repeats what the program printed.
func VersionErrorText(ve *claude.VersionError) string {
	out := strings.TrimSpace(ve.Stdout)
	if out == "" {
		out = strings.TrimSpace(ve.Stderr)
	}
	first, more := out, 0
	if lines := strings.Split(out, "\n"); len(lines) > 1 {
		first, more = strings.TrimSpace(lines[0]), len(lines)-1
	}
	if more > 0 {
		first += " …"
	}
	var ee *exec.ExitError
	switch {
	case errors.Is(ve.Err, context.DeadlineExceeded):
		return fmt.Sprintf("`%s --version` %v: it is not a working Claude Code CLI", ve.Path, ve.Err)
	case errors.As(ve.Err, &ee) || errors.Is(ve.Err, exec.ErrNotFound) || errors.Is(ve.Err, os.ErrPermission):
		if first == "" {
			return fmt.Sprintf("`%s --version` failed: %v", ve.Path, ve.Err)
		}
		return fmt.Sprintf("`%s --version` failed (%v): %q", ve.Path, ve.Err, first)
	case first == "":
		return fmt.Sprintf("`%s --version` printed nothing: no x.y.z version number, so it is not Claude Code", ve.Path)
	}
	return fmt.Sprintf("`%s --version` printed %q: no x.y.z version number, so it is not Claude Code", ve.Path, first)
}
