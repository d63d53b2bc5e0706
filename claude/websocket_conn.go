package claude

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/claudectl/claudectl/internal/jsonl"
	"github.com/claudectl/claudectl/internal/relay"
)

// Timings of the WebSocket side; tests may shorten them.
var (
	// wsKeepAlive is how often a keep_alive line and a ping go to an idle CLI.
	wsKeepAlive = 15 * time.Second
	// wsPongTimeout is how long to wait for the pong that confirms lines.
	wsPongTimeout = 10 * time.Second
	// wsLinger is how long the CLI's connection may outlive its process.
	wsLinger = 2 * time.Second
)

// wsConn is the Conn of a WebSocketTransport: a child process plus the
// WebSocket server it connects to.
type wsConn struct {
	logger   *slog.Logger
	url      string
	token    string
	wsPath   string
	postPath string
	maxLine  int
	grace    time.Duration
	proc     *process
	srv      *http.Server
	out      *relay.Outbox // lines for the CLI, kept until confirmed

	bg       sync.WaitGroup // Serve, drainStdout, supervise, the idle stop
	handlers sync.WaitGroup // ServeHTTP calls

	writeMu   sync.Mutex
	closeOnce sync.Once

	mu          sync.Mutex
	closing     bool // refuse new connections
	link        *wsLink
	connections int
	lastUUID    string // the last uuid received from the CLI
	seen        *uuidSet
	dups        int
	posts       int
	in          []Line
	inWake      chan struct{} // closed and replaced when in grows or ends
	inEnd       bool
	users       int  // user lines written
	results     int  // result lines read
	inputEnded  bool // CloseWrite or Close
	idleStop    bool // we sent SIGTERM to a CLI with nothing left to do
	exited      chan struct{}
	exitErr     error
}

// wsLink is one WebSocket connection from the CLI.
type wsLink struct {
	c    *websocket.Conn
	wmu  sync.Mutex    // held while writing a line and recording it as sent
	sent atomic.Uint64 // the last line written
	done chan struct{} // closed when the link's handler returns
}

