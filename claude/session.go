package claude

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A Session is one running Claude Code CLI. Start one with [Start], write
// prompts with [Session.Send], read what the CLI prints with
// [Session.Next], [Session.Messages] or [Session.Turn], steer it with
// control requests ([Session.Interrupt], [Session.SetModel], ...), and end it
// with [Session.Close].
//
// All methods are safe for concurrent use, but messages are delivered once:
// read them from one goroutine. The CLI's own requests (permission prompts,
// cancellations) are answered by the session in the background, whether or
// not anybody is reading messages. Output that nobody reads is buffered, up
// to a few MiB; then the session stops reading from the CLI, which pauses
// it, until the reader catches up.
type Session struct {
	opts   Options
	conn   Conn
	dec    *Decoder
	logger *slog.Logger

	ctx    context.Context // the session's life; cancelled by Close
	cancel context.CancelCauseFunc

	// writeTurn serialises conn.WriteLine: a writer holds its one token.
	// A channel, not a mutex, so that a writer waiting behind a stuck one
	// gives up when its ctx ends.
	writeTurn chan struct{}

	q        msgQueue
	pipeline sync.WaitGroup // readLoop, dispatchLoop and decode workers
	handlers sync.WaitGroup // goroutines answering the CLI's control requests
	done     chan struct{}  // closed when the dispatcher has finished
	endErr   error          // why the session ended; set before done is closed

	reqSeq atomic.Uint64

	mcp mcpRouter // connections to the in-process MCP servers (mcp_transport.go)
	// mcpSetMu serialises the calls that send mcp_set_servers, and guards
	// mcpExternal, the external servers MCPSetServers last set (mcp.go).
	mcpSetMu    sync.Mutex
	mcpExternal map[string]MCPServerConfig

	hooks *hookRegistry // Options.Hooks, numbered (hooks.go); read-only
	idle  idleState     // whether the reader has reached idle (agents.go)

	mu         sync.Mutex
	sessionID  string
	cliVersion string       // from the initialize response or system/init
	initCaps   []Capability // the latest system/init's capabilities
	inTurn     bool
	pending    map[string]*pendingRequest    // our requests awaiting a response
	incoming   map[string]context.CancelFunc // the CLI's requests being answered
	refusals   []string                      // ids of the CLI's requests to refuse (control.go)
	refusing   bool                          // writeRefusals is running
	dropped    int                           // requests neither answered nor refused
	initResp   *InitializeResponse
	initErr    error
	initDone   chan struct{}
	closeOnce  sync.Once
	closeErr   error
	inputEnded bool
}

type pendingRequest struct {
	subtype string
	ch      chan controlResult
}

type controlResult struct {
	body ControlResponseBody
	err  error
}

// noLineLimit is the line limit of MaxPayloadBytes < 0: no line is that long.
const noLineLimit = math.MaxInt / 4

