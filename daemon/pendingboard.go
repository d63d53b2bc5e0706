package daemon

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// The requests other daemons hold (a store.PendingBoard shared with a
// store.Leaser): each daemon publishes the requests its broker holds and
// removes them once settled; Pending and WatchPending list the others'
// beside its own, so a person sees every request waiting on any daemon
// wherever they look, and a decision through any daemon reaches the one
// holding the request (routed as a command).

// board is the store's, when requests are shared.
func (d *Daemon) board() store.PendingBoard {
	b, ok := d.db.(store.PendingBoard)
	if !ok || d.lease == nil {
		return nil
	}
	return b
}

// publishPending keeps the board in step with the broker until the daemon
// closes.
func (d *Daemon) publishPending(b store.PendingBoard) {
	defer close(d.pendingDone)
	for d.ctx.Err() == nil {
		sub, pending := d.broker.Observe()
		for _, p := range pending {
			d.putPending(b, p)
		}
		for open := true; open; {
			select {
			case <-d.ctx.Done():
				sub.Close()
				return
			case n, ok := <-sub.C():
				if !ok {
					open = false
					break
				}
				if n.Resolution == nil {
					d.putPending(b, n.Pending)
					break
				}
				ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
				if err := b.DropPending(ctx, n.Pending.Request.RequestID); err != nil && d.ctx.Err() == nil {
					d.log.Warn("removing a settled request from the shared list", "request", n.Pending.Request.RequestID, "err", err)
				}
				cancel()
			}
		}
		if sub.Err() != permission.ErrDropped {
			return // the broker closed
		}
	}
}

func (d *Daemon) putPending(b store.PendingBoard, p permission.Pending) {
	raw, err := json.Marshal(p.Request)
	if err == nil {
		ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
		err = b.PutPending(ctx, &store.PendingRequest{RequestID: p.Request.RequestID, SessionID: p.SessionID,
			Request: raw, CreatedAt: p.Created})
		cancel()
	}
	if err != nil && d.ctx.Err() == nil {
		d.log.Warn("publishing a request to the other daemons", "request", p.Request.RequestID, "err", err)
	}
}

// othersPending returns the requests other daemons hold for session id
// ("" for all).
func (d *Daemon) othersPending(ctx context.Context, id string) []permission.Pending {
	b := d.board()
	if b == nil {
		return nil
	}
	ps, err := b.OthersPending(ctx, id)
	if err != nil {
		d.log.Warn("listing the requests of other daemons", "err", err)
		return nil
	}
	out := make([]permission.Pending, 0, len(ps))
	for _, p := range ps {
		req := &claude.PermissionRequest{}
		if json.Unmarshal(p.Request, req) != nil {
			continue
		}
		req.RequestID, req.Raw = p.RequestID, p.Request
		out = append(out, permission.Pending{SessionID: p.SessionID, Request: req, Created: p.CreatedAt})
	}
	return out
}

// remoteChanges returns what changed in the requests other daemons hold
// since known (which it updates): the new ones, and those settled (with
// the outcome the audit trail has for them).
func (d *Daemon) remoteChanges(ctx context.Context, id string, known map[string]permission.Pending) []PendingChange {
	now := d.othersPending(ctx, id)
	var out []PendingChange
	seen := map[string]bool{}
	var added []permission.Pending
	for _, p := range now {
		rid := p.Request.RequestID
		seen[rid] = true
		if _, ok := known[rid]; !ok {
			known[rid] = p
			added = append(added, p)
		}
	}
	if len(added) > 0 {
		out = append(out, PendingChange{Pending: added})
	}
	var gone []string
	for rid := range known {
		if !seen[rid] {
			gone = append(gone, rid)
		}
	}
	slices.Sort(gone)
	for _, rid := range gone {
		p := known[rid]
		delete(known, rid)
		s := &Settled{RequestID: rid, SessionID: p.SessionID, Outcome: "settled", By: "another daemon", At: time.Now()}
		// The holder removes the request as its broker settles it and
		// audits the decision just after: give the audit a moment.
		for try := 0; try < 10 && s.By == "another daemon" && ctx.Err() == nil; try++ {
			if try > 0 {
				time.Sleep(100 * time.Millisecond)
			}
			ds, err := d.db.Decisions(ctx, store.DecisionFilter{SessionID: p.SessionID, Limit: 50})
			if err != nil {
				break
			}
			for _, dec := range ds {
				if dec.RequestID == rid {
					s.Outcome, s.By, s.At = decisionWord(dec), dec.By, dec.DecidedAt
					break
				}
			}
		}
		out = append(out, PendingChange{Settled: s})
	}
	return out
}

// decisionWord is the Settled outcome of an audit entry.
func decisionWord(dec *store.Decision) string {
	switch dec.Behavior {
	case "allow":
		if permission.Answers(dec.UpdatedInput) != nil {
			return "answered"
		}
		return "allowed"
	case "deny":
		return "denied"
	}
	return dec.Behavior
}
