package apiserver

import (
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// strictJSON is the API's JSON codec (Connect's "json" and its
// "json; charset=utf-8"): connect-go's own, but for what a request may
// hold. Connect's discards unknown fields and unknown enum names, so a
// misspelt filter ({"status": ["SESSION_STATUS_RUNING"]}) reached the
// daemon as no filter and listed every session, and a misspelt field
// name was dropped without a word. Here either is refused with
// InvalidArgument (Connect's code for a request it cannot unmarshal),
// naming the field or value. The API's clients ship with the daemon (its
// page, claudectl), so there is no older or newer schema for the leniency
// to serve; binary requests keep protobuf's rules, and their enum numbers
// are checked by each method.
type strictJSON struct{ name string }

func (c strictJSON) Name() string { return c.name }

func (c strictJSON) IsBinary() bool { return false }

func (c strictJSON) Marshal(m any) ([]byte, error) { return c.MarshalAppend(nil, m) }

func (c strictJSON) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", m)
	}
	return protojson.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (c strictJSON) Unmarshal(data []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", m)
	}
	if len(data) == 0 {
		return errors.New("the request body is empty, not a JSON object")
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(data, pm); err != nil {
		// protojson's words ("proto: (line 1:12): invalid value for enum
		// field status: ...") without the package's prefix.
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "proto:"), "\u00a0")
		return fmt.Errorf("the request's JSON: %s", strings.TrimSpace(msg))
	}
	return nil
}

// jsonCodecs are the handler options that put strictJSON in place of
// Connect's JSON codecs.
func jsonCodecs() connect.HandlerOption {
	return connect.WithHandlerOptions(
		connect.WithCodec(strictJSON{"json"}),
		connect.WithCodec(strictJSON{"json; charset=utf-8"}),
	)
}