// Start launches the CLI and returns the running session. It sends the
// initialize request but does not wait for its answer (see
// [Session.Initialize]), so a prompt can be sent at once.
//
// ctx governs the whole life of the session: when it is cancelled the CLI is
// torn down and reads return the context's error. Close the session when
// done with it, whatever ctx does.
func Start(ctx context.Context, opts *Options) (*Session, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	path := o.CLIPath
	if jsCLI(path) {
		p, err := findJSCLI(path) // options_more.go
		if err != nil {
			return nil, err
		}
		path = p
	} else if o.Transport == nil || path != "" {
		p, err := FindBinary(&FindOptions{Path: o.CLIPath})
		if err != nil {
			return nil, err
		}
		path = p
	}
	args, err := o.args()
	if err != nil {
		return nil, err
	}
	maxLine := o.MaxPayloadBytes
	switch {
	case maxLine == 0:
		maxLine = DefaultMaxPayloadBytes
	case maxLine < 0:
		maxLine = noLineLimit
	}
	exe, args := o.launch(path, args)
	cmd := &Command{Path: exe, Args: args, Env: o.environ(), Dir: o.Cwd, MaxLineBytes: maxLine}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	tr := o.Transport
	if tr == nil {
		tr = &ProcessTransport{Stderr: recoverStderr(o.Stderr, logger)}
	}
	sctx, cancel := context.WithCancelCause(ctx)
	conn, err := tr.Start(sctx, cmd)
	if err != nil {
		cancel(err)
		return nil, err
	}
	s := &Session{
		opts:      o,
		conn:      conn,
		dec:       &Decoder{Logger: logger},
		logger:    logger,
		ctx:       sctx,
		cancel:    cancel,
		done:      make(chan struct{}),
		writeTurn: make(chan struct{}, 1),
		pending:   make(map[string]*pendingRequest),
		incoming:  make(map[string]context.CancelFunc),
		initDone:  make(chan struct{}),
		hooks:     newHookRegistry(o.Hooks),
	}
	s.q.init()
	s.mcp.init(o.MCPServers, o.MCPServerSettings)
	s.startPipeline()
	if a, ok := conn.(interface{ Attached() bool }); ok && a.Attached() {
		// A CLI another process started and initialised: it is not
		// initialised again (see WorkerTransport.Resume).
		s.initErr = errAttached
		close(s.initDone)
	} else {
		s.initialize()
	}
	return s, nil
}

// recoverStderr wraps an Options.Stderr callback: a panic in it is logged
// and turns it off (it is called from one goroutine).
func recoverStderr(f func(string), logger *slog.Logger) func(string) {
	if f == nil {
		return nil
	}
	off := false
	return func(line string) {
		if off {
			return
		}
		defer func() {
			if r := recover(); r != nil {
				off = true
				logger.Error("claude: the Stderr callback panicked; it is called no more", "panic", r)
			}
		}()
		f(line)
	}
}

// errAttached is Initialize's error in a session attached to a running CLI.
var errAttached = errors.New("claude: the session took over a running CLI: its initialize response went to the process that started it")

// Release tells the connection that what the session delivered from the
// CLI's lines up to the one numbered seq (see [LineSeq]) is safe, stored
// by the caller: a connection that keeps lines until then (a remote
// worker's, with [WorkerTransport].Hold) lets the worker forget them. It
// does nothing on other connections. Releases never go back: a lower seq
// than an earlier one is ignored.
func (s *Session) Release(seq uint64) {
	if r, ok := s.conn.(interface{ Release(uint64) }); ok {
		r.Release(seq)
	}
}

// SessionID returns the CLI's session id, known once the first system/init
// or result message has been read ("" before).
func (s *Session) SessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionID
}

// Stats returns the decoder's counters of messages it could not fully type.
func (s *Session) Stats() DecodeStats { return s.dec.Stats() }

// StderrTail returns the last part of what the CLI wrote on stderr.
func (s *Session) StderrTail() string { return s.conn.StderrTail() }

// MemoryKills returns how many processes of the CLI's tree (the CLI or a
// tool it ran) the kernel has killed so far for reaching its memory limit
// ([ProcessTransport.Limits]); 0 without one, or on transports that cannot
// tell. It reads one small file: cheap enough for every turn.
func (s *Session) MemoryKills() int64 {
	if m, ok := s.conn.(memoryKiller); ok {
		return m.MemoryKills()
	}
	return 0
}

// Send writes a user message with the given content to the CLI, starting a
// turn (or queueing one if a turn is running). ctx bounds the write.
func (s *Session) Send(ctx context.Context, content Content) error {
	s.mu.Lock()
	s.inTurn = true
	s.mu.Unlock()
	s.idle.sent.Add(1)
	return s.opErr("send", s.write(ctx, wireUser{
		Type:           "user",
		SessionID:      "",
		Message:        UserContent{Role: "user", Content: content},
		ClientComposed: s.opts.VerbatimPrompts,
	}))
}

// SendText writes a text prompt; see [Session.Send].
func (s *Session) SendText(ctx context.Context, text string) error {
	return s.Send(ctx, BlockContent(&TextBlock{Text: text}))
}

