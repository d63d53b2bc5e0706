package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// The kinds of events, as webhooks' "events" name them.
const (
	EventPermission      = "permission_request" // a tool call waits for a person
	EventQuestion        = "question"           // Claude asks a person (AskUserQuestion)
	EventEscalated       = "escalated"          // a request waited its route's escalate_after: more people are asked
	EventBudgetStop      = "budget_stop"        // a session was stopped at its budget
	EventSessionFinished = "session_finished"   // a session's turn ended: it waits for the next prompt
	EventSessionFailed   = "session_failed"     // a session's turn or the session failed
	EventTest            = "test"               // claudectl notify test
)

// Events are the events a webhook may ask for, in the order docs list them.
var Events = []string{EventPermission, EventQuestion, EventEscalated, EventBudgetStop, EventSessionFinished, EventSessionFailed}

// An Event is something a person may want to hear of, as the daemon tells
// it to a Notifier.
type Event struct {
	Kind string
	At   time.Time
	// SessionID and Cwd are the session's; Terminal is set for a session
	// started by hand in a terminal (claudectl hook install).
	SessionID string
	Cwd       string
	Terminal  bool

	// Of a request (EventPermission, EventQuestion, EventEscalated):
	RequestID   string
	Tool        string
	Input       json.RawMessage
	Description string
	// Routing is who is asked (nil: whoever may decide); Escalated says
	// its EscalateTo are asked too, Approvals who allowed so far.
	Routing   *permission.Routing
	Escalated bool
	Approvals []string
	// ExpiresAt is when the request is denied unless someone decides
	// (zero: unknown).
	ExpiresAt time.Time

	// Detail is what ended a turn or a session, or stopped it.
	Detail string
}

// pushKind is the device's switch an event falls under, "" for none.
func (e *Event) pushKind() string {
	switch e.Kind {
	case EventPermission:
		return store.PushPermission
	case EventQuestion:
		return store.PushQuestion
	case EventEscalated:
		if e.Tool == "AskUserQuestion" {
			return store.PushQuestion
		}
		return store.PushPermission
	case EventBudgetStop:
		return store.PushBudget
	case EventSessionFinished, EventSessionFailed:
		return store.PushSessionEnd
	case EventTest:
		return "test"
	}
	return ""
}

// isRequest reports whether e is about a pending request.
func (e *Event) isRequest() bool {
	return e.Kind == EventPermission || e.Kind == EventQuestion || e.Kind == EventEscalated
}

// Summary is what a tool call would do, on one line: a command, a path,
// a URL, a question.
func Summary(tool string, input json.RawMessage) string {
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	str := func(k string) string { s, _ := in[k].(string); return s }
	var s string
	switch tool {
	case "Bash":
		s = str("command")
	case "AskUserQuestion":
		if qs, ok := in["questions"].([]any); ok && len(qs) > 0 {
			if q, ok := qs[0].(map[string]any); ok {
				s, _ = q["question"].(string)
			}
		}
	default:
		for _, k := range []string{"file_path", "notebook_path", "path", "url", "pattern", "query", "description"} {
			if s = str(k); s != "" {
				break
			}
		}
	}
	return clipLine(s, 300)
}

// title is the notification's first line.
func (e *Event) title() string {
	where := shortDir(e.Cwd)
	switch e.Kind {
	case EventPermission:
		return fmt.Sprintf("%s waits for you in %s", e.Tool, where)
	case EventQuestion:
		return fmt.Sprintf("Claude asks you in %s", where)
	case EventEscalated:
		return fmt.Sprintf("Still waiting: %s in %s", e.Tool, where)
	case EventBudgetStop:
		return fmt.Sprintf("Budget spent in %s", where)
	case EventSessionFinished:
		return fmt.Sprintf("Claude finished in %s", where)
	case EventSessionFailed:
		return fmt.Sprintf("Session failed in %s", where)
	case EventTest:
		return "claudectl: a test notification"
	}
	return "claudectl"
}

// body is what follows the title: what is asked, who must answer, by when.
func (e *Event) body() string {
	var lines []string
	if e.isRequest() {
		if s := Summary(e.Tool, e.Input); s != "" {
			lines = append(lines, s)
		} else if e.Description != "" {
			lines = append(lines, clipLine(e.Description, 300))
		}
		if r := e.Routing; r != nil {
			who := "asked: " + strings.Join(r.Asked(e.Escalated), ", ")
			if r.Approvals > 1 {
				who += fmt.Sprintf(" (%d of %d allowed)", len(e.Approvals), r.Approvals)
			}
			lines = append(lines, who+" · route "+r.Route)
		}
		if !e.ExpiresAt.IsZero() {
			lines = append(lines, "denied at "+e.ExpiresAt.Format("15:04")+" unless someone decides")
		}
	} else if e.Detail != "" {
		lines = append(lines, clipLine(e.Detail, 300))
	}
	if e.SessionID != "" {
		kind := "session"
		if e.Terminal {
			kind = "terminal session"
		}
		lines = append(lines, kind+" "+shortID(e.SessionID))
	}
	return strings.Join(lines, "\n")
}

// text is the event in one paragraph, for chat webhooks.
func (e *Event) text() string {
	return e.title() + "\n" + e.body()
}

func shortDir(dir string) string {
	if dir == "" {
		return "a session"
	}
	parts := strings.Split(strings.TrimRight(dir, "/"), "/")
	if len(parts) > 2 {
		return "…/" + strings.Join(parts[len(parts)-2:], "/")
	}
	return dir
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