func (wc *wsConn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	wc.mu.Lock()
	if wc.closing {
		wc.mu.Unlock()
		http.Error(w, "session over", http.StatusGone)
		return
	}
	wc.handlers.Add(1)
	wc.mu.Unlock()
	defer wc.handlers.Done()
	if !bearerOK(r, wc.token) {
		wc.logger.Warn("claude: WebSocket transport refused a connection", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "reason", authProblem(r))
		refuse(w)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == wc.wsPath:
		wc.serveWS(w, r)
	case r.Method == http.MethodPost && r.URL.Path == wc.postPath:
		wc.servePost(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (wc *wsConn) serveWS(w http.ResponseWriter, r *http.Request) {
	lastSent := r.Header.Get("X-Last-Request-Id")
	wc.mu.Lock()
	reconnect := wc.connections > 0
	lastGot := wc.lastUUID
	missing := lastSent != "" && !wc.seen.has(lastSent)
	wc.mu.Unlock()
	if lastGot != "" {
		// What a CLI that resends from its buffer would start after.
		w.Header().Set("X-Last-Request-Id", lastGot)
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		wc.logger.Warn("claude: WebSocket transport: upgrade failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	c.SetReadLimit(-1) // lines are bounded by the reader below
	lk := &wsLink{c: c, done: make(chan struct{})}
	defer close(lk.done)
	wc.mu.Lock()
	if wc.closing {
		wc.mu.Unlock()
		c.Close(websocket.StatusGoingAway, "session over")
		return
	}
	old := wc.link
	wc.link = lk
	wc.connections++
	wc.mu.Unlock()
	if old != nil {
		old.c.CloseNow()
	}
	if reconnect {
		wc.logger.Info("claude: CLI reconnected to the WebSocket transport", "url", wc.url, "last_sent_by_cli", lastSent, "last_received", lastGot)
		if missing {
			wc.logger.Warn("claude: the CLI sent messages while disconnected that never arrived and will not be sent again",
				"url", wc.url, "last_sent_by_cli", lastSent, "last_received", lastGot)
		}
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := wc.writeLoop(ctx, lk); err != nil {
			cancel(err)
			c.CloseNow()
		}
	}()
	rd := jsonl.NewReader(&msgStream{ctx: ctx, c: c}, &jsonl.ReaderOptions{MaxLineBytes: wc.maxLine, BufferSize: 64 << 10})
	var rerr error
	for {
		l, err := rd.Next()
		if err != nil {
			rerr = err
			break
		}
		wc.deliver(Line{Data: l.Data, OriginalSize: truncatedSize(l)})
	}
	cancel(rerr)
	c.CloseNow()
	wg.Wait()
	wc.mu.Lock()
	if wc.link == lk {
		wc.link = nil
	}
	closing := wc.closing
	wc.mu.Unlock()
	if !closing {
		wc.logger.Info("claude: the CLI's WebSocket connection ended", "url", wc.url, "err", rerr)
	}
}

func truncatedSize(l jsonl.Line) int64 {
	if l.Truncated {
		return l.OriginalSize
	}
	return 0
}

// writeLoop sends the lines the CLI has not confirmed yet, then each new
// one; after each batch a ping's pong confirms them. It returns nil when ctx
// ends, an error when the connection failed.
func (wc *wsConn) writeLoop(ctx context.Context, lk *wsLink) error {
	sent := wc.out.Acked()
	keep := time.NewTicker(wsKeepAlive)
	defer keep.Stop()
	for {
		frames, wake := wc.out.After(sent)
		for _, f := range frames {
			if err := lk.write(ctx, f.Payload, f.Seq); err != nil {
				return err
			}
			sent = f.Seq
		}
		if len(frames) > 0 {
			if err := wc.confirm(ctx, lk, sent); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-keep.C:
			if err := lk.write(ctx, []byte("{\"type\":\"keep_alive\"}\n"), 0); err != nil {
				return err
			}
			if err := wc.confirm(ctx, lk, sent); err != nil {
				return err
			}
		}
	}
}

func (lk *wsLink) write(ctx context.Context, line []byte, seq uint64) error {
	lk.wmu.Lock()
	defer lk.wmu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := lk.c.Write(ctx, websocket.MessageText, line); err != nil {
		return err
	}
	if seq != 0 {
		lk.sent.Store(seq)
	}
	return nil
}

// confirm pings; the pong means the CLI has read every line up to seq. A
// late pong is not taken for a dead connection (the CLI's own pings detect
// those, and a needless reconnection loses what the CLI writes meanwhile):
// the lines just stay unconfirmed until a later ping succeeds.
func (wc *wsConn) confirm(ctx context.Context, lk *wsLink, seq uint64) error {
	pctx, cancel := context.WithTimeout(ctx, wsPongTimeout)
	defer cancel()
	if err := lk.c.Ping(pctx); err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			wc.logger.Debug("claude: no pong from the CLI yet", "url", wc.url, "after", wsPongTimeout)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	wc.out.Ack(seq)
	return nil
}

// drop closes the CLI's current connection with a close handshake, as a
// network failure would end it (the CLI dials again). Lines written before
// the handshake completed are known to be read.
func (wc *wsConn) drop() error {
	wc.mu.Lock()
	lk := wc.link
	wc.mu.Unlock()
	if lk == nil {
		return errors.New("claude: no WebSocket connection to drop")
	}
	lk.wmu.Lock()
	err := lk.c.Close(websocket.StatusGoingAway, "dropped")
	sent := lk.sent.Load()
	lk.wmu.Unlock()
	if err == nil {
		wc.out.Ack(sent)
	}
	<-lk.done
	return err
}

// msgStream reads the WebSocket messages of a connection as one byte
// stream, each message ending in a newline.
type msgStream struct {
	ctx    context.Context
	c      *websocket.Conn
	r      io.Reader
	n      int  // bytes read from the current message
	last   byte // its last byte
	needNL bool
}

func (m *msgStream) Read(p []byte) (int, error) {
	for {
		if m.r == nil {
			if m.needNL {
				m.needNL = false
				p[0] = '\n'
				return 1, nil
			}
			_, r, err := m.c.Reader(m.ctx)
			if err != nil {
				return 0, err
			}
			m.r, m.n = r, 0
		}
		n, err := m.r.Read(p)
		if n > 0 {
			m.n += n
			m.last = p[n-1]
		}
		if errors.Is(err, io.EOF) {
			m.r = nil
			m.needNL = m.n > 0 && m.last != '\n'
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

// servePost is the hybrid transport's ingress: {"events":[message, ...]}.
func (wc *wsConn) servePost(w http.ResponseWriter, r *http.Request) {
	limit := int64(4*wc.maxLine + 1<<20)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	var req struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
		return
	}
	wc.mu.Lock()
	wc.posts++
	wc.mu.Unlock()
	for _, ev := range req.Events {
		line, err := compactJSON(ev)
		if err != nil {
			continue
		}
		l := Line{Data: line}
		if cut, ok := jsonl.Truncate(line, wc.maxLine); ok {
			l = Line{Data: cut, OriginalSize: int64(len(line))}
		}
		wc.deliver(l)
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, "{}")
}

// deliver queues one line from the CLI, unless it is a copy of one already
// received.
func (wc *wsConn) deliver(l Line) {
	uuid := sniffString(l.Data, "uuid")
	typ, _ := sniffKind(l.Data)
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if wc.inEnd {
		return
	}
	if uuid != "" {
		if wc.seen.has(uuid) {
			wc.dups++
			wc.logger.Debug("claude: dropping a message the CLI sent again", "uuid", uuid, "type", typ)
			return
		}
		wc.seen.add(uuid)
		wc.lastUUID = uuid
	}
	if typ == "result" {
		wc.results++
	}
	wc.in = append(wc.in, l)
	broadcast(&wc.inWake)
	wc.stopIfIdle()
}

// ReadLine implements [Conn].
func (wc *wsConn) ReadLine() (Line, error) {
	for {
		wc.mu.Lock()
		if len(wc.in) > 0 {
			l := wc.in[0]
			wc.in[0] = Line{}
			wc.in = wc.in[1:]
			wc.mu.Unlock()
			return l, nil
		}
		if wc.inEnd {
			wc.mu.Unlock()
			return Line{}, io.EOF
		}
		wake := wc.inWake
		wc.mu.Unlock()
		<-wake
	}
}

// WriteLine implements [Conn].
func (wc *wsConn) WriteLine(ctx context.Context, line []byte) error {
	wc.writeMu.Lock()
	defer wc.writeMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-wc.exited:
		return wc.exitOrClosed()
	default:
	}
	typ, _ := sniffKind(line)
	if typ == "user" && sniffString(line, "uuid") == "" {
		// The CLI drops a user message whose uuid it has seen, which makes
		// sending it again after a failed connection safe.
		line = append([]byte(`{"uuid":"`+newUUID()+`",`), line[1:]...)
	} else {
		line = append([]byte(nil), line...)
	}
	wc.mu.Lock()
	if wc.inputEnded {
		wc.mu.Unlock()
		return ErrClosed
	}
	if typ == "user" {
		wc.users++
	}
	wc.mu.Unlock()
	_, err := wc.out.Push(ctx, relay.Header{Type: relay.TypeLine}, line)
	if err != nil {
		if typ == "user" {
			wc.mu.Lock()
			wc.users--
			wc.mu.Unlock()
		}
		if errors.Is(err, relay.ErrOutboxClosed) {
			return wc.exitOrClosed()
		}
	}
	return err
}

func (wc *wsConn) exitOrClosed() error {
	select {
	case <-wc.exited:
		if wc.exitErr != nil {
			return wc.exitErr
		}
	default:
	}
	return ErrClosed
}

// CloseWrite implements [Conn]: the CLI is stopped once every prompt written
// has its result.
func (wc *wsConn) CloseWrite() error {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	wc.inputEnded = true
	wc.stopIfIdle()
	return nil
}

// stopIfIdle sends SIGTERM to a CLI whose input has ended once it has
// answered every prompt; wc.mu is held.
func (wc *wsConn) stopIfIdle() {
	if !wc.inputEnded || wc.idleStop || wc.results < wc.users {
		return
	}
	wc.idleStop = true
	wc.bg.Add(1)
	go func() {
		defer wc.bg.Done()
		wc.proc.Close() // GracePeriod -1: SIGTERM now, then SIGKILL after KillDelay
	}()
}

// Close implements [Conn]: it ends the input, waits up to the grace period
// for the current turn to end, then stops the CLI.
func (wc *wsConn) Close() error {
	wc.closeOnce.Do(func() {
		wc.CloseWrite()
		t := time.NewTimer(wc.grace)
		select {
		case <-wc.exited:
		case <-t.C:
		case <-wc.proc.ctx.Done():
		}
		t.Stop()
		wc.proc.Close()
		wc.bg.Wait()
	})
	return wc.Wait()
}

// Wait implements [Conn]. A CLI stopped with SIGTERM because it had nothing
// left to do exited cleanly.
func (wc *wsConn) Wait() error {
	<-wc.exited
	return wc.exitErr
}

// StderrTail implements [Conn].
func (wc *wsConn) StderrTail() string { return wc.proc.StderrTail() }

// drainStdout reads what the CLI prints on stdout: with --sdk-url its
// messages go over the WebSocket, so anything here is only logged.
func (wc *wsConn) drainStdout() {
	defer wc.bg.Done()
	for {
		l, err := wc.proc.ReadLine()
		if err != nil {
			return
		}
		wc.logger.Debug("claude: CLI stdout with --sdk-url", "line", string(l.Data))
	}
}

// supervise waits for the CLI to exit, then ends the server and the
// output.
func (wc *wsConn) supervise() {
	defer wc.bg.Done()
	err := wc.proc.Wait()
	wc.mu.Lock()
	wc.closing = true
	if wc.idleStop {
		var ee *ExitError
		if errors.As(err, &ee) && (ee.Code == 128+15 || ee.Signal == "terminated") {
			err = nil // our SIGTERM was the end of input
		}
	}
	wc.exitErr = err
	close(wc.exited)
	lk := wc.link
	wc.mu.Unlock()
	if lk != nil {
		select {
		case <-lk.done:
		case <-time.After(wsLinger):
			lk.c.CloseNow()
		}
	}
	wc.srv.Close()
	wc.handlers.Wait()
	wc.out.Close()
	wc.mu.Lock()
	wc.inEnd = true
	broadcast(&wc.inWake)
	wc.mu.Unlock()
}

// uuidSet remembers the last n uuids.
type uuidSet struct {
	m    map[string]struct{}
	ring []string
	next int
}

func newUUIDSet(n int) *uuidSet {
	return &uuidSet{m: make(map[string]struct{}, n), ring: make([]string, n)}
}

func (s *uuidSet) has(u string) bool {
	_, ok := s.m[u]
	return ok
}

func (s *uuidSet) add(u string) {
	if old := s.ring[s.next]; old != "" {
		delete(s.m, old)
	}
	s.ring[s.next] = u
	s.m[u] = struct{}{}
	s.next = (s.next + 1) % len(s.ring)
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	h := []byte(randomHex(16))
	h[12] = '4'
	h[16] = "89ab"[h[16]%4]
	return string(h[0:8]) + "-" + string(h[8:12]) + "-" + string(h[12:16]) + "-" + string(h[16:20]) + "-" + string(h[20:32])
}
