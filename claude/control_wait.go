package claude

import (
	"errors"
	"fmt"
	"time"
)

// DefaultControlTimeout is the default Options.ControlTimeout, the same as
// the Python SDK's.
const DefaultControlTimeout = 60 * time.Second

// ErrControlTimeout matches (errors.Is) a *ControlTimeoutError.
var ErrControlTimeout = errors.New("claude: control request not answered in time")

// ControlTimeoutError reports that the CLI did not answer a control request
// within Options.ControlTimeout. Some CLI versions ignore requests they do
// not know instead of answering them with an error (2.1.37 ignores
// get_context_usage).
type ControlTimeoutError struct {
	SessionID string
	Subtype   string
	RequestID string
	Timeout   time.Duration
}

func (e *ControlTimeoutError) Error() string {
	s := fmt.Sprintf("claude: control request %s: the CLI did not answer within %v (Options.ControlTimeout); this CLI version may not support it", e.Subtype, e.Timeout)
	if e.SessionID != "" {
		s += " (session " + e.SessionID + ")"
	}
	return s
}

// Is matches ErrControlTimeout.
func (e *ControlTimeoutError) Is(target error) bool { return target == ErrControlTimeout }

// longControlRequests are the control requests whose answer may take long
// by design: they run the model, or wait for a person or a browser. They
// are not bounded by Options.ControlTimeout.
var longControlRequests = map[string]bool{
	"side_question":                    true,
	"generate_session_title":           true,
	"ultrareview_launch":               true,
	"submit_feedback":                  true,
	"mcp_authenticate":                 true,
	"claude_authenticate":              true,
	"claude_oauth_wait_for_completion": true,
	"mcp_call":                         true, // a tool runs as long as it runs; check_permissions may ask a person
}

// controlTimeout is the wait bound of the session's control requests; 0 for none.
func (s *Session) controlTimeout() time.Duration {
	switch t := s.opts.ControlTimeout; {
	case t < 0:
		return 0
	case t == 0:
		return DefaultControlTimeout
	default:
		return t
	}
}

// controlTimer returns a channel that fires when a request of this subtype
// has waited too long (nil: never), and a function to release the timer.
func (s *Session) controlTimer(subtype string) (<-chan time.Time, func()) {
	d := s.controlTimeout()
	if d == 0 || longControlRequests[subtype] {
		return nil, func() {}
	}
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}
