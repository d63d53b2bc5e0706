package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"
)

// What the daemon keeps to reach people (package notify): the devices
// that asked to be told (Web Push subscriptions, each with its owner),
// the one-use capabilities a notification's actions carry, the VAPID key
// the daemon signs its pushes with, and the log of every delivery.

// The limits on what reaching people stores. A client with a token can
// subscribe devices: the subscriptions are bounded so that it cannot make
// every push fan out to thousands of endpoints.
const (
	// MaxPushSubscriptions is how many devices a store keeps subscribed,
	// all users together; PutPushSubscription refuses one more with a
	// *LimitError.
	MaxPushSubscriptions = 1000
	// MaxPushSubscriptionsPerUser is how many of them one user may have.
	MaxPushSubscriptionsPerUser = 20
	// MaxEndpointBytes bounds a subscription's endpoint URL.
	MaxEndpointBytes = 2048
	// MaxDeliveries is how many deliveries the log keeps: the oldest go.
	MaxDeliveries = 10000
)

// The kinds of things a device may be told of, each switchable per device.
const (
	PushPermission = "permission"  // a permission request waits for a person
	PushQuestion   = "question"    // Claude asks a question (AskUserQuestion)
	PushBudget     = "budget"      // a session was stopped at its budget
	PushSessionEnd = "session_end" // a session finished (closed) or failed
)

// PushKinds are the kinds, in the order they are shown.
var PushKinds = []string{PushPermission, PushQuestion, PushBudget, PushSessionEnd}

// ErrUsed means a one-use record (a push capability) was used already.
var ErrUsed = errors.New("already used")

// A PushSubscription is a device (a browser's service worker) that asked
// to be told of requests and sessions: what the Push API gave it
// (RFC 8030's push resource, RFC 8291's keys) and whose it is.
type PushSubscription struct {
	// ID is assigned by the store.
	ID int64
	// User owns it: pushes say only what that user may see, and its
	// actions decide as that user.
	User string
	// Token is the name of the token it was made with: once that token
	// is revoked or expires, the device is pushed nothing more and its
	// actions are refused.
	Token string
	// Endpoint is the push service's URL for the device (unique: the same
	// device subscribing again replaces its record).
	Endpoint string
	// P256DH is the device's ECDH public key (65 bytes, uncompressed
	// P-256) and Auth its authentication secret (16 bytes).
	P256DH []byte
	Auth   []byte
	// Kinds are the PushKinds the device wants.
	Kinds []string
	// Device names it for its owner ("Firefox on Android").
	Device string
	// CreatedAt is set by the store; LastPushAt by RecordPush.
	CreatedAt  time.Time
	LastPushAt time.Time
}

// Wants reports whether the device wants pushes of kind.
func (p *PushSubscription) Wants(kind string) bool { return slices.Contains(p.Kinds, kind) }

// A PushCapability is what a notification's Allow or Deny carries instead
// of a token: good for one request, from one device, once, until it
// expires. The store keeps its SHA-256 only.
type PushCapability struct {
	Hash           []byte
	RequestID      string
	SessionID      string
	SubscriptionID int64
	ExpiresAt      time.Time
	// UsedAt is when it was used; zero while it is not.
	UsedAt time.Time
}

// A Delivery is one notification sent, or given up on: to a webhook or a
// device, for an event, with its outcome.
type Delivery struct {
	// ID is assigned by the store; At (when the event happened) is set to
	// now when zero.
	ID int64
	At time.Time
	// Target is "webhook:NAME" or "push:ID".
	Target string
	// Event is what it told of: "permission_request", "question",
	// "budget_stop", "session_finished", "session_failed", "escalated",
	// "test".
	Event     string
	SessionID string
	RequestID string
	// Status is "delivered", "failed" (every attempt failed), "refused"
	// (never sent: a private address, no secret), "dropped" (its target's
	// queue was full) or "expired" (a device the push service forgot).
	Status     string
	Attempts   int
	HTTPStatus int
	Error      string
	// Latency is from the event to the last attempt's answer.
	Latency time.Duration
}

// DeliveryFilter selects deliveries, newest first.
type DeliveryFilter struct {
	// Target, when set, selects one target's.
	Target string
	// BeforeID pages backwards: only entries with a smaller ID.
	BeforeID int64
	// Limit caps the number returned; zero means 100.
	Limit int
}

