package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/websocket"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/internal/relay"
	"github.com/claudectl/claudectl/store"
)

// These tests attack a daemon's worker endpoint as a hostile holder of the
// worker token would: a raw WebSocket client speaking the relay protocol,
// beside honest "claudectl worker" processes running the real CLI.

// hostileDial opens a connection to the daemon's worker endpoint with
// token, closed by the test's end.
func hostileDial(t *testing.T, ctx context.Context, endpoint, token string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(ctx, endpoint, &websocket.DialOptions{
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + token}},
		Subprotocols: []string{relay.Subprotocol},
	})
	if err != nil {
		t.Fatalf("dialing %s: %v", endpoint, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// hostileHello dials the daemon's worker endpoint with token, says hello
// and returns the connection (closed by the test's end) and the daemon's
// answer (an error when it closed the connection instead).
func hostileHello(t *testing.T, ctx context.Context, endpoint, token string, h relay.Header) (*websocket.Conn, *relay.Frame, error) {
	t.Helper()
	c := hostileDial(t, ctx, endpoint, token)
	h.Type = relay.TypeHello
	if err := relay.WriteFrame(ctx, c, &h, nil); err != nil {
		t.Fatal(err)
	}
	f, err := relay.ReadFrame(ctx, c)
	return c, f, err
}

// followToResult reads session id's log after seq after until a result
// line, and returns that line and the seq of the last event read.
func followToResult(t *testing.T, ctx context.Context, sessions claudectlv1connect.SessionServiceClient, id string, after int64) (string, int64) {
	t.Helper()
	stream, err := sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id, AfterSeq: after}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	for stream.Receive() {
		ev := stream.Msg().Event
		after = ev.Seq
		if m := ev.GetMessage(); m.GetType() == "result" {
			return string(m.Raw), after
		}
	}
	t.Fatalf("session %s: the log ended without a result: %v", id, stream.Err())
	return "", after
}

// TestDaemonWorkerLinkNeedsSecret: a session runs on a "claudectl worker
// --once" (the real CLI). Another holder of the worker token, who read the
// session's relay id in the store (or the daemon's log), says hello naming
// it: it is refused, not resumed, and the honest worker's link is left
// alone — the next prompt is answered by the honest worker's CLI.
func TestDaemonWorkerLinkNeedsSecret(t *testing.T) {
	t.Parallel()
	bin := buildClaudectl(t)
	const token = "worker-s3cret"
	dd := daemontest.Start(t, &daemontest.Options{WorkerToken: token},
		claudetest.Reply(claudetest.Text("first answer")), claudetest.Reply(claudetest.Text("second answer")))
	apiURL, httpc := dd.Serve()
	ctx := dd.Ctx
	sessions := claudectlv1connect.NewSessionServiceClient(httpc, apiURL)
	endpoint := "ws://" + strings.TrimPrefix(apiURL, "http://") + apiserver.WorkerPath
	worker := startWorker(t, bin, endpoint, token)

	res, err := sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir(), Worker: "remote"}, Prompt: "first"}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.Session.Id
	result, seq := followToResult(t, ctx, sessions, id, 0)
	if !strings.Contains(result, "first answer") {
		t.Fatalf("first result %s", result)
	}
	s, err := dd.DB().Session(ctx, id)
	if err != nil || s.Relay.Session == "" {
		t.Fatalf("stored relay state: %+v, %v", s, err)
	}

	for _, h := range []relay.Header{
		{Session: s.Relay.Session, Worker: "e2e-worker"},
		{Session: s.Relay.Session, Worker: "e2e-worker", Secret: s.Relay.SecretHash}, // what the store holds is no secret
	} {
		c, f, err := hostileHello(t, ctx, endpoint, token, h)
		if err != nil || f.Type != relay.TypeReject || !strings.Contains(f.Error, "secret") {
			t.Fatalf("a stranger's hello naming the live session (worker %q): answered %+v (%v); want reject, for want of the session's secret", h.Worker, f, err)
		}
		c.CloseNow()
	}

	if _, err := sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: "second"})); err != nil {
		t.Fatal(err)
	}
	if result, _ := followToResult(t, ctx, sessions, id, seq); !strings.Contains(result, "second answer") {
		t.Errorf("second result %s; want the honest worker's CLI's answer", result)
	}
	if _, err := sessions.CloseSession(ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	<-worker.done
	if worker.err != nil {
		t.Errorf("honest worker: %v, want exit 0 once its session was closed", worker.err)
	}
	if strings.Contains(worker.stderr.String(), "link to the controller lost") {
		t.Errorf("the honest worker lost its link to the stranger:\n%s", worker.stderr.String())
	}
}

