package cli

import (
	"errors"
	"testing"

	"connectrpc.com/connect"
)

// TestStreamReset: a stream the daemon reset over HTTP/2 (how it ends the
// stream of a client that stopped reading: the message it was writing
// cannot be ended halfway) is resumed, not reported as the daemon's
// failure; other Internal errors are not taken for it.
func TestStreamReset(t *testing.T) {
	reset := connect.NewError(connect.CodeInternal, errors.New("stream error: stream ID 3; INTERNAL_ERROR; received from peer"))
	if !streamReset(reset) {
		t.Errorf("%v: not taken for a reset stream", reset)
	}
	for _, err := range []error{
		connect.NewError(connect.CodeInternal, errors.New("the daemon failed")),
		connect.NewError(connect.CodeUnknown, errors.New("stream error: stream ID 3; INTERNAL_ERROR; received from peer")),
		errors.New("stream error: stream ID 3; INTERNAL_ERROR"),
	} {
		if streamReset(err) {
			t.Errorf("%v: taken for a reset stream", err)
		}
	}
}
