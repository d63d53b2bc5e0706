package daemon

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/store"
)

// An Event is one entry of a session's log as the daemon hands it out: the
// stored record and, for an event the daemon made itself, its typed Body.
// Live events carry the Body they were logged with; replayed ones get it
// decoded from the stored line once, by EventFromStore.
//
// The daemon's events are declared here and nowhere else: each Body type
// below, its stored type name (the store.Event's Type) and its JSON form
// (the stored line, with "type" first).
type Event struct {
	store.Event
	// Body is the content of an event the daemon made (Direction
	// store.FromDaemon): one of the pointer types below. It is nil for the
	// CLI's lines in both directions, whose content is Raw.
	Body Body
}

// A Body is the content of one of the daemon's own events: *StatusChange,
// *TextDelta, *ToolUse, *UsageReport, *PermissionRequest,
// *PermissionResolved, *ErrorReport, *Warning, *Interrupted, *Gap or
// *PermissionModeChange.
type Body interface {
	// EventType is the event's type as stored ("status", "text_delta", …).
	EventType() string
}

// StatusChange: the session's status changed (type "status").
type StatusChange struct {
	Status store.SessionStatus `json:"status"`
	Detail string              `json:"detail,omitempty"`
}

// TextDelta is a piece of streamed text (type "text_delta"), logged after
// the stream_event it comes from.
type TextDelta struct {
	Text            string `json:"text"`
	ParentToolUseID string `json:"parent_tool_use_id,omitempty"`
}

// ToolUse is a tool call (type "tool_use"): logged after the
// content_block_stop that completes a streamed one, or after the assistant
// message that holds it when partial messages are off.
type ToolUse struct {
	ToolUseID       string          `json:"tool_use_id"`
	Name            string          `json:"name"`
	Input           json.RawMessage `json:"input"`
	ParentToolUseID string          `json:"parent_tool_use_id,omitempty"`
}

// UsageReport is logged after a result's usage is recorded (type
// "usage_report"): the turn's share and the session's totals after it.
type UsageReport struct {
	Turn   store.UsageRecord `json:"turn"`
	Totals store.Totals      `json:"totals"`
}

// PermissionRequest is logged when a request goes to a person (type
// "permission_request").
type PermissionRequest struct {
	RequestID   string                    `json:"request_id"`
	ToolName    string                    `json:"tool_name"`
	ToolUseID   string                    `json:"tool_use_id,omitempty"`
	Input       json.RawMessage           `json:"input,omitempty"`
	Suggestions []claude.PermissionUpdate `json:"suggestions,omitempty"`
	Description string                    `json:"description,omitempty"`
	Reason      string                    `json:"decision_reason,omitempty"`
	// Route is the routing rule that says who is asked (notify routes),
	// and Asked who it asks; empty when none applies.
	Route string   `json:"route,omitempty"`
	Asked []string `json:"asked,omitempty"`
	// AlwaysRules are the rules "always allow" stores in the daemon, and
	// AlwaysSession the other changes it makes to this CLI process only,
	// in words: what the person agrees to.
	AlwaysRules   []RuleSpec `json:"always_rules,omitempty"`
	AlwaysSession []string   `json:"always_session,omitempty"`
}

// RuleSpec is a permission rule as events show it.
type RuleSpec struct {
	Pattern    string `json:"pattern"`
	Behavior   string `json:"behavior"`
	ProjectDir string `json:"project_dir,omitempty"`
	SessionID  string `json:"session_id,omitempty"`
}

// ruleSpecs returns rules as events show them.
func ruleSpecs(rules []*store.Rule) []RuleSpec {
	out := make([]RuleSpec, 0, len(rules))
	for _, r := range rules {
		out = append(out, RuleSpec{Pattern: r.Spec, Behavior: r.Behavior, ProjectDir: r.ProjectDir, SessionID: r.SessionID})
	}
	return out
}

// PermissionResolved is logged when a request is settled (type
// "permission_resolved"), by a rule or a person.
type PermissionResolved struct {
	RequestID string `json:"request_id"`
	ToolName  string `json:"tool_name"`
	Behavior  string `json:"behavior"` // allow, deny, withdrawn
	By        string `json:"by"`       // rule, client:<name>, timeout, cli
	RuleID    int64  `json:"rule_id,omitempty"`
	Message   string `json:"message,omitempty"`
	// Answers are an AskUserQuestion's answers (behavior allow): question
	// text to the answer given.
	Answers map[string]string `json:"answers,omitempty"`
	// Route is the routing rule that applied, and ApprovedBy who allowed
	// it when the route needed more than one person.
	Route      string   `json:"route,omitempty"`
	ApprovedBy []string `json:"approved_by,omitempty"`
}

// ErrorReport is something that went wrong in the session (type "error"):
// the CLI failed, a turn ended in error, a streamed tool input could not be
// rebuilt, the budget was spent.
type ErrorReport struct {
	Message    string `json:"message"`
	StderrTail string `json:"stderr_tail,omitempty"`
	// Hint is what to do about it, when the daemon knows: set for a turn
	// refused for lack of credentials (where the key goes).
	Hint string `json:"hint,omitempty"`
}