// TestDaemonWorkerReturnNeedsSecret: after a daemon restart a session's
// worker comes back and the daemon takes its CLI over (claude.WorkerListener.Adopt)
// — but only from the worker holding the secret whose hash the store
// keeps. A stranger naming the session is rejected; the worker with the
// secret is resumed.
func TestDaemonWorkerReturnNeedsSecret(t *testing.T) {
	t.Parallel()
	const token = "worker-s3cret"
	dd := daemontest.Start(t, &daemontest.Options{WorkerToken: token})
	apiURL, _ := dd.Serve()
	ctx := dd.Ctx
	endpoint := "ws://" + strings.TrimPrefix(apiURL, "http://") + apiserver.WorkerPath
	// What the daemon that ran the session left in the store when it
	// died: the session interrupted, its relay state with the secret's
	// hash.
	db := dd.DB()
	s := &store.Session{Cwd: t.TempDir(), Status: store.StatusInterrupted, Worker: "remote", Options: []byte(`{"worker":"remote"}`)}
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	const secret = "3f1c9e0b8a7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a3928170f6e5d4c"
	sum := sha256.Sum256([]byte(secret))
	relayID := s.ID + "~0123456789abcdef01234567"
	if _, err := db.UpdateSession(ctx, s.ID, store.SessionUpdate{Relay: &store.Relay{Worker: "w1", Session: relayID,
		SecretHash: hex.EncodeToString(sum[:])}}); err != nil {
		t.Fatal(err)
	}

	for _, h := range []relay.Header{
		{Session: relayID, Worker: "w1"},
		{Session: relayID, Worker: "w1", Secret: hex.EncodeToString(sum[:])},
	} {
		c, f, err := hostileHello(t, ctx, endpoint, token, h)
		if err != nil || f.Type != relay.TypeReject || !strings.Contains(f.Error, "secret") {
			t.Fatalf("a stranger naming the session after a restart: answered %+v (%v); want reject, for want of the session's secret", f, err)
		}
		c.CloseNow()
	}

	// The worker that holds the secret is taken over; its CLI then ends.
	c, f, err := hostileHello(t, ctx, endpoint, token, relay.Header{Session: relayID, Worker: "w1", Secret: secret})
	if err != nil || f.Type != relay.TypeResume || f.Session != relayID {
		t.Fatalf("the worker with the secret: answered %+v (%v); want resume", f, err)
	}
	if err := relay.WriteFrame(ctx, c, &relay.Header{Type: relay.TypeExit, Seq: 1, Exit: &relay.Exit{}}, nil); err != nil {
		t.Fatal(err)
	}
	for { // until the daemon acknowledges the exit
		f, err := relay.ReadFrame(ctx, c)
		if err != nil {
			t.Fatalf("waiting for the exit's acknowledgement: %v", err)
		}
		if f.Ack >= 1 {
			break
		}
	}
	c.Close(websocket.StatusNormalClosure, "session over")
}

