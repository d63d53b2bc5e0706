package claude

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// ErrNotFound is the error FindBinary's *NotFoundError matches with errors.Is.
var ErrNotFound = errors.New("claude: Claude Code CLI not found")

// Places FindBinary looks, in order, as they appear in Candidate.Source.
const (
	SourceOption = "option"          // FindOptions.Path
	SourceEnv    = "CLAUDE_BIN"      // the CLAUDE_BIN environment variable
	SourceBuild  = "make"            // the CLI "make" installed for this build (BuiltInPath)
	SourceLocal  = "~/.claude/local" // the per-user install: ~/.claude/local/claude
	SourceSystem = "/usr/local/bin"  // /usr/local/bin/claude
	SourcePATH   = "PATH"            // claude on $PATH
)

// claudeBinEnv names the environment variable that points at the CLI.
const claudeBinEnv = "CLAUDE_BIN"

// builtInCLI is the CLI the project's Makefile installed (into .tools/)
// when it built this program, set at link time:
//
//	go build -ldflags "-X github.com/claudectl/claudectl/claude.builtInCLI=PATH"
//
// so that a claudectl built by make finds the CLI make installed, as its
// daemon (make run) uses.
var builtInCLI string

// BuiltInPath returns the CLI path built into this program by the
// Makefile ("" for a plain go build). FindBinary tries it after CLAUDE_BIN.
func BuiltInPath() string { return builtInCLI }

// FindOptions says where FindBinary looks. A nil *FindOptions uses the defaults.
type FindOptions struct {
	// Path is an explicit path to the CLI. When set, only it is tried: if it
	// is not usable FindBinary fails without looking anywhere else.
	Path string

	// Env looks up environment variables (CLAUDE_BIN, PATH and, when HomeDir
	// is empty, HOME). Nil means os.Getenv.
	Env func(string) string

	// HomeDir is the home directory holding .claude/local/claude. Empty means
	// $HOME from Env when Env is set, otherwise os.UserHomeDir().
	HomeDir string

	// systemPath replaces /usr/local/bin/claude in tests.
	systemPath string
	// builtIn replaces BuiltInPath in tests; "-" means none.
	builtIn string
}

// Candidate is one place FindBinary tried and why it was rejected.
type Candidate struct {
	// Source is where the candidate came from: SourceOption, SourceEnv,
	// SourceLocal, SourceSystem or SourcePATH.
	Source string
	// Path is the file that was checked; empty when there was nothing to
	// check (CLAUDE_BIN unset, home directory unknown). For SourcePATH it is
	// the bare name "claude".
	Path string
	// Reason says why the candidate was rejected: "unset", "does not exist",
	// "is a directory", "not a regular file", "not executable",
	// "not on PATH", "PATH is empty", "home directory unknown", or the
	// operating system's error text.
	Reason string
}

// String returns the candidate as it appears in NotFoundError's message,
// e.g. "/root/.claude/local/claude (does not exist)".
func (c Candidate) String() string {
	var where string
	switch {
	case c.Source == SourcePATH:
		where = "$PATH"
	case c.Source == SourceEnv:
		where = SourceEnv
		if c.Path != "" {
			where += "=" + c.Path
		}
	case c.Path != "":
		where = c.Path
	default:
		where = c.Source
	}
	return where + " (" + c.Reason + ")"
}

// NotFoundError is returned when no candidate works. It lists each place
// tried and why it was rejected. It matches ErrNotFound with errors.Is.
type NotFoundError struct {
	Tried []Candidate
}

// explicit returns the candidate when the search stopped at an explicitly
// configured location (FindOptions.Path or CLAUDE_BIN) that was unusable.
func (e *NotFoundError) explicit() (Candidate, bool) {
	if len(e.Tried) != 1 {
		return Candidate{}, false
	}
	c := e.Tried[0]
	return c, c.Path != "" && (c.Source == SourceOption || c.Source == SourceEnv)
}