// Notifications is a store that keeps what reaching people needs. Both
// engines implement it.
type Notifications interface {
	// PutPushSubscription stores p, replacing the subscription of the same
	// endpoint (a device subscribing again, maybe for another user), and
	// sets its ID and CreatedAt. It fails with a *LimitError past
	// MaxPushSubscriptions, or MaxPushSubscriptionsPerUser of its user.
	PutPushSubscription(ctx context.Context, p *PushSubscription) error
	// PushSubscriptions returns every subscription, oldest first.
	PushSubscriptions(ctx context.Context) ([]*PushSubscription, error)
	// SetPushKinds changes the kinds of subscription id. ErrNotFound when
	// there is none.
	SetPushKinds(ctx context.Context, id int64, kinds []string) error
	// DeletePushSubscription removes subscription id and its capabilities.
	// ErrNotFound when there is none.
	DeletePushSubscription(ctx context.Context, id int64) error
	// RecordPush notes when subscription id was last pushed to.
	RecordPush(ctx context.Context, id int64, at time.Time) error
	// AddPushCapability stores c (and forgets the expired ones).
	AddPushCapability(ctx context.Context, c *PushCapability) error
	// UsePushCapability marks the capability whose hash is hash used, at
	// now, and returns it: once. ErrNotFound for none or an expired one,
	// an error wrapping ErrUsed (with the capability) when it was used
	// already.
	UsePushCapability(ctx context.Context, hash []byte, now time.Time) (*PushCapability, error)
	// VAPIDKey returns the daemon's VAPID private key (a P-256 scalar),
	// storing newKey first if the store has none: every daemon sharing the
	// store signs with the same key, the one the devices subscribed with.
	VAPIDKey(ctx context.Context, newKey []byte) ([]byte, error)
	// AddDelivery appends d to the delivery log, setting its ID; the log
	// keeps MaxDeliveries.
	AddDelivery(ctx context.Context, d *Delivery) error
	// Deliveries returns the deliveries f selects, newest first.
	Deliveries(ctx context.Context, f DeliveryFilter) ([]*Delivery, error)
}

// ValidatePushSubscription checks the fields of p a client gave: an https
// endpoint (http is for a push service on a private network, which the
// daemon reaches only when allowed), keys of the sizes RFC 8291 gives,
// known kinds, bounded text.
func ValidatePushSubscription(p *PushSubscription) error {
	if p.User == "" {
		return fmt.Errorf("%w: a push subscription needs its user", ErrInvalid)
	}
	if err := field("user", p.User, MaxNameBytes); err != nil {
		return err
	}
	if err := field("token", p.Token, MaxNameBytes); err != nil {
		return err
	}
	if err := field("device", p.Device, MaxNameBytes); err != nil {
		return err
	}
	if len(p.Endpoint) > MaxEndpointBytes {
		return fmt.Errorf("%w: endpoint is %d bytes long, the most is %d", ErrInvalid, len(p.Endpoint), MaxEndpointBytes)
	}
	u, err := url.Parse(p.Endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%w: endpoint %q is not a push service's https URL", ErrInvalid, clipText(p.Endpoint))
	}
	if len(p.P256DH) != 65 || p.P256DH[0] != 4 {
		return fmt.Errorf("%w: keys.p256dh is %d bytes, want an uncompressed P-256 point (65 bytes, starting 0x04)", ErrInvalid, len(p.P256DH))
	}
	if len(p.Auth) != 16 {
		return fmt.Errorf("%w: keys.auth is %d bytes, want 16", ErrInvalid, len(p.Auth))
	}
	return ValidatePushKinds(p.Kinds)
}

// ValidatePushKinds checks a device's kinds: each one of PushKinds, once.
func ValidatePushKinds(kinds []string) error {
	for i, k := range kinds {
		if !slices.Contains(PushKinds, k) {
			return fmt.Errorf("%w: unknown kind %q (kinds are %v)", ErrInvalid, clipText(k), PushKinds)
		}
		if slices.Contains(kinds[:i], k) {
			return fmt.Errorf("%w: kind %q twice", ErrInvalid, k)
		}
	}
	return nil
}

// PrepareDelivery checks d and sets its time when zero; text fields are
// cut to MaxFieldBytes (an error a target answered can be long).
func PrepareDelivery(d *Delivery) error {
	if d.Target == "" || d.Event == "" || d.Status == "" {
		return fmt.Errorf("%w: a delivery needs a target, an event and a status", ErrInvalid)
	}
	if d.At.IsZero() {
		d.At = time.Now()
	}
	d.Target, d.Event, d.Error = cutText(d.Target, MaxNameBytes*2), cutText(d.Event, MaxNameBytes), cutText(d.Error, MaxFieldBytes)
	d.SessionID, d.RequestID = cutText(d.SessionID, MaxFieldBytes), cutText(d.RequestID, MaxFieldBytes)
	return nil
}

// cutText cuts s to at most n bytes, on a rune boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}

// clipText is s clipped for an error message.
func clipText(s string) string {
	if len(s) > 80 {
		return cutText(s, 77) + "..."
	}
	return s
}
