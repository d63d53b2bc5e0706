package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/store"
)

// An actor owns one session's *claude.Session. Its goroutine (run) is the
// only one that steers the CLI (send, interrupt, set model, close); the
// reader goroutine it starts and waits for only reads messages and logs
// them. Every event of the session, from either, goes through logEvent or
// queueEvent: stored first, published from the store's commit callback.
type actor struct {
	d    *Daemon
	id   string
	opts SessionOptions

	launch  launch
	sess    *claude.Session
	process int64 // CLI process generation (store.NewProcess)

	waiting  atomic.Int32 // permission requests waiting for a person
	shutdown atomic.Bool  // the daemon is stopping: the session is interrupted, not closed
	stopMu   sync.Mutex
	stopMsg  string // why the daemon stopped the session itself (budget)

	cmds    chan command
	closing chan struct{} // closed to ask run to end
	once    sync.Once
	done    chan struct{} // closed when run has returned

	hub *hub
}

type command struct {
	ctx   context.Context
	fn    func(context.Context, *claude.Session) error
	reply chan error
}

func newActor(d *Daemon, id string, o SessionOptions) *actor {
	return &actor{
		d: d, id: id, opts: o,
		cmds:    make(chan command),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		hub:     newHub(d.subBuf),
	}
}

// start launches the CLI. On failure the session is marked failed.
func (a *actor) start(ctx context.Context) error {
	a.status(ctx, store.StatusStarting, "")
	gen, err := a.d.db.NewProcess(ctx, a.id)
	if err != nil {
		return a.fail(ctx, fmt.Errorf("daemon: new process: %w", err))
	}
	a.process = gen
	o := a.opts
	var tr claude.Transport = &claude.ProcessTransport{ReadBufferSize: a.d.readBuf}
	if o.Worker == "remote" {
		if a.d.workers == nil {
			return a.fail(ctx, &InvalidArgumentError{Field: "options.worker", Value: o.Worker,
				Reason: "this daemon accepts no remote workers now"})
		}
		tr = a.d.workers
	}
	s, err := claude.Start(a.d.ctx, &claude.Options{
		CLIPath:                a.d.cliPath,
		Transport:              &tapTransport{Transport: tr, a: a},
		Resume:                 a.launch.resume,
		ForkSession:            a.launch.fork,
		Cwd:                    o.Cwd,
		Env:                    a.d.env,
		Model:                  o.Model,
		PermissionMode:         claude.PermissionMode(o.PermissionMode),
		AllowedTools:           o.AllowedTools,
		DisallowedTools:        o.DisallowedTools,
		AddDirs:                o.AddDirs,
		SystemPrompt:           claude.SystemPromptFromFlags(o.SystemPrompt, o.AppendSystemPrompt),
		MaxTurns:               o.MaxTurns,
		MaxBudgetUSD:           o.MaxBudgetUSD,
		IncludePartialMessages: o.IncludePartialMessages,
		ExtraArgs:              o.ExtraArgs,
		CanUseTool:             a.canUseTool,
		Logger:                 a.d.log,
	})
	if err != nil {
		return a.fail(ctx, fmt.Errorf("daemon: starting the CLI: %w", err))
	}
	a.sess = s
	if _, err := a.d.db.UpdateSession(ctx, a.id, store.SessionUpdate{Error: new(string)}); err != nil {
		a.d.log.Error("clearing the session's last error", "session", a.id, "err", err)
	}
	a.status(ctx, store.StatusIdle, "")
	return nil
}

func (a *actor) fail(ctx context.Context, err error) error {
	a.logError(ctx, err.Error(), "")
	a.status(ctx, store.StatusFailed, err.Error())
	a.hub.close(nil)
	close(a.done)
	return err
}

// run is the actor's goroutine.
func (a *actor) run() {
	defer close(a.done)
	readerDone := make(chan error, 1)
	go func() { readerDone <- a.read() }()
	for {
		select {
		case c := <-a.cmds:
			c.reply <- c.fn(c.ctx, a.sess)
		case err := <-readerDone:
			// The CLI ended by itself.
			a.sess.Close()
			a.end(err, false)
			return
		case <-a.closing:
			a.sess.Close()
			err := <-readerDone
			a.end(err, true)
			return
		}
	}
}

