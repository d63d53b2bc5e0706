package claude_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/relay"
)

// These tests attack a WorkerListener as a hostile holder of the worker
// token would: a raw WebSocket client speaking the relay protocol, beside
// honest workers (relay.Worker, the code of "claudectl worker").

// dialHostile opens a raw relay connection to url with token; the test's
// end closes it.
func dialHostile(t *testing.T, ctx context.Context, url, token string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + token}},
		Subprotocols: []string{relay.Subprotocol},
	})
	if err != nil {
		t.Fatalf("dialing %s: %v", url, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// sayHello writes a hello frame on c.
func sayHello(t *testing.T, ctx context.Context, c *websocket.Conn, h relay.Header) {
	t.Helper()
	h.Type = relay.TypeHello
	if err := relay.WriteFrame(ctx, c, &h, nil); err != nil {
		t.Fatal(err)
	}
}

// honestWorker runs a relay.Worker named name on url whose CLI is a
// fakeCLI printing lines lines; its Run error comes on the channel.
func honestWorker(t *testing.T, ctx context.Context, url, name string, lines int) (*relay.Worker, chan error) {
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w := &relay.Worker{URL: url, Token: "tok", Name: name, ReconnectTimeout: 20 * time.Second,
		PingInterval: 100 * time.Millisecond, PingTimeout: time.Second, Logger: logger,
		Start: func(ctx context.Context, _ *relay.Command, stderr func(string)) (relay.Process, error) {
			return startFakeCLI(ctx, lines, stderr), nil
		}}
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	return w, errc
}

// TestWorkerOnceNameBounded: a one-session worker's name is checked as a
// registered worker's is. A hello naming a worker with 20,057 characters of
// HTML, ANSI escapes and a newline is refused (it would have become the
// session's worker name, whole in every log line about it); the session
// goes to the next, honest worker, and the log holds 40 bytes of the name
// at most, quoted.
func TestWorkerOnceNameBounded(t *testing.T) {
	logs := &logBuffer{}
	l := &claude.WorkerListener{Token: "tok", Logger: slog.New(slog.NewTextHandler(logs, nil))}
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	evil := "<script>alert(1)</script>\x1b[31m\nlevel=ERROR msg=forged <b>"
	evil += strings.Repeat("x", 20057-len(evil)) // a hello fits in the listener's 32 KiB
	c := dialHostile(t, ctx, l.URL(), "tok")
	sayHello(t, ctx, c, relay.Header{Worker: evil})

	// A session waits for a worker meanwhile: a listener that kept the
	// hostile one would give it this session.
	type started struct {
		conn claude.Conn
		err  error
	}
	startc := make(chan started, 1)
	go func() {
		conn, err := l.Start(ctx, &claude.Command{})
		startc <- started{conn, err}
	}()
	f, err := relay.ReadFrame(ctx, c)
	if err != nil || f.Type != relay.TypeReject || !strings.Contains(f.Error, "at most 64 characters") {
		t.Fatalf("a hello naming a worker of %d characters was answered %+v (%v); want reject, saying the name has at most 64 characters", len(evil), f, err)
	}

	_, workerErr := honestWorker(t, ctx, l.URL(), "honest-1", 1)
	s := <-startc
	if s.err != nil {
		t.Fatal(s.err)
	}
	if got := workerName(t, s.conn); got != "honest-1" {
		t.Errorf("the session runs on worker %q, want honest-1", relay.Clip(got))
	}
	if _, err := s.conn.ReadLine(); err != nil {
		t.Fatal(err)
	}
	if err := s.conn.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-workerErr; err != nil {
		t.Errorf("honest worker: %v", err)
	}

	log := logs.String()
	if !strings.Contains(log, "worker link refused") {
		t.Errorf("the refusal is not logged:\n%s", log)
	}
	for _, line := range strings.Split(log, "\n") {
		if len(line) > 1000 {
			t.Errorf("a log line of %d bytes: %.200s…", len(line), line)
		}
	}
	if strings.Contains(log, "\x1b") || strings.Contains(log, "\nlevel=ERROR msg=forged") {
		t.Errorf("the worker's name reached the log raw:\n%q", log)
	}
}
