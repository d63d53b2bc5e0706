package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// NotifyCommand is "claudectl notify": the log of the notifications the
// daemon delivered to webhooks and devices, and a test delivery.
type NotifyCommand struct{ Env *Env }

// Name implements Command.
func (*NotifyCommand) Name() string { return "notify" }

// Summary implements Command.
func (*NotifyCommand) Summary() string {
	return "show the delivery log of webhooks and devices, or send a test (admin)"
}

const notifyUsage = `Usage: claudectl notify log [--target T] [--limit N] [--json]
       claudectl notify test [WEBHOOK]

log shows the deliveries of notifications, newest first: to the webhooks of
the settings (notify.webhooks, target webhook:NAME) and to the devices
people subscribed on the page (target push:ID), each with its event, its
session and request, its status (delivered, failed, refused: a private
address without notify.allow_private_targets, dropped: the target's queue
was full, expired: a device its push service forgot), the attempts made,
the last HTTP status and error, and the time from the event to the answer.
test sends a test event to the webhook WEBHOOK, or to every webhook, now,
and shows how each delivery went. Needs an admin token.
` + clientFlagsHelp

// deliveryJSON is one delivery in notify log --json.
type deliveryJSON struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Target     string    `json:"target"`
	Event      string    `json:"event"`
	SessionID  string    `json:"session_id,omitempty"`
	RequestID  string    `json:"request_id,omitempty"`
	Status     string    `json:"status"`
	Attempts   int       `json:"attempts"`
	HTTPStatus int       `json:"http_status,omitempty"`
	Error      string    `json:"error,omitempty"`
	LatencyMS  int64     `json:"latency_ms"`
}

// Run implements Command.
func (c *NotifyCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var asJSON bool
	var target string
	var limit int
	fs := newFlagSet("notify")
	fs.StringVar(&target, "target", "", "log: only the deliveries to `T` (webhook:NAME, push:ID)")
	fs.IntVar(&limit, "limit", 100, "log: at most `N` entries (up to 1000)")
	fs.BoolVar(&asJSON, "json", false, "print the deliveries as a JSON array")
	cf.register(fs)
	pos, help, err := parseClient(env, notifyUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("missing subcommand: notify needs log or test")
	}
	sub, rest := pos[0], pos[1:]
	if limit < 1 || limit > 1000 {
		return badValue("limit", fmt.Sprint(limit), "1 to 1000")
	}
	var call func(*daemonClient) ([]*v1.Delivery, error)
	switch sub {
	case "log":
		if len(rest) > 0 {
			return usagef("unexpected argument %q: notify log takes no arguments (--target T selects a target)", rest[0])
		}
		call = func(dc *daemonClient) ([]*v1.Delivery, error) {
			res, err := dc.notify.ListDeliveries(ctx, connect.NewRequest(&v1.ListDeliveriesRequest{Target: target, Limit: int32(limit)}))
			if err != nil {
				return nil, dc.explain(err, "reading the delivery log")
			}
			return res.Msg.Deliveries, nil
		}
	case "test":
		if len(rest) > 1 {
			return usagef("unexpected argument %q: notify test takes one WEBHOOK name at most", rest[1])
		}
		if target != "" {
			return usagef("--target only goes with notify log")
		}
		name := ""
		if len(rest) == 1 {
			name = rest[0]
		}
		call = func(dc *daemonClient) ([]*v1.Delivery, error) {
			res, err := dc.notify.TestWebhooks(ctx, connect.NewRequest(&v1.TestWebhooksRequest{Name: name}))
			if err != nil {
				return nil, dc.explain(err, "testing the webhooks")
			}
			return res.Msg.Deliveries, nil
		}
	default:
		return usagef("unknown subcommand %q: notify needs log or test", sub)
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	ds, err := call(dc)
	if err != nil {
		return err
	}
	list := make([]deliveryJSON, 0, len(ds))
	for _, d := range ds {
		list = append(list, deliveryJSON{ID: d.Id, At: d.GetAt().AsTime(), Target: d.Target, Event: d.Event, SessionID: d.SessionId,
			RequestID: d.RequestId, Status: d.Status, Attempts: int(d.Attempts), HTTPStatus: int(d.HttpStatus), Error: d.Error,
			LatencyMS: d.LatencyMs})
	}
	if asJSON {
		return writeJSON(env.Stdout, list)
	}
	if len(list) == 0 {
		if sub == "test" {
			fmt.Fprintln(env.Stdout, "No webhooks to test: the settings have no notify.webhooks.")
		} else {
			fmt.Fprintln(env.Stdout, "No deliveries.")
		}
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTARGET\tEVENT\tSESSION\tREQUEST\tSTATUS\tTRIES\tHTTP\tLATENCY\tERROR")
	for _, d := range list {
		code := "-"
		if d.HTTPStatus != 0 {
			code = fmt.Sprint(d.HTTPStatus)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.At.Local().Format(time.DateTime), clipCell(d.Target, 32), d.Event,
			orDash(d.SessionID), orDash(clipCell(d.RequestID, 36)), d.Status, d.Attempts, code,
			(time.Duration(d.LatencyMS) * time.Millisecond).String(), orDash(clipCell(d.Error, 80)))
	}
	return tw.Flush()
}
