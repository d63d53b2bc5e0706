package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
	"github.com/claudectl/claudectl/store/sqlite/sqlitetest"
)

// When the daemon's store cannot write and stops the session attach
// follows, attach says so in the store's words (not that it lost the
// daemon), and does not wait silently for events that cannot come: it
// tries again, then gives up saying why, in bounded time. Not parallel:
// it shortens reconnectTimeout.
func TestAttachStoreCannotWrite(t *testing.T) {
	defer func(old time.Duration) { reconnectTimeout = old }(reconnectTimeout)
	reconnectTimeout = 3 * time.Second
	dd := daemontest.Start(t, nil,
		claudetest.Reply(claudetest.ToolUseID("toolu_s1", "Bash", map[string]any{"command": "rm -rf /tmp/x", "description": "clean"})),
		claudetest.Reply(claudetest.Text("Stopped.")))
	db, ok := dd.DB().(*sqlite.DB)
	if !ok {
		t.Skip("a full disk is staged on SQLite")
	}
	url, httpc := dd.Serve()
	d := &testDaemon{url: url, token: dd.Token(), ctx: dd.Ctx, sessions: claudectlv1connect.NewSessionServiceClient(httpc, url)}
	id := d.create(t, t.TempDir(), "clean")
	d.permissionRequest(t, id) // mid-turn
	_, wait := background(t, d.inv(), "attach", id)
	time.Sleep(300 * time.Millisecond) // attached

	// Fill the store: a scratch session takes every page left.
	scratch := &store.Session{Cwd: t.TempDir(), Status: store.StatusClosed}
	if err := db.CreateSession(dd.Ctx, scratch); err != nil {
		t.Fatal(err)
	}
	if err := sqlitetest.Fill(db, true); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{4000, 300, 30, 1} {
		pad := []byte(`{"type":"pad","x":"` + strings.Repeat("x", size) + `"}`)
		for i := 0; ; i++ {
			_, err := db.Append(dd.Ctx, &store.Event{SessionID: scratch.ID, Direction: store.FromDaemon, Type: "pad", Raw: pad})
			if errors.Is(err, store.ErrWriteFailed) {
				break
			}
			if err != nil || i > 100_000 {
				t.Fatalf("filling the store: %d writes, %v", i, err)
			}
		}
	}
	defer sqlitetest.Fill(db, false)
	// The interrupt cannot be logged: the store stops the session.
	_, err := d.sessions.Interrupt(d.ctx, connect.NewRequest(&v1.InterruptRequest{SessionId: id}))
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("Interrupt on a full store: %v, want Unavailable", err)
	}
	o := wait()
	if o.code != ExitFailure {
		t.Errorf("attach: exit %d, want %d", o.code, ExitFailure)
	}
	if !strings.Contains(o.stderr, "disk full") || !strings.Contains(o.stderr, "could not be stored") {
		t.Errorf("attach does not say the store stopped the session:\n%s", o.stderr)
	}
	for _, wrong := range []string{"lost the daemon", "sqlite:", "append:"} {
		if strings.Contains(o.stderr, wrong) {
			t.Errorf("attach says %q:\n%s", wrong, o.stderr)
		}
	}
}
