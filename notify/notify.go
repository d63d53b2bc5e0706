// Package notify reaches the people sessions wait for, wherever they are:
// Web Push to their devices (the daemon's own, no vendor's relay) and
// webhooks (generic JSON, Slack-compatible chat, ntfy). The daemon tells a
// [Notifier] what happened ([Event]: a request waits, a question, a budget
// spent, a turn that finished or failed); the Notifier decides who hears
// of it and delivers it off the daemon's path.
//
// # Delivery
//
// Notify never blocks: it hands the event to the Notifier's dispatcher,
// which puts one job per target on that target's lane (a webhook, a
// device), a bounded queue with workers of its own. A slow or dead target
// fills its own lane and delays nothing else: another target, the session
// that asked. Each job is tried up to its target's attempts, each attempt
// bounded by a timeout, with jittered exponential backoff between them
// (Retry-After heeded, within bounds); every outcome goes to the delivery
// log (store.Delivery; claudectl notify log). A lane that is full drops
// the job, logged as "dropped".
//
// # Who hears what
//
// A device (store.PushSubscription) hears of a session only while the
// token it subscribed with is live and may see that session (its role and
// scopes: Access), and of a request only if the request's route asks its
// owner (a user, or one of their groups). A request's notification
// carries Allow and Deny only for an owner whose token may decide: a
// capability good for that request, from that device, once (see
// [Notifier.Act]); the owner's token is never in a payload. A device the
// push service no longer knows (404, 410) is forgotten.
//
// # Addresses
//
// Webhook URLs and push endpoints are dialled through a guard that
// refuses loopback, private, link-local and other non-public addresses
// after DNS resolution, at connect time (AllowPrivateTargets lifts it),
// with no proxy and no redirect followed.
package notify

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/claudectl/claudectl/store"
)

// Access says what a person's token may do with a session; apiserver.Auth
// implements it from its tokens.
type Access interface {
	// May reports whether the live token called token, of user, may see
	// the session (id, directory), and whether it may also decide its
	// requests; false, false for a revoked, expired or unknown token.
	May(user, token, sessionID, cwd string) (see, decide bool)
	// Groups returns the groups user is in, for routes that ask groups.
	Groups(user string) []string
}

// Options configures New. A nil *Options is the same as a zero one.
type Options struct {
	// Store keeps the devices, capabilities, the VAPID key and the
	// delivery log; nil means no Web Push and no log.
	Store store.Notifications
	// Webhooks are the webhook targets.
	Webhooks []Webhook
	// AllowPrivateTargets lets webhooks and push endpoints be on
	// loopback and private networks (a self-hosted ntfy, a test).
	AllowPrivateTargets bool
	// PushSubject is the VAPID "sub" claim: a mailto: or https: URL the
	// push services may contact about the daemon's pushes. Empty means
	// "mailto:claudectl@" and the host name.
	PushSubject string
	// PageURL is the page's address as people open it
	// ("https://claude.example.com"), for links in webhooks; empty for
	// none.
	PageURL string
	// Access says who may see and decide what; nil means everyone may.
	Access Access
	// Logger receives failures; nil means slog.Default().
	Logger *slog.Logger
	// Backoff is the wait before the second attempt, doubled each time
	// after (with jitter, at most a minute); zero means 1 s.
	Backoff time.Duration
	// PushTTL is how long a push service keeps a message for a device
	// that is offline; zero means an hour.
	PushTTL time.Duration
}

// laneSize bounds the jobs waiting on one target's lane.
const laneSize = 1024

// Workers per lane: a webhook target takes a few deliveries at once, so
// that one slow answer does not hold the next; a device takes one at a
// time, in order.
const (
	webhookWorkers = 4
	pushWorkers    = 1
)

// A Notifier delivers events to webhooks and devices. Its methods are safe
// for concurrent use.
type Notifier struct {
	o      Options
	log    *slog.Logger
	client *http.Client
	key    *VAPIDKey // nil without a store

	events chan Event
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	lanes map[string]*lane
	subs  subsCache
}

