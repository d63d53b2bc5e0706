package apiserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"unicode"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// toConnect maps daemon, store and permission errors to connect codes.
func toConnect(err error) error {
	if err == nil {
		return nil
	}
	var ia *daemon.InvalidArgumentError
	var re *permission.ResolvedError
	var le *store.LimitError
	switch {
	case errors.Is(err, store.ErrWriteFailed), errors.Is(err, store.ErrReadFailed): // whatever it stopped: the store is the cause
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.As(err, &ia):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.As(err, &re):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.As(err, &le):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, daemon.ErrNotAsked): // a route asks others
		return connect.NewError(connect.CodePermissionDenied, err)
	case errors.Is(err, store.ErrUsed), errors.Is(err, daemon.ErrTerminalSession):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, store.ErrNotFound), errors.Is(err, permission.ErrNotPending):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, store.ErrInvalid), errors.Is(err, permission.ErrInvalidDecision), errors.Is(err, permission.ErrSyntax):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, store.ErrUnavailable):
		return connect.NewError(connect.CodeOutOfRange, err)
	case errors.Is(err, claude.ErrWorkersBusy):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, claude.ErrNoWorker):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, daemon.ErrNotRunning), errors.Is(err, daemon.ErrAlreadyRunning), errors.Is(err, claude.ErrClosed),
		errors.Is(err, store.ErrNotOwner): // another daemon runs the session
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, daemon.ErrClosed), errors.Is(err, store.ErrClosed), errors.Is(err, permission.ErrBrokerClosed):
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	if code, ok := worktreeCode(err); ok {
		return connect.NewError(code, err)
	}
	var ce *claude.ControlError
	if errors.As(err, &ce) {
		return connect.NewError(connect.CodeFailedPrecondition, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

func invalid(field, value, reason string) error {
	return toConnect(&daemon.InvalidArgumentError{Field: field, Value: value, Reason: reason})
}

// maxClientName bounds the client names requests carry (for the audit
// trail and the session's watchers).
const maxClientName = 128

// clientName checks a request's client name: at most maxClientName bytes
// of printable UTF-8.
func clientName(value string) error {
	if len(value) > maxClientName {
		return invalid("client", value[:32]+"…", fmt.Sprintf("at most %d bytes", maxClientName))
	}
	if !utf8.ValidString(value) {
		return invalid("client", value, "must be UTF-8")
	}
	for _, r := range value {
		if !unicode.IsPrint(r) {
			return invalid("client", value, "must be printable (no control characters)")
		}
	}
	return nil
}

// notFound is a NotFound error in the client's words alone: the store's
// error that it replaces names the store's own call ("sqlite: DeleteRule
// 12: not found"), which helps no client and shows the store's internals.
func notFound(format string, args ...any) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf(format, args...))
}

func required(field, value string) error {
	if value == "" {
		return invalid(field, value, "required")
	}
	return nil
}

// internalNames are the packages whose names start the daemon's error
// messages and the parts they wrap, as Go's errors do ("daemon: creating
// session: sqlite: append: …"): its log keeps them, a client has no use
// for them.
var internalNames = []string{"daemon", "store", "sqlite", "postgres", "permission", "claude", "relay", "jsonl", "apiserver", "api"}

// ClientMessage returns an error message of the daemon's in its client's
// words: without the names of internal packages at its start and at the
// start of each part after ": " or a line break. Quoted values (as %q
// writes them) are left whole, whatever they hold. The API says every
// error this way; clients may apply it to messages of older daemons and
// of events.
func ClientMessage(msg string) string {
	var b strings.Builder
	quoted, partStart := false, true
	for i := 0; i < len(msg); {
		if partStart && !quoted {
			if n := internalPrefix(msg[i:]); n > 0 {
				i += n
				if store := msg[i-n : i-2]; store == "sqlite" || store == "postgres" {
					i += storeMethod(msg[i:]) // "sqlite: CreateSession: …"
				}
				continue
			}
			partStart = false
		}
		c := msg[i]
		switch {
		case quoted && c == '\\' && i+1 < len(msg): // an escape: the next byte is not a quote
			b.WriteString(msg[i : i+2])
			i += 2
			continue
		case c == '"':
			quoted = !quoted
		case !quoted && c == '\n':
			partStart = true
		case !quoted && strings.HasPrefix(msg[i:], ": "):
			b.WriteString(": ")
			i += 2
			partStart = true
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

// internalPrefix returns the length of the "name: " that s starts with, if
// name is one of internalNames, else 0.
// storeMethod returns the length of the name of a store's method
// starting s with its ": " ("CreateSession: "), 0 when s does not start
// with one: the stores name the call an error came from, which a client
// never made.
func storeMethod(s string) int {
	n := 0
	for n < len(s) && (s[n] >= 'A' && s[n] <= 'Z' || n > 0 && (s[n] >= 'a' && s[n] <= 'z' || s[n] >= 'A' && s[n] <= 'Z')) {
		n++
	}
	if n > 0 && strings.HasPrefix(s[n:], ": ") {
		return n + 2
	}
	return 0
}

func internalPrefix(s string) int {
	for _, name := range internalNames {
		if len(s) > len(name)+1 && s[:len(name)] == name && s[len(name):len(name)+2] == ": " {
			return len(name) + 2
		}
	}
	return 0
}

// clientWords is the interceptor that says every RPC's error in its
// client's words (ClientMessage), whichever handler or layer made it: the
// daemon's messages name its packages ("daemon: no session …"), which its
// log keeps and a client needs not.
type clientWords struct{}

func (clientWords) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		return res, inClientWords(err)
	}
}

func (clientWords) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (clientWords) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return inClientWords(next(ctx, conn))
	}
}

// inClientWords returns err with its message in ClientMessage's words; its
// code, details and metadata, and the errors it wraps, are kept.
func inClientWords(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		if msg := ClientMessage(err.Error()); msg != err.Error() {
			return &reworded{msg: msg, err: err}
		}
		return err
	}
	msg := ClientMessage(ce.Message())
	if msg == ce.Message() {
		return err
	}
	out := connect.NewError(ce.Code(), &reworded{msg: msg, err: ce.Unwrap()})
	for _, d := range ce.Details() {
		out.AddDetail(d)
	}
	maps.Copy(out.Meta(), ce.Meta())
	return out
}

// reworded is err said as msg.
type reworded struct {
	msg string
	err error
}

func (e *reworded) Error() string { return e.msg }
func (e *reworded) Unwrap() error { return e.err }
