package main_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/internal/testdisk"
)

// TestServeFullDisk runs claudectl serve with its data dir on a 6 MiB
// tmpfs, 2 MiB of it taken by a ballast file, and a session that streams
// more than the rest can hold: the subscriber gets Unavailable saying the
// disk is full, Health says so, a prompt is refused; once the ballast is
// deleted the store writes again, the session's log records the gap, the
// daemon is healthy, and SIGTERM ends it with status 0.
func TestServeFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon and the CLI on a small disk")
	}
	dataDir := testdisk.Small(t, "6m")
	if dataDir == "" {
		return
	}
	cli := claudetest.CLIPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	binary := filepath.Join(t.TempDir(), "claudectl")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ballast := filepath.Join(dataDir, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	// ~10 MB of events: 3 blocks of 60,000 characters in deltas of 12.
	var blocks []claudetest.Block
	for i := range 3 {
		blocks = append(blocks, claudetest.Text(strings.Repeat(fmt.Sprintf("block %d fills the disk ", i), 60_000/20)[:60_000]))
	}
	model := claudetest.NewServer(claudetest.Script(claudetest.Turn{Blocks: blocks, ChunkSize: 12},
		claudetest.Reply(claudetest.Text("Back."))))
	t.Cleanup(model.Close)
	home := t.TempDir()
	httpc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(httpc.CloseIdleConnections)
	p := startServe(ctx, t, binary, cli, dataDir, model.Env(home), filepath.Join(t.TempDir(), "serve.log"), httpc)
	health := claudectlv1connect.NewHealthServiceClient(httpc, p.url, connect.WithInterceptors(tokenFrom(dataDir)))

	res, err := p.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir(), IncludePartialMessages: true}, Prompt: "Fill the disk."}))
	if err != nil {
		t.Fatalf("CreateSession: %v\n%s", err, p.log())
	}
	id := res.Msg.Session.Id
	stream, err := p.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for stream.Receive() {
		last = stream.Msg().Event.Seq
	}
	err = stream.Err()
	stream.Close()
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("the subscription ended after seq %d with %v; want Unavailable, disk full\n%s", last, err, p.log())
	}
	h, err := health.HealthDetails(ctx, connect.NewRequest(&v1.HealthDetailsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	// A full disk can still take a small commit: SQLite reuses the WAL
	// file's blocks. So the daemon's retries (the gap record) may have
	// gone through by now, and then Health is right to say the store
	// writes. While it says it fails, it says why.
	if !h.Msg.Store.GetOk() && (h.Msg.Ok || !strings.Contains(h.Msg.Store.GetError(), "disk full")) {
		t.Errorf("health on a full disk: ok %v, store %v\n%s", h.Msg.Ok, h.Msg.Store, p.log())
	}
	// A prompt is refused as the store's failure (Unavailable), or, if it
	// could be stored, taken: never "the session is not running", which
	// the session resumed and stopped again by the full disk once said.
	_, err = p.sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: "more"}))
	if err != nil && (connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "disk full")) {
		t.Errorf("Send on a full disk: %v, want Unavailable saying the disk is full\n%s", err, p.log())
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	for { // the daemon tries again and records the gap
		h, err := health.HealthDetails(ctx, connect.NewRequest(&v1.HealthDetailsRequest{}))
		if err == nil && h.Msg.Ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not healthy after the disk had room again: %v, %v\n%s", h, err, p.log())
		case <-time.After(100 * time.Millisecond):
		}
	}
	var gap *v1.Gap
	for gap == nil {
		g, err := p.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		seq := int64(0)
		for _, ev := range replay(ctx, t, p.sessions, id, g.Msg.Session.LastSeq) {
			if ev.Seq != seq+1 {
				t.Fatalf("seq %d after %d", ev.Seq, seq)
			}
			seq = ev.Seq
			if ev.GetGap() != nil {
				gap = ev.GetGap()
			}
		}
		if gap == nil {
			select {
			case <-ctx.Done():
				t.Fatalf("no gap record in the log\n%s", p.log())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if gap.Lost < 1 || !strings.Contains(gap.Reason, "disk full") {
		t.Errorf("gap record: %v", gap)
	}
	if !strings.Contains(p.log(), "the store cannot write") {
		t.Errorf("the daemon's log does not say the store failed:\n%s", p.log())
	}
	p.stop(t)
	if err := p.err; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("claudectl serve after SIGTERM: %v", err)
	}
}