// CloseInput tells the CLI that no more prompts will come. It finishes the
// current turn (and background tasks) and exits; keep reading messages until
// they end. It does not wait for a write in progress: the input ends after
// the line being written, and later writes fail with ErrClosed.
func (s *Session) CloseInput() error {
	s.mu.Lock()
	s.inputEnded = true
	s.mu.Unlock()
	return s.conn.CloseWrite()
}

func (s *Session) write(ctx context.Context, v any) error {
	line, err := encodeLine(v)
	if err != nil {
		return err
	}
	return s.writeLine(ctx, line)
}

// writeLine writes one line, after the lines already waiting; it returns
// when ctx ends, whether or not the line was written (the error says which).
// Its errors are for a caller to wrap with [Session.opErr].
func (s *Session) writeLine(ctx context.Context, line []byte) error {
	select {
	case <-s.done:
		return s.endErrOrClosed()
	default:
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("writing to the CLI: line not written: %w", err)
	}
	select {
	case s.writeTurn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("writing to the CLI: line not written: %w", ctx.Err())
	case <-s.done:
		return s.endErrOrClosed()
	}
	err := s.conn.WriteLine(ctx, line)
	<-s.writeTurn
	if err != nil {
		select {
		case <-s.done:
			return s.endErrOrClosed()
		default:
		}
		if errors.Is(err, ErrClosed) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return fmt.Errorf("writing to the CLI: %w", err)
	}
	return nil
}

// opErr wraps an error of what the session was doing (op: "send",
// "control request set_model") with op and the session id, without
// repeating the package prefix or the session of the error it wraps.
func (s *Session) opErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return &opError{op: op, sessionID: s.SessionID(), err: err}
}

type opError struct {
	op, sessionID string
	err           error
}

func (e *opError) Error() string {
	inner := strings.TrimPrefix(e.err.Error(), "claude: ")
	msg := "claude: " + e.op
	if e.sessionID != "" && !strings.Contains(inner, "(session "+e.sessionID+")") {
		msg += " (session " + e.sessionID + ")"
	}
	return msg + ": " + inner
}

func (e *opError) Unwrap() error { return e.err }

func (s *Session) endErrOrClosed() error {
	if s.endErr != nil && !errors.Is(s.endErr, io.EOF) {
		return s.endErr
	}
	return ErrClosed
}

// Next returns the next message. It returns io.EOF after the CLI exited
// cleanly and every message was read; an *ExitError if it exited otherwise;
// ctx's error if ctx ends first (the session goes on).
func (s *Session) Next(ctx context.Context) (Message, error) {
	m, err := s.q.pop(ctx)
	if err == nil {
		s.idle.observe(m)
	}
	return m, err
}

// Messages returns an iterator over the messages until the session ends. A
// clean end stops the iteration; any other end yields (nil, err) last.
// Breaking out of the loop leaves the session running: a later call goes on
// from the next message.
func (s *Session) Messages(ctx context.Context) iter.Seq2[Message, error] {
	return func(yield func(Message, error) bool) {
		for {
			m, err := s.Next(ctx)
			if err != nil {
				if !errors.Is(err, io.EOF) {
					yield(nil, err)
				}
				return
			}
			if !yield(m, nil) {
				return
			}
		}
	}
}

// Turn returns an iterator over the messages up to and including the next
// *ResultMessage of the main thread. If the session ends first, the last
// pair carries the error (io.EOF for a clean exit before any result).
// Background sub-agents can start more turns after it; see
// [Session.UntilIdle].
func (s *Session) Turn(ctx context.Context) iter.Seq2[Message, error] {
	return func(yield func(Message, error) bool) {
		for {
			m, err := s.Next(ctx)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(m, nil) {
				return
			}
			if r, ok := m.(*ResultMessage); ok && r != nil {
				return
			}
		}
	}
}

