package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/claudectl/claudectl/internal/suggest"
)

// usageError is a bad command line: exit status 2, printed as one line
// followed by where to find help.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// badValue is the usage error for a flag value that is not allowed.
func badValue(flagName, value, allowed string) error {
	return usagef("invalid value %q for --%s: %s", value, flagName, allowed)
}

// newFlagSet returns a FlagSet that reports errors instead of printing them.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args with fs and returns the positional arguments.
// Unlike fs.Parse it accepts flags after positional arguments ("run PROMPT
// --verbose"); everything after "--" is positional. It returns flag.ErrHelp
// for -h and a *usageError for anything wrong.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{msg: suggestFlag(fs, rewriteFlagError(err.Error()))}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagRef matches a flag name in the flag package's messages, which spell
// flags with one dash.
var flagRef = regexp.MustCompile(`(^|[ :])-{1,2}([A-Za-z][A-Za-z0-9_.-]*)`)

// rewriteFlagError turns the flag package's message into claudectl's
// wording, with flags spelled --name as the usage shows them.
func rewriteFlagError(msg string) string {
	msg = flagRef.ReplaceAllString(msg, "$1--$2")
	if rest, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return "unknown flag " + rest
	}
	if rest, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return rest + " needs a value"
	}
	// "invalid value "x" for flag --max-turns: must be ..."
	msg = strings.Replace(msg, " for flag --", " for --", 1)
	return msg
}

// suggestFlag adds to msg, when it says a flag is unknown, the flag of fs
// that was probably meant: "unknown flag --verbos (did you mean --verbose?)".
func suggestFlag(fs *flag.FlagSet, msg string) string {
	name, ok := strings.CutPrefix(msg, "unknown flag --")
	if !ok {
		return msg
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if s := suggest.Closest(name, names, suggest.Within(len(name))); s != "" {
		return fmt.Sprintf("%s (did you mean --%s?)", msg, s)
	}
	return msg
}

// printUsage writes a command's usage: the synopsis text, then its flags.
func printUsage(w io.Writer, text string, fs *flag.FlagSet) {
	fmt.Fprint(w, text)
	fmt.Fprintln(w, "\nFlags:")
	fs.VisitAll(func(f *flag.Flag) {
		typ, use := flag.UnquoteUsage(f)
		if _, ok := f.Value.(interface{ IsBoolFlag() bool }); ok {
			typ = ""
		}
		name := "--" + f.Name
		if typ != "" {
			name += " " + typ
		}
		if len(name) <= 24 {
			fmt.Fprintf(w, "  %-24s %s\n", name, use)
		} else {
			fmt.Fprintf(w, "  %s\n  %-24s %s\n", name, "", use)
		}
	})
}

// stringList is a repeatable string flag.
type stringList struct {
	name   string
	values *[]string
}

func (l stringList) String() string {
	if l.values == nil {
		return ""
	}
	return strings.Join(*l.values, ", ")
}

func (l stringList) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("must not be empty")
	}
	*l.values = append(*l.values, v)
	return nil
}

// Value checkers for flag.Func; their errors read after
// `invalid value "x" for --flag: `.

func parseNonNegInt(dst *int, what string) func(string) error {
	return func(s string) error {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return fmt.Errorf("must be a whole number >= 0 (%s)", what)
		}
		*dst = n
		return nil
	}
}

func parseNonNegFloat(dst *float64, what string) func(string) error {
	return func(s string) error {
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
			return fmt.Errorf("must be a number >= 0 (%s)", what)
		}
		*dst = x
		return nil
	}
}

func parseNonNegDuration(dst *time.Duration, what string) func(string) error {
	return func(s string) error {
		s = strings.TrimSpace(s)
		if s == "0" {
			*dst = 0
			return nil
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return fmt.Errorf("must be a duration >= 0 such as 90s, 5m or 1h30m (%s)", what)
		}
		*dst = d
		return nil
	}
}

// parseChoice accepts one of choices.
func parseChoice(dst *string, choices ...string) func(string) error {
	return func(s string) error {
		for _, c := range choices {
			if s == c {
				*dst = s
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(choices, ", "))
	}
}

// checkDir returns the absolute path of dir, or a usage error naming the
// flag when it is not an existing directory.
func checkDir(flagName, dir string) (string, error) {
	if strings.TrimSpace(dir) == "" {
		return "", badValue(flagName, dir, "must be a directory")
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", badValue(flagName, dir, "no such directory")
	case err != nil:
		return "", badValue(flagName, dir, err.Error())
	case !fi.IsDir():
		return "", badValue(flagName, dir, "not a directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir, nil
	}
	return abs, nil
}
