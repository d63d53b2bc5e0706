package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// Commands between daemons (a store.Commander shared with a store.Leaser):
// a command for a session that another daemon runs (send, interrupt, set
// model or permission mode, close), or a decision on a permission request
// another daemon holds, is stored for that daemon, which carries it out
// and stores the result; the client's call returns that result, as if it
// had been made on the owner. A command no daemon acknowledges within
// CommandTimeout fails with an error that says so: nothing is done quietly
// or twice (a command is claimed once before it is carried out).

// CommandTimeout bounds how long a command routed to another daemon waits
// for its result once that daemon took it; ClaimTimeout how long it waits
// to be taken (a live owner takes it within milliseconds of the
// notification, a second at most by polling: longer means the owner is
// gone, and its lease will expire).
const (
	CommandTimeout = 30 * time.Second
	ClaimTimeout   = 2 * time.Second
)

// The kinds of routed commands.
const (
	cmdSend      = "send"
	cmdInterrupt = "interrupt"
	cmdModel     = "set_model"
	cmdMode      = "set_permission_mode"
	cmdClose     = "close"
	cmdDecide    = "decide"
)

// commandArgs is every routed command's payload.
type commandArgs struct {
	Text     string    `json:"text,omitempty"`
	By       string    `json:"by,omitempty"`
	Model    string    `json:"model,omitempty"`
	Mode     string    `json:"mode,omitempty"`
	Decision *Decision `json:"decision,omitempty"`
}

// commandResult is a routed command's result.
type commandResult struct {
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
	// Session and Tool describe the request a decide settled; Decision is
	// the decision as the owner stores it (absent from older daemons).
	Session  string          `json:"session,omitempty"`
	Tool     string          `json:"tool,omitempty"`
	Decision *store.Decision `json:"decision,omitempty"`
	// Mode is the permission mode in effect that a set_permission_mode
	// left (absent from older daemons).
	Mode string `json:"mode,omitempty"`
	// Need is how many allows a request needs, when a decide's allow was
	// counted but did not settle it (code approvals_needed).
	Need int `json:"need,omitempty"`
}

// A RemoteError is the failure of a command another daemon carried out:
// its message, and the error it stands for (errors.Is works as on the
// owner).
type RemoteError struct {
	Daemon string
	Msg    string
	err    error
}

func (e *RemoteError) Error() string { return e.Msg + " (on daemon " + e.Daemon + ")" }
func (e *RemoteError) Unwrap() error { return e.err }

// errorCodes maps the errors a command can fail with to the codes stored
// with its result, and back.
var errorCodes = []struct {
	code string
	err  error
}{
	{"not_found", store.ErrNotFound},
	{"unavailable", store.ErrWriteFailed},
	{"not_owner", store.ErrNotOwner},
	{"invalid", store.ErrInvalid},
	{"not_running", ErrNotRunning},
	{"already_running", ErrAlreadyRunning},
	{"not_pending", permission.ErrNotPending},
	{"resolved", permission.ErrAlreadyResolved},
	{"invalid_decision", permission.ErrInvalidDecision},
	{"closed", ErrClosed},
	{"not_asked", ErrNotAsked},
	{"approvals_needed", permission.ErrApprovalsNeeded},
}

