package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	fastjson "github.com/goccy/go-json"
)

// unmarshal is the decoder used on the hot path. goccy/go-json is API
// compatible with encoding/json and several times faster on the CLI's
// stream (see docs/design.md); a panic inside it is turned into an error so
// that a hostile line can never take the session down.
func unmarshal(data []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("json decoder panic: %v", r)
		}
	}()
	return fastjson.Unmarshal(data, v)
}

// A DecodeError describes a line that could not be decoded.
type DecodeError struct {
	Type string // the line's "type", if it could be found
	Line []byte // the line, at most 200 bytes of it
	Err  error
}

func (e *DecodeError) Error() string {
	if e.Type != "" {
		return fmt.Sprintf("claude: decoding %q message: %v (line: %.200s)", e.Type, e.Err, e.Line)
	}
	return fmt.Sprintf("claude: decoding line: %v (line: %.200s)", e.Err, e.Line)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// unknownWarnAt is how many unknown messages make the decoder warn that the
// CLI is probably newer than this package.
const unknownWarnAt = 10

// A Decoder turns CLI output lines into messages and keeps count of what it
// could not type. Its zero value is ready to use; it is safe for concurrent use.
type Decoder struct {
	// Logger receives degradation warnings; nil means slog.Default().
	Logger *slog.Logger

	mu       sync.Mutex
	stats    DecodeStats
	warnedAt int

	sessionIDs sessionIDCache
	shapes     shapeCache // of the stream_event lines (fastshape.go)
}

// DecodeStats counts the lines a [Decoder] could not fully type.
type DecodeStats struct {
	// Unknown counts messages of unknown type (or system subtype), by
	// "type" or "type/subtype".
	Unknown map[string]int
	// Tolerated counts known messages that decoded only after coercion
	// (numbers sent as strings and the like).
	Tolerated int
	// Failed counts known messages that could not be decoded even
	// tolerantly; they were delivered as *UnknownMessage with Err set.
	Failed int
	// NotJSON counts lines that were not a JSON object; they are skipped.
	NotJSON int
}

// Stats returns a copy of the counters.
func (d *Decoder) Stats() DecodeStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.Unknown = maps.Clone(d.stats.Unknown)
	return s
}

func (d *Decoder) logger() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return slog.Default()
}

// streamEventFirst reports whether line starts with a "type" member whose
// value is "stream_event", as the CLI prints (and as Python's json.dumps
// does, a space after the colon): the common line is picked for the fast
// path without sniffing it first.
func streamEventFirst(line []byte) bool {
	const compact, spaced = `{"type":"stream_event"`, `{"type": "stream_event"`
	return bytes.HasPrefix(line, []byte(compact)) || bytes.HasPrefix(line, []byte(spaced))
}

// DecodeMessage decodes one line with a zero [Decoder].
func DecodeMessage(line []byte) (Message, error) {
	var d Decoder
	return d.Decode(line)
}

// Decode decodes one line. The message keeps line as its Raw bytes, so the
// caller must not modify line afterwards.
//
// Decode follows the tolerant-reader rules: unknown fields are ignored,
// missing optional fields keep their zero value, numbers and booleans sent
// as strings (and the reverse) are coerced, and a line of unknown type
// becomes an *UnknownMessage. The only error is for a line that is not a
// JSON object at all (*DecodeError).
func (d *Decoder) Decode(line []byte) (Message, error) { return d.decode(line, nil) }

