package apiserver_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// TestStreamLimit: past daemon.max_streams open streams, one more is
// refused with ResourceExhausted saying what to do, whatever its kind; a
// stream that ends makes room; unary calls are not counted.
func TestStreamLimit(t *testing.T) {
	c := startWith(t, &daemontest.Options{MaxStreams: 3})
	sessions, perms, ctx := c.sessions, c.perms, c.ctx

	type stream interface {
		Receive() bool
		Err() error
		Close() error
	}
	open := func(kind int) stream {
		t.Helper()
		var s stream
		var err error
		switch kind % 2 {
		case 0:
			s, err = sessions.WatchSessions(ctx, connect.NewRequest(&v1.WatchSessionsRequest{}))
		default:
			s, err = perms.WatchPending(ctx, connect.NewRequest(&v1.WatchPendingRequest{}))
		}
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var held []stream
	for i := range 3 {
		s := open(i)
		if !s.Receive() { // its snapshot: the stream is being served
			t.Fatalf("stream %d: %v", i, s.Err())
		}
		held = append(held, s)
	}
	for i := range 2 {
		s := open(i)
		if s.Receive() || connect.CodeOf(s.Err()) != connect.CodeResourceExhausted ||
			!strings.Contains(s.Err().Error(), "at most 3 streams at once") || !strings.Contains(s.Err().Error(), "daemon.max_streams") {
			t.Errorf("stream past the limit: %v; want ResourceExhausted saying the limit and max_streams", s.Err())
		}
		s.Close()
	}
	if _, err := sessions.ListSessions(ctx, connect.NewRequest(&v1.ListSessionsRequest{})); err != nil {
		t.Errorf("a unary call with every stream in use: %v", err)
	}
	held[0].Close()
	var s stream
	for range 100 { // the server notices the close when its send fails or its context ends
		s = open(0)
		if s.Receive() {
			break
		}
		s.Close()
		s = nil
		time.Sleep(10 * time.Millisecond)
	}
	if s == nil {
		t.Fatal("no room for a stream after one was closed")
	}
	s.Close()
	for _, h := range held[1:] {
		h.Close()
	}
}
