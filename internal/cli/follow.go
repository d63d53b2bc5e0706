package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claude"
)

// This file follows a daemon session's event log for attach and
// run --server: it renders the events as run renders its own stream, puts
// the pending permission requests to the user and answers them through the
// PermissionService, and subscribes again from the last event seen when
// the daemon drops the stream.

// reconnectTimeout is how long a follower keeps trying to reach the daemon
// after losing it; mutable for testing.
var reconnectTimeout = 2 * time.Minute

// errStreamEnded is follow's error when the daemon ended the stream: the
// session has no CLI any more (closed, failed, or never resumed).
var errStreamEnded = errors.New("the session's event stream ended")

// follower follows one session. Its fields are set before follow and not
// changed after; the state below them belongs to follow's goroutine unless
// a comment says otherwise.
type follower struct {
	env *Env
	dc  *daemonClient
	id  string // the session

	// Output: one of asJSON (attach --json: every event as a JSON line),
	// raw (run --output-format stream-json: the CLI's lines) or render.
	asJSON bool
	raw    bool
	render *renderer
	tools  *toolLog

	// attach shows what run leaves out: the user's prompts, status
	// changes, usage reports, errors, and every permission request and
	// decision.
	attach  bool
	verbose bool

	// decide answers a pending permission request (nil: show it, do not
	// answer); client names this claudectl in the decision's audit.
	decide claude.CanUseToolFunc
	client string

	// onMessage sees every CLI message in order; true stops follow.
	onMessage func(claude.Message) bool

	lastSeq int64
	status  v1.SessionStatus // the last status change seen
	detail  string           // its detail
	hint    string           // of the last error event that had one (credentials)
	buf     []byte

	mu     sync.Mutex
	asking map[string]*asking // requests being put to the user; guarded by mu
	// interruptedBy names the client that interrupted the turn; guarded by mu
	// while following, read after.
	interruptedBy string
	wg            sync.WaitGroup // the asking goroutines
}

// asking is one request being put to the user.
type asking struct {
	cancel    context.CancelFunc // withdraws the question
	prompting bool               // the user is being asked; guarded by follower.mu
	winner    *v1.Decision       // set when the request was resolved; guarded by follower.mu
}

// follow subscribes to the session after f.lastSeq and handles its events
// until onMessage says stop (nil), the stream ends (errStreamEnded), ctx
// ends (its error) or the daemon cannot be reached or refuses (an error to
// report). A dropped or lost stream is subscribed again from the last event
// seen, with backoff.
func (f *follower) follow(ctx context.Context) error {
	const minBackoff, maxBackoff = 100 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	var lostAt time.Time
	for {
		stop, got, err := f.subscribe(ctx)
		switch {
		case stop:
			return nil
		case err == nil:
			return errStreamEnded
		case ctx.Err() != nil:
			return ctx.Err()
		}
		if got {
			backoff, lostAt = minBackoff, time.Time{}
		}
		var ce *connect.Error
		switch {
		case errors.As(err, &ce) && ce.Code() == connect.CodeResourceExhausted, streamReset(err):
			// The daemon ends the stream of a client that stopped reading
			// (daemon.stream_write_timeout): this one, held up by a
			// terminal that did not take its output, say.
			fmt.Fprintf(f.env.Stderr, "claudectl: the daemon ended this client's stream (it had stopped reading); catching up from event %d\n", f.lastSeq+1)
			backoff = minBackoff
		case transient(err):
			if lostAt.IsZero() {
				lostAt = time.Now()
				if errors.As(err, &ce) && connect.IsWireError(ce) && ce.Code() == connect.CodeUnavailable {
					// The daemon answered: it cannot serve the session now
					// (its store cannot write, say), and says why.
					fmt.Fprintf(f.env.Stderr, "claudectl: the daemon cannot follow session %s now: %s; trying again\n", f.id, userMessage(ce.Message()))
				} else {
					fmt.Fprintf(f.env.Stderr, "claudectl: lost the daemon at %s (%v); reconnecting\n", f.dc.addr, err)
				}
			} else if time.Since(lostAt) > reconnectTimeout {
				return f.dc.explain(err, fmt.Sprintf("following session %s", f.id))
			}
		default:
			return f.dc.explain(err, fmt.Sprintf("following session %s", f.id))
		}
		// Jitter keeps many clients of a restarted daemon apart.
		d := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// subscribe reads one subscription; got says whether it delivered events.
func (f *follower) subscribe(ctx context.Context) (stop, got bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := f.dc.sessions.Subscribe(sctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: f.id, AfterSeq: f.lastSeq}))
	if err != nil {
		return false, false, err
	}
	defer stream.Close()
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		if ev == nil || ev.Seq <= f.lastSeq {
			continue
		}
		got = true
		f.lastSeq = ev.Seq
		if f.handle(ctx, ev) {
			return true, got, nil
		}
	}
	return false, got, stream.Err()
}

