package claude

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrClosed is returned by calls on a session that has ended (closed by the
// caller, or the CLI exited). When the CLI exited on its own, the error
// returned is an *ExitError, which also matches ErrClosed with errors.Is.
var ErrClosed = errors.New("claude: session closed")

// ErrUnsupportedRequest matches (errors.Is) a *ControlError whose code is
// "unsupported_request": the CLI does not know the control request subtype.
var ErrUnsupportedRequest = errors.New("claude: control request not supported by this CLI")

// ExitError reports that the CLI process ended. It carries the exit code or
// signal and the tail of what the CLI wrote on stderr.
type ExitError struct {
	SessionID string
	Code      int    // exit code; -1 when killed by a signal
	Signal    string // signal name when killed by a signal, e.g. "killed"
	Stderr    string // last part of stderr
	// During reports what the session was doing, e.g. "mid-turn".
	During string
	// KeptRunning is set when the CLI closed its output (the end of the
	// session for the protocol) but did not exit: the SDK then stopped it
	// as Close does, and KeptRunning is how long it waited before the
	// signal that ended it (GracePeriod, plus KillDelay if SIGTERM was
	// not enough). Code or Signal is how the CLI then ended. Zero when
	// the CLI exited on its own.
	KeptRunning time.Duration
	// MemoryLimit is set when the CLI was killed by the kernel because its
	// process tree reached its memory limit ([ResourceLimits.MemoryMax]):
	// that limit, in bytes.
	MemoryLimit int64
}

func (e *ExitError) Error() string {
	var sb strings.Builder
	sb.WriteString("claude: CLI ")
	switch {
	case e.MemoryLimit > 0:
		fmt.Fprintf(&sb, "was killed: memory limit %s reached", FormatBytes(e.MemoryLimit))
	case e.KeptRunning > 0:
		sb.WriteString("closed its output")
		if e.During != "" {
			sb.WriteString(" " + e.During)
		}
		stopped := "stopped"
		if e.Signal == "killed" {
			stopped = "killed"
		}
		fmt.Fprintf(&sb, " but kept running; it was %s after %v", stopped, e.KeptRunning)
	case e.Signal != "":
		fmt.Fprintf(&sb, "was terminated by signal %s", e.Signal)
	default:
		fmt.Fprintf(&sb, "exited with code %d", e.Code)
	}
	if e.During != "" && e.KeptRunning <= 0 {
		sb.WriteString(" " + e.During)
	}
	if e.SessionID != "" {
		fmt.Fprintf(&sb, " (session %s)", e.SessionID)
	}
	if s := strings.TrimSpace(e.Stderr); s != "" {
		sb.WriteString("; stderr: ")
		sb.WriteString(s)
	} else {
		sb.WriteString("; stderr was empty")
	}
	return sb.String()
}

// Is makes errors.Is(err, ErrClosed) true for an ExitError.
func (e *ExitError) Is(target error) bool { return target == ErrClosed }

// ControlError is an error response to a control request the SDK sent.
type ControlError struct {
	SessionID string
	Subtype   string // the request's subtype, e.g. "set_model"
	RequestID string
	Message   string // the CLI's error text
	Code      string // the CLI's error_code, if any (e.g. "unsupported_request")
}

func (e *ControlError) Error() string {
	s := fmt.Sprintf("claude: control request %s failed: %s", e.Subtype, e.Message)
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.SessionID != "" {
		s += " (session " + e.SessionID + ")"
	}
	return s
}

// Is matches ErrUnsupportedRequest by code.
func (e *ControlError) Is(target error) bool {
	return target == ErrUnsupportedRequest && e.Code == "unsupported_request"
}

// ResultError is the error form of a result whose IsError is set; see
// [ResultMessage.Err].
type ResultError struct {
	SessionID string
	Subtype   string
	Errors    []string
	Result    string
	// StartupFailureReason says why the CLI refused to start, when this is
	// the result it printed before exiting for that.
	StartupFailureReason StartupFailureReason
}

func (e *ResultError) Error() string {
	detail := strings.Join(e.Errors, "; ")
	if detail == "" {
		detail = e.Result
	}
	if detail == "" {
		detail = "no detail given"
	}
	what := e.Subtype
	if what == "" || what == "success" {
		what = "an error" // the CLI reports API failures as subtype success with is_error set
	}
	if e.StartupFailureReason != "" {
		return fmt.Sprintf("claude: Claude Code refused to start (%s): %s", e.StartupFailureReason, detail)
	}
	return fmt.Sprintf("claude: turn ended with %s (session %s): %s", what, e.SessionID, detail)
}

// Err returns a *ResultError when the result reports an error, else nil.
func (m *ResultMessage) Err() error {
	if !m.IsError && (m.Subtype == "success" || m.Subtype == "") {
		return nil
	}
	return &ResultError{SessionID: m.SessionID, Subtype: m.Subtype, Errors: m.Errors, Result: m.Result,
		StartupFailureReason: m.StartupFailureReason}
}

// StartError reports that the CLI could not be started.
type StartError struct {
	Path string
	Err  error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("claude: starting %s: %v", e.Path, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// A LimitsError says why [ResourceLimits] cannot be applied to the CLIs of
// this process: no cgroup hierarchy with the controllers they need is
// writable here (see ProcessTransport's doc).
type LimitsError struct {
	Limits ResourceLimits
	Reason string
}

func (e *LimitsError) Error() string {
	return fmt.Sprintf("claude: resource limits (%s) cannot be applied: %s", e.Limits, e.Reason)
}
