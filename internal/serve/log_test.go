package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/internal/serve"
)

// lockedBuffer is a bytes.Buffer safe for the logger's and the test's
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// With log_format json every log line is a JSON object, and a session's
// life is in them: created, the CLI started (pid) and exited (exit code),
// who closed it, how it ended.
func TestJSONLogsTellASessionsLife(t *testing.T) {
	model := claudetest.NewServer(claudetest.Script(claudetest.Reply(claudetest.Text("Hi."))))
	t.Cleanup(model.Close)
	var logs lockedBuffer
	srv, err := serve.Start(context.Background(), &serve.Settings{CLI: claudetest.CLIPath(t), Listen: "127.0.0.1:0",
		DataDir: t.TempDir(), LogFormat: "json", Env: model.EnvMap(t.TempDir())},
		&serve.Options{Stderr: &logs, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := srv.Daemon.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "hello")
	if err != nil {
		t.Fatal(err)
	}
	for ev, err := range srv.Daemon.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "result" {
			break
		}
	}
	if err := srv.Daemon.CloseSession(ctx, s.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	byMsg := map[string]map[string]any{}
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q: %v", line, err)
		}
		if msg, _ := rec["msg"].(string); msg != "" {
			byMsg[msg] = rec
		}
	}
	for msg, want := range map[string]map[string]any{
		"session created":     {"session": s.ID},
		"CLI started":         {"session": s.ID},
		"closing session":     {"session": s.ID, "by": "client:alice"},
		"CLI exited":          {"session": s.ID},
		"session's CLI ended": {"session": s.ID, "status": "closed", "detail": "closed by client:alice"},
	} {
		rec := byMsg[msg]
		if rec == nil {
			t.Errorf("no %q line in the logs:\n%s", msg, logs.String())
			continue
		}
		for k, v := range want {
			if rec[k] != v {
				t.Errorf("%q: %s = %v, want %v", msg, k, rec[k], v)
			}
		}
	}
	if pid, _ := byMsg["CLI started"]["pid"].(float64); pid <= 0 {
		t.Errorf("CLI started without its pid: %v", byMsg["CLI started"])
	}
	if rec := byMsg["CLI exited"]; rec != nil && rec["exit_code"] == nil && rec["signal"] == nil {
		t.Errorf("CLI exited without its exit code or signal: %v", rec)
	}
}

// The daemon's log says when connections without the token are closed for
// going over daemon.max_unauthenticated_connections, in its format.
func TestEvictionsInTheDaemonsLog(t *testing.T) {
	var logs lockedBuffer
	srv, err := serve.Start(context.Background(), &serve.Settings{CLI: claudetest.CLIPath(t), Listen: "127.0.0.1:0",
		DataDir: t.TempDir(), LogFormat: "json", MaxUnauthenticated: 2},
		&serve.Options{Stderr: &logs, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for range 3 { // idle: no request, no token
		c, err := net.Dial("tcp", srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "closed connections") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "closed connections") {
			var rec struct {
				Level, Fix string
				Closed     int
				Limit      int
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("not a line of the JSON logger: %q: %v", line, err)
			}
			if rec.Level != "WARN" || rec.Closed != 1 || rec.Limit != 2 || !strings.Contains(rec.Fix, "daemon.max_unauthenticated_connections") {
				t.Errorf("%s; want Warn, closed 1, limit 2, naming the setting", line)
			}
			return
		}
	}
	t.Errorf("no line of the connection closed over the limit:\n%s", logs.String())
}
