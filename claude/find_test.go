package claude

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// findEnv returns an Env func backed by m.
func findEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeFindFile creates path (and its parent directories) with the given mode.
func writeFindFile(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho 2.1.329 '(Claude Code)'\n"), mode); err != nil {
		t.Fatal(err)
	}
	// WriteFile's mode is subject to the umask; make it exact.
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func skipWithoutUnixPerms(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("needs Unix permission bits")
	}
}

// asNotFound checks err is a *NotFoundError matching ErrNotFound and returns it.
func asNotFound(t *testing.T, err error) *NotFoundError {
	t.Helper()
	if err == nil {
		t.Fatal("FindBinary succeeded, want an error")
	}
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("errors.Is(%v, ErrNotFound) = false", err)
	}
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("error %T %v is not a *NotFoundError", err, err)
	}
	return nf
}

func TestFindBinaryExplicitPath(t *testing.T) {
	skipWithoutUnixPerms(t)
	dir := t.TempDir()
	good := writeFindFile(t, filepath.Join(dir, "good", "claude"), 0o755)
	notExec := writeFindFile(t, filepath.Join(dir, "noexec", "claude"), 0o644)
	subdir := filepath.Join(dir, "adir")
	if err := os.Mkdir(subdir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	dirLink := filepath.Join(dir, "dirlink")
	if err := os.Symlink(subdir, dirLink); err != nil {
		t.Fatal(err)
	}

	// Places that would work if the search fell back to them.
	home := t.TempDir()
	writeFindFile(t, filepath.Join(home, ".claude", "local", "claude"), 0o755)
	fallback := writeFindFile(t, filepath.Join(t.TempDir(), "claude"), 0o755)
	env := findEnv(map[string]string{"CLAUDE_BIN": fallback, "PATH": filepath.Dir(fallback)})

	t.Run("ok", func(t *testing.T) {
		got, err := FindBinary(&FindOptions{Path: good, Env: env, HomeDir: home})
		if err != nil || got != good {
			t.Fatalf("FindBinary = %q, %v; want %q", got, err, good)
		}
	})
	t.Run("symlink", func(t *testing.T) {
		got, err := FindBinary(&FindOptions{Path: link, Env: env, HomeDir: home})
		if err != nil || got != link {
			t.Fatalf("FindBinary = %q, %v; want %q", got, err, link)
		}
	})

	bad := []struct {
		name, path, reason string
	}{
		{"missing", filepath.Join(dir, "missing"), "does not exist"},
		{"missing parent is a file", filepath.Join(good, "claude"), "does not exist"},
		{"directory", subdir, "is a directory"},
		{"not executable", notExec, "not executable"},
		{"dangling symlink", dangling, "does not exist"},
		{"symlink to directory", dirLink, "is a directory"},
		{"device", os.DevNull, "not a regular file"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FindBinary(&FindOptions{Path: tc.path, Env: env, HomeDir: home})
			if got != "" {
				t.Errorf("FindBinary returned path %q with the error", got)
			}
			nf := asNotFound(t, err)
			want := []Candidate{{Source: SourceOption, Path: tc.path, Reason: tc.reason}}
			if !reflect.DeepEqual(nf.Tried, want) {
				t.Errorf("Tried = %+v, want %+v", nf.Tried, want)
			}
			msg := err.Error()
			wantMsg := "claude: Claude Code CLI not found: " + tc.path + ": " + tc.reason
			if msg != wantMsg {
				t.Errorf("Error() = %q, want %q", msg, wantMsg)
			}
		})
	}
}

func TestFindBinaryRelativePathIsMadeAbsolute(t *testing.T) {
	skipWithoutUnixPerms(t)
	dir := t.TempDir()
	writeFindFile(t, filepath.Join(dir, "bin", "claude"), 0o755)
	t.Chdir(dir)
	got, err := FindBinary(&FindOptions{Path: filepath.Join("bin", "claude"), Env: findEnv(nil)})
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "bin", "claude")
	// The temp dir may itself be reached through a symlink (macOS /var).
	if gotEval, _ := filepath.EvalSymlinks(got); gotEval == "" || !filepath.IsAbs(got) || !sameFile(t, gotEval, want) {
		t.Errorf("FindBinary = %q, want absolute %q", got, want)
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(fa, fb)
}