// decode is Decode with the stream events taken from arena.
func (d *Decoder) decode(line []byte, arena *eventArena) (Message, error) {
	// A stream_event line has "type" first: try the fast path before
	// sniffing the whole line. It accepts a line only if every "type"
	// member in it is "stream_event", so it agrees with sniffKind.
	var firstType string
	if streamEventFirst(line) {
		firstType = "stream_event" // no need to sniff what the prefix says
	} else {
		firstType = sniffFirstType(line)
	}
	if firstType == "stream_event" {
		if ev, ok := decodeStreamEvent(line, &d.sessionIDs, &d.shapes, arena); ok {
			ev.raw = line
			return ev, nil
		}
	}
	typ, sub := sniffKind(line)
	if typ == "" {
		if t := bytes.TrimSpace(line); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
			d.count(func(s *DecodeStats) { s.NotJSON++ })
			return nil, &DecodeError{Line: clip(line), Err: errNotJSONObject}
		}
	}
	if typ == "stream_event" && firstType != "stream_event" {
		if ev, ok := decodeStreamEvent(line, &d.sessionIDs, &d.shapes, arena); ok {
			ev.raw = line
			return ev, nil
		}
	}
	if typ == "result" {
		// A turn is over: its shape goes (the next turn's first delta
		// brings one). An idle session keeps none: a small object kept
		// from amid a turn's garbage kept whole pages of the heap in use,
		// about 30 KB per idle session of the daemon.
		d.shapes.Store(nil)
	}
	m := newMessage(typ, sub)
	if m == nil {
		u := &UnknownMessage{Subtype: sub}
		u.Type = typ
		u.raw = line
		_ = unmarshal(line, &u.Base) // best effort: uuid, session_id
		u.Type = typ
		key := typ
		if sub != "" {
			key += "/" + sub
		}
		d.recordUnknown(key)
		return u, nil
	}
	if err := unmarshal(line, m); err != nil {
		if !json.Valid(line) {
			d.count(func(s *DecodeStats) { s.NotJSON++ })
			return nil, &DecodeError{Type: typ, Line: clip(line), Err: err}
		}
		if err2 := decodeTolerant(line, m); err2 != nil {
			d.count(func(s *DecodeStats) { s.Failed++ })
			derr := &DecodeError{Type: typ, Line: clip(line), Err: err}
			d.logger().Warn("claude: could not decode a known message type; passing it on as unknown",
				"type", typ, "subtype", sub, "err", err)
			u := &UnknownMessage{Subtype: sub, Err: derr}
			u.Type = typ
			u.raw = line
			return u, nil
		}
		d.count(func(s *DecodeStats) { s.Tolerated++ })
		m.base().strictErr = &DecodeError{Type: typ, Line: clip(line), Err: err} // DecodeErrorOf
	}
	// The sniffed kind chose the struct; keep it, whatever other members
	// the case-insensitive struct decoder matched (e.g. "Type").
	b := m.base()
	b.raw = line
	b.Type = typ
	if sb, ok := m.(interface{ systemBase() *SystemBase }); ok {
		sb.systemBase().Subtype = sub
	}
	if cr, ok := m.(*ControlRequest); ok {
		_, cr.Subtype = sniffKind(cr.Request)
	}
	return m, nil
}

var errNotJSONObject = fmt.Errorf("not a JSON object")

func clip(b []byte) []byte {
	if len(b) > 200 {
		b = b[:200]
	}
	return bytes.Clone(b)
}

func (d *Decoder) count(f func(*DecodeStats)) {
	d.mu.Lock()
	f(&d.stats)
	d.mu.Unlock()
}

func (d *Decoder) recordUnknown(key string) {
	d.mu.Lock()
	if d.stats.Unknown == nil {
		d.stats.Unknown = make(map[string]int)
	}
	d.stats.Unknown[key]++
	total := 0
	for _, n := range d.stats.Unknown {
		total += n
	}
	warn := total >= unknownWarnAt && d.warnedAt == 0
	if warn {
		d.warnedAt = total
	}
	var kinds []string
	if warn {
		kinds = slices.Sorted(maps.Keys(d.stats.Unknown))
	}
	d.mu.Unlock()
	if warn {
		d.logger().Warn("claude: received 10+ messages of unknown type; Claude Code may be newer than this SDK (they are passed through as *UnknownMessage)",
			"types", kinds)
	}
}

// newMessage returns a zero message of the Go type for a wire type, or nil
// when the type is unknown.
func newMessage(typ, sub string) Message {
	switch typ {
	case "stream_event":
		return new(StreamEvent)
	case "assistant":
		return new(AssistantMessage)
	case "user":
		return new(UserMessage)
	case "result":
		return new(ResultMessage)
	case "system":
		return newSystem(sub)
	case "control_request":
		return new(ControlRequest)
	case "control_response":
		return new(ControlResponse)
	case "control_cancel_request":
		return new(ControlCancelRequest)
	case "keep_alive":
		return new(KeepAlive)
	case "tool_progress":
		return new(ToolProgress)
	case "tool_use_summary":
		return new(ToolUseSummary)
	case "auth_status":
		return new(AuthStatus)
	case "rate_limit_event":
		return new(RateLimitEvent)
	case "prompt_suggestion":
		return new(PromptSuggestion)
	case "conversation_reset":
		return new(ConversationReset)
	}
	return nil
}

func newSystem(sub string) Message {
	switch sub {
	case "init":
		return new(SystemInit)
	case "status":
		return new(SystemStatus)
	case "compact_boundary":
		return new(CompactBoundary)
	case "api_retry":
		return new(APIRetry)
	case "hook_started", "hook_progress", "hook_response":
		return new(HookEvent)
	case "task_started":
		return new(TaskStarted)
	case "task_progress":
		return new(TaskProgress)
	case "task_updated":
		return new(TaskUpdated)
	case "task_notification":
		return new(TaskNotification)
	case "background_tasks_changed":
		return new(BackgroundTasksChanged)
	case "session_state_changed":
		return new(SessionStateChanged)
	case "permission_denied":
		return new(PermissionDenied)
	}
	return newSystemMore(sub)
}
