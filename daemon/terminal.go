package daemon

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/notify"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// Sessions started by hand in a terminal. claudectl's hook (claudectl
// hook install) runs inside an interactive claude anywhere on the machine
// and hands the daemon its permission requests (AskTerminal) and its
// notifications and stops (ReportTerminal). The daemon keeps such a
// session as a session of its own, marked terminal in its options: it is
// listed with its directory, its requests are held by the broker like any
// session's (rules, routes, people, pushes, webhooks), and its transcript
// is Claude Code's own file, read, never written. It is driven from its
// terminal: a prompt, an interrupt, a resume or a fork is refused.

// ErrTerminalSession is wrapped by the error of a call that drives a
// session started by hand in a terminal (a prompt, an interrupt, a model,
// a resume): such a session is driven from its terminal; the daemon only
// answers its permission requests.
var ErrTerminalSession = errors.New("the session runs in a terminal")

// TerminalHook is a hook's input as Claude Code hands it to a command
// hook (PermissionRequest, Notification, Stop, SessionEnd).
type TerminalHook struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Cwd            string `json:"cwd"`
	Event          string `json:"hook_event_name"`
	// PermissionRequest's.
	ToolName    string                    `json:"tool_name"`
	ToolInput   json.RawMessage           `json:"tool_input"`
	Suggestions []claude.PermissionUpdate `json:"permission_suggestions"`
	// Notification's.
	Message          string `json:"message"`
	Title            string `json:"title"`
	NotificationType string `json:"notification_type"`
	// Stop's.
	LastAssistantMessage string `json:"last_assistant_message"`
}

// maxHookBytes bounds a hook's input: a tool's input can be a whole file
// (Write), and the daemon's messages take at most MaxRequestBytes.
const maxHookBytes = 4 << 20

// ParseTerminalHook reads a hook's input, checking what the daemon relies
// on: Claude Code's session id and an absolute directory.
func ParseTerminalHook(b []byte) (*TerminalHook, error) {
	if len(b) > maxHookBytes {
		return nil, &InvalidArgumentError{Field: "hook_input", Value: fmt.Sprintf("%d bytes", len(b)), Reason: fmt.Sprintf("at most %d bytes", maxHookBytes)}
	}
	var h TerminalHook
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, &InvalidArgumentError{Field: "hook_input", Value: clipValue(string(b)), Reason: "not a hook's JSON input: " + err.Error()}
	}
	switch {
	case h.SessionID == "" || len(h.SessionID) > 128 || strings.ContainsAny(h.SessionID, "/\\\n"):
		return nil, &InvalidArgumentError{Field: "hook_input.session_id", Value: clipValue(h.SessionID), Reason: "Claude Code's session id"}
	case !filepath.IsAbs(h.Cwd):
		return nil, &InvalidArgumentError{Field: "hook_input.cwd", Value: clipValue(h.Cwd), Reason: "an absolute directory"}
	case h.Event == "PermissionRequest" && h.ToolName == "":
		return nil, &InvalidArgumentError{Field: "hook_input.tool_name", Value: "", Reason: "required for PermissionRequest"}
	}
	if len(h.ToolInput) == 0 || string(h.ToolInput) == "null" {
		h.ToolInput = json.RawMessage("{}")
	}
	return &h, nil
}

// terminalMark is what a terminal session's stored options hold besides
// the session options (decodeOptions discards it).
type terminalMark struct {
	Cwd      string `json:"cwd"`
	Terminal struct {
		TranscriptPath string `json:"transcriptPath"`
	} `json:"terminal"`
}

// TerminalOf says whether s was started by hand in a terminal, and where
// its transcript is.
func TerminalOf(s *store.Session) (transcript string, ok bool) {
	if !strings.Contains(string(s.Options), `"terminal"`) {
		return "", false
	}
	var m struct {
		Terminal *struct {
			TranscriptPath string `json:"transcriptPath"`
		} `json:"terminal"`
	}
	if json.Unmarshal(s.Options, &m) != nil || m.Terminal == nil {
		return "", false
	}
	return m.Terminal.TranscriptPath, true
}