func TestFindBinaryClaudeBin(t *testing.T) {
	skipWithoutUnixPerms(t)
	dir := t.TempDir()
	good := writeFindFile(t, filepath.Join(dir, "claude-good"), 0o755)
	notExec := writeFindFile(t, filepath.Join(dir, "claude-noexec"), 0o644)
	home := t.TempDir()
	writeFindFile(t, filepath.Join(home, ".claude", "local", "claude"), 0o755)

	t.Run("good", func(t *testing.T) {
		got, err := FindBinary(&FindOptions{Env: findEnv(map[string]string{"CLAUDE_BIN": good}), HomeDir: home})
		if err != nil || got != good {
			t.Fatalf("FindBinary = %q, %v; want %q", got, err, good)
		}
	})
	t.Run("option wins", func(t *testing.T) {
		other := writeFindFile(t, filepath.Join(t.TempDir(), "claude"), 0o755)
		got, err := FindBinary(&FindOptions{Path: other, Env: findEnv(map[string]string{"CLAUDE_BIN": good})})
		if err != nil || got != other {
			t.Fatalf("FindBinary = %q, %v; want %q", got, err, other)
		}
	})
	for _, tc := range []struct{ name, path, reason string }{
		{"missing", filepath.Join(dir, "nope"), "does not exist"},
		{"directory", dir, "is a directory"},
		{"not executable", notExec, "not executable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// ~/.claude/local/claude is usable, but a bad CLAUDE_BIN must not fall back to it.
			_, err := FindBinary(&FindOptions{Env: findEnv(map[string]string{"CLAUDE_BIN": tc.path}), HomeDir: home})
			nf := asNotFound(t, err)
			want := []Candidate{{Source: SourceEnv, Path: tc.path, Reason: tc.reason}}
			if !reflect.DeepEqual(nf.Tried, want) {
				t.Errorf("Tried = %+v, want %+v", nf.Tried, want)
			}
			if msg, sub := err.Error(), "CLAUDE_BIN="+tc.path+": "+tc.reason; !strings.Contains(msg, sub) {
				t.Errorf("Error() = %q, want it to contain %q", msg, sub)
			}
		})
	}
}

func TestFindBinaryHomeLocal(t *testing.T) {
	skipWithoutUnixPerms(t)
	home := t.TempDir()
	local := writeFindFile(t, filepath.Join(home, ".claude", "local", "claude"), 0o755)
	pathDir := t.TempDir()
	writeFindFile(t, filepath.Join(pathDir, "claude"), 0o755)
	env := map[string]string{"PATH": pathDir}

	got, err := FindBinary(&FindOptions{Env: findEnv(env), HomeDir: home, systemPath: filepath.Join(t.TempDir(), "claude")})
	if err != nil || got != local {
		t.Fatalf("FindBinary = %q, %v; want %q (before PATH)", got, err, local)
	}

	// Without HomeDir, HOME comes from the injected Env.
	env[homeEnvName()] = home
	got, err = FindBinary(&FindOptions{Env: findEnv(env), systemPath: filepath.Join(t.TempDir(), "claude")})
	if err != nil || got != local {
		t.Fatalf("FindBinary with $HOME = %q, %v; want %q", got, err, local)
	}
}

func TestFindBinarySystemPath(t *testing.T) {
	skipWithoutUnixPerms(t)
	system := writeFindFile(t, filepath.Join(t.TempDir(), "claude"), 0o755)
	pathDir := t.TempDir()
	writeFindFile(t, filepath.Join(pathDir, "claude"), 0o755)
	got, err := FindBinary(&FindOptions{Env: findEnv(map[string]string{"PATH": pathDir}), HomeDir: t.TempDir(), systemPath: system})
	if err != nil || got != system {
		t.Fatalf("FindBinary = %q, %v; want %q (before PATH)", got, err, system)
	}
}

