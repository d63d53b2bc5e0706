package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
)

func TestStatusText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		frame   int
		what    string
		elapsed time.Duration
		tokens  int64
		want    string
	}{
		{0, "thinking", 0, 0, "⠋ thinking… (0s)"},
		{1, "thinking", 12*time.Second + 300*time.Millisecond, 1, "⠙ thinking… (12s · 1 token)"},
		{10, "running Bash `sleep 3`", 65 * time.Second, 340, "⠋ running Bash `sleep 3`… (1m05s · 340 tokens)"},
		{3, "writing", 2*time.Hour + 3*time.Minute, 0, "⠸ writing… (2h03m)"},
	} {
		if got := statusText(c.frame, c.what, c.elapsed, c.tokens); got != c.want {
			t.Errorf("statusText(%d, %q, %v, %d) = %q, want %q", c.frame, c.what, c.elapsed, c.tokens, got, c.want)
		}
	}
	if got := toolActivity("Bash", []byte(`{"command":"go test ./... && go vet ./... && staticcheck ./... && echo done"}`)); got != "running Bash `go test ./... && go vet ./... && static…`" {
		t.Errorf("toolActivity = %q", got)
	}
}

// newTestStatus returns a status line drawing into a buffer, with a clock
// the test moves, not redrawn by a ticker (the test calls draw).
func newTestStatus(pal palette, width int) (*statusLine, *lockedBuffer, *time.Time) {
	var buf lockedBuffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newStatusLine(&buf, pal, width)
	s.now = func() time.Time { return now }
	s.stop = make(chan struct{}) // as if started
	return s, &buf, &now
}

func TestStatusLineFrames(t *testing.T) {
	t.Parallel()
	s, buf, now := newTestStatus(palette{}, 80)
	stdout := &statusWriter{s: s, w: buf}

	s.draw() // nothing to show yet
	if buf.String() != "" {
		t.Fatalf("drawn with no activity: %q", buf.String())
	}
	s.set("thinking")
	*now = now.Add(3 * time.Second)
	s.streamed(400)
	s.draw()
	if want := clearLine + "⠙ thinking… (3s · 100 tokens)"; buf.String() != want {
		t.Fatalf("first frame %q, want %q", buf.String(), want)
	}
	s.outputTokens(42) // the message's own count replaces the estimate
	s.draw()
	if !strings.HasSuffix(buf.String(), clearLine+"⠹ thinking… (3s · 42 tokens)") {
		t.Fatalf("second frame: %q", buf.String())
	}

	// Output wipes the line before it is written; while a line is half
	// written the status line is not drawn.
	before := len(buf.String())
	stdout.Write([]byte("Hello"))
	if got := buf.String()[before:]; got != clearLine+"Hello" {
		t.Fatalf("write after a frame: %q, want the line cleared first", got)
	}
	before = len(buf.String())
	s.draw()
	if got := buf.String()[before:]; got != "" {
		t.Fatalf("drawn in the middle of a line: %q", got)
	}
	stdout.Write([]byte(" world\n"))
	before = len(buf.String())
	s.draw()
	if got := buf.String()[before:]; !strings.HasPrefix(got, clearLine+"⠸ thinking…") {
		t.Fatalf("not drawn at the start of a line: %q", got)
	}

	// A question leaves the cursor after it; the answer's Enter puts it back.
	stdout.Write([]byte("Allow Bash? [y/N] "))
	before = len(buf.String())
	s.draw()
	if got := buf.String()[before:]; got != "" {
		t.Fatalf("drawn over a question: %q", got)
	}
	stdout.lineEntered()
	s.draw()
	if got := buf.String()[before:]; !strings.HasPrefix(got, clearLine) {
		t.Fatalf("not drawn after the answer: %q", got)
	}

	// A new message adds its tokens to the finished ones.
	s.messageStarted()
	s.outputTokens(8)
	before = len(buf.String())
	s.draw()
	if got := buf.String()[before:]; !strings.Contains(got, "(3s · 50 tokens)") {
		t.Fatalf("tokens of two messages: %q", got)
	}

	// idle wipes it and resets the clock; close wipes it too, once.
	before = len(buf.String())
	s.idle()
	s.draw()
	if got := buf.String()[before:]; got != clearLine {
		t.Fatalf("idle: %q, want the line wiped and not drawn again", got)
	}
	s.set("thinking")
	s.draw()
	before = len(buf.String())
	s.close()
	s.close()
	if got := buf.String()[before:]; got != clearLine {
		t.Fatalf("close: %q", got)
	}
	var nilStatus *statusLine // a command without a status line
	nilStatus.set("thinking")
	nilStatus.idle()
	nilStatus.close()
}

func TestStatusLineFitsTheWidth(t *testing.T) {
	t.Parallel()
	s, buf, _ := newTestStatus(palette{on: true}, 20)
	s.set("running Bash `a very long command line`")
	s.draw()
	got := buf.String()
	if want := clearLine + sgrDim + "⠙ running Bash `a …" + sgrReset; got != want {
		t.Fatalf("drawn %q, want %q (19 columns, dimmed)", got, want)
	}
}

func TestStatusLineWaiting(t *testing.T) {
	t.Parallel()
	s, _, _ := newTestStatus(palette{}, 80)
	s.set("running Bash `ls`")
	s.waiting(true)
	if got := s.activity(); got != waitingActivity {
		t.Fatalf("waiting: %q", got)
	}
	s.waiting(false)
	if got := s.activity(); got != "running Bash `ls`" {
		t.Fatalf("after waiting: %q, want the activity before", got)
	}
	s.idle()
	s.waiting(false) // running again, nothing known
	if got := s.activity(); got != "thinking" {
		t.Fatalf("running with nothing shown: %q", got)
	}
}

// TestRendererTellsTheStatusLine feeds a renderer a turn and checks what
// the status line says after each message.
func TestRendererTellsTheStatusLine(t *testing.T) {
	t.Parallel()
	s, _, _ := newTestStatus(palette{}, 80)
	var out lockedBuffer
	r := newRenderer(&out, nil)
	r.status = s
	steps := []struct {
		line string
		want string
	}{
		{`{"type":"system","subtype":"init","session_id":"s","model":"m","cwd":"/","tools":[],"permissionMode":"default"}`, "thinking"},
		{`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1"}}}`, "thinking"},
		{`{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}}`, "writing"},
		{`{"type":"stream_event","event":{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","name":"Bash","id":"t1","input":{}}}}`, "preparing Bash"},
		{`{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"sleep 3"}}]}}`, "running Bash `sleep 3`"},
		{`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"done"}]}}`, "thinking"},
		{`{"type":"result","subtype":"success","session_id":"s","result":"ok"}`, ""},
	}
	for _, st := range steps {
		m, err := claude.DecodeMessage([]byte(st.line))
		if err != nil {
			t.Fatal(err)
		}
		r.handle(m)
		if got := s.activity(); got != st.want {
			t.Errorf("after %s: status %q, want %q", st.line, got, st.want)
		}
	}
}

// TestStatusLineCloseWhileDrawing closes status lines whose ticker is
// running: close must never wait for a goroutine that no longer sees the
// stop (it once selected on the field close had just set to nil).
func TestStatusLineCloseWhileDrawing(t *testing.T) {
	t.Parallel()
	for range 200 {
		var buf lockedBuffer
		s := newStatusLine(&buf, palette{}, 80)
		s.interval = time.Microsecond // redraw all the time
		s.set("thinking")
		s.start()
		done := make(chan struct{})
		go func() {
			s.close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("close hangs")
		}
	}
}
