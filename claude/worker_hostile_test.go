package claude_test

import (
	"context"
	"io"
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

// honestWorker runs a relay.Worker named name on urls (tried in turn)
// whose CLI is a fakeCLI printing lines lines; its Run error comes on the
// channel.
func honestWorker(t *testing.T, ctx context.Context, name string, lines int, urls ...string) chan error {
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w := &relay.Worker{URLs: urls, Token: "tok", Name: name, ReconnectTimeout: 20 * time.Second,
		PingInterval: 100 * time.Millisecond, PingTimeout: time.Second, Logger: logger,
		Start: func(ctx context.Context, _ *relay.Command, stderr func(string)) (relay.Process, error) {
			return startFakeCLI(ctx, lines, stderr), nil
		}}
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	return errc
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
	if _, _, err := c.Read(ctx); err == nil { // and the close that follows
		t.Fatal("the refused connection got a frame after reject")
	}

	workerErr := honestWorker(t, ctx, "honest-1", 1, l.URL())
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

// TestWorkerLinkNeedsSecret: a second connection holding the worker token
// that says hello naming a live session's relay id (it is in the
// controller's log and store) is refused: it is not resumed, it gets no
// line meant for the CLI, and the honest worker's link is left alone —
// the next line reaches the honest CLI, whose answer comes back.
func TestWorkerLinkNeedsSecret(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l := &claude.WorkerListener{Token: "tok", Logger: logger}
	claude.SetWorkerPing(l, 100*time.Millisecond, time.Second)
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	workerErr := honestWorker(t, ctx, "honest-1", 1, l.URL())
	conn, err := l.Start(ctx, &claude.Command{MaxLineBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ReadLine(); err != nil { // the count: the honest link is up
		t.Fatal(err)
	}
	sid := conn.(interface{ RelaySession() string }).RelaySession()

	for _, h := range []relay.Header{
		{Session: sid, Worker: "honest-1"},                             // the name alone
		{Session: sid, Worker: "honest-1", Secret: "0123456789abcdef"}, // a guess
		{Session: sid, Worker: "honest-1", Ack: 1 << 40, Held: 1 << 40},
	} {
		c := dialHostile(t, ctx, l.URL(), "tok")
		sayHello(t, ctx, c, h)
		f, err := relay.ReadFrame(ctx, c)
		if err != nil || f.Type != relay.TypeReject || !strings.Contains(f.Error, "secret") {
			t.Fatalf("hello %+v naming the live session: answered %+v (%v); want reject, for want of the session's secret", h, f, err)
		}
		if _, _, err := c.Read(ctx); err == nil {
			t.Fatal("the refused connection got a frame after reject")
		}
	}

	// The honest link carries the session as before.
	if err := conn.WriteLine(ctx, []byte(`{"after":"the refusals"}`+"\n")); err != nil {
		t.Fatal(err)
	}
	ln, err := conn.ReadLine()
	if err != nil || decodeFake(t, ln).Type != "echo" || decodeFake(t, ln).Line != `{"after":"the refusals"}` {
		t.Fatalf("after the refusals: %s, %v; want the honest CLI's echo of the line", ln.Data, err)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-workerErr; err != nil {
		t.Errorf("honest worker: %v", err)
	}
}

// TestWorkerClaimNeedsOpenSecret: a session placed on a registered worker
// waits for the link that worker dials for it. Another holder of the
// token, naming the worker and the session, is refused: the claim needs
// the secret of the open frame, which only the worker's control
// connection read. The worker's own link then gets the session.
func TestWorkerClaimNeedsOpenSecret(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l := &claude.WorkerListener{Token: "tok", Logger: logger}
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The registered worker is a raw connection too, to hold its link
	// back while the stranger tries.
	ctl := dialHostile(t, ctx, l.URL(), "tok")
	sayHello(t, ctx, ctl, relay.Header{Worker: "gpu1", Register: &relay.Registration{Name: "gpu1", Instance: "i1", Capacity: 1}})
	if f, err := relay.ReadFrame(ctx, ctl); err != nil || f.Type != relay.TypeWelcome {
		t.Fatalf("registration: %+v, %v", f, err)
	}
	(&hostHarness{t: t, l: l}).waitConnected("gpu1") // placeable once welcomed
	type started struct {
		conn claude.Conn
		err  error
	}
	startc := make(chan started, 1)
	go func() {
		conn, err := (&claude.WorkerTransport{Listener: l, Name: "gpu1"}).Start(ctx, &claude.Command{})
		startc <- started{conn, err}
	}()
	open, err := relay.ReadFrame(ctx, ctl)
	if err != nil || open.Type != relay.TypeOpen || open.Secret == "" {
		t.Fatalf("open frame: %+v, %v; want one with a secret", open, err)
	}

	stranger := dialHostile(t, ctx, l.URL(), "tok")
	sayHello(t, ctx, stranger, relay.Header{Worker: "gpu1", Claim: open.Session})
	if f, err := relay.ReadFrame(ctx, stranger); err != nil || f.Type != relay.TypeReject {
		t.Fatalf("a claim without the open frame's secret: %+v (%v); want reject", f, err)
	}

	link := dialHostile(t, ctx, l.URL(), "tok")
	sayHello(t, ctx, link, relay.Header{Worker: "gpu1", Claim: open.Session, Secret: open.Secret})
	f, err := relay.ReadFrame(ctx, link)
	if err != nil || f.Type != relay.TypeStart || f.Session != open.Session || f.Secret == "" || f.Secret == open.Secret {
		t.Fatalf("the worker's claim: %+v (%v); want start, with the session's own secret", f, err)
	}
	s := <-startc
	if s.err != nil {
		t.Fatal(s.err)
	}
	// End the session as a worker would: its CLI exited.
	exit := &relay.Header{Type: relay.TypeExit, Seq: 1, Exit: &relay.Exit{}}
	if err := relay.WriteFrame(ctx, link, exit, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.conn.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	closed := make(chan struct{})
	go func() { // once the exit is acknowledged, the worker closes
		defer close(closed)
		for {
			f, err := relay.ReadFrame(ctx, link)
			if err != nil {
				return
			}
			if f.Ack >= 1 {
				link.Close(websocket.StatusNormalClosure, "session over")
				return
			}
		}
	}()
	s.conn.Close()
	<-closed
}

// TestWorkerReturnNeedsSecret: a controller that did not start a session
// takes it over only from the worker holding its secret. A stranger naming
// the session to the second controller, while the first still serves it,
// is not resumed even by an Adopt that forgets to check
// (WorkerReturn.Proves): WorkerResume.SecretHash does not match what it
// presented. When the first controller dies, the honest worker comes back
// and is taken over, its CLI untouched.
func TestWorkerReturnNeedsSecret(t *testing.T) {
	a, b, _ := twoListeners(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var secretHash string // A's session's, set before any hello reaches B
	refusals := make(chan error, 4)
	adopted := make(chan claude.Conn, 1)
	b.Adopt = func(actx context.Context, r *claude.WorkerReturn) error {
		c, err := (&claude.WorkerTransport{Listener: b,
			Resume: &claude.WorkerResume{Session: r.Session, SecretHash: secretHash}}).Start(ctx, &claude.Command{MaxLineBytes: 1 << 20})
		if err != nil {
			refusals <- err
			return err
		}
		adopted <- c
		return nil
	}
	workerErr := honestWorker(t, ctx, "honest-1", 1, a.URL(), b.URL())
	connA, err := a.Start(ctx, &claude.Command{MaxLineBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := connA.ReadLine(); err != nil {
		t.Fatal(err)
	}
	sid := connA.(interface{ RelaySession() string }).RelaySession()
	secretHash = connA.(interface{ RelaySecretHash() string }).RelaySecretHash()

	c := dialHostile(t, ctx, b.URL(), "tok")
	sayHello(t, ctx, c, relay.Header{Session: sid, Worker: "honest-1", Secret: "a guess"})
	if f, err := relay.ReadFrame(ctx, c); err == nil {
		t.Fatalf("a stranger naming the session to another controller got %+v; want the connection closed", f)
	}
	if err := <-refusals; !strings.Contains(err.Error(), "did not present its secret") {
		t.Errorf("taking the session over for the stranger: %v; want a refusal for want of the secret", err)
	}
	if err := connA.WriteLine(ctx, []byte(`{"on":"a"}`+"\n")); err != nil {
		t.Fatal(err)
	}
	if ln, err := connA.ReadLine(); err != nil || decodeFake(t, ln).Line != `{"on":"a"}` {
		t.Fatalf("the first controller after the stranger: %s, %v; want the echo", ln.Data, err)
	}

	a.Close() // the honest worker comes back to B, with the secret
	var connB claude.Conn
	select {
	case connB = <-adopted:
	case err := <-refusals:
		t.Fatalf("the honest worker was refused: %v", err)
	case <-ctx.Done():
		t.Fatal("the honest worker was never taken over")
	}
	if err := connB.WriteLine(ctx, []byte(`{"on":"b"}`+"\n")); err != nil {
		t.Fatal(err)
	}
	connB.CloseWrite()
	for { // after what A read but had not acknowledged (nothing is stored here)
		ln, err := connB.ReadLine()
		if err != nil {
			t.Fatalf("the second controller: %v before the echo", err)
		}
		if decodeFake(t, ln).Line == `{"on":"b"}` {
			break
		}
	}
	if err := connB.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-workerErr; err != nil {
		t.Errorf("honest worker: %v", err)
	}
}

// TestWorkerListenerMaxConnections: connections that presented the token
// are capped (a holder of the token opened 2,000 idle ones: 2,000 file
// descriptors and 73 MB). One more is answered 503 with the reason, which
// an honest worker turned away prints, in its own words, before it tries
// again; once a connection closes, it gets in and runs its session. The
// listener warns once, not per refusal.
func TestWorkerListenerMaxConnections(t *testing.T) {
	logs := &logBuffer{}
	l := &claude.WorkerListener{Token: "tok", MaxConnections: 3, MaxConnectionsSetting: "workers.max_connections",
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Open, authenticated, and silent: no hello.
	var idle []*websocket.Conn
	for range 3 {
		idle = append(idle, dialHostile(t, ctx, l.URL(), "tok"))
	}
	const reason = "3 worker connections are open, as many as it allows (workers.max_connections): stop workers it does not need, or raise workers.max_connections"
	for range 2 {
		c, res, err := websocket.Dial(ctx, l.URL(), &websocket.DialOptions{
			HTTPHeader:   http.Header{"Authorization": {"Bearer tok"}},
			Subprotocols: []string{relay.Subprotocol},
		})
		if err == nil {
			c.CloseNow()
			t.Fatal("a fourth connection was accepted")
		}
		var body []byte
		if res != nil {
			body, _ = io.ReadAll(res.Body)
		}
		if res == nil || res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), reason) {
			t.Fatalf("a fourth connection: %v, %s; want 503 saying %q", err, body, reason)
		}
	}

	workerLogs := &logBuffer{}
	w := &relay.Worker{URL: l.URL(), Token: "tok", Name: "honest-1", ReconnectTimeout: 20 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(workerLogs, testWriter{t}), nil)),
		Start: func(ctx context.Context, _ *relay.Command, stderr func(string)) (relay.Process, error) {
			return startFakeCLI(ctx, 1, stderr), nil
		}}
	workerErr := make(chan error, 1)
	go func() { workerErr <- w.Run(ctx) }()
	want := "the controller at " + l.URL() + " turned the connection away: " + reason + "; trying again"
	for !strings.Contains(workerLogs.String(), want) {
		select {
		case err := <-workerErr:
			t.Fatalf("the worker turned away stopped: %v", err)
		case <-ctx.Done():
			t.Fatalf("the worker's log:\n%s\nwant %q", workerLogs.String(), want)
		case <-time.After(10 * time.Millisecond):
		}
	}

	idle[0].CloseNow() // room for one
	conn, err := l.Start(ctx, &claude.Command{})
	if err != nil {
		t.Fatal(err)
	}
	if got := workerName(t, conn); got != "honest-1" {
		t.Errorf("the session runs on %q, want honest-1", got)
	}
	if _, err := conn.ReadLine(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-workerErr; err != nil {
		t.Errorf("worker: %v", err)
	}
	if n := strings.Count(logs.String(), "worker connections refused"); n != 1 {
		t.Errorf("%d warnings of refused connections, want 1 (at most one a minute):\n%s", n, logs.String())
	}
}