// New returns a running Notifier; Close stops it. It reads (or makes and
// stores) the VAPID key when it has a store.
func New(ctx context.Context, opts *Options) (*Notifier, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.PushSubject == "" {
		host, _ := os.Hostname()
		o.PushSubject = "mailto:claudectl@" + cmp.Or(host, "localhost")
	}
	o.Backoff = cmp.Or(o.Backoff, time.Second)
	o.PushTTL = cmp.Or(o.PushTTL, time.Hour)
	for i := range o.Webhooks {
		if err := CheckWebhook(&o.Webhooks[i]); err != nil {
			return nil, fmt.Errorf("notify.webhooks[%d]: %w", i, err)
		}
	}
	n := &Notifier{o: o, log: cmp.Or(o.Logger, slog.Default()), client: newClient(o.AllowPrivateTargets),
		events: make(chan Event, 4096), lanes: map[string]*lane{}}
	if o.Store != nil {
		fresh, err := NewVAPIDKey()
		if err != nil {
			return nil, err
		}
		scalar, err := o.Store.VAPIDKey(ctx, fresh)
		if err != nil {
			return nil, fmt.Errorf("notify: reading the VAPID key: %w", err)
		}
		if n.key, err = ParseVAPIDKey(scalar); err != nil {
			return nil, err
		}
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.wg.Add(1)
	go n.dispatch()
	return n, nil
}

// Close stops the Notifier: deliveries under way are cut, those waiting
// are dropped. Idempotent.
func (n *Notifier) Close() {
	n.cancel()
	n.wg.Wait()
	n.client.CloseIdleConnections()
}

// VAPIDPublicKey returns the public key devices subscribe with (base64url),
// "" without Web Push.
func (n *Notifier) VAPIDPublicKey() string {
	if n.key == nil {
		return ""
	}
	return n.key.PublicBase64()
}

// Notify hands e to the Notifier and returns at once. If the dispatcher is
// more than 4096 events behind, e is dropped (and logged).
func (n *Notifier) Notify(e Event) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	select {
	case n.events <- e:
	default:
		n.log.Warn("notifications are too far behind: an event was dropped", "event", e.Kind, "session", e.SessionID,
			"request", e.RequestID)
	}
}

// dispatch turns events into jobs on their targets' lanes.
func (n *Notifier) dispatch() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case e := <-n.events:
			n.fanOut(&e)
		}
	}
}

// fanOut queues e for every webhook that wants it and every device that
// should hear of it.
func (n *Notifier) fanOut(e *Event) {
	for i := range n.o.Webhooks {
		w := &n.o.Webhooks[i]
		if w.wants(e.Kind) {
			n.enqueue("webhook:"+w.Name, webhookWorkers, e, func(ctx context.Context) *store.Delivery { return n.deliverWebhook(ctx, w, e) })
		}
	}
	if n.key == nil || e.Kind == EventTest {
		return
	}
	subs, err := n.subscriptions()
	if err != nil {
		n.log.Warn("reading the devices to push to", "event", e.Kind, "err", err)
		return
	}
	for _, s := range subs {
		actions, ok := n.hears(s, e)
		if !ok {
			continue
		}
		n.enqueue(pushTarget(s.ID), pushWorkers, e, func(ctx context.Context) *store.Delivery { return n.deliverPush(ctx, s, e, actions) })
	}
}

func pushTarget(id int64) string { return "push:" + strconv.FormatInt(id, 10) }

// hears reports whether device s should hear of e, and whether its
// notification carries Allow and Deny.
func (n *Notifier) hears(s *store.PushSubscription, e *Event) (actions, ok bool) {
	if !s.Wants(e.pushKind()) {
		return false, false
	}
	see, decide := true, true
	if n.o.Access != nil {
		see, decide = n.o.Access.May(s.User, s.Token, e.SessionID, e.Cwd)
	}
	if !see {
		return false, false
	}
	if !e.isRequest() {
		return false, true
	}
	if r := e.Routing; r != nil {
		var groups []string
		if n.o.Access != nil {
			groups = n.o.Access.Groups(s.User)
		}
		if !r.Asks(s.User, groups, e.Escalated) {
			return false, false
		}
		// An escalation is news only to those it adds.
		if e.Kind == EventEscalated && r.Asks(s.User, groups, false) {
			return false, false
		}
	}
	// A question is answered in the page: its options and free text do
	// not fit a notification's buttons.
	return decide && e.Tool != "AskUserQuestion", true
}

// A lane is one target's queue of jobs.
type lane struct {
	jobs   chan func(context.Context)
	active int // workers running; guarded by Notifier.mu
}

// enqueue puts job on target's lane, starting a worker if the lane has
// fewer than workers; a full lane drops it (logged as "dropped").
func (n *Notifier) enqueue(target string, workers int, e *Event, job func(context.Context) *store.Delivery) {
	run := func(ctx context.Context) {
		if d := job(ctx); d != nil {
			n.record(d)
		}
	}
	n.mu.Lock()
	if n.ctx.Err() != nil {
		n.mu.Unlock()
		return
	}
	l := n.lanes[target]
	if l == nil {
		l = &lane{jobs: make(chan func(context.Context), laneSize)}
		n.lanes[target] = l
	}
	select {
	case l.jobs <- run:
	default:
		n.mu.Unlock()
		n.record(&store.Delivery{At: e.At, Target: target, Event: e.Kind, SessionID: e.SessionID, RequestID: e.RequestID,
			Status: "dropped", Error: fmt.Sprintf("%d deliveries were waiting for this target already", laneSize)})
		return
	}
	if l.active < workers {
		l.active++
		n.wg.Add(1)
		go n.work(target, l)
	}
	n.mu.Unlock()
}

