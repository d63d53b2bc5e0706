package cli

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
)

func TestInterrupt(t *testing.T) {
	t.Parallel()
	const words = 2000
	slow := claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(strings.Repeat("slow ", words))},
		ChunkSize: 5, DeltaDelay: 50 * time.Millisecond}
	d, _ := startDaemonModel(t, nil, slow, claudetest.Reply(claudetest.Text("Next turn.")))
	id := d.create(t, t.TempDir(), "go slowly")
	waitFor(t, "the reply to stream", func() bool {
		stream, err := d.sessions.Subscribe(d.ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
		if err != nil {
			return false
		}
		defer stream.Close()
		for stream.Receive() {
			if stream.Msg().Event.GetTextDelta() != nil {
				return true
			}
		}
		return false
	})
	start := time.Now()
	o := claudectl(t, d.inv(), "interrupt", id)
	if o.code != 0 || o.stdout != "Interrupted session "+id+".\n" {
		t.Fatalf("interrupt: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	d.waitResults(t, id, 1)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the turn ended %v after the interrupt: it was not cut short", took)
	}
	d.waitStatus(t, id, v1.SessionStatus_SESSION_STATUS_IDLE)

	// The session goes on.
	if o := claudectl(t, d.inv(), "send", id, "next"); o.code != 0 {
		t.Fatalf("send after the interrupt: exit %d, stderr %q", o.code, o.stderr)
	}
	d.waitResults(t, id, 2)
}