// transient reports whether err means the daemon went away or the
// connection broke, rather than that it refused.
func transient(err error) bool {
	if isDialError(err) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeAborted:
		return true
	}
	return false
}

// streamReset reports whether err is an HTTP/2 stream the daemon reset
// (RST_STREAM INTERNAL_ERROR, which Connect reports as Internal): what a
// stream ended for a stalled client looks like over HTTP/2, its message
// being cut short.
func streamReset(err error) bool {
	return connect.CodeOf(err) == connect.CodeInternal && strings.Contains(err.Error(), "INTERNAL_ERROR; received from peer")
}

// handle shows one event and acts on it; true stops follow.
func (f *follower) handle(ctx context.Context, ev *v1.Event) bool {
	if f.asJSON {
		f.printJSON(ev)
	}
	switch k := ev.Kind.(type) {
	case *v1.Event_Message:
		return f.message(k.Message)
	case *v1.Event_TextDelta, *v1.Event_ToolUse:
		// Shown from the CLI's own messages, as run shows them.
	case *v1.Event_PermissionRequest:
		f.permissionRequest(ctx, k.PermissionRequest)
	case *v1.Event_PermissionResolved:
		f.permissionResolved(k.PermissionResolved)
	case *v1.Event_UsageReport:
		if !f.asJSON && (f.attach || f.verbose) {
			f.endLine()
			fmt.Fprintf(f.env.Stderr, "claudectl: usage: %s\n", usageText(k.UsageReport))
		}
	case *v1.Event_StatusChange:
		f.statusChange(k.StatusChange.GetStatus(), k.StatusChange.GetDetail())
	case *v1.Event_Error:
		if h := k.Error.GetHint(); h != "" {
			f.hint = h
		}
		f.showError(k.Error.GetMessage(), k.Error.GetStderrTail(), k.Error.GetHint())
	case *v1.Event_Interrupted:
		f.mu.Lock()
		f.interruptedBy = k.Interrupted.GetBy()
		f.mu.Unlock()
		if !f.asJSON && f.attach { // run says it as it ends
			f.endLine()
			fmt.Fprintf(f.env.Stderr, "claudectl: turn interrupted by %s\n", k.Interrupted.GetBy())
		}
	case *v1.Event_PermissionMode:
		if !f.asJSON && f.attach {
			f.endLine()
			fmt.Fprintf(f.env.Stderr, "claudectl: %s\n", modeChangeText(k.PermissionMode))
		}
	case *v1.Event_Gap:
		if !f.asJSON {
			g := k.Gap
			f.endLine()
			if g.GetFrom() == nil { // not a failure: retention removed them
				fmt.Fprintf(f.env.Stderr, "claudectl: %d earlier events of this session are gone: %s\n", g.GetLost(), g.GetReason())
				break
			}
			fmt.Fprintf(f.env.Stderr, "claudectl: warning: %d events of this session were lost between %s and %s: %s\n",
				g.GetLost(), g.GetFrom().AsTime().Local().Format(time.TimeOnly), g.GetTo().AsTime().Local().Format(time.TimeOnly), g.GetReason())
		}
	}
	return false
}

// modeChangeText says a change of the permission mode in effect.
func modeChangeText(c *v1.PermissionModeChange) string {
	switch {
	case c.GetRequested() == "":
		return "permission mode now " + c.GetMode() + " (changed by Claude Code)"
	case c.GetRequested() != c.GetMode():
		return "permission mode now " + c.GetMode() + " (" + c.GetRequested() + " was asked for)"
	}
	return "permission mode now " + c.GetMode()
}