func TestFindBinaryPATH(t *testing.T) {
	skipWithoutUnixPerms(t)
	noExecDir, dirDir, goodDir, laterDir := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	writeFindFile(t, filepath.Join(noExecDir, "claude"), 0o644)
	if err := os.Mkdir(filepath.Join(dirDir, "claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	good := writeFindFile(t, filepath.Join(goodDir, "claude"), 0o755)
	writeFindFile(t, filepath.Join(laterDir, "claude"), 0o755)

	// A relative entry holding a usable claude is skipped, like exec.LookPath does.
	cwd := t.TempDir()
	writeFindFile(t, filepath.Join(cwd, "claude"), 0o755)
	t.Chdir(cwd)

	pathEnv := strings.Join([]string{"", ".", filepath.Join(t.TempDir(), "missing"), noExecDir, dirDir, goodDir, laterDir}, string(os.PathListSeparator))
	got, err := FindBinary(&FindOptions{
		Env:        findEnv(map[string]string{"PATH": pathEnv}),
		HomeDir:    t.TempDir(),
		systemPath: filepath.Join(t.TempDir(), "claude"),
	})
	if err != nil || got != good {
		t.Fatalf("FindBinary = %q, %v; want %q", got, err, good)
	}
}

func TestFindBinaryNotFound(t *testing.T) {
	skipWithoutUnixPerms(t)
	home := t.TempDir()
	// ~/.claude/local/claude exists but is not executable.
	local := writeFindFile(t, filepath.Join(home, ".claude", "local", "claude"), 0o644)
	system := filepath.Join(t.TempDir(), "claude")
	pathDir := t.TempDir()

	_, err := FindBinary(&FindOptions{
		Env:        findEnv(map[string]string{"PATH": pathDir}),
		HomeDir:    home,
		systemPath: system,
	})
	nf := asNotFound(t, err)
	want := []Candidate{
		{Source: SourceEnv, Reason: "unset"},
		{Source: SourceLocal, Path: local, Reason: "not executable"},
		{Source: SourceSystem, Path: system, Reason: "does not exist"},
		{Source: SourcePATH, Path: "claude", Reason: "not on PATH"},
	}
	if !reflect.DeepEqual(nf.Tried, want) {
		t.Errorf("Tried =\n%+v\nwant\n%+v", nf.Tried, want)
	}
	wantMsg := "claude: Claude Code CLI not found; looked in: CLAUDE_BIN (unset), " +
		local + " (not executable), " + system + " (does not exist), $PATH (not on PATH); " +
		"install it with `npm install -g @anthropic-ai/claude-code` or set CLAUDE_BIN"
	if got := err.Error(); got != wantMsg {
		t.Errorf("Error() =\n%s\nwant\n%s", got, wantMsg)
	}
}

func TestFindBinaryNotFoundEmptyEnv(t *testing.T) {
	skipWithoutUnixPerms(t)
	system := filepath.Join(t.TempDir(), "claude")
	// No HomeDir and an Env without HOME or PATH.
	_, err := FindBinary(&FindOptions{Env: findEnv(nil), systemPath: system})
	nf := asNotFound(t, err)
	want := []Candidate{
		{Source: SourceEnv, Reason: "unset"},
		{Source: SourceLocal, Reason: "home directory unknown"},
		{Source: SourceSystem, Path: system, Reason: "does not exist"},
		{Source: SourcePATH, Path: "claude", Reason: "PATH is empty"},
	}
	if !reflect.DeepEqual(nf.Tried, want) {
		t.Errorf("Tried =\n%+v\nwant\n%+v", nf.Tried, want)
	}
	for _, sub := range []string{"CLAUDE_BIN (unset)", "~/.claude/local (home directory unknown)", system + " (does not exist)", "$PATH (PATH is empty)", "npm install -g @anthropic-ai/claude-code"} {
		if !strings.Contains(err.Error(), sub) {
			t.Errorf("Error() = %q, want it to mention %q", err.Error(), sub)
		}
	}
}

func TestFindBinaryNilOptions(t *testing.T) {
	// Uses the real environment: whatever it finds must be a usable file.
	got, err := FindBinary(nil)
	if err != nil {
		asNotFound(t, err)
		t.Logf("no claude here: %v", err)
		return
	}
	if _, reason := checkExecutable(got); reason != "" {
		t.Errorf("FindBinary(nil) = %q, which is %s", got, reason)
	}
}

func TestNotFoundErrorIs(t *testing.T) {
	var err error = &NotFoundError{}
	if !errors.Is(err, ErrNotFound) {
		t.Error("errors.Is(&NotFoundError{}, ErrNotFound) = false")
	}
	if errors.Is(err, os.ErrNotExist) {
		t.Error("errors.Is(&NotFoundError{}, os.ErrNotExist) = true")
	}
}

// The CLI make installed (built in at link time) comes after CLAUDE_BIN and
// before the usual places; when it is gone the error says so, and how to
// get it back.
func TestFindBinaryBuiltIn(t *testing.T) {
	skipWithoutUnixPerms(t)
	home := t.TempDir()
	writeFindFile(t, filepath.Join(home, ".claude", "local", "claude"), 0o755)
	built := writeFindFile(t, filepath.Join(t.TempDir(), ".tools", "claude"), 0o755)
	env := findEnv(map[string]string{"PATH": t.TempDir()})
	got, err := FindBinary(&FindOptions{Env: env, HomeDir: home, builtIn: built})
	if err != nil || got != built {
		t.Errorf("FindBinary = %q, %v; want the built-in %q", got, err, built)
	}
	other := writeFindFile(t, filepath.Join(t.TempDir(), "claude"), 0o755)
	got, err = FindBinary(&FindOptions{Env: findEnv(map[string]string{"CLAUDE_BIN": other}), HomeDir: home, builtIn: built})
	if err != nil || got != other {
		t.Errorf("with CLAUDE_BIN: FindBinary = %q, %v; want %q", got, err, other)
	}

	gone := filepath.Join(t.TempDir(), "removed", "claude")
	system := filepath.Join(t.TempDir(), "claude")
	_, err = FindBinary(&FindOptions{Env: env, HomeDir: t.TempDir(), builtIn: gone, systemPath: system})
	nf := asNotFound(t, err)
	if len(nf.Tried) < 2 || nf.Tried[1] != (Candidate{Source: SourceBuild, Path: gone, Reason: "does not exist"}) {
		t.Errorf("Tried = %+v, want the built-in path second", nf.Tried)
	}
	if msg := err.Error(); !strings.Contains(msg, gone+" (does not exist)") || !strings.Contains(msg, "run `make cli` in the claudectl repository") {
		t.Errorf("Error() = %s", msg)
	}
	// A plain go build has none: the list is as before.
	_, err = FindBinary(&FindOptions{Env: env, HomeDir: t.TempDir(), builtIn: "-", systemPath: system})
	if msg := asNotFound(t, err).Error(); strings.Contains(msg, "make cli") {
		t.Errorf("Error() without a built-in path mentions make: %s", msg)
	}
}
