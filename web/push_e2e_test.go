package web_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/notify/notifytest"
)

// TestPushInChromium runs e2e/push.mjs in Chromium against claudectl serve
// --demo (the real Claude Code CLI, the demo model) whose pushes go to a
// push-service stand-in on loopback (notify.allow_private_targets): the
// page subscribes "this device", switches a kind off, a request's push is
// delivered to its service worker and shown with Allow and Deny, and Allow
// settles the request through the push's capability, once.
func TestPushInChromium(t *testing.T) {
	chromium, node, cli := pageTools(t)
	ps := notifytest.NewPushService(t)
	endpoint, p256dh, auth := ps.NewDevice("/device/phone")
	dir := t.TempDir()
	bin := buildClaudectl(t, dir)
	dataDir, cwd := filepath.Join(dir, "data"), filepath.Join(dir, "work")
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(settings, []byte(`{"notify": {"allow_private_targets": true, "push_subject": "mailto:ops@example.com"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemonProc{t: t, bin: bin, args: []string{"serve", "--demo", "--config", settings, "--listen", freeLoopback(t),
		"--data-dir", dataDir, "--cli", cli}}
	pageURL := d.start()
	defer d.stop()
	tokenBytes, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	api := claudectlv1connect.NewNotifyServiceClient(http.DefaultClient, strings.TrimSuffix(pageURL, "/"))
	b64 := base64.RawURLEncoding.EncodeToString

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "e2e/push.mjs")
	cmd.Env = append(os.Environ(), "URL="+pageURL+"#token="+token, "CWD="+cwd, "CHROMIUM="+chromium,
		"ENDPOINT="+endpoint, "P256DH="+b64(p256dh), "AUTH="+b64(auth))
	runScript(t, cmd, "the page's push script", func(line string, stdin io.Writer) {
		switch {
		case line == "SUBSCRIBED":
			req := connect.NewRequest(&v1.ListPushSubscriptionsRequest{})
			req.Header().Set("Authorization", "Bearer "+token)
			res, err := api.ListPushSubscriptions(ctx, req)
			answer := "OK"
			if err != nil || len(res.Msg.Subscriptions) != 1 || res.Msg.Subscriptions[0].Endpoint != endpoint ||
				!slices.Equal(res.Msg.Subscriptions[0].Kinds, []string{"permission", "question", "budget"}) ||
				!strings.Contains(res.Msg.Subscriptions[0].Device, "Chrome") {
				answer = fmt.Sprintf("the daemon's subscriptions: %v %v", res, err)
				t.Error(answer)
			}
			fmt.Fprintln(stdin, answer)
		case strings.HasPrefix(line, "WAITPUSH "):
			id := strings.TrimPrefix(line, "WAITPUSH ")
			var payload string
			for deadline := time.Now().Add(60 * time.Second); payload == "" && time.Now().Before(deadline); {
				for _, p := range ps.Pushes("/device/phone") {
					if strings.Contains(string(p.Payload), id) {
						payload = string(p.Payload)
					}
				}
				if payload == "" {
					ps.WaitPushes("/device/phone", len(ps.Pushes("/device/phone"))+1)
				}
			}
			fmt.Fprintln(stdin, payload)
		case line == "TERMINAL":
			// A claude started by hand, as its hook reports it.
			transcript := filepath.Join(dir, "t.jsonl")
			os.WriteFile(transcript, []byte(`{"type":"user","message":{"role":"user","content":"list the files"}}`+"\n"+
				`{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","name":"Bash","input":{"command":"ls -la"}}]}}`+"\n"), 0o600)
			in, _ := json.Marshal(map[string]string{"session_id": "5b1c9d2e-0000-4000-8000-000000000001", "transcript_path": transcript,
				"cwd": cwd, "hook_event_name": "Stop"})
			req := connect.NewRequest(&v1.ReportTerminalRequest{HookInput: in})
			req.Header().Set("Authorization", "Bearer "+token)
			res, err := claudectlv1connect.NewTerminalServiceClient(http.DefaultClient, strings.TrimSuffix(pageURL, "/")).ReportTerminal(ctx, req)
			if err != nil {
				t.Errorf("ReportTerminal: %v", err)
				fmt.Fprintln(stdin, "none")
				return
			}
			fmt.Fprintln(stdin, res.Msg.SessionId)
		default:
			t.Log(line)
		}
	})
}
