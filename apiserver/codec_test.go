package apiserver_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// TestJSONRequestsAreChecked: over Connect's JSON, a misspelt enum name or
// field name is refused with InvalidArgument naming it (Connect's own codec
// drops both, so a misspelt status filter listed every session), a
// well-formed request still works, and an enum number the daemon does not
// know is refused over binary protobuf too.
func TestJSONRequestsAreChecked(t *testing.T) {
	c := start(t)
	s, err := c.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: t.TempDir()}}))
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, c.url+"/claudectl.v1.SessionService/ListSessions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+c.token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: not JSON: %q", body, raw)
		}
		return res.StatusCode, out
	}
	for _, tc := range []struct{ body, want string }{
		{`{"status":["SESSION_STATUS_RUNING"]}`, "SESSION_STATUS_RUNING"},
		{`{"status":["SESSION_STATUS_IDLE"],"stauts":["SESSION_STATUS_IDLE"]}`, "stauts"},
		{`{"status":[99]}`, "99"},
		{`{"status":["SESSION_STATUS_UNSPECIFIED"]}`, "SESSION_STATUS_UNSPECIFIED"},
	} {
		code, out := post(tc.body)
		msg, _ := out["message"].(string)
		if code != http.StatusBadRequest || out["code"] != "invalid_argument" || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %v, want 400 invalid_argument naming %q", tc.body, code, out, tc.want)
		}
	}
	code, out := post(`{"status":["SESSION_STATUS_FAILED"]}`)
	if code != http.StatusOK || out["sessions"] != nil {
		t.Errorf("filter by failed: %d %v, want 200 and no session", code, out)
	}
	code, out = post(`{}`)
	if got, _ := out["sessions"].([]any); code != http.StatusOK || len(got) != 1 || !strings.Contains(fmt.Sprint(got), s.Msg.Session.Id) {
		t.Errorf("no filter: %d %v, want 200 and the session", code, out)
	}
	_, err = c.sessions.ListSessions(c.ctx, connect.NewRequest(&v1.ListSessionsRequest{Status: []v1.SessionStatus{42}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "42") {
		t.Errorf("binary status 42: %v, want InvalidArgument naming 42", err)
	}
}

// A status filter repeated millions of times costs the daemon one pass
// over it, not one per session: it is a set (it was a list each of
// 5,000 sessions was looked up in: 8.4 s; now 0.23 s).
func TestListSessionsHugeFilter(t *testing.T) {
	td := daemontest.Start(t, nil)
	url, httpc := td.Serve()
	sessions := claudectlv1connect.NewSessionServiceClient(httpc, url)
	const n = 5000
	for range n {
		if err := td.DB().CreateSession(td.Ctx, &store.Session{Cwd: "/tmp", Status: store.StatusSuspended, Options: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	filter := make([]v1.SessionStatus, 3<<20) // 3 MiB packed: under the request limit
	for i := range filter {
		filter[i] = v1.SessionStatus_SESSION_STATUS_IDLE
	}
	filter[len(filter)-1] = v1.SessionStatus_SESSION_STATUS_SUSPENDED // what the sessions are
	list := func(filter []v1.SessionStatus) time.Duration {
		t.Helper()
		start := time.Now()
		res, err := sessions.ListSessions(td.Ctx, connect.NewRequest(&v1.ListSessionsRequest{Status: filter}))
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Msg.Sessions) != n {
			t.Errorf("%d sessions listed, want %d", len(res.Msg.Sessions), n)
		}
		return took
	}
	plain := list(nil)
	took := list(filter)
	// The filter's bytes take their time too (3 MiB to read, check and
	// set): a bound that is a multiple of the plain list's, for -race,
	// and 15 s for a busy machine's pauses between the two calls (the
	// filter scanned for each session took 8.4 s a request without -race,
	// more with it).
	if took > 3*plain+15*time.Second {
		t.Errorf("listing with a filter of %d statuses took %v, %v without one", len(filter), took, plain)
	}
	t.Logf("%d sessions: %v; with a filter of %d statuses: %v", n, plain, len(filter), took)
}
