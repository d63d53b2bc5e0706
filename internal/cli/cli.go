// Package cli implements the claudectl command line: a small dispatcher and
// one type per subcommand (run, doctor, ...). cmd/claudectl only wires the
// process (signals, exit status) to Main.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/claudectl/claudectl/internal/suggest"
)

// Exit statuses of claudectl.
const (
	ExitOK          = 0
	ExitFailure     = 1   // the turn ended in an error, or the CLI failed
	ExitUsage       = 2   // bad command, flag or value
	ExitUnavailable = 69  // the CLI was found but does not work (sysexits EX_UNAVAILABLE)
	ExitNotFound    = 72  // the CLI is not installed (sysexits EX_OSFILE)
	ExitConfig      = 78  // the CLI is too old (sysexits EX_CONFIG)
	ExitInterrupted = 130 // stopped by Ctrl-C (128 + SIGINT)
	ExitHangup      = 129 // stopped by SIGHUP (128 + SIGHUP): its terminal hung up
)

// Env is the world a command runs in. Main fills in the zero fields from the
// process (os.Stdin, os.Getenv, ...), so tests set only what they inject.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer

	// Getenv looks up claudectl's own environment (CLAUDE_BIN, PATH and
	// HOME, to find the CLI). Nil means os.Getenv.
	Getenv func(string) string

	// CLIEnv is added to the environment the Claude Code CLI runs with
	// (claude.Options.Env); an empty value removes a variable.
	CLIEnv map[string]string

	// StdinIsTerminal reports whether stdin is an interactive terminal, and
	// so whether claudectl may ask questions on it. Nil means checking
	// whether Stdin is an *os.File for a character device.
	StdinIsTerminal func() bool

	// StdoutIsTerminal and StderrIsTerminal report whether stdout and
	// stderr are terminals: colour and the status line are shown only
	// there. Nil means checking the stream as StdinIsTerminal does.
	StdoutIsTerminal func() bool
	StderrIsTerminal func() bool

	// lookupEnv tells an unset variable from an empty one (NO_COLOR):
	// os.LookupEnv when Getenv was nil, else a non-empty Getenv.
	lookupEnv func(string) (string, bool)

	// Interrupts delivers one value per Ctrl-C (SIGINT). Nil means none.
	Interrupts <-chan os.Signal
	// Hangups delivers one value per SIGHUP: serve reloads its settings;
	// for the other commands it is a hung-up terminal, and the
	// dispatcher cancels them. Nil means none.
	Hangups <-chan os.Signal
}

// withDefaults returns a copy of e with the zero fields filled in, and the
// standard streams wrapped so that goroutines may write to them at once.
func (e *Env) withDefaults() *Env {
	var c Env
	if e != nil {
		c = *e
	}
	if c.Stdin == nil {
		c.Stdin = os.Stdin
	}
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
	if c.Getenv == nil {
		c.Getenv = os.Getenv
		if c.lookupEnv == nil {
			c.lookupEnv = os.LookupEnv
		}
	}
	if c.lookupEnv == nil {
		get := c.Getenv
		c.lookupEnv = func(k string) (string, bool) { v := get(k); return v, v != "" }
	}
	if c.StdinIsTerminal == nil {
		in := c.Stdin
		c.StdinIsTerminal = func() bool { return isTerminal(in) }
	}
	if c.StdoutIsTerminal == nil {
		out := c.Stdout
		c.StdoutIsTerminal = func() bool { return isTerminal(out) }
	}
	if c.StderrIsTerminal == nil {
		errOut := c.Stderr
		c.StderrIsTerminal = func() bool { return isTerminal(errOut) }
	}
	c.Stdout = newSyncWriter(c.Stdout)
	c.Stderr = newSyncWriter(c.Stderr)
	return &c
}

// isTerminal reports whether stream is a terminal: an *os.File for a
// character device that, where the system can tell, has terminal attributes
// (so that /dev/null does not count).
func isTerminal(stream any) bool {
	f, ok := stream.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	return hasTermAttrs(f)
}

// syncWriter serialises writes: permission prompts, the CLI's stderr and the
// main loop may all write to the same stream.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func newSyncWriter(w io.Writer) io.Writer {
	if sw, ok := w.(*syncWriter); ok {
		return sw
	}
	return &syncWriter{w: w}
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// A Command is one claudectl subcommand.
type Command interface {
	// Name is the word that selects the command: "run".
	Name() string
	// Summary is a one-line description for the command list.
	Summary() string
	// Run runs the command with the arguments after its name. It returns
	// nil for exit status 0; see exitCode for how errors map to statuses.
	Run(ctx context.Context, args []string) error
}

// interruptHandler is implemented by commands that handle Ctrl-C themselves
// (through Env.Interrupts); for the others the dispatcher cancels ctx.
type interruptHandler interface {
	handlesInterrupts()
}

// hangupHandler is implemented by commands that handle SIGHUP themselves
// (through Env.Hangups: serve reloads); for the others the dispatcher
// cancels ctx.
type hangupHandler interface {
	handlesHangups()
}

