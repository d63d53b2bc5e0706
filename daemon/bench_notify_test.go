package daemon_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/internal/serve"
	"github.com/claudectl/claudectl/notify"
	"github.com/claudectl/claudectl/notify/notifytest"
)

// BenchmarkReach100Requests: 100 sessions ask for a permission at once
// (in-process CLIs, each printing a can_use_tool request with its first
// turn); it measures, per request, from the moment its CLI printed it to
// the moment a webhook received it (request→webhook) and the push service
// stand-in received its push (request→push: VAPID-signed and encrypted for
// the device, on loopback). With dead, a second webhook never answers
// (each attempt hangs until its timeout): its lane fills and drops, and
// the figures of the others must not move.
//
//	go test -run '^$' -bench BenchmarkReach100Requests -benchtime 3x ./daemon/
func BenchmarkReach100Requests(b *testing.B) {
	for _, dead := range []bool{false, true} {
		b.Run(fmt.Sprintf("dead_target=%v", dead), func(b *testing.B) {
			var hookLat, pushLat []time.Duration
			for range b.N {
				h, p := reachRound(b, dead)
				hookLat, pushLat = append(hookLat, h...), append(pushLat, p...)
			}
			slices.Sort(hookLat)
			slices.Sort(pushLat)
			b.ReportMetric(ms(int64(hookLat[len(hookLat)/2])), "webhook_p50_ms")
			b.ReportMetric(ms(int64(hookLat[len(hookLat)*99/100])), "webhook_p99_ms")
			b.ReportMetric(ms(int64(pushLat[len(pushLat)/2])), "push_p50_ms")
			b.ReportMetric(ms(int64(pushLat[len(pushLat)*99/100])), "push_p99_ms")
		})
	}
}

const reachSessions = 100

// reachRound runs one round: a daemon, 100 sessions asking at once, and
// the latencies of their webhook deliveries and pushes.
func reachRound(b *testing.B, dead bool) (hook, push []time.Duration) {
	b.Helper()
	var mu sync.Mutex
	asked := map[string]time.Time{} // request id → when its CLI printed it
	hooked := map[string]time.Time{}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		var p notify.Payload
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &p) == nil && p.Request != nil {
			mu.Lock()
			hooked[p.Request.ID] = at
			mu.Unlock()
		}
	}))
	defer sink.Close()
	hang := make(chan struct{})
	deadSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer deadSrv.Close()
	defer close(hang)
	hooks := []serve.Webhook{{Webhook: notify.Webhook{Name: "fast", URL: sink.URL, Events: []string{notify.EventPermission}}}}
	if dead {
		hooks = append(hooks, serve.Webhook{Webhook: notify.Webhook{Name: "dead", URL: deadSrv.URL, Timeout: time.Minute}})
	}
	ps := notifytest.NewPushService(b)
	var n int
	cli := &daemontest.InProcessCLI{Script: func(int) [][]byte {
		mu.Lock()
		n++
		id := fmt.Sprintf("req-%03d", n)
		asked[id] = time.Now()
		mu.Unlock()
		const sid = `"session_id":"$SESSION_ID"`
		return [][]byte{
			fmt.Appendf(nil, `{"type":"system","subtype":"init",%s,"model":"stand-in","tools":["Bash"],"cwd":"/","permissionMode":"default","claude_code_version":"2.1.330"}`, sid),
			fmt.Appendf(nil, `{"type":"control_request","request_id":%q,"request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"make deploy"},"tool_use_id":"t-%s"}}`, id, id),
		}
	}}
	td := daemontest.Start(b, &daemontest.Options{Transport: cli,
		Notify: serve.NotifySettings{AllowPrivateTargets: true, Webhooks: hooks}})
	url, httpc := td.Serve()
	endpoint, key, auth := ps.NewDevice("/phone")
	b64 := base64.RawURLEncoding.EncodeToString
	if _, err := claudectlv1connect.NewNotifyServiceClient(httpc, url).AddPushSubscription(td.Ctx, connect.NewRequest(&v1.AddPushSubscriptionRequest{
		Endpoint: endpoint, P256Dh: b64(key), Auth: b64(auth), Kinds: []string{"permission"}})); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for range reachSessions {
		wg.Go(func() {
			if _, err := td.D.Create(td.Ctx, &daemon.SessionOptions{Cwd: b.TempDir()}, "deploy"); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		got := len(hooked)
		mu.Unlock()
		if got == reachSessions && len(ps.Pushes("/phone")) >= reachSessions {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("in 2 minutes: %d of %d webhook deliveries, %d pushes", got, reachSessions, len(ps.Pushes("/phone")))
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, at := range hooked {
		hook = append(hook, at.Sub(asked[id]))
	}
	for _, p := range ps.Pushes("/phone") {
		var m notify.PushMessage
		if err := json.Unmarshal(p.Payload, &m); err != nil || asked[m.RequestID].IsZero() {
			b.Fatalf("push %s: %v", p.Payload, err)
		}
		push = append(push, p.At.Sub(asked[m.RequestID]))
	}
	return hook, push
}
