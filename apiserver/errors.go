package apiserver

import (
	"context"
	"errors"
	"fmt"
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
	case errors.Is(err, store.ErrWriteFailed): // whatever it stopped: the store is the cause
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.As(err, &ia):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.As(err, &re):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.As(err, &le):
		return connect.NewError(connect.CodeResourceExhausted, err)
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
