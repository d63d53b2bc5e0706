package claude

import "encoding/json"

// ControlRequest is a control request, in either direction. A [Session]
// answers the CLI's requests itself (see [Options.CanUseTool]); they are
// not delivered by [Session.Next].
type ControlRequest struct {
	Base
	RequestID string `json:"request_id"`
	// Request is the payload; its "subtype" field is in Subtype.
	Request json.RawMessage `json:"request"`
	// Subtype is Request's "subtype" field, filled in by the decoder.
	Subtype string `json:"-"`
}

// ControlResponse answers a control request.
type ControlResponse struct {
	Base
	Response ControlResponseBody `json:"response"`
}

// ControlResponseBody is the body of a [ControlResponse].
type ControlResponseBody struct {
	Subtype   string          `json:"subtype"` // "success" or "error"
	RequestID string          `json:"request_id"`
	Response  json.RawMessage `json:"response,omitempty"`
	Error     string          `json:"error,omitempty"`
	ErrorCode string          `json:"error_code,omitempty"`
	// PendingPermissionRequests are can_use_tool requests the CLI had queued;
	// they are handled as if they had arrived on their own.
	PendingPermissionRequests []json.RawMessage `json:"pending_permission_requests,omitempty"`
}

// ControlCancelRequest withdraws a control request that is still unanswered.
type ControlCancelRequest struct {
	Base
	RequestID string `json:"request_id"`
}
