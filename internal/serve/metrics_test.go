package serve_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/internal/serve"
	"github.com/claudectl/claudectl/store"
)

// scrape reads url's metrics through Prometheus' own text parser and
// linter (naming conventions: _total counters, base units, help text).
func scrape(t *testing.T, c *http.Client, url string) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, res.Status, body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q, want Prometheus' text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, body)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "claudectl_") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
	return mfs, string(body)
}

// value returns the value of the series of family name with the labels
// given (name=value pairs), and whether there is one.
func value(mfs map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestMetricsDuringATurn scrapes /metrics (on the API's address, with the
// token) before, during and after a turn that asks a permission: the
// gauges show the live CLI and the pending request while it waits, the
// counters (events, commits, decisions) move, the exposition parses and
// passes Prometheus' linter, and no label names a session.
func TestMetricsDuringATurn(t *testing.T) {
	td := daemontest.Start(t, nil,
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "touch made.txt", "description": "make a file"})),
		claudetest.Reply(claudetest.Text("Made it.")))
	d, ctx := td.D, td.Ctx
	base, c := td.Serve()
	url := base + "/metrics"

	before, _ := scrape(t, c, url)
	events0, ok := value(before, "claudectl_events_appended_total")
	if !ok {
		t.Fatalf("no claudectl_events_appended_total: %v", before)
	}
	if v, ok := value(before, "claudectl_build_info"); !ok || v != 1 {
		t.Errorf("claudectl_build_info = %v, %v", v, ok)
	}

	s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "Make a file.")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the permission request", func() bool { return len(d.Pending(s.ID)) > 0 })
	during, text := scrape(t, c, url)
	for _, g := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"claudectl_cli_processes", nil, 1},
		{"claudectl_permission_requests_pending", nil, 1},
		{"claudectl_sessions", []string{"status", "running"}, 1},
		{"claudectl_sessions", []string{"status", "closed"}, 0},
		{"claudectl_sessions_queued", nil, 0},
	} {
		if v, ok := value(during, g.name, g.labels...); !ok || v != g.want {
			t.Errorf("during the turn, %s%v = %v (found %v), want %v", g.name, g.labels, v, ok, g.want)
		}
	}
	if v, ok := value(during, "claudectl_permission_request_oldest_age_seconds"); !ok || v < 0 || v > 60 {
		t.Errorf("the oldest request's age = %v, %v", v, ok)
	}
	if v, _ := value(during, "claudectl_events_appended_total"); v <= events0 {
		t.Errorf("claudectl_events_appended_total did not move: %v then %v", events0, v)
	}
	if v, ok := value(during, "claudectl_cli_version_info", "version", claudetest.CLIVersion(t)); !ok || v != 1 {
		t.Errorf("claudectl_cli_version_info{version=%q} = %v, %v", claudetest.CLIVersion(t), v, ok)
	}
	if strings.Contains(text, s.ID) {
		t.Errorf("the metrics name session %s: label values must be bounded", s.ID)
	}

	if _, _, err := d.Decide(ctx, daemon.Decision{RequestID: d.Pending(s.ID)[0].Request.RequestID, Allow: true, Client: "bob"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the turn's end", func() bool {
		got, err := d.Session(ctx, s.ID)
		return err == nil && got.Status == store.StatusIdle
	})
	after, text := scrape(t, c, url)
	if v, ok := value(after, "claudectl_permission_decisions_total", "outcome", "allow", "decider", "person"); !ok || v != 1 {
		t.Errorf(`decisions_total{outcome="allow",decider="person"} = %v, %v; want 1`, v, ok)
	}
	if v, _ := value(after, "claudectl_permission_requests_pending"); v != 0 {
		t.Errorf("pending after the decision: %v", v)
	}
	if v, _ := value(after, "claudectl_sessions", "status", "idle"); v != 1 {
		t.Errorf(`claudectl_sessions{status="idle"} = %v, want 1`, v)
	}
	commits0, _ := value(before, "claudectl_store_commit_duration_seconds")
	if v, ok := value(after, "claudectl_store_commit_duration_seconds"); !ok || v <= commits0 {
		t.Errorf("commits counted by the histogram: %v then %v", commits0, v)
	}
	if _, ok := after["claudectl_cost_usd_total"]; !ok {
		t.Errorf("no claudectl_cost_usd_total after a turn:\n%s", text)
	}
	for _, mf := range after {
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if strings.Contains(l.GetValue(), s.ID) || strings.Contains(l.GetValue(), "bob") {
					t.Errorf("%s has label %s=%q: label values must be bounded", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}

	res, err := http.Get(url) // no token
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %s, want 401", res.Status)
	}
	// Who may read them: a viewer (or better) over the whole daemon.
	auth := claudectlv1connect.NewAuthServiceClient(c, base)
	mint := func(req *v1.CreateTokenRequest) string {
		res, err := auth.CreateToken(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatalf("CreateToken %s: %v", req.Name, err)
		}
		return res.Msg.Secret
	}
	for _, tc := range []struct {
		req  *v1.CreateTokenRequest
		want int
	}{
		{&v1.CreateTokenRequest{Name: "grafana", Role: "viewer", User: "ops"}, http.StatusOK},
		{&v1.CreateTokenRequest{Name: "scoped", Role: "viewer", User: "ops", SessionId: s.ID}, http.StatusForbidden},
		{&v1.CreateTokenRequest{Name: "box", Role: "worker", User: "ops"}, http.StatusForbidden},
	} {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+mint(tc.req))
		res, err := (&http.Client{}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("/metrics with a %s token (session %q): %s, want %d: %s", tc.req.Role, tc.req.SessionId, res.Status, tc.want, body)
		}
	}
}

// TestMetricsListen: metrics_listen on loopback serves /metrics alone,
// without the token, for a local scraper; the API's address still wants
// it.
func TestMetricsListen(t *testing.T) {
	var stderr bytes.Buffer
	m, err := start(t, &serve.Settings{CLI: claudetest.CLIPath(t), MetricsListen: "127.0.0.1:0"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.MetricsAddr == "" || m.MetricsAddr == m.Addr {
		t.Fatalf("MetricsAddr %q (API %q)", m.MetricsAddr, m.Addr)
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	mfs, _ := scrape(t, c, "http://"+m.MetricsAddr+"/metrics")
	if _, ok := value(mfs, "claudectl_sessions", "status", "idle"); !ok {
		t.Errorf("no claudectl_sessions on metrics_listen")
	}
	if _, ok := mfs["go_goroutines"]; !ok {
		t.Errorf("no Go runtime metrics")
	}
	for path, want := range map[string]int{"/": http.StatusNotFound, "/claudectl.v1.HealthService/Health": http.StatusNotFound} {
		res, err := c.Get("http://" + m.MetricsAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET %s on metrics_listen: %s, want %d", path, res.Status, want)
		}
	}
	res, err := c.Get("http://" + m.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics on the API without the token: %s, want 401", res.Status)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