func codeOf(err error) string {
	var ia *InvalidArgumentError
	if errors.As(err, &ia) {
		return "invalid"
	}
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

func errOfCode(code string) error {
	for _, c := range errorCodes {
		if c.code == code {
			return c.err
		}
	}
	return nil
}

// commander is the store's, when commands can be routed.
func (d *Daemon) commander() store.Commander {
	c, ok := d.db.(store.Commander)
	if !ok || d.lease == nil {
		return nil
	}
	return c
}

// routed carries a command to the daemon that runs the session (or, with
// owner "", to whichever holds the request), when err says another does;
// handled is false when err is not that (the caller returns err as is).
func (d *Daemon) routed(ctx context.Context, err error, id, kind string, args commandArgs) (res *commandResult, handled bool, _ error) {
	var oe *OwnedElsewhereError
	if !errors.As(err, &oe) || d.commander() == nil || oe.Owner == "" {
		return nil, false, err
	}
	res, err = d.route(ctx, oe.Owner, id, kind, args, ClaimTimeout)
	if errors.Is(err, errUnclaimed) {
		// Its owner did not take it: it is likely dead, and the session
		// free once the lease expires.
		err = fmt.Errorf("%w: session %s runs under daemon %s, which did not answer (its lease runs until %s; after that any daemon resumes the session)",
			store.ErrNotOwner, id, oe.Owner, oe.Until.UTC().Format(time.RFC3339))
	}
	return res, true, err
}

// route stores a command and waits for its result, at most timeout for a
// daemon to claim it.
func (d *Daemon) route(ctx context.Context, owner, id, kind string, args commandArgs, timeout time.Duration) (*commandResult, error) {
	c := d.commander()
	payload, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	cmd := &store.Command{Owner: owner, Session: id, Kind: kind, Payload: payload}
	if err := c.SendCommand(ctx, cmd); err != nil {
		return nil, err
	}
	d.log.Info("command sent to another daemon", "session", id, "command", kind, "daemon", owner, "id", cmd.ID)
	raw, err := d.waitCommand(ctx, c, cmd, timeout)
	if err != nil {
		return nil, err
	}
	var res commandResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("daemon: the result of command %d: %w", cmd.ID, err)
	}
	if res.Error != "" {
		return &res, &RemoteError{Daemon: cmp.Or(owner, "another daemon"), Msg: res.Error, err: errOfCode(res.Code)}
	}
	return &res, nil
}

// decideTimeout is how long a decision on a request this daemon does not
// hold waits for the daemon that holds it to claim it.
const decideTimeout = 3 * time.Second

// errUnclaimed: no daemon claimed a command in time; it was withdrawn.
var errUnclaimed = errors.New("no daemon took the command")

// waitCommand waits for cmd's result. If no daemon has claimed it after
// timeout, it is withdrawn (nothing was done, and nothing will be: the
// error says so); once claimed, it is waited for up to CommandTimeout more.
func (d *Daemon) waitCommand(ctx context.Context, c store.Commander, cmd *store.Command, timeout time.Duration) (json.RawMessage, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	raw, err := c.WaitCommand(wctx, cmd.ID)
	cancel()
	if err == nil || (!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)) {
		return raw, err
	}
	// Not claimed in time, or the client gave up: withdraw it, so that it
	// is never carried out after the client was told it failed.
	withdrawn, werr := c.WithdrawCommand(context.WithoutCancel(ctx), cmd.ID)
	if werr != nil {
		return nil, werr
	}
	if withdrawn {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (the %s command was withdrawn before any daemon took it: nothing was done)", ctx.Err(), cmd.Kind)
		}
		who := "daemon " + cmd.Owner
		if cmd.Owner == "" {
			who = "no daemon"
		}
		return nil, fmt.Errorf("%w: %s took the %s command for session %s within %s; it was withdrawn, nothing was done",
			errUnclaimed, who, cmd.Kind, cmd.Session, timeout)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w (daemon %s had already taken the %s command; it may complete)", ctx.Err(), cmd.Owner, cmd.Kind)
	}
	wctx, cancel = context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	raw, err = c.WaitCommand(wctx, cmd.ID)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, fmt.Errorf("%w: daemon %s took the %s command for session %s but gave no result within %s",
			store.ErrWriteFailed, cmd.Owner, cmd.Kind, cmd.Session, CommandTimeout)
	}
	return raw, err
}

// serveCommands carries out the commands other daemons send this one,
// until it closes.
func (d *Daemon) serveCommands() {
	defer close(d.commandsDone)
	c := d.commander()
	wake, stop := c.WatchCommands()
	defer stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-wake:
		}
		cmds, err := c.OpenCommands(d.ctx)
		if err != nil {
			if d.ctx.Err() == nil {
				d.log.Warn("reading the commands of other daemons", "err", err)
			}
			continue
		}
		for _, cmd := range cmds {
			if cmd.Owner == "" && !d.holdsRequest(cmd) {
				continue // for whichever daemon holds the request: not this one
			}
			ok, err := c.ClaimCommand(d.ctx, cmd.ID)
			if err != nil || !ok {
				continue
			}
			d.commands.Go(func() { d.carryOut(c, cmd) })
		}
	}
}