// terminalSession returns the session of h's conversation, made on its
// first hook.
func (d *Daemon) terminalSession(ctx context.Context, h *TerminalHook) (*store.Session, error) {
	ss, err := d.db.Sessions(ctx, store.SessionFilter{ClaudeSessionID: h.SessionID})
	if err != nil {
		return nil, err
	}
	for _, s := range ss {
		if _, ok := TerminalOf(s); ok {
			return s, nil
		}
	}
	if len(ss) > 0 {
		// A session of the daemon's own: its CLI runs claudectl's hook
		// too when it reads the person's settings. Its requests come
		// through the daemon already.
		return nil, &StateError{SessionID: ss[0].ID, Status: ss[0].Status, Msg: "it is a session of the daemon's own, not one started in a terminal"}
	}
	var m terminalMark
	m.Cwd = h.Cwd
	m.Terminal.TranscriptPath = h.TranscriptPath
	opts, _ := json.Marshal(m)
	s := &store.Session{Cwd: h.Cwd, Status: store.StatusRunning, ClaudeSessionID: h.SessionID, Options: opts}
	if err := d.db.CreateSession(ctx, s); err != nil {
		return nil, err
	}
	d.feed.changed(s.ID) // the session lists see it
	d.log.Info("terminal session", "session", s.ID, "cwd", s.Cwd, "claude_session", h.SessionID)
	return s, nil
}

// TerminalAnswer is the answer to a terminal session's permission request.
type TerminalAnswer struct {
	// Decided is false when nobody decided within the wait (or the request
	// was withdrawn): the terminal's own dialog asks.
	Decided      bool
	Allow        bool
	Message      string
	UpdatedInput json.RawMessage
	By           string
	SessionID    string
	RequestID    string
}

// AskTerminal holds a terminal session's permission request as a session's
// are held: the rules first, then the people its route asks (or whoever
// may decide), notified as for any session, until someone decides or wait
// passes (or ctx ends: the hook gave up). The decision is audited, with
// its route.
func (d *Daemon) AskTerminal(ctx context.Context, h *TerminalHook, wait time.Duration) (*TerminalAnswer, error) {
	if d.isClosed() {
		return nil, ErrClosed
	}
	bg := context.WithoutCancel(ctx)
	s, err := d.terminalSession(ctx, h)
	if err != nil {
		return nil, err
	}
	req := &claude.PermissionRequest{RequestID: "term-" + rand.Text(), ToolName: h.ToolName, Input: h.ToolInput,
		Suggestions: h.Suggestions}
	out := &TerminalAnswer{SessionID: s.ID, RequestID: req.RequestID}
	requested := time.Now()
	at := permission.Scope{ProjectDir: s.Cwd, SessionID: s.ID}
	if req.ToolName != "AskUserQuestion" {
		if dec := d.engine.Evaluate(req, at); dec.Behavior == permission.Allow || dec.Behavior == permission.Deny {
			allow := dec.Behavior == permission.Allow
			res, behavior := claude.Allow(), "allow"
			if !allow {
				res, behavior = claude.Deny("Denied by rule "+dec.Rule.String()), "deny"
			}
			if err := d.db.AddDecision(bg, decisionRecord(s.ID, req, requested, time.Time{}, res, behavior, "rule", dec.Rule, nil)); err != nil {
				return nil, err
			}
			out.Decided, out.Allow, out.Message, out.By = true, allow, res.Message, "rule "+dec.Rule.String()
			return out, nil
		}
	}
	outcome := &auditOutcome{done: make(chan struct{})}
	d.audits.Store(req.RequestID, outcome)
	defer d.audits.CompareAndDelete(req.RequestID, outcome)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ch, err := d.broker.SubmitRouted(wctx, s.ID, req, d.router.Route(req, at))
	if err != nil {
		return nil, err
	}
	d.setTerminalStatus(bg, s.ID, store.StatusWaiting)
	r := <-ch
	d.setTerminalStatus(bg, s.ID, store.StatusRunning)
	d.log.Info("permission decided", "session", s.ID, "request", req.RequestID, "tool", req.ToolName, "terminal", true,
		"outcome", outcomeWord(&r), "by", r.By)
	if r.Outcome == permission.Withdrawn || r.Outcome == permission.Expired {
		// Nobody answered in time: the terminal's own dialog asks, and
		// whatever the person answers there is theirs, not the daemon's.
		close(outcome.done)
		return out, nil
	}
	behavior := "deny"
	if r.Result.Allow {
		behavior = "allow"
	}
	outcome.err = d.db.AddDecision(bg, decisionRecord(s.ID, req, requested, r.At, r.Result, behavior, r.By, nil, &r))
	close(outcome.done)
	if outcome.err != nil {
		return nil, outcome.err // unaudited: not sent to the terminal
	}
	out.Decided, out.Allow, out.Message, out.By = true, r.Result.Allow, r.Result.Message, r.By
	out.UpdatedInput = r.Result.UpdatedInput
	return out, nil
}

