package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/internal/serve"
	"github.com/claudectl/claudectl/notify"
)

// TestHookInstallUninstall: install merges claudectl's hook into a
// settings file that has hooks and keys of its own (kept, the file as it
// was backed up), a second install replaces its own hooks rather than
// adding more, and uninstall gives back the settings as they were; a file
// install created is removed by uninstall.
func TestHookInstallUninstall(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	path := filepath.Join(home, ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	orig := []byte(`{"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}, "permissions": {"allow": ["Bash(ls:*)"]}, "cleanupPeriodDays": 30}` + "\n")
	if err := os.WriteFile(path, orig, 0o640); err != nil {
		t.Fatal(err)
	}
	inv := invocation{getenv: map[string]string{"HOME": home}}
	read := func() map[string]any {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v\n%s", path, err, b)
		}
		return m
	}
	o := claudectl(t, inv, "hook", "install", "--claudectl", "/opt/claudectl/bin/claudectl", "--wait", "90s")
	if o.code != 0 || !strings.Contains(o.stdout, "Installed claudectl's hook in "+path) || !strings.Contains(o.stdout, path+".claudectl-backup") {
		t.Fatalf("install: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	if b, _ := os.ReadFile(path + ".claudectl-backup"); !bytes.Equal(b, orig) {
		t.Errorf("the backup: %q", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Errorf("the settings' mode is %v, want 0640 as it was", st.Mode().Perm())
	}
	m := read()
	hooks := m["hooks"].(map[string]any)
	stop := hooks["Stop"].([]any)
	if m["model"] != "opus" || m["cleanupPeriodDays"] != float64(30) || len(stop) != 2 ||
		!strings.Contains(mustJSON(stop[0]), "notify-send done") || !strings.Contains(mustJSON(stop[1]), "CLAUDECTL_HOOK=1 /opt/claudectl/bin/claudectl hook run --wait 1m30s") {
		t.Errorf("after install: %s", mustJSON(m))
	}
	perm := mustJSON(hooks["PermissionRequest"])
	if !strings.Contains(perm, `"matcher":"*"`) || !strings.Contains(perm, `"timeout":120`) || hooks["Notification"] == nil || hooks["SessionEnd"] == nil {
		t.Errorf("the hooks installed: %s", mustJSON(hooks))
	}
	if o = claudectl(t, inv, "hook", "install", "--claudectl", "/opt/claudectl/bin/claudectl"); o.code != 0 || strings.Contains(o.stdout, "backup") {
		t.Fatalf("install again: exit %d, stdout %q", o.code, o.stdout)
	}
	if got := strings.Count(mustJSON(read()), "hook run"); got != 4 {
		t.Errorf("after a second install, %d hooks of claudectl's, want 4 (one per event)", got)
	}
	if o = claudectl(t, inv, "hook", "uninstall"); o.code != 0 || !strings.Contains(o.stdout, "Removed claudectl's hook") {
		t.Fatalf("uninstall: exit %d, stdout %q", o.code, o.stdout)
	}
	var want map[string]any
	json.Unmarshal(orig, &want)
	if got := read(); !reflect.DeepEqual(got, want) {
		t.Errorf("after uninstall:\n%s\nwant\n%s", mustJSON(got), mustJSON(want))
	}
	if o = claudectl(t, inv, "hook", "uninstall"); o.code != 0 || !strings.Contains(o.stdout, "nothing to remove") {
		t.Errorf("uninstall again: exit %d, stdout %q", o.code, o.stdout)
	}

	// No settings file: install makes one, uninstall removes it.
	other := filepath.Join(t.TempDir(), "cfg")
	inv2 := invocation{getenv: map[string]string{"HOME": home, "CLAUDE_CONFIG_DIR": other}}
	if o = claudectl(t, inv2, "hook", "install"); o.code != 0 || !fileExists(filepath.Join(other, "settings.json")) {
		t.Fatalf("install without a file: exit %d, stderr %q", o.code, o.stderr)
	}
	if o = claudectl(t, inv2, "hook", "uninstall"); o.code != 0 || fileExists(filepath.Join(other, "settings.json")) {
		t.Errorf("uninstall of a file install made: exit %d, the file is still there: %v", o.code, fileExists(filepath.Join(other, "settings.json")))
	}
	// A settings file that is not JSON is left alone.
	bad := filepath.Join(t.TempDir(), "settings.json")
	os.WriteFile(bad, []byte("{oops"), 0o600)
	if o = claudectl(t, inv, "hook", "install", "--settings", bad); o.code != 1 || !strings.Contains(o.stderr, "is not a JSON object") {
		t.Errorf("install into a broken file: exit %d, stderr %q", o.code, o.stderr)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestHookRunThroughDaemon: claudectl hook run, as Claude Code runs it
// with a PermissionRequest's input, holds the request in the daemon:
// claudectl pending lists it in a terminal session (listed as such), a
// webhook hears of it (its session marked terminal),
// claudectl approve answers it, and the hook prints Claude Code's allow.
// A session started by hand cannot be prompted through the daemon. With
// nobody answering within --wait, and with the daemon gone, the hook
// prints nothing and exits 0: Claude Code's own dialog asks.
func TestHookRunThroughDaemon(t *testing.T) {
	t.Parallel()
	hooked := make(chan notify.Payload, 16)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p notify.Payload
		json.NewDecoder(r.Body).Decode(&p)
		hooked <- p
	}))
	t.Cleanup(sink.Close)
	d, _ := startDaemonModel(t, &daemontest.Options{Notify: serve.NotifySettings{AllowPrivateTargets: true,
		Webhooks: []serve.Webhook{{Webhook: notify.Webhook{Name: "ops", URL: sink.URL, Events: []string{notify.EventPermission}}}}}})
	cwd := t.TempDir()
	transcript := filepath.Join(t.TempDir(), "abc.jsonl")
	os.WriteFile(transcript, []byte(`{"type":"user","timestamp":"2026-11-28T10:00:00Z","message":{"role":"user","content":"list the files"}}`+"\n"+
		`{"type":"assistant","timestamp":"2026-11-28T10:00:01Z","message":{"role":"assistant","content":[{"type":"text","text":"I will run ls."},{"type":"tool_use","name":"Bash","input":{"command":"ls -la"}}]}}`+"\n"), 0o600)
	input := func(event, extra string) string {
		return `{"session_id":"0f7e2c1a-1111-4222-8333-444455556666","transcript_path":` + mustJSON(transcript) + `,"cwd":` + mustJSON(cwd) +
			`,"hook_event_name":"` + event + `"` + extra + `}`
	}
	ask := input("PermissionRequest", `,"tool_name":"Bash","tool_input":{"command":"rm -rf build","description":"Clean"},"permission_suggestions":[]`)
	inv := d.inv()
	inv.stdin = ask
	done := make(chan outcome, 1)
	go func() { done <- claudectl(t, inv, "hook", "run", "--wait", "60s") }()

	var pend []pendingJSON
	waitFor(t, "the terminal's request in claudectl pending", func() bool {
		o := claudectl(t, d.inv(), "pending", "--json")
		pend = nil
		json.Unmarshal([]byte(o.stdout), &pend)
		return len(pend) == 1
	})
	if pend[0].Tool != "Bash" || pend[0].Summary != "rm -rf build" {
		t.Errorf("pending: %+v", pend[0])
	}
	select {
	case p := <-hooked: // a webhook hears of it as of any session's
		if p.Session == nil || !p.Session.Terminal || p.Session.Cwd != cwd || p.Request == nil || p.Request.Summary != "rm -rf build" {
			t.Errorf("the webhook's payload: %+v %+v", p.Session, p.Request)
		}
	case <-time.After(30 * time.Second):
		t.Error("no webhook for the terminal's request")
	}
	sid := pend[0].SessionID
	res, err := d.sessions.GetSession(d.ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: sid}))
	if err != nil || !res.Msg.Session.Terminal || res.Msg.Session.Cwd != cwd || res.Msg.Session.ClaudeSessionId != "0f7e2c1a-1111-4222-8333-444455556666" {
		t.Errorf("the terminal session: %+v, %v", res.Msg.GetSession(), err)
	}
	if o := claudectl(t, d.inv(), "sessions"); !regexp.MustCompile(`(?m)^` + sid + `\s.*\sterminal\b`).MatchString(o.stdout) {
		t.Errorf("sessions does not list the terminal session as such:\n%s", o.stdout)
	}
	if o := claudectl(t, d.inv(), "send", sid, "hello"); o.code == 0 || !strings.Contains(o.stderr, "runs in a terminal") {
		t.Errorf("send to a terminal session: exit %d, stderr %q", o.code, o.stderr)
	}
	if o := claudectl(t, d.inv(), "approve", pend[0].RequestID); o.code != 0 {
		t.Fatalf("approve: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	var o outcome
	select {
	case o = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the hook did not return after the approval")
	}
	if o.code != 0 || strings.TrimSpace(o.stdout) != `{"hookSpecificOutput":{"decision":{"behavior":"allow"},"hookEventName":"PermissionRequest"}}` {
		t.Fatalf("the hook's answer: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}

	tr, err := claudectlTerminal(d).GetTerminalTranscript(d.ctx, connect.NewRequest(&v1.GetTerminalTranscriptRequest{SessionId: sid}))
	if err != nil || len(tr.Msg.Entries) != 3 || tr.Msg.Entries[0].Text != "list the files" || tr.Msg.Entries[2].Kind != "tool_use" ||
		!strings.Contains(tr.Msg.Entries[2].Text, "ls -la") || tr.Msg.Path != transcript {
		t.Errorf("the transcript: %v, %v", tr, err)
	}

	// Stop: the session is idle; nobody answering within --wait: no answer.
	inv.stdin = input("Stop", `,"stop_hook_active":false,"last_assistant_message":"Done."`)
	if o := claudectl(t, inv, "hook", "run"); o.code != 0 || o.stdout != "" {
		t.Errorf("the Stop hook: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	inv.stdin = ask
	start := time.Now()
	if o := claudectl(t, inv, "hook", "run", "--wait", "1s"); o.code != 0 || o.stdout != "" || !strings.Contains(o.stderr, "nobody answered") {
		t.Errorf("unanswered: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	t.Logf("an unanswered request fell back after %s", time.Since(start))

	// The daemon gone: at once, no answer.
	gone := invocation{stdin: ask, getenv: map[string]string{"CLAUDECTL_SERVER": "http://127.0.0.1:1", "CLAUDECTL_TOKEN": "x"}}
	if o := claudectl(t, gone, "hook", "run"); o.code != 0 || o.stdout != "" || !regexp.MustCompile(`Claude Code asks in the terminal`).MatchString(o.stderr) {
		t.Errorf("without a daemon: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
}

// claudectlTerminal is a TerminalService client with d's token.
func claudectlTerminal(d *testDaemon) claudectlv1connect.TerminalServiceClient {
	auth := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+d.token)
			return next(ctx, req)
		}
	})
	return claudectlv1connect.NewTerminalServiceClient(http.DefaultClient, d.url, connect.WithInterceptors(auth))
}