// message handles a line the CLI printed, or one written to it (to_cli: of
// those only the user's prompts are shown, by attach).
func (f *follower) message(msg *v1.Message) bool {
	m, err := claude.DecodeMessage(msg.Raw)
	if err != nil {
		return false
	}
	if msg.ToCli {
		if f.attach && f.render != nil {
			if p := userPrompt(m); p != "" {
				f.showPrompt(p)
			}
		}
		return false
	}
	switch {
	case f.asJSON:
	case f.raw:
		f.buf = append(append(f.buf[:0], msg.Raw...), '\n')
		f.env.Stdout.Write(f.buf)
	default:
		f.render.handle(m)
		if _, ok := m.(*claude.ResultMessage); ok && claude.ThreadOf(m).IsMain() {
			f.render.finish()
		}
	}
	if r, ok := m.(*claude.APIRetry); ok && !f.asJSON {
		what := fmt.Sprintf("API error %d (%s)", r.ErrorStatus, r.Error)
		if r.ErrorStatus == 0 {
			what = "could not reach the API"
		}
		fmt.Fprintf(f.env.Stderr, "claudectl: %s, retrying in %.1fs (attempt %d of %d)\n", what, float64(r.RetryDelayMS)/1000, r.Attempt, r.MaxRetries)
	}
	return f.onMessage != nil && f.onMessage(m)
}

// userPrompt returns the text of a user message written to the CLI, "" if
// it is not all text.
func userPrompt(m claude.Message) string {
	u, ok := m.(*claude.UserMessage)
	if !ok || u.ParentToolUseID != "" {
		return ""
	}
	for _, b := range u.Message.Content.Blocks {
		if _, ok := b.(*claude.TextBlock); !ok {
			return ""
		}
	}
	return strings.TrimSpace(u.Message.Content.String())
}

// showPrompt prints a user's prompt in the transcript: "> text".
func (f *follower) showPrompt(text string) {
	r := f.render
	r.endLine()
	if r.last != printedNothing {
		r.write("\n")
	}
	for _, l := range strings.Split(text, "\n") {
		r.write("> " + l + "\n")
	}
	r.last = printedPrompt // the reply is set apart by a blank line
}

// endLine ends the transcript's line before something goes to stderr.
func (f *follower) endLine() {
	if f.render != nil {
		f.render.endLine()
	}
}

func (f *follower) statusChange(st v1.SessionStatus, detail string) {
	if st == v1.SessionStatus_SESSION_STATUS_UNSPECIFIED {
		return // a status this claudectl does not know
	}
	changed := st != f.status || detail != f.detail
	f.status, f.detail = st, detail
	if f.render != nil {
		switch st {
		case v1.SessionStatus_SESSION_STATUS_RUNNING:
			f.render.status.waiting(false)
		case v1.SessionStatus_SESSION_STATUS_WAITING:
			f.render.status.waiting(true)
		case v1.SessionStatus_SESSION_STATUS_STARTING, v1.SessionStatus_SESSION_STATUS_QUEUED:
			f.render.status.set(statusName(st))
		case v1.SessionStatus_SESSION_STATUS_BUDGET:
			f.render.status.set("waiting for budget")
		default:
			f.render.status.idle()
		}
	}
	// A session held at a spend cap is said always: run --server waits
	// for an approver, and should say for what.
	held := st == v1.SessionStatus_SESSION_STATUS_BUDGET
	if f.asJSON || !changed || !(f.attach || f.verbose || held) {
		return
	}
	switch st {
	case v1.SessionStatus_SESSION_STATUS_WAITING:
		detail = "" // the tool's name: the request says more
	case v1.SessionStatus_SESSION_STATUS_IDLE, v1.SessionStatus_SESSION_STATUS_CLOSED:
		f.endLine()
	}
	if st == v1.SessionStatus_SESSION_STATUS_CLOSED && f.attach {
		return // attach says it as it ends (ended), with why
	}
	if detail != "" {
		fmt.Fprintf(f.env.Stderr, "claudectl: session %s: %s\n", statusName(st), userMessage(detail))
		return
	}
	fmt.Fprintf(f.env.Stderr, "claudectl: session %s\n", statusName(st))
}