// work runs l's jobs until it has none; the last worker out removes the
// lane, so that a device gone costs nothing.
func (n *Notifier) work(target string, l *lane) {
	defer n.wg.Done()
	for {
		if n.ctx.Err() != nil {
			return // the jobs waiting are dropped
		}
		select {
		case job := <-l.jobs:
			job(n.ctx)
			continue
		default:
		}
		n.mu.Lock()
		if len(l.jobs) == 0 { // enqueue sends under the same lock: nothing can arrive unseen
			l.active--
			if l.active == 0 && n.lanes[target] == l {
				delete(n.lanes, target)
			}
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
	}
}

// record writes d to the delivery log, and logs a failure.
func (n *Notifier) record(d *store.Delivery) {
	if d.Status != "delivered" {
		n.log.Warn("a notification was not delivered", "target", d.Target, "event", d.Event, "status", d.Status,
			"attempts", d.Attempts, "err", d.Error)
	}
	if n.o.Store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.o.Store.AddDelivery(ctx, d); err != nil {
		n.log.Warn("recording a delivery", "target", d.Target, "err", err)
	}
}

// attempt runs try up to attempts times, with backoff between; it fills
// d with the outcome.
func (n *Notifier) attempt(ctx context.Context, d *store.Delivery, attempts int, timeout time.Duration,
	try func(ctx context.Context) (int, error)) {
	var err error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			wait := n.backoff(i, err)
			select {
			case <-ctx.Done():
				d.Status, d.Error = "failed", "the daemon stopped before it could try again; last: "+clipLine(err.Error(), 300)
				return
			case <-time.After(wait):
			}
		}
		d.Attempts++
		actx, cancel := context.WithTimeout(ctx, timeout)
		d.HTTPStatus, err = try(actx)
		cancel()
		if err == nil {
			d.Status, d.Error = "delivered", ""
			break
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %s", timeout)
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("the daemon stopped during the delivery: %w", err)
		}
		var pe *PrivateTargetError
		if errors.As(err, &pe) {
			d.Status, d.Error = "refused", pe.Error()
			break
		}
		d.Status, d.Error = "failed", clipLine(err.Error(), 500)
		if !retryable(err) {
			break
		}
	}
	d.Latency = time.Since(d.At)
}

// backoff is the wait before attempt i (1 for the second): Backoff
// doubled each time, ±25 %, at most a minute; a Retry-After within that
// minute is waited instead.
func (n *Notifier) backoff(i int, err error) time.Duration {
	var he *HTTPError
	if errors.As(err, &he) && he.RetryAfter > 0 && he.RetryAfter <= time.Minute {
		return he.RetryAfter
	}
	d := min(n.o.Backoff<<(i-1), time.Minute)
	return time.Duration(float64(d) * (0.75 + 0.5*mrand.Float64()))
}

// deliverWebhook delivers e to w.
func (n *Notifier) deliverWebhook(ctx context.Context, w *Webhook, e *Event) *store.Delivery {
	d := &store.Delivery{At: e.At, Target: "webhook:" + w.Name, Event: e.Kind, SessionID: e.SessionID, RequestID: e.RequestID}
	n.attempt(ctx, d, cmp.Or(w.Attempts, 5), cmp.Or(w.Timeout, 10*time.Second), func(ctx context.Context) (int, error) {
		return w.post(ctx, n.client, e, n.o.PageURL)
	})
	return d
}

// Test sends a test event to every webhook (or the one named) now and
// waits for the deliveries, which it returns; each is in the delivery log
// too.
func (n *Notifier) Test(ctx context.Context, name string) ([]*store.Delivery, error) {
	e := &Event{Kind: EventTest, At: time.Now(), Detail: "claudectl notify test: this webhook receives the daemon's notifications"}
	var out []*store.Delivery
	for i := range n.o.Webhooks {
		w := &n.o.Webhooks[i]
		if name != "" && w.Name != name {
			continue
		}
		d := n.deliverWebhook(ctx, w, e)
		n.record(d)
		out = append(out, d)
	}
	if name != "" && len(out) == 0 {
		return nil, fmt.Errorf("no webhook is called %q (notify.webhooks in the settings)", name)
	}
	return out, nil
}