// Close ends the session: it interrupts the turn still running, if any,
// closes the CLI's input, gives it a grace period to exit, then terminates
// it, and waits for every goroutine of the session. It returns nil when the
// CLI exited cleanly (or was already gone after a clean exit), else the
// *ExitError. Close is idempotent; unread messages are discarded.
//
// Callbacks (Options.CanUseTool, hooks, in-process MCP tools, ...) still
// running see their ctx cancelled; Close waits up to a second for them to
// return, then returns anyway: a callback that ignores its ctx keeps its
// goroutine until it returns, and its answer is dropped. Close may be
// called from a callback (it then returns after that second, the callback
// being one of those it waits for).
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		// Unread messages are discarded: let the reader drain the CLI's
		// output freely so that the CLI is never stuck writing it.
		s.q.close(ErrClosed)
		s.stopAbandonedTurn()
		err := s.conn.Close()
		s.cancel(ErrClosed)
		<-s.done
		// Callbacks were told by their ctx; the in-process MCP servers'
		// close waits for their tool handlers.
		waitAtMost(closeCallbackWait, s.handlers.Wait, s.mcp.close)
		s.pipeline.Wait()
		<-s.initDone
		s.q.close(ErrClosed)
		s.q.discard()
		var ee *ExitError
		if errors.As(err, &ee) {
			c := *ee // the Conn hands the same error to others
			c.SessionID = s.SessionID()
			err = &c
		}
		s.closeErr = err
	})
	return s.closeErr
}

// closeCallbackWait bounds how long Close waits for callbacks still
// running once their ctx is cancelled.
var closeCallbackWait = time.Second

// waitAtMost runs each of fs on its own goroutine and returns when all have
// returned or d has passed; those still running are left to finish.
func waitAtMost(d time.Duration, fs ...func()) {
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Go(f)
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// closeInterruptWait bounds the wait for the CLI to confirm the interrupt
// that Close sends when a turn is still running.
const closeInterruptWait = time.Second

// stopAbandonedTurn interrupts the turn still running when the session is
// closed (the caller broke out of a Query or Turn loop), dropping queued
// prompts: the CLI then ends the turn at once and exits as soon as its input
// closes, instead of finishing the turn during Close's grace period.
func (s *Session) stopAbandonedTurn() {
	s.mu.Lock()
	inTurn := s.inTurn
	s.mu.Unlock()
	if !inTurn || s.ctx.Err() != nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(s.ctx, closeInterruptWait)
	defer cancel()
	if _, err := s.InterruptWith(ctx, &InterruptOptions{CancelQueued: true}); err != nil {
		s.logger.Debug("claude: interrupt before close failed", "session", s.SessionID(), "err", err)
	}
}

// Done returns a channel closed when the CLI's output has ended and every
// message has been decoded (they may still be unread); when the output
// ended cleanly, once the CLI has also exited. A CLI that closes its
// output but keeps running is stopped after a grace period (see
// [ProcessTransport]), and Err says so.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns why the session ended once Done is closed: nil for a clean
// exit, else the error Next returns at the end.
func (s *Session) Err() error {
	select {
	case <-s.done:
		if errors.Is(s.endErr, io.EOF) {
			return nil
		}
		return s.endErr
	default:
		return nil
	}
}

// Query runs one prompt in a new session and yields its messages until the
// CLI is idle (see [Session.UntilIdle]): up to and including the result,
// and the turns that background sub-agents start after it. Then it closes
// the session. For several prompts, or to steer the session while it runs,
// use [Start].
func Query(ctx context.Context, prompt string, opts *Options) iter.Seq2[Message, error] {
	return func(yield func(Message, error) bool) {
		s, err := Start(ctx, opts)
		if err != nil {
			yield(nil, err)
			return
		}
		defer s.Close()
		if err := s.SendText(ctx, prompt); err != nil {
			yield(nil, err)
			return
		}
		for m, err := range s.UntilIdle(ctx) {
			if !yield(m, err) {
				return
			}
			if err != nil {
				return
			}
		}
	}
}

// maxQueuedBytes is how much unread output (raw bytes) a session queues
// before it stops reading from the CLI. It is small because decoded messages
// cost about as much again, and the pipeline holds a few batches more.
const maxQueuedBytes = 2 << 20
