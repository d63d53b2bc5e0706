package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/claudectl/claudectl/store"
)

func p256(b byte) []byte {
	k := bytes.Repeat([]byte{b}, 65)
	k[0] = 4
	return k
}

// notifications: push subscriptions are stored with their owner, replaced
// by endpoint, bounded per user, their kinds switched; a capability is
// used once and not after its expiry, and goes with its subscription;
// the VAPID key is stored once; deliveries are logged and listed newest
// first; decisions keep their route and approvals.
func notifications(t *testing.T, s store.Store) {
	n, ok := s.(store.Notifications)
	if !ok {
		t.Fatalf("%T does not implement store.Notifications", s)
	}
	ctx := context.Background()
	phone := &store.PushSubscription{User: "alice", Token: "phone", Endpoint: "https://push.example/a1",
		P256DH: p256(1), Auth: bytes.Repeat([]byte{2}, 16), Kinds: []string{store.PushPermission, store.PushBudget}, Device: "Firefox"}
	if err := n.PutPushSubscription(ctx, phone); err != nil {
		t.Fatal(err)
	}
	if phone.ID == 0 || phone.CreatedAt.IsZero() {
		t.Fatalf("PutPushSubscription set id %d, created %v", phone.ID, phone.CreatedAt)
	}
	// The same device again (new keys): the same record.
	again := *phone
	again.ID, again.P256DH = 0, p256(3)
	if err := n.PutPushSubscription(ctx, &again); err != nil || again.ID != phone.ID {
		t.Fatalf("the same endpoint again: id %d (want %d), %v", again.ID, phone.ID, err)
	}
	subs, err := n.PushSubscriptions(ctx)
	if err != nil || len(subs) != 1 {
		t.Fatalf("PushSubscriptions: %+v, %v", subs, err)
	}
	if got := subs[0]; got.User != "alice" || got.Token != "phone" || !bytes.Equal(got.P256DH, p256(3)) ||
		!slices.Equal(got.Kinds, []string{"permission", "budget"}) || got.Device != "Firefox" || !got.Wants("budget") || got.Wants("question") {
		t.Fatalf("read back %+v", got)
	}
	if err := n.SetPushKinds(ctx, phone.ID, []string{store.PushQuestion}); err != nil {
		t.Fatal(err)
	}
	if err := n.SetPushKinds(ctx, phone.ID, []string{"telepathy"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("an unknown kind: %v, want ErrInvalid", err)
	}
	if err := n.SetPushKinds(ctx, 999999, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("kinds of an unknown subscription: %v, want ErrNotFound", err)
	}
	bad := *phone
	bad.ID, bad.Endpoint, bad.Auth = 0, "https://push.example/a2", []byte{1}
	if err := n.PutPushSubscription(ctx, &bad); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a short auth secret: %v, want ErrInvalid", err)
	}
	bad.Auth, bad.Endpoint = phone.Auth, "javascript:alert(1)"
	if err := n.PutPushSubscription(ctx, &bad); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a javascript: endpoint: %v, want ErrInvalid", err)
	}
	// A user's devices are bounded.
	for i := 1; ; i++ {
		d := &store.PushSubscription{User: "mallory", Endpoint: fmt.Sprintf("https://push.example/m%d", i),
			P256DH: p256(1), Auth: phone.Auth}
		err := n.PutPushSubscription(ctx, d)
		if i <= store.MaxPushSubscriptionsPerUser {
			if err != nil {
				t.Fatalf("device %d: %v", i, err)
			}
			continue
		}
		var le *store.LimitError
		if !errors.As(err, &le) {
			t.Fatalf("device %d of one user: %v, want a *LimitError", i, err)
		}
		break
	}

	// Capabilities: once, not expired.
	now := time.Now()
	c := &store.PushCapability{Hash: hashOf("cap1"), RequestID: "r1", SessionID: "s1", SubscriptionID: phone.ID,
		ExpiresAt: now.Add(time.Minute)}
	if err := n.AddPushCapability(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := n.UsePushCapability(ctx, hashOf("cap1"), now)
	if err != nil || got.RequestID != "r1" || got.SessionID != "s1" || got.SubscriptionID != phone.ID || got.UsedAt.IsZero() {
		t.Fatalf("UsePushCapability: %+v, %v", got, err)
	}
	if _, err := n.UsePushCapability(ctx, hashOf("cap1"), now); !errors.Is(err, store.ErrUsed) {
		t.Errorf("a capability used twice: %v, want ErrUsed", err)
	}
	if _, err := n.UsePushCapability(ctx, hashOf("nope"), now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown capability: %v, want ErrNotFound", err)
	}
	late := &store.PushCapability{Hash: hashOf("cap2"), RequestID: "r2", SubscriptionID: phone.ID, ExpiresAt: now.Add(time.Second)}
	if err := n.AddPushCapability(ctx, late); err != nil {
		t.Fatal(err)
	}
	if _, err := n.UsePushCapability(ctx, hashOf("cap2"), now.Add(2*time.Second)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an expired capability: %v, want ErrNotFound", err)
	}
	gone := &store.PushCapability{Hash: hashOf("cap3"), RequestID: "r3", SubscriptionID: phone.ID, ExpiresAt: now.Add(time.Minute)}
	if err := n.AddPushCapability(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := n.DeletePushSubscription(ctx, phone.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := n.UsePushCapability(ctx, hashOf("cap3"), now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a capability of a deleted subscription: %v, want ErrNotFound", err)
	}
	if err := n.DeletePushSubscription(ctx, phone.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting twice: %v, want ErrNotFound", err)
	}

	// The VAPID key: the first stored stays.
	k1, err := n.VAPIDKey(ctx, []byte("first"))
	if err != nil || string(k1) != "first" {
		t.Fatalf("VAPIDKey: %q, %v", k1, err)
	}
	if k2, err := n.VAPIDKey(ctx, []byte("second")); err != nil || string(k2) != "first" {
		t.Fatalf("VAPIDKey again: %q, %v", k2, err)
	}

	// Deliveries.
	for i, st := range []string{"delivered", "failed", "refused"} {
		d := &store.Delivery{Target: "webhook:ops", Event: "permission_request", SessionID: "s1", RequestID: fmt.Sprint("r", i),
			Status: st, Attempts: i + 1, HTTPStatus: 200 + i, Error: "e", Latency: time.Duration(i) * time.Millisecond}
		if err := n.AddDelivery(ctx, d); err != nil || d.ID == 0 {
			t.Fatalf("AddDelivery: %v (id %d)", err, d.ID)
		}
	}
	if err := n.AddDelivery(ctx, &store.Delivery{Target: "push:7", Event: "question", Status: "delivered"}); err != nil {
		t.Fatal(err)
	}
	ds, err := n.Deliveries(ctx, store.DeliveryFilter{Target: "webhook:ops"})
	if err != nil || len(ds) != 3 || ds[0].Status != "refused" || ds[0].Attempts != 3 || ds[0].HTTPStatus != 202 ||
		ds[0].Latency != 2*time.Millisecond || ds[2].Status != "delivered" || ds[0].At.IsZero() {
		t.Fatalf("Deliveries: %+v, %v", ds, err)
	}
	if all, err := n.Deliveries(ctx, store.DeliveryFilter{Limit: 2}); err != nil || len(all) != 2 || all[0].Target != "push:7" {
		t.Fatalf("Deliveries limit 2: %+v, %v", all, err)
	}

	// A decision keeps its route and who approved it.
	sess := newSession(t, s)
	d := &store.Decision{SessionID: sess.ID, RequestID: "r9", ToolName: "Bash", Behavior: "allow", By: "user:bob",
		Route: "deploys", ApprovedBy: []string{"user:alice", "user:bob"}}
	if err := s.AddDecision(ctx, d); err != nil {
		t.Fatal(err)
	}
	dd, err := s.Decisions(ctx, store.DecisionFilter{SessionID: sess.ID})
	if err != nil || len(dd) != 1 || dd[0].Route != "deploys" || !slices.Equal(dd[0].ApprovedBy, []string{"user:alice", "user:bob"}) {
		t.Fatalf("Decisions: %+v, %v", dd, err)
	}
}