// Webhooks returns the webhooks' names and URLs (without their secrets).
func (n *Notifier) Webhooks() []Webhook {
	out := make([]Webhook, len(n.o.Webhooks))
	for i, w := range n.o.Webhooks {
		w.Secret = nil
		out[i] = w
	}
	return out
}

// --- devices ---

// subsCache holds the subscriptions read, for a few seconds: every event
// looks at them. Changes through this Notifier clear it.
type subsCache struct {
	at   time.Time
	subs []*store.PushSubscription
}

const subsCacheTTL = 5 * time.Second

func (n *Notifier) subscriptions() ([]*store.PushSubscription, error) {
	n.mu.Lock()
	c := n.subs
	n.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < subsCacheTTL {
		return c.subs, nil
	}
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	subs, err := n.o.Store.PushSubscriptions(ctx)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.subs = subsCache{at: time.Now(), subs: subs}
	n.mu.Unlock()
	return subs, nil
}

func (n *Notifier) forgetSubscriptions() {
	n.mu.Lock()
	n.subs = subsCache{}
	n.mu.Unlock()
}

// ErrNoPush is returned by the device methods of a Notifier without a store.
var ErrNoPush = errors.New("notify: Web Push is off: the daemon keeps no devices")

// Subscribe stores a device of user's, made with the token called token;
// it returns the record with its ID. Its endpoint is checked when it is
// dialled (an http one is allowed only with AllowPrivateTargets).
func (n *Notifier) Subscribe(ctx context.Context, p *store.PushSubscription) error {
	if n.key == nil {
		return ErrNoPush
	}
	if u, err := url.Parse(p.Endpoint); err == nil && u.Scheme == "http" && !n.o.AllowPrivateTargets {
		return fmt.Errorf("%w: endpoint %q is not https (push services are; an http one is allowed with notify.allow_private_targets)",
			store.ErrInvalid, clipLine(p.Endpoint, 80))
	}
	defer n.forgetSubscriptions()
	return n.o.Store.PutPushSubscription(ctx, p)
}

// Devices returns the devices of user, every device for "".
func (n *Notifier) Devices(ctx context.Context, user string) ([]*store.PushSubscription, error) {
	if n.key == nil {
		return nil, ErrNoPush
	}
	subs, err := n.o.Store.PushSubscriptions(ctx)
	if err != nil {
		return nil, err
	}
	var out []*store.PushSubscription
	for _, s := range subs {
		if user == "" || s.User == user {
			out = append(out, s)
		}
	}
	return out, nil
}

// SetKinds switches device id's kinds.
func (n *Notifier) SetKinds(ctx context.Context, id int64, kinds []string) error {
	if n.key == nil {
		return ErrNoPush
	}
	defer n.forgetSubscriptions()
	return n.o.Store.SetPushKinds(ctx, id, kinds)
}

// Unsubscribe forgets device id.
func (n *Notifier) Unsubscribe(ctx context.Context, id int64) error {
	if n.key == nil {
		return ErrNoPush
	}
	defer n.forgetSubscriptions()
	return n.o.Store.DeletePushSubscription(ctx, id)
}