// showError shows an error event of the session (attach, run --verbose);
// run --server says its hint as the run ends, as a local run does.
func (f *follower) showError(msg, tail, hint string) {
	if f.asJSON || !(f.attach || f.verbose) {
		return
	}
	f.endLine()
	fmt.Fprintf(f.env.Stderr, "claudectl: error: %s\n", userMessage(msg))
	if tail = strings.TrimSpace(tail); tail != "" {
		fmt.Fprintf(f.env.Stderr, "claudectl: its stderr: %s\n", tail)
	}
	if hint != "" && f.attach {
		fmt.Fprintf(f.env.Stderr, "claudectl: hint: %s\n", hint)
	}
}

// usageText is a usage report in one line.
func usageText(u *v1.UsageReport) string {
	t := u.GetTurn()
	s := fmt.Sprintf("turn $%.4f · %d in, %d out tokens", t.GetCostUsd(), t.GetInputTokens(), t.GetOutputTokens())
	if t.GetCacheReadInputTokens() > 0 || t.GetCacheCreationInputTokens() > 0 {
		s += fmt.Sprintf(" (cache: %d read, %d written)", t.GetCacheReadInputTokens(), t.GetCacheCreationInputTokens())
	}
	if tot := u.GetSessionTotals(); tot != nil {
		s += fmt.Sprintf(" · session $%.4f", tot.GetCostUsd())
	}
	return s
}

// permissionRequest shows a request and, if this follower answers,
// puts it to the user once the daemon confirms it is still pending.
func (f *follower) permissionRequest(ctx context.Context, pr *v1.PermissionRequest) {
	req := &claude.PermissionRequest{RequestID: pr.RequestId, ToolName: pr.ToolName, Input: pr.Input,
		ToolUseID: pr.ToolUseId, Description: pr.Description, DecisionReason: pr.DecisionReason}
	if len(pr.Suggestions) > 0 {
		_ = json.Unmarshal(pr.Suggestions, &req.Suggestions)
	}
	if len(req.Input) == 0 {
		req.Input = json.RawMessage("{}")
	}
	if f.attach && !f.asJSON {
		f.endLine()
		what := pr.ToolName
		if s := toolSummary(pr.ToolName, req.Input); s != "" {
			what += ": " + s
		}
		fmt.Fprintf(f.env.Stderr, "claudectl: permission request %s: %s\n", pr.RequestId, what)
	}
	if f.decide == nil {
		return
	}
	f.mu.Lock()
	if f.asking == nil {
		f.asking = map[string]*asking{}
	}
	if _, ok := f.asking[pr.RequestId]; ok {
		f.mu.Unlock()
		return
	}
	actx, cancel := context.WithCancel(ctx)
	a := &asking{cancel: cancel}
	f.asking[pr.RequestId] = a
	f.mu.Unlock()
	actx = context.WithValue(actx, alwaysKey{}, describeAlways(pr))
	f.wg.Go(func() {
		defer cancel()
		f.ask(ctx, actx, a, req)
		f.mu.Lock()
		delete(f.asking, pr.RequestId)
		f.mu.Unlock()
	})
}