// holdsRequest reports whether a decide command names a request of this
// daemon's broker.
func (d *Daemon) holdsRequest(cmd *store.Command) bool {
	var args commandArgs
	if cmd.Kind != cmdDecide || json.Unmarshal(cmd.Payload, &args) != nil || args.Decision == nil {
		return false
	}
	for _, p := range d.broker.Pending("") {
		if p.Request.RequestID == args.Decision.RequestID {
			return true
		}
	}
	return false
}

// carryOut runs a claimed command and stores its result.
func (d *Daemon) carryOut(c store.Commander, cmd *store.Command) {
	ctx, cancel := context.WithTimeout(d.ctx, CommandTimeout)
	defer cancel()
	var args commandArgs
	var res commandResult
	err := json.Unmarshal(cmd.Payload, &args)
	if err == nil {
		d.log.Info("carrying out a command of another daemon", "session", cmd.Session, "command", cmd.Kind,
			"daemon", cmd.Sender, "id", cmd.ID)
		switch cmd.Kind {
		case cmdSend:
			err = d.Send(ctx, cmd.Session, args.Text)
		case cmdInterrupt:
			err = d.Interrupt(ctx, cmd.Session, args.By)
		case cmdModel:
			err = d.SetModel(ctx, cmd.Session, args.Model)
		case cmdMode:
			res.Mode, err = d.SetPermissionMode(ctx, cmd.Session, args.Mode)
		case cmdClose:
			err = d.CloseSession(ctx, cmd.Session, args.By)
		case cmdDecide:
			if args.Decision == nil {
				err = &InvalidArgumentError{Field: "decision", Reason: "required"}
				break
			}
			res.Decision, _, err = d.Decide(ctx, *args.Decision)
			if res.Decision != nil {
				res.Session, res.Tool = res.Decision.SessionID, res.Decision.ToolName
			}
			if more := (*permission.ApprovalsNeededError)(nil); errors.As(err, &more) {
				res.Need = more.Need
			}
		default:
			err = fmt.Errorf("%w: unknown command %q", store.ErrInvalid, cmd.Kind)
		}
	}
	if err != nil {
		res.Error, res.Code = err.Error(), codeOf(err)
	}
	raw, _ := json.Marshal(res)
	if err := c.FinishCommand(context.WithoutCancel(ctx), cmd.ID, raw); err != nil {
		d.log.Error("storing the result of another daemon's command", "id", cmd.ID, "err", err)
	}
}

// remoteDecide asks the daemon holding a request this one does not hold
// to settle it.
func (d *Daemon) remoteDecide(ctx context.Context, dec Decision) (*store.Decision, error) {
	res, err := d.route(ctx, "", "", cmdDecide, commandArgs{Decision: &dec}, decideTimeout)
	if errors.Is(err, errUnclaimed) {
		return nil, fmt.Errorf("%w: no daemon holds request %s", permission.ErrNotPending, dec.RequestID)
	}
	if errors.Is(err, permission.ErrApprovalsNeeded) && res != nil && res.Decision != nil {
		more := &permission.ApprovalsNeededError{RequestID: dec.RequestID, Need: res.Need}
		for _, by := range res.Decision.ApprovedBy {
			more.Approvals = append(more.Approvals, permission.Approval{By: by})
		}
		return res.Decision, more
	}
	if err != nil {
		return nil, err
	}
	if res.Decision == nil { // an older daemon: what it said
		b, by := "deny", clientName(dec.Client)
		if dec.Allow {
			b = "allow"
		}
		return &store.Decision{SessionID: res.Session, RequestID: dec.RequestID, ToolName: res.Tool,
			Behavior: b, By: by, Message: dec.Message, DecidedAt: time.Now()}, nil
	}
	return res.Decision, nil
}