// Error returns a message naming every place tried, or only the explicitly
// configured path when the search stopped there.
func (e *NotFoundError) Error() string {
	var b strings.Builder
	b.WriteString(ErrNotFound.Error())
	if c, ok := e.explicit(); ok {
		b.WriteString(": ")
		if c.Source == SourceEnv {
			b.WriteString(claudeBinEnv + "=" + c.Path + ": " + c.Reason + " (fix or unset " + claudeBinEnv + ")")
		} else {
			b.WriteString(c.Path + ": " + c.Reason)
		}
		return b.String()
	}
	b.WriteString("; looked in: ")
	for i, c := range e.Tried {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.String())
	}
	b.WriteString("; install it with `npm install -g @anthropic-ai/claude-code` or set " + claudeBinEnv)
	for _, c := range e.Tried {
		if c.Source == SourceBuild {
			b.WriteString(", or run `make cli` in the claudectl repository to install the one this build uses")
		}
	}
	return b.String()
}

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// FindBinary returns the claude executable to run: the explicit opts.Path,
// then $CLAUDE_BIN, then the CLI make installed when it built this program
// (BuiltInPath), then ~/.claude/local/claude, then /usr/local/bin/claude,
// then claude on $PATH (exec.LookPath semantics, using PATH from opts.Env;
// relative PATH entries are ignored, as exec.LookPath does).
//
// A candidate must exist, be a regular file (after following symlinks) and be
// executable. An explicit opts.Path or a set CLAUDE_BIN that fails these
// checks is an error on its own: FindBinary does not fall back to other
// places, so a misconfiguration is not silently replaced by another CLI.
//
// The returned path is absolute when the candidate's path was relative.
// On failure the error is a *NotFoundError (matching ErrNotFound).
func FindBinary(opts *FindOptions) (string, error) {
	var o FindOptions
	if opts != nil {
		o = *opts
	}
	getenv := o.Env
	if getenv == nil {
		getenv = os.Getenv
	}

	if o.Path != "" {
		p, reason := checkExecutable(o.Path)
		if reason == "" {
			return p, nil
		}
		return "", &NotFoundError{Tried: []Candidate{{Source: SourceOption, Path: o.Path, Reason: reason}}}
	}

	if bin := getenv(claudeBinEnv); bin != "" {
		p, reason := checkExecutable(bin)
		if reason == "" {
			return p, nil
		}
		return "", &NotFoundError{Tried: []Candidate{{Source: SourceEnv, Path: bin, Reason: reason}}}
	}
	tried := []Candidate{{Source: SourceEnv, Reason: "unset"}}

	builtIn := builtInCLI
	if o.builtIn != "" {
		builtIn = strings.TrimPrefix(o.builtIn, "-")
	}
	if builtIn != "" {
		p, reason := checkExecutable(builtIn)
		if reason == "" {
			return p, nil
		}
		tried = append(tried, Candidate{Source: SourceBuild, Path: builtIn, Reason: reason})
	}

	home := o.HomeDir
	if home == "" {
		if o.Env != nil {
			home = o.Env(homeEnvName())
		} else if h, err := os.UserHomeDir(); err == nil {
			home = h
		}
	}
	if home == "" {
		tried = append(tried, Candidate{Source: SourceLocal, Reason: "home directory unknown"})
	} else {
		local := filepath.Join(home, ".claude", "local", "claude")
		p, reason := checkExecutable(local)
		if reason == "" {
			return p, nil
		}
		tried = append(tried, Candidate{Source: SourceLocal, Path: local, Reason: reason})
	}

	if runtime.GOOS != "windows" {
		system := o.systemPath
		if system == "" {
			system = "/usr/local/bin/claude"
		}
		p, reason := checkExecutable(system)
		if reason == "" {
			return p, nil
		}
		tried = append(tried, Candidate{Source: SourceSystem, Path: system, Reason: reason})
	}

	pathEnv := getenv("PATH")
	if p, ok := lookPathIn(pathEnv, getenv); ok {
		return p, nil
	}
	reason := "not on PATH"
	if pathEnv == "" {
		reason = "PATH is empty"
	}
	tried = append(tried, Candidate{Source: SourcePATH, Path: "claude", Reason: reason})
	return "", &NotFoundError{Tried: tried}
}

// homeEnvName is the variable os.UserHomeDir reads on this platform.
func homeEnvName() string {
	switch runtime.GOOS {
	case "windows":
		return "USERPROFILE"
	case "plan9":
		return "home"
	}
	return "HOME"
}

// lookPathIn searches the directories of pathEnv for an executable claude,
// like exec.LookPath does for the process's own PATH. Relative entries
// (including empty ones, which mean ".") are skipped: exec.LookPath refuses
// such results with exec.ErrDot.
func lookPathIn(pathEnv string, getenv func(string) string) (string, bool) {
	names := []string{"claude"}
	if runtime.GOOS == "windows" {
		exts := getenv("PATHEXT")
		if exts == "" {
			exts = ".com;.exe;.bat;.cmd"
		}
		names = names[:0]
		for _, ext := range strings.Split(exts, ";") {
			if ext != "" {
				names = append(names, "claude"+strings.ToLower(ext))
			}
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		for _, name := range names {
			p := filepath.Join(dir, name)
			if _, reason := checkExecutable(p); reason == "" {
				return p, true
			}
		}
	}
	return "", false
}

// checkExecutable reports whether path is an existing, executable regular
// file (following symlinks). It returns the path, made absolute when
// possible, and an empty reason on success, or the rejection reason.
func checkExecutable(path string) (string, string) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return "", "does not exist"
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return "", pe.Err.Error()
		}
		return "", err.Error()
	}
	switch {
	case fi.IsDir():
		return "", "is a directory"
	case !fi.Mode().IsRegular():
		return "", "not a regular file"
	case runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0:
		return "", "not executable"
	}
	if !filepath.IsAbs(path) {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
	}
	return path, ""
}