// Warning says the CLI has drifted from what the daemon was tested with
// (type "warning"), on the session where it is first seen: a message type
// the daemon does not know, a known one that failed to decode (the first of
// each per CLI version), or a system/init that lacks what the daemon relies
// on (each time a session's init lacks something new). Health lists them
// all (Daemon.Compatibility).
type Warning struct {
	Kind    string               `json:"kind"`  // unknown_type, parse_failure, missing_feature
	Level   claude.Compatibility `json:"level"` // the level it holds the CLI's version to
	Message string               `json:"message"`
	// Items are the type names or the missing features.
	Items             []string `json:"items,omitempty"`
	ClaudeCodeVersion string   `json:"claude_code_version,omitempty"`
}

// Interrupted: a client interrupted the running turn (type "interrupted"),
// logged before the interrupt goes to the CLI.
type Interrupted struct {
	By string `json:"by"` // client:<name>
}

// Gap: events of the session could not be stored (type "gap"): the store
// failed between From and To, and Lost lines and events are missing before
// this one. Logged once the store writes again. A replay of a session
// whose events retention removed yields one in their place, never stored,
// with From and To zero: it stands at the last removed seq, and Lost
// counts them all (that one included).
type Gap struct {
	Lost   int64     `json:"lost"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Reason string    `json:"reason"`
}

// PermissionModeChange: the session's permission mode in effect changed
// (type "permission_mode"), as the CLI reports it: in its answer to
// SetPermissionMode, where Requested is the mode the client asked for
// (the CLI may have made another the mode in effect), or by itself in a
// system/init or system/status line (a plan approved, an "always" that
// switches modes, a start in another mode than asked), Requested empty.
// The session's stored mode is Mode from then on.
type PermissionModeChange struct {
	Mode      string `json:"mode"`
	Requested string `json:"requested,omitempty"`
}

// EventType implements Body.
func (*StatusChange) EventType() string         { return "status" }
func (*TextDelta) EventType() string            { return "text_delta" }
func (*ToolUse) EventType() string              { return "tool_use" }
func (*UsageReport) EventType() string          { return "usage_report" }
func (*PermissionRequest) EventType() string    { return "permission_request" }
func (*PermissionResolved) EventType() string   { return "permission_resolved" }
func (*ErrorReport) EventType() string          { return "error" }
func (*Warning) EventType() string              { return "warning" }
func (*Interrupted) EventType() string          { return "interrupted" }
func (*Gap) EventType() string                  { return "gap" }
func (*PermissionModeChange) EventType() string { return "permission_mode" }

// bodies makes an empty Body of each stored type name, for decoding.
var bodies = map[string]func() Body{
	"status":              func() Body { return new(StatusChange) },
	"text_delta":          func() Body { return new(TextDelta) },
	"tool_use":            func() Body { return new(ToolUse) },
	"usage_report":        func() Body { return new(UsageReport) },
	"permission_request":  func() Body { return new(PermissionRequest) },
	"permission_resolved": func() Body { return new(PermissionResolved) },
	"error":               func() Body { return new(ErrorReport) },
	"warning":             func() Body { return new(Warning) },
	"interrupted":         func() Body { return new(Interrupted) },
	"gap":                 func() Body { return new(Gap) },
	"permission_mode":     func() Body { return new(PermissionModeChange) },
}

// encodeBody returns the stored line of b: its JSON object with "type"
// first. Type names are plain identifiers: they need no escaping.
func encodeBody(b Body) ([]byte, error) {
	fields, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("daemon: encoding a %s event: %w", b.EventType(), err)
	}
	typ := b.EventType()
	raw := make([]byte, 0, len(fields)+len(typ)+12)
	raw = append(raw, `{"type":"`...)
	raw = append(raw, typ...)
	raw = append(raw, '"')
	if len(fields) > 2 { // not "{}"
		raw = append(raw, ',')
	}
	return append(raw, fields[1:]...), nil
}

// newEvent makes the stored form of b, one of session id's own events.
func newEvent(id string, b Body) (Event, error) {
	raw, err := encodeBody(b)
	if err != nil {
		return Event{}, err
	}
	return Event{Event: store.Event{SessionID: id, Direction: store.FromDaemon, Type: b.EventType(), Raw: raw}, Body: b}, nil
}

// EventFromStore returns a stored event with its Body decoded when it is
// one of the daemon's own. A line that does not decode keeps a nil Body:
// clients then get it as a raw message.
func EventFromStore(ev store.Event) Event {
	out := Event{Event: ev}
	if ev.Direction != store.FromDaemon {
		return out
	}
	if mk := bodies[ev.Type]; mk != nil {
		b := mk()
		if json.Unmarshal(ev.Raw, b) == nil {
			out.Body = b
		}
	}
	return out
}