// ask puts req to the user (actx ends if someone else resolves it) and
// sends the answer (within ctx).
func (f *follower) ask(ctx, actx context.Context, a *asking, req *claude.PermissionRequest) {
	if !f.pending(actx, req.RequestID) {
		return // resolved already, or the session is gone
	}
	f.mu.Lock()
	a.prompting = a.winner == nil
	f.mu.Unlock()
	if !a.prompting {
		return
	}
	res, err := f.decide(actx, req)
	if err != nil {
		f.mu.Lock()
		w := a.winner
		f.mu.Unlock()
		switch {
		case w != nil && w.GetBehavior() == v1.Behavior_BEHAVIOR_UNSPECIFIED:
			fmt.Fprintf(f.env.Stderr, "claudectl: the %s request was %s\n", req.ToolName, decisionText(w))
		case w != nil && len(w.GetAnswers()) > 0:
			fmt.Fprintf(f.env.Stderr, "claudectl: %s was answered first by %s: %s\n", req.ToolName, w.GetDecidedBy(), answersText(w.GetAnswers()))
		case w != nil:
			fmt.Fprintf(f.env.Stderr, "claudectl: %s was decided first by %s: %s\n", req.ToolName, w.GetDecidedBy(), behaviorName(w.GetBehavior()))
		case ctx.Err() == nil:
			fmt.Fprintf(f.env.Stderr, "claudectl: request %s (%s) not answered: %v\n", req.RequestID, req.ToolName, err)
		}
		return
	}
	dr := &v1.DecideRequest{RequestId: req.RequestID, Client: f.client}
	switch {
	case !res.Allow:
		dr.Behavior, dr.Message = v1.Behavior_BEHAVIOR_DENY, res.Message
	case req.ToolName == "AskUserQuestion":
		var in struct {
			Answers map[string]string `json:"answers"`
		}
		_ = json.Unmarshal(res.UpdatedInput, &in)
		dr.Behavior, dr.Answers = v1.Behavior_BEHAVIOR_ALLOW, in.Answers
	default:
		dr.Behavior, dr.Always = v1.Behavior_BEHAVIOR_ALLOW, len(res.UpdatedPermissions) > 0
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = f.dc.perms.Decide(dctx, connect.NewRequest(dr))
	var ce *connect.Error
	switch {
	case err == nil:
	case errors.As(err, &ce) && ce.Code() == connect.CodeFailedPrecondition && strings.Contains(ce.Message(), "already"):
		fmt.Fprintf(f.env.Stderr, "claudectl: too late for %s: %s (the first decision wins)\n", req.ToolName, strings.TrimPrefix(ce.Message(), "permission: "))
	case ctx.Err() == nil:
		fmt.Fprintf(f.env.Stderr, "claudectl: %v\n", f.dc.explain(err, fmt.Sprintf("answering request %s", req.RequestID)))
	}
}

// pending reports whether the daemon holds request id for a person. The
// daemon logs a request just before it holds it, so a request not held yet
// is asked about again for a while; a replayed request that was resolved
// meanwhile ends ctx through permissionResolved.
func (f *follower) pending(ctx context.Context, id string) bool {
	for _, d := range []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond} {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return false
		}
		res, err := f.dc.perms.ListPending(ctx, connect.NewRequest(&v1.ListPendingRequest{SessionId: f.id}))
		if err != nil {
			continue
		}
		for _, p := range res.Msg.Requests {
			if p.RequestId == id {
				return true
			}
		}
	}
	return false
}

// permissionResolved withdraws the question about a request someone
// resolved, and shows the decision.
func (f *follower) permissionResolved(pr *v1.PermissionResolved) {
	d := pr.GetDecision()
	f.mu.Lock()
	a := f.asking[pr.RequestId]
	prompting := false
	if a != nil {
		a.winner, prompting = d, a.prompting
	}
	f.mu.Unlock()
	if a != nil {
		a.cancel()
	}
	// A question being asked says itself who won.
	if !f.attach || f.asJSON || prompting || d.GetDecidedBy() == "client:"+f.client {
		return
	}
	f.endLine()
	fmt.Fprintf(f.env.Stderr, "claudectl: request %s (%s) %s\n", pr.RequestId, d.GetToolName(), decisionText(d))
}

// decisionText says how a request ended, in the user's words: "allowed by
// client:alice", "answered by client:alice: "Files"" (a question), "denied
// by rule:3", "withdrawn: the turn was interrupted or the session ended".
// A withdrawn request has no behavior; its decided_by names the daemon's
// reason, which means nothing to the user.
func decisionText(d *v1.Decision) string {
	switch d.GetBehavior() {
	case v1.Behavior_BEHAVIOR_ALLOW:
		if len(d.GetAnswers()) > 0 {
			return "answered by " + d.GetDecidedBy() + ": " + answersText(d.GetAnswers())
		}
		return "allowed by " + d.GetDecidedBy()
	case v1.Behavior_BEHAVIOR_DENY:
		return "denied by " + d.GetDecidedBy()
	}
	switch d.GetDecidedBy() {
	case "context", "cli", "withdrawn":
		// The CLI withdrew it (control_cancel_request), or its session
		// ended: the permission.Broker's words for either.
		return "withdrawn: the turn was interrupted or the session ended"
	case "broker":
		return "withdrawn: the daemon stopped"
	}
	return "withdrawn (" + d.GetDecidedBy() + ")"
}