// A PushMessage is what a device's service worker receives (decrypted):
// the page's sw.js shows it.
type PushMessage struct {
	V     int    `json:"v"`
	Kind  string `json:"kind"` // the store.PushKinds, or "test"
	Title string `json:"title"`
	Body  string `json:"body"`
	// Tag makes a later notification of the same request or session
	// replace this one.
	Tag       string `json:"tag"`
	URL       string `json:"url"` // the page's fragment to open: "/#/s/ID"
	SessionID string `json:"session_id,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Capability, with Actions, settles the request: POST it to
	// /push/act with the action chosen.
	Capability string       `json:"cap,omitempty"`
	Actions    []PushAction `json:"actions,omitempty"`
}

// A PushAction is a notification's button.
type PushAction struct {
	Action string `json:"action"` // "allow" or "deny"
	Title  string `json:"title"`
}

// capabilityPrefix starts every capability, so that a leaked one is
// recognised for what it is.
const capabilityPrefix = "cctlcap_"

// capabilityLife bounds a capability's life: a request pending longer is
// settled from the page.
const capabilityLife = 24 * time.Hour

// hashCapability is what the store keeps of a capability.
func hashCapability(c string) []byte {
	h := sha256.Sum256([]byte(c))
	return h[:]
}

// message builds the push of e for device s, with a capability for its
// actions when actions is set.
func (n *Notifier) message(ctx context.Context, s *store.PushSubscription, e *Event, actions bool) (*PushMessage, error) {
	m := &PushMessage{V: 1, Kind: e.pushKind(), Title: e.title(), Body: e.body(), SessionID: e.SessionID, RequestID: e.RequestID}
	m.Tag = cmp.Or(e.RequestID, e.SessionID, e.Kind)
	if e.SessionID != "" {
		m.URL = "/#/s/" + url.PathEscape(e.SessionID)
	} else {
		m.URL = "/#/inbox"
	}
	if actions {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		m.Capability = capabilityPrefix + base64.RawURLEncoding.EncodeToString(b[:])
		exp := e.At.Add(capabilityLife)
		if !e.ExpiresAt.IsZero() && e.ExpiresAt.Before(exp) {
			exp = e.ExpiresAt
		}
		if err := n.o.Store.AddPushCapability(ctx, &store.PushCapability{Hash: hashCapability(m.Capability),
			RequestID: e.RequestID, SessionID: e.SessionID, SubscriptionID: s.ID, ExpiresAt: exp}); err != nil {
			return nil, fmt.Errorf("storing the notification's capability: %w", err)
		}
		m.Actions = []PushAction{{Action: "allow", Title: "Allow"}, {Action: "deny", Title: "Deny"}}
	}
	// What does not fit one record is cut from the body.
	for {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		if len(b) <= MaxPushPayload || m.Body == "" {
			return m, nil
		}
		m.Body = m.Body[:len(m.Body)*3/4]
	}
}

// deliverPush pushes e to device s.
func (n *Notifier) deliverPush(ctx context.Context, s *store.PushSubscription, e *Event, actions bool) *store.Delivery {
	d := &store.Delivery{At: e.At, Target: pushTarget(s.ID), Event: e.Kind, SessionID: e.SessionID, RequestID: e.RequestID}
	m, err := n.message(ctx, s, e, actions)
	if err != nil {
		d.Status, d.Error = "failed", err.Error()
		return d
	}
	payload, _ := json.Marshal(m)
	urgency := "normal"
	if e.isRequest() {
		urgency = "high"
	}
	t := PushTarget{Endpoint: s.Endpoint, P256DH: s.P256DH, Auth: s.Auth}
	n.attempt(ctx, d, 3, 10*time.Second, func(ctx context.Context) (int, error) {
		if u, err := url.Parse(t.Endpoint); err == nil && u.Scheme == "http" && !n.o.AllowPrivateTargets {
			return 0, fmt.Errorf("endpoint %s is not https: not pushed (notify.allow_private_targets allows it)", u.Redacted())
		}
		return sendPush(ctx, n.client, n.key, n.o.PushSubject, t, payload, pushOptions{TTL: n.o.PushTTL, Urgency: urgency})
	})
	switch {
	case d.Status == "delivered":
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := n.o.Store.RecordPush(rctx, s.ID, time.Now()); err != nil {
			n.log.Debug("recording a push", "device", s.ID, "err", err)
		}
		cancel()
	case d.HTTPStatus == http.StatusNotFound || d.HTTPStatus == http.StatusGone:
		d.Status = "expired"
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := n.Unsubscribe(rctx, s.ID)
		cancel()
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			n.log.Warn("forgetting a device the push service no longer knows", "device", s.ID, "err", err)
		} else {
			n.log.Info("forgot a device the push service no longer knows", "device", s.ID, "user", s.User, "device_name", s.Device)
		}
	}
	return d
}

// Errors of Act.
var (
	// ErrBadCapability means the capability is not one the daemon made,
	// or it expired.
	ErrBadCapability = errors.New("this notification's action is not valid (unknown, or expired)")
)

// Act takes a notification's capability, once: it returns the request it
// is for and the device it was sent to. The caller checks that the
// device's owner may still decide, then decides as them. Errors:
// ErrBadCapability, an error wrapping store.ErrUsed naming when it was
// used, or the store's.
func (n *Notifier) Act(ctx context.Context, capability string) (*store.PushCapability, *store.PushSubscription, error) {
	if n.key == nil || !strings.HasPrefix(capability, capabilityPrefix) || len(capability) > 128 {
		return nil, nil, ErrBadCapability
	}
	c, err := n.o.Store.UsePushCapability(ctx, hashCapability(capability), time.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, ErrBadCapability
	}
	if err != nil {
		return c, nil, err // c, when the store gives it, says which request (store.ErrUsed)
	}
	subs, err := n.o.Store.PushSubscriptions(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range subs {
		if s.ID == c.SubscriptionID {
			return c, s, nil
		}
	}
	return nil, nil, ErrBadCapability // the device was forgotten meanwhile
}