// ReportTerminal records a terminal session's other hooks: a Stop ends
// its turn (notified as a session that finished), a SessionEnd closes it,
// a Notification is what Claude Code would show in the terminal.
func (d *Daemon) ReportTerminal(ctx context.Context, h *TerminalHook) (*store.Session, error) {
	s, err := d.terminalSession(ctx, h)
	if err != nil {
		return nil, err
	}
	switch h.Event {
	case "Stop":
		if err := d.setTerminalStatus(ctx, s.ID, store.StatusIdle); err != nil {
			return nil, err
		}
		d.tell(notify.Event{Kind: notify.EventSessionFinished, SessionID: s.ID, Cwd: s.Cwd, Terminal: true,
			Detail: firstLine(h.LastAssistantMessage, 300)})
	case "SessionEnd":
		if err := d.setTerminalStatus(ctx, s.ID, store.StatusClosed); err != nil {
			return nil, err
		}
	case "Notification":
		d.feed.changed(s.ID) // its transcript may have grown
	}
	return s, nil
}

// setTerminalStatus stores a terminal session's status, for the lists.
func (d *Daemon) setTerminalStatus(ctx context.Context, id string, st store.SessionStatus) error {
	_, err := d.db.UpdateSession(ctx, id, store.SessionUpdate{Status: &st})
	d.feed.changed(id)
	return err
}

// TranscriptEntry is one entry of a Claude Code transcript, in words.
type TranscriptEntry struct {
	Kind string // "user", "assistant", "tool_use", "tool_result", "system"
	Text string
	Time time.Time
}

// maxTranscriptLine bounds one line of a transcript the daemon reads.
const maxTranscriptLine = 16 << 20

// TerminalTranscript reads the last limit entries of terminal session
// id's transcript, Claude Code's own file (JSONL), read-only.
func (d *Daemon) TerminalTranscript(ctx context.Context, id string, limit int) (entries []TranscriptEntry, path string, truncated bool, err error) {
	s, err := d.db.Session(ctx, id)
	if err != nil {
		return nil, "", false, err
	}
	path, ok := TerminalOf(s)
	if !ok {
		return nil, "", false, &StateError{SessionID: id, Status: s.Status, Msg: "it is not a terminal session: its log is the session's own (Subscribe)"}
	}
	if path == "" {
		return nil, "", false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, path, false, fmt.Errorf("daemon: reading the transcript of terminal session %s: %w", id, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxTranscriptLine)
	for sc.Scan() {
		entries = append(entries, transcriptEntries(sc.Bytes())...)
		if len(entries) > 2*limit {
			entries, truncated = append(entries[:0:0], entries[len(entries)-limit:]...), true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, path, false, fmt.Errorf("daemon: reading the transcript of terminal session %s: %w", id, err)
	}
	if len(entries) > limit {
		entries, truncated = entries[len(entries)-limit:], true
	}
	return entries, path, truncated, nil
}

// transcriptEntries reads one transcript line: a user or assistant
// message, whose content is text or blocks.
func transcriptEntries(line []byte) []TranscriptEntry {
	var l struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Message   struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(line, &l) != nil || (l.Type != "user" && l.Type != "assistant") {
		return nil
	}
	var text string
	if json.Unmarshal(l.Message.Content, &text) == nil {
		return []TranscriptEntry{{Kind: l.Type, Text: text, Time: l.Timestamp}}
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Name    string          `json:"name"`
		Input   json.RawMessage `json:"input"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(l.Message.Content, &blocks) != nil {
		return nil
	}
	var out []TranscriptEntry
	for _, b := range blocks {
		switch b.Type {
		case "text":
			out = append(out, TranscriptEntry{Kind: l.Type, Text: b.Text, Time: l.Timestamp})
		case "tool_use":
			out = append(out, TranscriptEntry{Kind: "tool_use", Text: b.Name + " " + clipValue(string(b.Input)), Time: l.Timestamp})
		case "tool_result":
			var s string
			if json.Unmarshal(b.Content, &s) != nil {
				s = string(b.Content)
			}
			out = append(out, TranscriptEntry{Kind: "tool_result", Text: clipValue(s), Time: l.Timestamp})
		}
	}
	return out
}