// answersText is an AskUserQuestion's answers in one line: the answer,
// quoted ("Files"), or with several questions each question's ("Which
// part?" "Files"; ...), in the questions' order of text.
func answersText(answers map[string]string) string {
	if len(answers) == 1 {
		for _, a := range answers {
			return strconv.Quote(oneLine(a))
		}
	}
	parts := make([]string, 0, len(answers))
	for _, q := range slices.Sorted(maps.Keys(answers)) {
		parts = append(parts, strconv.Quote(oneLine(q))+" "+strconv.Quote(oneLine(answers[q])))
	}
	return strings.Join(parts, "; ")
}

// stopAsking withdraws every question and waits for the asking goroutines.
func (f *follower) stopAsking() {
	f.mu.Lock()
	for _, a := range f.asking {
		a.cancel()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// finalStatus returns the status of a session whose stream ended, and why
// it ended: the daemon's word if it can be asked, else the last status
// change seen.
func (f *follower) finalStatus(ctx context.Context) (v1.SessionStatus, string) {
	st, detail := f.status, f.detail
	if res, err := f.dc.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: f.id})); err == nil {
		s := res.Msg.Session
		if s.Status != st {
			st, detail = s.Status, ""
		}
		if detail == "" {
			detail = s.Error
		}
	}
	return st, userMessage(strings.TrimSpace(detail))
}

// clientName names this claudectl in decisions and interrupts, so that
// "decided first by" says who: "claudectl approve (alice@host, pid N)".
func clientName(cmd string) string {
	who := ""
	if u, err := user.Current(); err == nil {
		who = clipRunes(u.Username, 32) + "@"
	}
	host, _ := os.Hostname()
	// Within the daemon's 128 bytes for a client's name.
	return fmt.Sprintf("claudectl %s (%s%s, pid %d)", cmd, who, clipRunes(host, 48), os.Getpid())
}