// TestDaemonWorkerConnectionsCapped: the worker connections a daemon
// keeps open are capped by workers.max_connections. With the cap held by
// connections that presented the token and say nothing, a "claudectl
// worker --once" is turned away and says why, naming the setting, until it
// gives up.
func TestDaemonWorkerConnectionsCapped(t *testing.T) {
	t.Parallel()
	const token = "worker-s3cret"
	dd := daemontest.Start(t, &daemontest.Options{WorkerToken: token, MaxWorkerConnections: 2})
	apiURL, _ := dd.Serve()
	endpoint := "ws://" + strings.TrimPrefix(apiURL, "http://") + apiserver.WorkerPath
	for range 2 {
		hostileDial(t, dd.Ctx, endpoint, token)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := claudectl(t, invocation{timeout: 30 * time.Second}, "worker", "--connect", endpoint, "--token-file", tokenFile,
		"--cli", claudetest.CLIPath(t), "--once", "--reconnect-timeout", "2s")
	said := "the controller at " + endpoint + " turned the connection away: 2 worker connections are open, as many as it allows " +
		"(workers.max_connections): stop workers it does not need, or raise workers.max_connections"
	if o.code != ExitFailure || !strings.Contains(o.stderr, said+"; trying again") || !strings.Contains(o.stderr, "gave up") {
		t.Errorf("a worker turned away: exit %d, stderr %q; want 1, a warning saying %q, and that it gave up", o.code, o.stderr, said)
	}
}

// TestDaemonWorkerCannotClaimConversation: a worker's CLI reports, in its
// system/init, the conversation of another session (a local one, run by
// the real CLI), whose id a worker can learn from a fork's or a resume's
// command line. The daemon does not make it the worker's session's: a
// resume or fork of that session would have run claude --resume on the
// victim's conversation. The session's log and the daemon's log say what
// happened.
func TestDaemonWorkerCannotClaimConversation(t *testing.T) {
	t.Parallel()
	const token = "worker-s3cret"
	logs := &daemontest.LogBuffer{}
	dd := daemontest.Start(t, &daemontest.Options{WorkerToken: token, Log: logs},
		claudetest.Reply(claudetest.Text("the victim's plan")))
	apiURL, httpc := dd.Serve()
	ctx := dd.Ctx
	sessions := claudectlv1connect.NewSessionServiceClient(httpc, apiURL)
	endpoint := "ws://" + strings.TrimPrefix(apiURL, "http://") + apiserver.WorkerPath

	res, err := sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir()}, Prompt: "plan"}))
	if err != nil {
		t.Fatal(err)
	}
	victim := res.Msg.Session.Id
	followToResult(t, ctx, sessions, victim, 0)
	got, err := sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: victim}))
	if err != nil {
		t.Fatal(err)
	}
	stolen := got.Msg.Session.ClaudeSessionId
	if stolen == "" {
		t.Fatal("the victim's CLI reported no conversation")
	}

	// The hostile worker: the worker's own code, its "CLI" lying about
	// its conversation.
	wctx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	w := &relay.Worker{URL: endpoint, Token: token, Name: "evil", ReconnectTimeout: 20 * time.Second,
		Start: func(ctx context.Context, _ *relay.Command, _ func(string)) (relay.Process, error) {
			conn, err := (&daemontest.InProcessCLI{Init: func(f map[string]any) { f["session_id"] = stolen }}).Start(ctx, nil)
			return &localCLI{conn}, err
		}}
	workerErr := make(chan error, 1)
	go func() { workerErr <- w.Run(wctx) }()
	res, err = sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir(), Worker: "remote"}, Prompt: "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	thief := res.Msg.Session.Id
	followToResult(t, ctx, sessions, thief, 0)

	got, err = sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: thief}))
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Msg.Session.ClaudeSessionId; c == stolen {
		t.Fatalf("the worker's session took session %s's conversation %s: a resume or fork of it would continue that one", victim, stolen)
	}
	want := "the CLI reported conversation " + stolen + ", which is session " + victim + "'s: it was not recorded as this session's"
	stream, err := sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: thief}))
	if err != nil {
		t.Fatal(err)
	}
	said := false
	for !said && stream.Receive() {
		said = strings.Contains(stream.Msg().Event.GetError().GetMessage(), want)
	}
	stream.Close()
	if !said {
		t.Errorf("the session's log does not say %q", want)
	}
	if !strings.Contains(logs.String(), "a CLI claimed a conversation that is not its session's") {
		t.Errorf("the daemon's log does not warn of it:\n%s", logs.String())
	}

	if _, err := sessions.CloseSession(ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: thief})); err != nil {
		t.Fatal(err)
	}
	if err := <-workerErr; err != nil {
		t.Errorf("worker: %v", err)
	}
	for _, op := range []func() error{
		func() error {
			_, err := sessions.ResumeSession(ctx, connect.NewRequest(&v1.ResumeSessionRequest{SessionId: thief, Prompt: "go on"}))
			return err
		},
		func() error {
			_, err := sessions.ForkSession(ctx, connect.NewRequest(&v1.ForkSessionRequest{SessionId: thief}))
			return err
		},
	} {
		if err := op(); connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "never started a conversation") {
			t.Errorf("resuming or forking the worker's session: %v; want FailedPrecondition: it has no conversation of its own", err)
		}
	}
}
