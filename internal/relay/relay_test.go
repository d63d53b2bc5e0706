package relay

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFrameRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		h       Header
		payload string
	}{
		{Header{Type: TypeLine, Seq: 7}, `{"type":"assistant"}`},
		{Header{Type: TypeLine, Seq: 8, Ack: 3, Orig: 12345678}, `{"type":"x","truncated":"[truncated]"}`},
		{Header{Type: TypeHello, Worker: "w", Session: "s-1", Ack: 4}, ""},
		{Header{Type: TypeStart, Session: "s-1", Command: &Command{Args: []string{"--verbose"}, SetEnv: map[string]string{"A": "b"}, UnsetEnv: []string{"C"}, Dir: "/tmp", MaxLineBytes: 10}}, ""},
		{Header{Type: TypeExit, Seq: 9, Exit: &Exit{Code: 1, Stderr: "boom"}}, ""},
		{Header{Type: TypeClose, Seq: 2, Now: true}, ""},
		{Header{Type: TypeAck, Ack: 5}, ""},
	} {
		msg, err := Encode(nil, &tc.h, []byte(tc.payload))
		if err != nil {
			t.Fatal(err)
		}
		f, err := Decode(msg)
		if err != nil {
			t.Fatalf("Decode(%q): %v", msg, err)
		}
		if diff := cmp.Diff(tc.h, f.Header); diff != "" {
			t.Errorf("header (-want +got):\n%s", diff)
		}
		if string(f.Payload) != tc.payload {
			t.Errorf("payload %q, want %q", f.Payload, tc.payload)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, msg := range []string{
		`{"type":"line"}`,                // no newline
		"{\"type\":\"line\"}\n{}",        // sequenced without seq
		"{\"type\":\"ack\",\"seq\":3}\n", // seq on an unsequenced frame
		"{}\n",
		"nope\n",
	} {
		if _, err := Decode([]byte(msg)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%q): %v, want ErrMalformed", msg, err)
		}
	}
}

func TestCommandEnviron(t *testing.T) {
	c := &Command{SetEnv: map[string]string{"B": "2", "D": "4"}, UnsetEnv: []string{"C"}}
	got := c.Environ([]string{"A=1", "B=1", "C=1"})
	want := []string{"A=1", "B=2", "D=4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestOutbox(t *testing.T) {
	ctx := context.Background()
	o := NewOutbox(12)
	for i := range 3 {
		seq, err := o.Push(ctx, Header{Type: TypeLine}, []byte("abcd"))
		if err != nil || seq != uint64(i+1) {
			t.Fatalf("Push: %d, %v", seq, err)
		}
	}
	// Over the limit now: the next Push waits for an ack.
	pushed := make(chan uint64)
	go func() {
		seq, _ := o.Push(ctx, Header{Type: TypeLine}, []byte("efgh"))
		pushed <- seq
	}()
	select {
	case <-pushed:
		t.Fatal("Push did not block on a full outbox")
	case <-time.After(50 * time.Millisecond):
	}
	frames, _ := o.After(1)
	if len(frames) != 2 || frames[0].Seq != 2 {
		t.Fatalf("After(1): %d frames", len(frames))
	}
	o.Ack(2)
	if seq := <-pushed; seq != 4 {
		t.Fatalf("seq %d, want 4", seq)
	}
	o.Ack(1) // old acks are ignored
	if o.Acked() != 2 || o.Pending() != 2 {
		t.Errorf("acked %d pending %d", o.Acked(), o.Pending())
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := o.WaitAcked(wctx, 4); err == nil {
		t.Error("WaitAcked returned before the ack")
	}
	o.Ack(4)
	if err := o.WaitAcked(ctx, 4); err != nil {
		t.Error(err)
	}
	o.Close()
	if _, err := o.Push(ctx, Header{Type: TypeLine}, nil); !errors.Is(err, ErrOutboxClosed) {
		t.Errorf("Push after Close: %v", err)
	}
	// A frame bigger than the limit still goes through on its own.
	big := NewOutbox(2)
	if _, err := big.Push(ctx, Header{Type: TypeLine}, []byte(strings.Repeat("x", 100))); err != nil {
		t.Error(err)
	}
}
