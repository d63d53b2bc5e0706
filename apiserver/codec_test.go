package apiserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
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
	if got, _ := out["sessions"].([]any); code != http.StatusOK || len(got) != 1 || !strings.Contains(func() string { b, _ := json.Marshal(got); return string(b) }(), s.Msg.Session.Id) {
		t.Errorf("no filter: %d %v, want 200 and the session", code, out)
	}
	_, err = c.sessions.ListSessions(c.ctx, connect.NewRequest(&v1.ListSessionsRequest{Status: []v1.SessionStatus{42}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "42") {
		t.Errorf("binary status 42: %v, want InvalidArgument naming 42", err)
	}
}