// Commands returns the subcommands, in the order the usage lists them.
func Commands(env *Env) []Command {
	return []Command{
		&RunCommand{Env: env},
		&DoctorCommand{Env: env},
		&WorkerCommand{Env: env},
		&ServeCommand{Env: env},
		&SessionsCommand{Env: env},
		&SearchCommand{Env: env},
		&WorkersCommand{Env: env},
		&SendCommand{Env: env},
		&AttachCommand{Env: env},
		&ResumeCommand{Env: env},
		&ForkCommand{Env: env},
		&InterruptCommand{Env: env},
		&CloseCommand{Env: env},
		&DiffCommand{Env: env},
		&MergeCommand{Env: env},
		&DiscardCommand{Env: env},
		&PendingCommand{Env: env},
		&BudgetCommand{Env: env},
		&DecideCommand{Env: env, Allow: true},
		&DecideCommand{Env: env},
		&RulesCommand{Env: env},
		&TokensCommand{Env: env},
		&WhoamiCommand{Env: env},
		&AuditCommand{Env: env},
		&NotifyCommand{Env: env},
		&HookCommand{Env: env},
		&PruneCommand{Env: env},
		&BackupCommand{Env: env},
		&RestoreCommand{Env: env},
		&ReloadCommand{Env: env},
		&VersionCommand{Env: env},
		&CompletionCommand{Env: env},
	}
}

// Main runs claudectl with args (without the program name) and returns the
// exit status. It never calls os.Exit.
func Main(ctx context.Context, env *Env, args []string) int {
	env = env.withDefaults()
	cmds := Commands(env)
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usage(cmds))
		return ExitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(args) > 1 {
			// "claudectl help run" is "claudectl run -h".
			if c := findCommand(cmds, args[1]); c != nil {
				return runCommand(ctx, env, c, []string{"-h"})
			}
			fmt.Fprintf(env.Stderr, "claudectl: %s\n\n%s", unknownCommand(cmds, args[1]), usage(cmds))
			return ExitUsage
		}
		fmt.Fprint(env.Stdout, usage(cmds))
		return ExitOK
	}
	switch name {
	case "--version", "-version":
		name, args = "version", append([]string{"version"}, args[1:]...)
	case completeCommand: // hidden: the shell completion scripts call it
		return runCompletion(ctx, env, args[1:])
	}
	c := findCommand(cmds, name)
	if c == nil {
		if strings.HasPrefix(name, "-") {
			fmt.Fprintf(env.Stderr, "claudectl: flags go after the command: claudectl COMMAND [flags]; unknown flag %s\n\n%s", name, usage(cmds))
		} else {
			fmt.Fprintf(env.Stderr, "claudectl: %s\n\n%s", unknownCommand(cmds, name), usage(cmds))
		}
		return ExitUsage
	}
	return runCommand(ctx, env, c, args[1:])
}

// unknownCommand says that name is no command, and which one it looks
// like: "unknown command "sesions" (did you mean "sessions"?)".
func unknownCommand(cmds []Command, name string) string {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.Name()
	}
	return didYouMean(fmt.Sprintf("unknown command %q", name), name, names)
}

// didYouMean is msg followed by the candidate closest to word, if one is
// close enough to be what was meant.
func didYouMean(msg, word string, candidates []string) string {
	if s := suggest.Closest(strings.ToLower(word), candidates, suggest.Within(len(word))); s != "" {
		return fmt.Sprintf("%s (did you mean %q?)", msg, s)
	}
	return msg
}

func findCommand(cmds []Command, name string) Command {
	i := slices.IndexFunc(cmds, func(c Command) bool { return c.Name() == name })
	if i < 0 {
		return nil
	}
	return cmds[i]
}

// runCommand runs c and turns its error into an exit status, printing the
// error unless the command already reported it.
func runCommand(ctx context.Context, env *Env, c Command, args []string) int {
	var interrupted, hungUp atomic.Bool
	if _, ok := c.(hangupHandler); !ok && env.Hangups != nil {
		// A hung-up terminal: cancel the command's context.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			select {
			case <-env.Hangups:
				hungUp.Store(true)
				cancel()
			case <-ctx.Done():
			}
		}()
		defer func() { cancel(); <-done }()
	}
	err := func() error {
		if _, ok := c.(interruptHandler); ok || env.Interrupts == nil {
			return c.Run(ctx, args)
		}
		// The command does not watch Ctrl-C itself: cancel its context.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-env.Interrupts:
				interrupted.Store(true)
				cancel()
			case <-done:
			}
		}()
		defer wg.Wait()
		defer close(done)
		return c.Run(ctx, args)
	}()
	code := exitCode(err)
	if interrupted.Load() && code != ExitOK {
		code = ExitInterrupted
	}
	if hungUp.Load() && code != ExitOK {
		code = ExitHangup
	}
	if err != nil {
		var se *statusError
		var ue *usageError
		switch {
		case errors.As(err, &se) && se.reported:
		case errors.As(err, &ue):
			fmt.Fprintf(env.Stderr, "claudectl %s: %v; see \"claudectl %s -h\"\n", c.Name(), ue, c.Name())
		default:
			fmt.Fprintf(env.Stderr, "claudectl %s: %v\n", c.Name(), err)
		}
	}
	return code
}

// statusError is a command's error carrying the process exit status
// claudectl ends with (not the exit of a CLI, claude.ExitError); reported
// means the message was already printed.
type statusError struct {
	code     int
	err      error
	reported bool
}

func (e *statusError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *statusError) Unwrap() error { return e.err }

// exitWith returns an error for status code with a message.
func exitWith(code int, format string, args ...any) error {
	return &statusError{code: code, err: fmt.Errorf(format, args...)}
}

// exitSilently returns an error for status code whose message has been
// printed already.
func exitSilently(code int) error { return &statusError{code: code, reported: true} }

// exitCode maps a command's error to an exit status.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.code
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitFailure
}

func usage(cmds []Command) string {
	var b strings.Builder
	b.WriteString("claudectl drives the Claude Code CLI.\n\n")
	b.WriteString("Usage:\n  claudectl COMMAND [flags] [arguments]\n\nCommands:\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "  %-10s %s\n", c.Name(), c.Summary())
	}
	b.WriteString("\nRun \"claudectl COMMAND -h\" for a command's flags.\n")
	return b.String()
}
