package claude

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
)

// The read side of a session is a three-stage pipeline, so that decoding,
// the expensive part, runs on every core while order is kept:
//
//	readLoop ──batches──▶ decode workers (N) ──▶ dispatchLoop ──▶ msgQueue ──▶ Next
//	    └────────── same batches, in order ──────────▲
//
// readLoop owns conn.ReadLine. It groups the lines that are already buffered
// into a batch and hands the batch both to the worker pool and, in order, to
// dispatchLoop, which waits for each batch to be decoded, answers control
// traffic and queues the rest for the reader. Every goroutine ends when the
// CLI's output ends; dispatchLoop then records why and closes s.done, then
// the reader's queue.

const (
	batchMaxLines = 2048
	batchMaxBytes = 384 << 10
	// inlineDecodeLines: batches this small are decoded by readLoop itself,
	// which saves a hand-off when output trickles in.
	inlineDecodeLines = 2
)

type batch struct {
	lines []Line
	msgs  []Message
	done  chan struct{} // closed when msgs is filled
}

func (s *Session) startPipeline() {
	workers := min(runtime.GOMAXPROCS(0), 4)
	work := make(chan *batch, workers)
	ordered := make(chan *batch, workers+1)
	s.pipeline.Add(2 + workers)
	for range workers {
		go func() {
			defer s.pipeline.Done()
			for b := range work {
				s.decodeBatch(b)
			}
		}()
	}
	go func() {
		defer s.pipeline.Done()
		defer close(work)
		defer close(ordered)
		s.readLoop(work, ordered)
	}()
	go func() {
		defer s.pipeline.Done()
		s.dispatchLoop(ordered) // closes s.done (finish)
	}()
}

func (s *Session) readLoop(work, ordered chan<- *batch) {
	bc, canPeek := s.conn.(bufferedConn)
	cur := &batch{done: make(chan struct{})}
	size, hint := 0, 0
	flush := func() {
		n := len(cur.lines)
		if n == 0 {
			return
		}
		if n <= inlineDecodeLines {
			s.decodeBatch(cur)
		} else {
			work <- cur
		}
		ordered <- cur
		// The next batch is likely the size of this one: room for it at
		// its first line, instead of growing the slice by doubling (a
		// third of the bytes the read side allocated besides the lines
		// and messages); not before, so that an idle session holds none.
		hint = n
		cur = &batch{done: make(chan struct{})}
		size = 0
		s.q.waitRoom(s.ctx) // pause the CLI while the reader is far behind
	}
	for {
		line, err := s.conn.ReadLine()
		if err != nil {
			flush()
			end := &batch{done: make(chan struct{})}
			end.msgs = []Message{&endMarker{err: err}}
			close(end.done)
			ordered <- end
			return
		}
		if cur.lines == nil {
			cur.lines = make([]Line, 0, max(hint, 1))
		}
		cur.lines = append(cur.lines, line)
		size += len(line.Data)
		if len(cur.lines) >= batchMaxLines || size >= batchMaxBytes || !canPeek || bc.Buffered() == 0 {
			flush()
		}
	}
}

// endMarker is the last "message" of the pipeline; it never leaves it.
type endMarker struct {
	Base
	err error
}

func (s *Session) decodeBatch(b *batch) {
	b.msgs = make([]Message, 0, len(b.lines))
	arena := eventArena{lines: len(b.lines)}
	for _, l := range b.lines {
		m, err := s.dec.decode(l.Data, &arena)
		if err != nil {
			s.logger.Warn("claude: skipping a line that is not a JSON object", "session", s.SessionID(), "err", err)
			continue
		}
		m.base().lineSeq = l.Seq
		if l.OriginalSize > 0 {
			m.base().originalSize = l.OriginalSize
			s.logger.Warn("claude: CLI output line over the payload limit was truncated",
				"session", s.SessionID(), "type", m.Kind(), "original_bytes", l.OriginalSize, "kept_bytes", len(l.Data))
		}
		b.msgs = append(b.msgs, m)
	}
	b.lines = nil
	close(b.done)
}

func (s *Session) dispatchLoop(ordered <-chan *batch) {
	var endErr error = io.EOF
	for b := range ordered {
		<-b.done
		// The batch is ours now: keep what goes to the reader in place.
		// (A slice kept across batches would hold the last big batch's
		// messages, and their lines, for as long as the session idles;
		// a fixed-size one would sit on this goroutine's stack.)
		out := b.msgs[:0]
		for _, m := range b.msgs {
			if e, ok := m.(*endMarker); ok {
				endErr = e.err
				continue
			}
			if s.route(m) {
				out = append(out, m)
			}
		}
		if len(out) > 0 {
			s.q.push(out)
		}
	}
	s.finish(endErr)
}

// route handles control traffic and session bookkeeping, and reports whether
// m goes to the reader.
func (s *Session) route(m Message) bool {
	switch m := m.(type) {
	case *ControlResponse:
		s.handleResponse(&m.Response)
		return false
	case *ControlRequest:
		s.handleRequest(m.RequestID, m.Subtype, m.Request)
		return false
	case *ControlCancelRequest:
		s.mu.Lock()
		cancel := s.incoming[m.RequestID]
		s.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		return false
	case *KeepAlive:
		return false
	case *SystemInit:
		s.setSessionID(m.SessionID)
		s.mu.Lock()
		if m.ClaudeCodeVersion != "" {
			s.cliVersion = m.ClaudeCodeVersion
		}
		if m.Capabilities != nil {
			s.initCaps = slices.Clone(m.Capabilities) // the reader gets m
		}
		s.mu.Unlock()
	case *ResultMessage:
		s.setSessionID(m.SessionID)
		s.mu.Lock()
		s.inTurn = false
		s.mu.Unlock()
	}
	return true
}

func (s *Session) setSessionID(id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	s.sessionID = id
	s.mu.Unlock()
}

// finish records why the output ended and fails whatever still waits.
func (s *Session) finish(readErr error) {
	err := readErr
	if errors.Is(err, io.EOF) {
		// The output ended: the exit status tells how.
		if werr := s.conn.Wait(); werr != nil {
			err = werr
		}
	} else {
		err = fmt.Errorf("claude: reading CLI output: %w", err)
	}
	if cerr := context.Cause(s.ctx); cerr != nil && cerr != ErrClosed && !errors.Is(err, io.EOF) {
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Signal != "" {
			err = fmt.Errorf("claude: session ended: %w", cerr)
		}
	}
	s.mu.Lock()
	sid, inTurn := s.sessionID, s.inTurn
	pend := s.pending
	s.pending = map[string]*pendingRequest{}
	s.mu.Unlock()
	var ee *ExitError
	if errors.As(err, &ee) {
		// A copy: the Conn hands the same error to others.
		c := *ee
		c.SessionID = sid
		if inTurn {
			c.During = "mid-turn"
		}
		err = &c
	}
	s.endErr = err
	failWith := err
	if errors.Is(failWith, io.EOF) {
		failWith = ErrClosed
	}
	for _, p := range pend {
		p.ch <- controlResult{err: failWith}
	}
	// Ended before the reader hears of it: a write after the last message
	// fails with the end, never succeeds into a CLI that is gone.
	close(s.done)
	s.q.close(err)
}
