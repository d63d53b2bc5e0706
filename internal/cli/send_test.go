package cli

import (
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// A prompt sent to a suspended session while every slot is busy waits for
// one (sessions.max_running): send says so on stderr instead of hanging
// silently, and Ctrl-C gives up (exit 130), leaving the session suspended.
func TestSendQueued(t *testing.T) {
	t.Parallel()
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("slow ", 4000))}, ChunkSize: 5, DeltaDelay: 50 * time.Millisecond}
	d, _ := startDaemonModel(t, &daemontest.Options{MaxRunning: 1}, claudetest.Reply(claudetest.Text("Hi.")), slow)
	a := d.create(t, t.TempDir(), "hi")
	d.waitResults(t, a, 1)
	b := d.create(t, t.TempDir(), "hi") // takes a's slot: a is suspended
	d.waitResults(t, b, 1)
	status := func(id string) v1.SessionStatus {
		res, err := d.sessions.GetSession(d.ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.Session.Status
	}
	waitFor(t, "the first session suspended", func() bool { return status(a) == v1.SessionStatus_SESSION_STATUS_SUSPENDED })
	if _, err := d.sessions.Send(d.ctx, connect.NewRequest(&v1.SendRequest{SessionId: b, Text: "go slowly"})); err != nil {
		t.Fatal(err) // holds the only slot for minutes
	}
	ints := make(chan os.Signal, 1)
	done, stdout, stderr := runInBackground(d, ints, "send", "--server", d.url, a, "next")
	waitFor(t, "send to say the session is queued", func() bool { return strings.Contains(stderr.String(), "queued") })
	if want := "claudectl: session " + a + " is queued: next in line, waiting for a free session slot (sessions.max_running is 1); the prompt goes to it then (Ctrl-C gives up: the prompt is not sent)\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
	ints <- os.Interrupt
	waitExit(t, done, ExitInterrupted, 30*time.Second, stderr, "Ctrl-C did not end the queued send")
	if !strings.Contains(stderr.String(), "gave up waiting for a slot: the prompt was not sent") {
		t.Errorf("stderr %q does not say the prompt was given up", stderr.String())
	}
	if strings.Contains(stdout.String(), "Sent") {
		t.Errorf("stdout %q says the prompt was sent", stdout.String())
	}
	waitFor(t, "the session suspended again", func() bool { return status(a) == v1.SessionStatus_SESSION_STATUS_SUSPENDED })
}