// end records how the session ended and closes the subscriptions.
func (a *actor) end(err error, requested bool) {
	ctx := context.WithoutCancel(a.d.ctx)
	a.stopMu.Lock()
	stopped := a.stopMsg
	a.stopMu.Unlock()
	switch {
	case stopped != "":
		a.status(ctx, store.StatusClosed, stopped)
	case a.shutdown.Load():
		a.status(ctx, store.StatusInterrupted, "the daemon stopped; the next prompt resumes the session")
	case requested || err == nil:
		a.status(ctx, store.StatusClosed, "")
	default:
		tail := a.sess.StderrTail()
		a.logError(ctx, err.Error(), tail)
		detail := err.Error()
		if t := strings.TrimSpace(tail); t != "" && !strings.Contains(detail, t) {
			detail += "\n" + t
		}
		a.status(ctx, store.StatusFailed, detail)
	}
	a.d.engine.RemoveSession(a.id)
	a.hub.close(nil)
}

// read logs every message until the session ends; it returns nil for a
// clean end.
func (a *actor) read() error {
	ctx := context.WithoutCancel(a.d.ctx)
	recorded := false
	var acc claude.Accumulator
	for {
		m, err := a.sess.Next(a.d.ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		ev := &store.Event{SessionID: a.id, Direction: store.FromCLI, Type: m.Kind(),
			Subtype: messageSubtype(m), Raw: append([]byte(nil), m.Raw()...)}
		if b, ok := m.(interface{ Truncated() (int64, bool) }); ok {
			if n, t := b.Truncated(); t {
				ev.OriginalSize = n
			}
		}
		var usage usageOutcome
		switch m := m.(type) {
		case *claude.ResultMessage: // stored with its ledger entry, waited for
			usage = a.logResult(ctx, ev, m)
		case *claude.SystemInit:
			if !recorded && m.SessionID != "" { // stored with the CLI's session id
				recorded = true
				a.record(ctx, ev, &store.SessionUpdate{ClaudeSessionID: &m.SessionID}, false)
			} else {
				a.queueEvent(ctx, ev)
			}
		default:
			a.queueEvent(ctx, ev)
		}
		if u, ok := acc.Add(m); ok {
			a.logStreamUpdate(ctx, u)
		}
		switch m := m.(type) {
		case *claude.AssistantMessage:
			if m.Error != "" {
				a.logError(ctx, "the model's turn failed: "+m.Error, "")
			}
			if !a.opts.IncludePartialMessages { // no stream: the whole message has the calls
				for _, b := range m.Message.Content {
					if tu, ok := b.(*claude.ToolUseBlock); ok {
						a.queueDaemon(ctx, "tool_use", ToolUseEvent{Type: "tool_use", ToolUseID: tu.ID, Name: tu.Name,
							Input: tu.Input, ParentToolUseID: m.ParentToolUseID})
					}
				}
			}
		case *claude.ResultMessage:
			if m.IsError {
				a.logError(ctx, resultError(m), "")
			}
			rec, sess, err := usage.rec, usage.sess, usage.err
			if err != nil {
				a.d.log.Error("recording usage", "session", a.id, "err", err)
			} else if rec != nil && sess != nil {
				a.logDaemon(ctx, "usage_report", UsageReportEvent{Type: "usage_report", Turn: *rec, Totals: sess.Totals})
				if sess.BudgetExceeded() {
					a.stop(ctx, fmt.Sprintf("budget of $%.4f spent ($%.4f used); the session was stopped", sess.BudgetUSD, sess.Totals.CostUSD))
				}
			}
			if isMainThread(m) {
				a.status(ctx, store.StatusIdle, "")
			}
		}
	}
}

// logStreamUpdate logs what the accumulator made of a stream event.
func (a *actor) logStreamUpdate(ctx context.Context, u claude.StreamUpdate) {
	switch {
	case u.Err != nil:
		a.d.log.Warn("rebuilding a streamed tool input", "session", a.id, "err", u.Err)
		a.logError(ctx, "rebuilding a streamed tool input: "+u.Err.Error(), "")
	case u.ToolUse != nil:
		a.queueDaemon(ctx, "tool_use", ToolUseEvent{Type: "tool_use", ToolUseID: u.ToolUse.ID, Name: u.ToolUse.Name,
			Input: u.ToolUse.Input, ParentToolUseID: u.Thread.ParentToolUseID})
	default:
		a.queueDaemon(ctx, "text_delta", TextDeltaEvent{Type: "text_delta", Text: u.Text, ParentToolUseID: u.Thread.ParentToolUseID})
	}
}

// TextDeltaEvent is the raw line of a piece of streamed text (type
// "text_delta"), logged after the stream_event it comes from.
type TextDeltaEvent struct {
	Type            string `json:"type"` // "text_delta"
	Text            string `json:"text"`
	ParentToolUseID string `json:"parent_tool_use_id,omitempty"`
}

// ToolUseEvent is the raw line of a tool call (type "tool_use"): logged
// after the content_block_stop that completes a streamed one, or after the
// assistant message that holds it when partial messages are off.
type ToolUseEvent struct {
	Type            string          `json:"type"` // "tool_use"
	ToolUseID       string          `json:"tool_use_id"`
	Name            string          `json:"name"`
	Input           json.RawMessage `json:"input"`
	ParentToolUseID string          `json:"parent_tool_use_id,omitempty"`
}

// UsageReportEvent is the raw line logged after a result's usage is recorded
// (type "usage_report"): the turn's share and the session's totals after it.
type UsageReportEvent struct {
	Type   string            `json:"type"` // "usage_report"
	Turn   store.UsageRecord `json:"turn"`
	Totals store.Totals      `json:"totals"`
}

func isMainThread(m claude.Message) bool { return claude.ThreadOf(m).IsMain() }

// messageSubtype is lineKind's subtype without decoding the line again
// for the messages that have none (a stream_event is most of a stream).
func messageSubtype(m claude.Message) string {
	switch m.(type) {
	case *claude.StreamEvent, *claude.AssistantMessage, *claude.UserMessage:
		return ""
	}
	_, sub := lineKind(m.Raw())
	return sub
}

// lineKind returns the "type" of a line and its "subtype", or that of its
// "request" or "response" for control lines.
func lineKind(raw []byte) (typ, subtype string) {
	var v struct {
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
		Request struct {
			Subtype string `json:"subtype"`
		} `json:"request"`
		Response struct {
			Subtype string `json:"subtype"`
		} `json:"response"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return "", ""
	}
	switch {
	case v.Subtype != "":
		return v.Type, v.Subtype
	case v.Request.Subtype != "":
		return v.Type, v.Request.Subtype
	}
	return v.Type, v.Response.Subtype
}

// record stores ev, with upd applied to its session in the same commit
// when not nil, and fans ev out once it is committed. Events are published
// from the store's in-order commit callbacks, so the live order is the seq
// order whichever goroutine logs. With wait, record returns after the
// commit (ev.Seq is set) with its outcome; without, the reader goes on
// while earlier lines commit (many per transaction), failures are logged,
// and ev must not be touched afterwards.
func (a *actor) record(ctx context.Context, ev *store.Event, upd *store.SessionUpdate, wait bool) error {
	var done chan error
	if wait {
		done = make(chan error, 1)
	}
	committed := func(err error) {
		if err == nil {
			a.hub.publish(*ev)
		} else if !wait {
			a.d.log.Error("logging an event", "session", a.id, "type", ev.Type, "err", err)
		}
		if wait {
			done <- err
		}
	}
	var err error
	if upd != nil {
		err = a.d.db.AppendUpdateAsync(ctx, committed, ev, *upd)
	} else {
		err = a.d.db.AppendAsync(ctx, committed, ev)
	}
	switch {
	case err == nil && wait:
		return <-done
	case err != nil && !wait:
		a.d.log.Error("logging an event", "session", a.id, "type", ev.Type, "err", err)
	}
	return err
}

// logEvent stores ev and waits for the commit.
func (a *actor) logEvent(ctx context.Context, ev *store.Event) error {
	return a.record(ctx, ev, nil, true)
}

// queueEvent stores ev without waiting for the commit.
func (a *actor) queueEvent(ctx context.Context, ev *store.Event) {
	a.record(ctx, ev, nil, false)
}

// usageOutcome is what entering a result in the usage ledger gave.
type usageOutcome struct {
	rec  *store.UsageRecord
	sess *store.Session
	err  error
}

// logResult stores a result line together with its usage ledger entry
// and waits for the commit.
func (a *actor) logResult(ctx context.Context, ev *store.Event, m *claude.ResultMessage) usageOutcome {
	done := make(chan usageOutcome, 1)
	err := a.d.db.AppendResultAsync(ctx, func(rec *store.UsageRecord, sess *store.Session, err error) {
		if err == nil {
			a.hub.publish(*ev)
		}
		done <- usageOutcome{rec, sess, err}
	}, ev, store.UsageInput{SessionID: a.id, Process: a.process, Result: m})
	if err != nil {
		return usageOutcome{err: err}
	}
	return <-done
}

// logDaemon logs an event the daemon made itself and waits for its
// commit; v is encoded as its raw line and must have a "type" equal to typ.
func (a *actor) logDaemon(ctx context.Context, typ string, v any) {
	raw, err := json.Marshal(v)
	if err == nil {
		err = a.logEvent(ctx, &store.Event{SessionID: a.id, Direction: store.FromDaemon, Type: typ, Raw: raw})
	}
	if err != nil {
		a.d.log.Error("logging a daemon event", "session", a.id, "type", typ, "err", err)
	}
}

// queueDaemon is logDaemon without waiting for the commit.
func (a *actor) queueDaemon(ctx context.Context, typ string, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		a.d.log.Error("logging a daemon event", "session", a.id, "type", typ, "err", err)
		return
	}
	a.queueEvent(ctx, &store.Event{SessionID: a.id, Direction: store.FromDaemon, Type: typ, Raw: raw})
}

// ErrorEvent is the raw line of something that went wrong in the session
// (type "error"): the CLI failed, a turn ended in error, a streamed tool
// input could not be rebuilt, the budget was spent.
type ErrorEvent struct {
	Type       string `json:"type"` // "error"
	Message    string `json:"message"`
	StderrTail string `json:"stderr_tail,omitempty"`
}

func (a *actor) logError(ctx context.Context, msg, stderrTail string) {
	a.logDaemon(ctx, "error", ErrorEvent{Type: "error", Message: msg, StderrTail: stderrTail})
}

// resultError describes a result that is an error.
func resultError(m *claude.ResultMessage) string {
	msg := "the turn ended in error (" + m.Subtype + ")"
	if len(m.Errors) > 0 {
		msg += ": " + strings.Join(m.Errors, "; ")
	} else if m.Result != "" {
		msg += ": " + m.Result
	}
	return msg
}

// stop ends the session on the daemon's own decision (a spent budget):
// the reason is logged as an error and becomes the closed status's detail.
// It does not wait: it may run on the reader goroutine.
func (a *actor) stop(ctx context.Context, reason string) {
	a.stopMu.Lock()
	first := a.stopMsg == ""
	if first {
		a.stopMsg = reason
	}
	a.stopMu.Unlock()
	if !first {
		return
	}
	a.logError(ctx, reason, "")
	if _, err := a.d.db.UpdateSession(ctx, a.id, store.SessionUpdate{Error: &reason}); err != nil {
		a.d.log.Error("recording why the session stopped", "session", a.id, "err", err)
	}
	a.once.Do(func() { close(a.closing) })
}

// StatusEvent is the raw line of a status change (type "status").
type StatusEvent struct {
	Type   string              `json:"type"` // "status"
	Status store.SessionStatus `json:"status"`
	Detail string              `json:"detail,omitempty"`
}

// status stores a status transition and logs it as an event, in one
// commit. Waiting is stored as running (see store.StatusWaiting); failed
// stores detail as the session's error.
func (a *actor) status(ctx context.Context, st store.SessionStatus, detail string) {
	stored := st
	if st == store.StatusWaiting {
		stored = store.StatusRunning
	}
	var errText *string
	if st == store.StatusFailed {
		errText = &detail
	}
	raw, err := json.Marshal(StatusEvent{Type: "status", Status: st, Detail: detail})
	if err != nil {
		a.d.log.Error("updating status", "session", a.id, "status", st, "err", err)
		return
	}
	ev := &store.Event{SessionID: a.id, Direction: store.FromDaemon, Type: "status", Raw: raw}
	if err := a.record(ctx, ev, &store.SessionUpdate{Status: &stored, Error: errText}, true); err != nil {
		a.d.log.Error("updating status", "session", a.id, "status", st, "err", err)
	}
}

// do runs fn on the actor's goroutine.
func (a *actor) do(ctx context.Context, fn func(context.Context, *claude.Session) error) error {
	reply := make(chan error, 1)
	select {
	case a.cmds <- command{ctx: ctx, fn: fn, reply: reply}:
	case <-a.done:
		return fmt.Errorf("%w: session %s ended", ErrNotRunning, a.id)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *actor) send(ctx context.Context, text string) error {
	return a.do(ctx, func(ctx context.Context, s *claude.Session) error {
		a.status(ctx, store.StatusRunning, "")
		return s.SendText(ctx, text)
	})
}

// ended reports whether the actor's CLI is gone (or never started).
func (a *actor) ended() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// close asks the actor to end and waits for it.
func (a *actor) close() {
	a.once.Do(func() { close(a.closing) })
	<-a.done
}
