package notify_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/claudectl/claudectl/notify"
	"github.com/claudectl/claudectl/notify/notifytest"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openStore(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "claudectl.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// access is an Access whose users' tokens may do what the test says.
type access struct {
	decide map[string]bool // user → may decide (else: may see only)
	hidden map[string]bool // user → may not see
	groups map[string][]string
}

func (a *access) May(user, token, sessionID, cwd string) (bool, bool) {
	if a.hidden[user] {
		return false, false
	}
	return true, a.decide[user]
}
func (a *access) Groups(user string) []string { return a.groups[user] }

func newNotifier(t *testing.T, o *notify.Options) *notify.Notifier {
	t.Helper()
	n, err := notify.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

func bashEvent(id, cmd string) notify.Event {
	in, _ := json.Marshal(map[string]string{"command": cmd})
	return notify.Event{Kind: notify.EventPermission, SessionID: "s-" + id, Cwd: "/src/app", RequestID: id, Tool: "Bash", Input: in}
}

// waitDeliveries polls the delivery log until f holds of it.
func waitDeliveries(t *testing.T, db store.Notifications, what string, f func([]*store.Delivery) bool) []*store.Delivery {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds, err := db.Deliveries(context.Background(), store.DeliveryFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if f(ds) {
			return ds
		}
		if time.Now().After(deadline) {
			for _, d := range ds {
				t.Logf("delivery %+v", d)
			}
			t.Fatalf("the delivery log did not come to %s in 30 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPushAgainstStandIn: a request reaches a subscribed device through a
// push service on loopback that checks the VAPID signature and decrypts
// the payload (RFC 8291) itself: the title, what is asked, Allow and Deny
// with a capability that settles that request once; a device whose
// owner may only see gets it without actions; a device of someone the
// route does not ask gets nothing; a device the push service answers 410
// for is forgotten; the log has each delivery.
func TestPushAgainstStandIn(t *testing.T) {
	ps := notifytest.NewPushService(t)
	db := openStore(t)
	acc := &access{decide: map[string]bool{"alice": true}, groups: map[string][]string{"alice": {"ops"}}}
	n := newNotifier(t, &notify.Options{Store: db, AllowPrivateTargets: true, Access: acc, PushSubject: "mailto:ops@example.com"})
	ctx := context.Background()
	subscribe := func(user, path string) *store.PushSubscription {
		ep, key, auth := ps.NewDevice(path)
		s := &store.PushSubscription{User: user, Token: user + "-phone", Endpoint: ep, P256DH: key, Auth: auth, Kinds: store.PushKinds}
		if err := n.Subscribe(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	alice := subscribe("alice", "/d/alice")
	bob := subscribe("bob", "/d/bob")

	n.Notify(bashEvent("r1", "git push origin main"))
	got := ps.WaitPushes("/d/alice", 1)[0]
	var m notify.PushMessage
	if err := json.Unmarshal(got.Payload, &m); err != nil {
		t.Fatalf("payload %s: %v", got.Payload, err)
	}
	if m.Kind != "permission" || !strings.Contains(m.Title, "Bash waits for you") || !strings.Contains(m.Body, "git push origin main") ||
		m.RequestID != "r1" || m.Tag != "r1" || m.URL != "/#/s/s-r1" || len(m.Actions) != 2 || !strings.HasPrefix(m.Capability, "cctlcap_") {
		t.Fatalf("alice's push: %+v", m)
	}
	if got.Header.Get("Urgency") != "high" {
		t.Errorf("a request's push has Urgency %q, want high", got.Header.Get("Urgency"))
	}
	if string(got.VAPIDKey) == "" || n.VAPIDPublicKey() == "" {
		t.Error("no VAPID key")
	}
	var bm notify.PushMessage
	json.Unmarshal(ps.WaitPushes("/d/bob", 1)[0].Payload, &bm)
	if bm.Capability != "" || len(bm.Actions) != 0 || bm.RequestID != "r1" {
		t.Errorf("bob may not decide, but his push is %+v", bm)
	}
	for _, p := range ps.Pushes("") {
		if strings.Contains(string(p.Payload), "alice-phone") {
			t.Error("a payload names the owner's token")
		}
	}

	// The capability: this request, this device, once.
	c, s, err := n.Act(ctx, m.Capability)
	if err != nil || c.RequestID != "r1" || c.SessionID != "s-r1" || s.ID != alice.ID || s.User != "alice" {
		t.Fatalf("Act: %+v %+v %v", c, s, err)
	}
	if _, _, err := n.Act(ctx, m.Capability); !errors.Is(err, store.ErrUsed) {
		t.Errorf("the capability again: %v, want ErrUsed", err)
	}
	if _, _, err := n.Act(ctx, "cctlcap_forged"); !errors.Is(err, notify.ErrBadCapability) {
		t.Errorf("a forged capability: %v, want ErrBadCapability", err)
	}

	// A route that asks carol: alice and bob hear nothing of it; one that
	// asks group ops: alice does.
	routed := bashEvent("r2", "rm -rf build")
	routed.Routing = &permission.Routing{Route: "cleanups", Ask: []string{"carol"}, Approvals: 1}
	n.Notify(routed)
	routed = bashEvent("r3", "git push --force")
	routed.Routing = &permission.Routing{Route: "pushes", Ask: []string{"group:ops"}, Approvals: 2}
	routed.Approvals = []string{"user:dave"}
	n.Notify(routed)
	ps.WaitPushes("/d/alice", 2)
	var m3 notify.PushMessage
	json.Unmarshal(ps.Pushes("/d/alice")[1].Payload, &m3)
	if m3.RequestID != "r3" || !strings.Contains(m3.Body, "asked: group:ops (1 of 2 allowed) · route pushes") {
		t.Errorf("alice's second push: %+v", m3)
	}
	waitDeliveries(t, db, "r3 delivered", func(ds []*store.Delivery) bool {
		return slices.ContainsFunc(ds, func(d *store.Delivery) bool { return d.RequestID == "r3" })
	})
	if len(ps.Pushes("/d/bob")) != 1 {
		t.Errorf("bob, whom no route asked, got %d pushes", len(ps.Pushes("/d/bob")))
	}

	// Gone: the push service answers 410; the device is forgotten.
	ps.SetAnswer("/d/bob", http.StatusGone)
	n.Notify(notify.Event{Kind: notify.EventSessionFailed, SessionID: "s9", Cwd: "/src/app", Detail: "the CLI exited with code 1"})
	waitDeliveries(t, db, "bob's device expired", func(ds []*store.Delivery) bool {
		return slices.ContainsFunc(ds, func(d *store.Delivery) bool {
			return d.Target == "push:"+strconv.FormatInt(bob.ID, 10) && d.Status == "expired"
		})
	})
	devs, err := n.Devices(ctx, "")
	if err != nil || len(devs) != 1 || devs[0].ID != alice.ID {
		t.Errorf("devices after a 410: %+v, %v", devs, err)
	}
	ds := waitDeliveries(t, db, "alice's session push", func(ds []*store.Delivery) bool {
		return slices.ContainsFunc(ds, func(d *store.Delivery) bool { return d.Event == notify.EventSessionFailed && d.Status == "delivered" })
	})
	for _, d := range ds {
		if d.Target == "push:"+strconv.FormatInt(alice.ID, 10) && (d.Status != "delivered" || d.Attempts != 1 || d.HTTPStatus != 201) {
			t.Errorf("alice's delivery %+v", d)
		}
	}
	var fm notify.PushMessage
	json.Unmarshal(ps.WaitPushes("/d/alice", 3)[2].Payload, &fm)
	if fm.Kind != "session_end" || !strings.Contains(fm.Body, "the CLI exited with code 1") {
		t.Errorf("the failed session's push: %+v", fm)
	}

	// Kinds switched off per device.
	if err := n.SetKinds(ctx, alice.ID, []string{store.PushQuestion}); err != nil {
		t.Fatal(err)
	}
	n.Notify(bashEvent("r4", "make"))
	n.Notify(notify.Event{Kind: notify.EventQuestion, SessionID: "s5", RequestID: "q1", Tool: "AskUserQuestion",
		Input: json.RawMessage(`{"questions":[{"question":"Which color?"}]}`)})
	var qm notify.PushMessage
	json.Unmarshal(ps.WaitPushes("/d/alice", 4)[3].Payload, &qm)
	if qm.Kind != "question" || qm.RequestID != "q1" || !strings.Contains(qm.Body, "Which color?") || qm.Capability != "" {
		t.Errorf("with only questions switched on, alice's next push: %+v", qm)
	}
}

// webhookSink is a webhook target on loopback recording what it gets.
type webhookSink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []*http.Request
	bodies [][]byte
	status []int // answers to give, in order; then 200
	hang   chan struct{}
}

func newSink(t *testing.T) *webhookSink {
	s := &webhookSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.got = append(s.got, r)
		s.bodies = append(s.bodies, body)
		code := 200
		if len(s.status) > 0 {
			code, s.status = s.status[0], s.status[1:]
		}
		hang := s.hang
		s.mu.Unlock()
		if hang != nil {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(func() {
		s.mu.Lock()
		if s.hang != nil {
			close(s.hang)
			s.hang = nil
		}
		s.mu.Unlock()
		s.srv.Close()
	})
	return s
}

func (s *webhookSink) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

func (s *webhookSink) wait(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.n() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the webhook target got %d deliveries in 30 s, want %d", s.n(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWebhookSignedAndFormatted: a JSON delivery carries
// Claudectl-Signature: t=UNIX,v1=HMAC-SHA256(secret, t + "." + body),
// checked here by hand, and the event's fields; the Slack and ntfy
// formats carry the text their services show; a webhook gets only the
// events it asked for.
func TestWebhookSignedAndFormatted(t *testing.T) {
	jsonSink, slackSink, ntfySink := newSink(t), newSink(t), newSink(t)
	db := openStore(t)
	secret := []byte("s3cret")
	n := newNotifier(t, &notify.Options{Store: db, AllowPrivateTargets: true, PageURL: "https://claude.example.com/",
		Webhooks: []notify.Webhook{
			{Name: "ops", URL: jsonSink.srv.URL + "/hook", Secret: secret},
			{Name: "chat", URL: slackSink.srv.URL, Format: notify.FormatSlack, Events: []string{notify.EventSessionFailed}},
			{Name: "phone", URL: ntfySink.srv.URL + "/claude", Format: notify.FormatNtfy},
		}})
	ev := bashEvent("r1", "git push origin main")
	ev.Routing = &permission.Routing{Route: "pushes", Ask: []string{"group:ops"}, Approvals: 2}
	n.Notify(ev)
	n.Notify(notify.Event{Kind: notify.EventSessionFailed, SessionID: "s2", Cwd: "/src/lib", Detail: "the CLI exited with code 1"})
	jsonSink.wait(t, 2)
	slackSink.wait(t, 1)
	ntfySink.wait(t, 2)

	// A target's lane has several workers: the two events may arrive in
	// either order.
	jsonSink.mu.Lock()
	r, body := jsonSink.got[0], jsonSink.bodies[0]
	if r.Header.Get("Claudectl-Event") != "permission_request" {
		r, body = jsonSink.got[1], jsonSink.bodies[1]
	}
	jsonSink.mu.Unlock()
	sig := r.Header.Get("Claudectl-Signature")
	ts, mac, ok := strings.Cut(strings.TrimPrefix(sig, "t="), ",v1=")
	if !ok {
		t.Fatalf("Claudectl-Signature %q is not t=…,v1=…", sig)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > time.Minute {
		t.Errorf("signature time %q", ts)
	}
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts + "." + string(body)))
	if want := hex.EncodeToString(h.Sum(nil)); mac != want {
		t.Errorf("signature %s, want HMAC-SHA256 of t.body %s", mac, want)
	}
	if err := notify.Verify(sig, secret, body, time.Now(), 5*time.Minute); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if err := notify.Verify(sig, []byte("wrong"), body, time.Now(), 5*time.Minute); err == nil {
		t.Error("Verify with another secret passed")
	}
	var p notify.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Event != "permission_request" || p.Session.ID != "s-r1" || p.Session.Cwd != "/src/app" || p.Request.Tool != "Bash" ||
		p.Request.Summary != "git push origin main" || p.Request.Route != "pushes" || p.Request.Needed != 2 ||
		!slices.Equal(p.Request.Asked, []string{"group:ops"}) || p.URL != "https://claude.example.com/#/s/s-r1" ||
		r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Claudectl-Event") != "permission_request" {
		t.Errorf("JSON payload %s, headers %v", body, r.Header)
	}

	slackSink.mu.Lock()
	var slack map[string]string
	json.Unmarshal(slackSink.bodies[0], &slack)
	slackHasSig := slackSink.got[0].Header.Get("Claudectl-Signature") != ""
	slackSink.mu.Unlock()
	if !strings.Contains(slack["text"], "Session failed in …/src/lib") || !strings.Contains(slack["text"], "the CLI exited with code 1") ||
		!strings.Contains(slack["text"], "<https://claude.example.com/#/s/s2|Open in claudectl>") || slackHasSig {
		t.Errorf("Slack body %q (signed: %v)", slack["text"], slackHasSig)
	}
	if slackSink.n() != 1 {
		t.Errorf("the Slack webhook asked for session_failed only, got %d deliveries", slackSink.n())
	}

	ntfySink.mu.Lock()
	nr, nb := ntfySink.got[0], ntfySink.bodies[0]
	if nr.Header.Get("Claudectl-Event") != "permission_request" { // four workers: either may come first
		nr, nb = ntfySink.got[1], ntfySink.bodies[1]
	}
	ntfySink.mu.Unlock()
	if nr.Header.Get("Title") != "Bash waits for you in …/src/app" || nr.Header.Get("Priority") != "high" ||
		!strings.Contains(string(nb), "git push origin main") || nr.Header.Get("Click") != "https://claude.example.com/#/s/s-r1" {
		t.Errorf("ntfy: headers %v body %q", nr.Header, nb)
	}
	waitDeliveries(t, db, "five deliveries logged", func(ds []*store.Delivery) bool {
		return len(ds) == 5 && !slices.ContainsFunc(ds, func(d *store.Delivery) bool { return d.Status != "delivered" })
	})
}

// TestWebhookRetries: 503 twice then 200 is delivered at the third
// attempt; a 400 is not tried again; a target that does not answer in
// its timeout fails after its attempts.
func TestWebhookRetries(t *testing.T) {
	flaky, bad, slow := newSink(t), newSink(t), newSink(t)
	flaky.status = []int{503, 503}
	bad.status = []int{400, 400, 400}
	slow.hang = make(chan struct{})
	db := openStore(t)
	n := newNotifier(t, &notify.Options{Store: db, AllowPrivateTargets: true, Backoff: 10 * time.Millisecond,
		Webhooks: []notify.Webhook{
			{Name: "flaky", URL: flaky.srv.URL},
			{Name: "bad", URL: bad.srv.URL},
			{Name: "slow", URL: slow.srv.URL, Timeout: 100 * time.Millisecond, Attempts: 2},
		}})
	n.Notify(bashEvent("r1", "make"))
	ds := waitDeliveries(t, db, "three outcomes", func(ds []*store.Delivery) bool { return len(ds) == 3 })
	by := map[string]*store.Delivery{}
	for _, d := range ds {
		by[d.Target] = d
	}
	if d := by["webhook:flaky"]; d.Status != "delivered" || d.Attempts != 3 || d.HTTPStatus != 200 {
		t.Errorf("flaky: %+v", d)
	}
	if d := by["webhook:bad"]; d.Status != "failed" || d.Attempts != 1 || d.HTTPStatus != 400 || !strings.Contains(d.Error, "HTTP 400") {
		t.Errorf("bad: %+v", d)
	}
	if d := by["webhook:slow"]; d.Status != "failed" || d.Attempts != 2 || !strings.Contains(d.Error, "no answer within 100ms") {
		t.Errorf("slow: %+v", d)
	}
}

// TestPrivateTargetsRefused: without notify.allow_private_targets, a
// webhook on 127.0.0.1, and one named localhost (a name, so only the
// address dialled tells: the check a DNS rebinding meets), are refused
// without a byte sent; the log says why and which setting allows it.
// Push endpoints meet the same guard.
func TestPrivateTargetsRefused(t *testing.T) {
	sink := newSink(t)
	_, port, _ := net.SplitHostPort(sink.srv.Listener.Addr().String())
	ps := notifytest.NewPushService(t)
	db := openStore(t)
	n := newNotifier(t, &notify.Options{Store: db, Webhooks: []notify.Webhook{
		{Name: "ip", URL: sink.srv.URL},
		{Name: "name", URL: "http://localhost:" + port + "/"},
	}})
	ctx := context.Background()
	ep, key, auth := ps.NewDevice("/d/1")
	if err := n.Subscribe(ctx, &store.PushSubscription{User: "alice", Endpoint: ep, P256DH: key, Auth: auth, Kinds: store.PushKinds}); err == nil ||
		!strings.Contains(err.Error(), "not https") {
		t.Errorf("an http endpoint without allow_private_targets: %v", err)
	}
	https := "https://127.0.0.1:" + port + "/d/1"
	if err := n.Subscribe(ctx, &store.PushSubscription{User: "alice", Endpoint: https, P256DH: key, Auth: auth, Kinds: store.PushKinds}); err != nil {
		t.Fatal(err)
	}
	n.Notify(bashEvent("r1", "make"))
	ds := waitDeliveries(t, db, "three refusals", func(ds []*store.Delivery) bool { return len(ds) == 3 })
	for _, d := range ds {
		if d.Status != "refused" || d.Attempts != 1 || !strings.Contains(d.Error, "127.0.0.1 is a loopback address: refused") ||
			!strings.Contains(d.Error, "notify.allow_private_targets") {
			t.Errorf("delivery %+v", d)
		}
	}
	if sink.n() != 0 || len(ps.Pushes("")) != 0 {
		t.Errorf("a private target got %d webhook and %d push requests", sink.n(), len(ps.Pushes("")))
	}
}

// TestSlowTargetDelaysNoOther: a target that never answers holds its own
// lane only: a hundred events reach another target all the while, and
// Notify returns at once for each.
func TestSlowTargetDelaysNoOther(t *testing.T) {
	dead, fast := newSink(t), newSink(t)
	dead.hang = make(chan struct{})
	n := newNotifier(t, &notify.Options{AllowPrivateTargets: true, Webhooks: []notify.Webhook{
		{Name: "dead", URL: dead.srv.URL, Timeout: time.Hour},
		{Name: "fast", URL: fast.srv.URL},
	}})
	var slowest atomic.Int64
	for i := range 100 {
		start := time.Now()
		n.Notify(bashEvent("r"+strconv.Itoa(i), "make"))
		if d := time.Since(start); int64(d) > slowest.Load() {
			slowest.Store(int64(d))
		}
	}
	fast.wait(t, 100)
	if dead.n() == 0 || dead.n() > 4 {
		t.Errorf("the dead target holds %d requests, want its 4 workers' at most", dead.n())
	}
	t.Logf("slowest Notify: %s", time.Duration(slowest.Load()))
}