// clipRunes is s cut to at most n bytes, on a rune boundary.
func clipRunes(s string, n int) string {
	for len(s) > n {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// eventJSON is one event as attach --json prints it: the CLI's lines as
// they are, the daemon's events with their fields.
type eventJSON struct {
	SessionID string    `json:"session_id"`
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Type      string    `json:"type"`

	Message      json.RawMessage   `json:"message,omitempty"`       // message: the line
	ToCLI        bool              `json:"to_cli,omitempty"`        // message: written to the CLI
	OriginalSize int64             `json:"original_size,omitempty"` // message: when truncated
	Text         string            `json:"text,omitempty"`          // text_delta
	ParentToolID string            `json:"parent_tool_use_id,omitempty"`
	RequestID    string            `json:"request_id,omitempty"` // permission_*
	ToolUseID    string            `json:"tool_use_id,omitempty"`
	Name         string            `json:"name,omitempty"` // tool_use, permission_*: the tool
	Input        json.RawMessage   `json:"input,omitempty"`
	Description  string            `json:"description,omitempty"`
	Reason       string            `json:"decision_reason,omitempty"`
	Suggestions  json.RawMessage   `json:"suggestions,omitempty"`
	Behavior     string            `json:"behavior,omitempty"` // permission_resolved
	DecidedBy    string            `json:"decided_by,omitempty"`
	Answers      map[string]string `json:"answers,omitempty"` // permission_resolved: a question's
	Turn         json.RawMessage   `json:"turn,omitempty"`    // usage_report
	Totals       json.RawMessage   `json:"session_totals,omitempty"`
	Status       string            `json:"status,omitempty"` // status
	Detail       string            `json:"detail,omitempty"`
	Error        string            `json:"error,omitempty"` // error; also permission_resolved's message
	StderrTail   string            `json:"stderr_tail,omitempty"`
	Hint         string            `json:"hint,omitempty"` // error: what to do (credentials)
	Lost         int64             `json:"lost,omitempty"` // gap: events that could not be stored
	Mode         string            `json:"mode,omitempty"` // permission_mode: in effect
	Requested    string            `json:"requested,omitempty"`
}

func (f *follower) printJSON(ev *v1.Event) {
	j := eventJSON{SessionID: ev.SessionId, Seq: ev.Seq, Time: ev.GetTime().AsTime()}
	switch k := ev.Kind.(type) {
	case *v1.Event_Message:
		j.Type = "message"
		j.Message, j.ToCLI = jsonOrString(k.Message.Raw), k.Message.ToCli
		j.OriginalSize = k.Message.OriginalSize
	case *v1.Event_TextDelta:
		j.Type, j.Text, j.ParentToolID = "text_delta", k.TextDelta.Text, k.TextDelta.ParentToolUseId
	case *v1.Event_ToolUse:
		t := k.ToolUse
		j.Type, j.ToolUseID, j.Name, j.Input, j.ParentToolID = "tool_use", t.ToolUseId, t.Name, jsonOrString(t.Input), t.ParentToolUseId
	case *v1.Event_PermissionRequest:
		p := k.PermissionRequest
		j.Type, j.RequestID, j.Name, j.ToolUseID = "permission_request", p.RequestId, p.ToolName, p.ToolUseId
		j.Input, j.Description, j.Reason, j.Suggestions = jsonOrString(p.Input), p.Description, p.DecisionReason, jsonOrString(p.Suggestions)
	case *v1.Event_PermissionResolved:
		d := k.PermissionResolved.GetDecision()
		j.Type, j.RequestID, j.Name = "permission_resolved", k.PermissionResolved.RequestId, d.GetToolName()
		j.Behavior, j.DecidedBy, j.Error, j.Answers = behaviorName(d.GetBehavior()), d.GetDecidedBy(), d.GetMessage(), d.GetAnswers()
	case *v1.Event_UsageReport:
		j.Type, j.Turn, j.Totals = "usage_report", protoJSON(k.UsageReport.Turn), protoJSON(k.UsageReport.SessionTotals)
	case *v1.Event_StatusChange:
		j.Type, j.Status, j.Detail = "status", statusName(k.StatusChange.Status), k.StatusChange.Detail
	case *v1.Event_Error:
		j.Type, j.Error, j.StderrTail, j.Hint = "error", k.Error.Message, k.Error.StderrTail, k.Error.Hint
	case *v1.Event_Interrupted:
		j.Type, j.DecidedBy = "interrupted", k.Interrupted.By
	case *v1.Event_Gap:
		j.Type, j.Lost, j.Detail = "gap", k.Gap.Lost, k.Gap.Reason
	case *v1.Event_PermissionMode:
		j.Type, j.Mode, j.Requested = "permission_mode", k.PermissionMode.Mode, k.PermissionMode.Requested
	default:
		j.Type = "unknown"
	}
	b, err := json.Marshal(j)
	if err != nil {
		return
	}
	f.env.Stdout.Write(append(b, '\n'))
}

// jsonOrString returns b if it is JSON, else b as a JSON string.
func jsonOrString(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}

func protoJSON(m proto.Message) json.RawMessage {
	if m == nil {
		return nil
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil
	}
	return b
}

// watchInterrupt returns a ctx that ends at the first Ctrl-C
// (env.Interrupts) and a flag saying whether one came; stop ends the
// watching (and ctx) and waits for it.
func watchInterrupt(ctx context.Context, env *Env) (_ context.Context, hit *atomic.Bool, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	hit = new(atomic.Bool)
	done := make(chan struct{})
	var wg sync.WaitGroup
	if env.Interrupts != nil {
		wg.Go(func() {
			select {
			case <-env.Interrupts:
				hit.Store(true)
				cancel()
			case <-done:
			}
		})
	}
	return ctx, hit, func() {
		close(done)
		wg.Wait()
		cancel()
	}
}
