package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
)

// This file bounds what a client that stops reading costs the daemon. A
// stream's answer is written by its handler goroutine, which holds the
// message being written (the whole of it: a 2 MB event is marshalled
// whole) and what it read to make it until the client takes it. 200
// Subscribe streams that never read, on a session holding four 2 MB
// messages, held 12 MB each. Now every write of an API answer is watched:
// a client that accepts nothing for StreamWriteTimeout has its stream
// ended, and one that stops while a message larger than StreamUnsentBytes
// waits for it is ended after stallGrace already, so that a stalled
// stream holds little for long whatever the size of its events. The
// stream is reset (HTTP/2) or its connection closed (HTTP/1): a message
// cannot be ended halfway, so the client learns why from the log and by
// subscribing again, from the last event it has, as claudectl's clients
// and the page do by themselves.

// DefaultStreamWriteTimeout is how long a client may accept nothing of an
// answer under way before its stream is ended, unless
// Service.StreamWriteTimeout says otherwise.
const DefaultStreamWriteTimeout = 30 * time.Second

// DefaultStreamUnsentBytes is the largest message a stream may keep
// waiting for a client that has stopped reading for longer than
// stallGrace, unless Service.StreamUnsentBytes says otherwise.
const DefaultStreamUnsentBytes = 256 << 10

// stallGrace is how long a client that stopped reading may keep a message
// larger than the unsent bound waiting (the write timeout when shorter):
// long enough for a client busy for a moment, short enough that a crowd
// of stalled streams pins its large messages briefly.
const stallGrace = 5 * time.Second

// writePiece is the most of a message written at once: each piece the
// client accepts is progress, so a slow link that keeps reading is never
// taken for a stalled one, however large the message.
const writePiece = 32 << 10

// A StalledError is what a write of a stream ended for its stalled client
// returns (wrapped by Connect's error); the handler says, from it, where
// the client may resume.
type StalledError struct {
	// Idle is how long the client had accepted nothing.
	Idle time.Duration
	// Waiting is the size of the message it left waiting.
	Waiting int
	// Bound is the setting that ended it: "daemon.stream_write_timeout"
	// or "daemon.stream_unsent_bytes".
	Bound string
}

func (e *StalledError) Error() string {
	return fmt.Sprintf("this client stopped reading: it accepted nothing for %s with %s waiting for it (%s)",
		e.Idle.Round(100*time.Millisecond), sizeText(e.Waiting), e.Bound)
}

// sizeText says n bytes the way a person reads them.
func sizeText(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// stallLimits are the bounds the API's writes are held to.
type stallLimits struct {
	timeout atomic.Int64 // nanoseconds; <0: never (Service.SetStreamLimits changes both)
	unsent  atomic.Int64
	log     *slog.Logger
}

// watchStalls wraps the response writer of every API call (not the page's
// files, nor the workers' WebSocket) in a stallWriter, found again by the
// handlers through their context (stallOf).
func watchStalls(h http.Handler, l *stallLimits) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.timeout.Load() < 0 || r.URL.Path == WorkerPath || !strings.HasPrefix(r.URL.Path, "/claudectl.") && !strings.HasPrefix(r.URL.Path, "/grpc.") {
			h.ServeHTTP(w, r)
			return
		}
		sw := &stallWriter{ResponseWriter: w, limits: l, remote: r.RemoteAddr, procedure: r.URL.Path}
		defer sw.stop()
		h.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), stallKey{}, sw)))
	})
}

type stallKey struct{}

// stallOf returns the stallWriter of the call whose context is ctx, or nil.
func stallOf(ctx context.Context) *stallWriter {
	sw, _ := ctx.Value(stallKey{}).(*stallWriter)
	return sw
}

// stallWriter is an http.ResponseWriter whose writes are watched: a
// timer, armed while a write or a flush waits for the client and
// stopped when it returns, ends the stream when it fires. Writes come
// from the handler's goroutine alone; the timer's function runs on its
// own.
type stallWriter struct {
	http.ResponseWriter
	limits    *stallLimits
	remote    string
	procedure string

	timer    *time.Timer  // made at the first write
	since    atomic.Int64 // unix nanoseconds the write under way began; 0 when none is
	waiting  atomic.Int64 // the size of the message under way
	bound    atomic.Value // string: the setting the armed timer stands for
	buffered int          // bytes written since the last flush (the HTTP/2 writer buffers small writes)
	cut      atomic.Pointer[StalledError]

	// sent is the seq of the last event written whole, for a Subscribe:
	// where its client may resume.
	sent    atomic.Int64
	session string
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Write implements http.ResponseWriter: p goes out in pieces, each one's
// acceptance counting as progress.
func (w *stallWriter) Write(p []byte) (int, error) {
	size := len(p) + w.buffered
	n := 0
	for n < len(p) {
		piece := p[n:min(len(p), n+writePiece)]
		if err := w.arm(size); err != nil {
			return n, err
		}
		m, err := w.ResponseWriter.Write(piece)
		w.disarm()
		n += m
		w.buffered += m
		if err != nil {
			if e := w.cut.Load(); e != nil {
				return n, e
			}
			return n, err
		}
	}
	return n, nil
}

// Flush implements http.Flusher (Connect flushes after every message): on
// HTTP/2 it is where a small message waits for the client.
func (w *stallWriter) Flush() {
	f, ok := w.ResponseWriter.(http.Flusher)
	if !ok || w.arm(w.buffered) != nil {
		return
	}
	f.Flush()
	w.disarm()
	w.buffered = 0
}

// arm starts the timer for a write of a message of size bytes.
func (w *stallWriter) arm(size int) error {
	if e := w.cut.Load(); e != nil {
		return e
	}
	d, bound := time.Duration(w.limits.timeout.Load()), "daemon.stream_write_timeout"
	if d < 0 { // "never" since the stream began (a reload)
		return nil
	}
	if int64(size) > w.limits.unsent.Load() && stallGrace <= d {
		d, bound = stallGrace, "daemon.stream_unsent_bytes"
	}
	w.waiting.Store(int64(size))
	w.bound.Store(bound)
	w.since.Store(time.Now().UnixNano())
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.fire)
	} else {
		w.timer.Reset(d)
	}
	return nil
}

func (w *stallWriter) disarm() {
	w.since.Store(0)
	if w.timer != nil {
		w.timer.Stop()
	}
}

func (w *stallWriter) stop() {
	if w.timer != nil {
		w.disarm()
	}
}

// fire ends the stream whose write has waited too long: the server resets
// it (HTTP/2) or fails the write and closes the connection (HTTP/1), so
// the write under way returns and the handler with it, letting go of what
// it held.
func (w *stallWriter) fire() {
	since := w.since.Load()
	if since == 0 { // the write returned meanwhile
		return
	}
	e := &StalledError{Idle: time.Since(time.Unix(0, since)), Waiting: int(w.waiting.Load()), Bound: w.bound.Load().(string)}
	if !w.cut.CompareAndSwap(nil, e) {
		return
	}
	attrs := []any{"client", w.remote, "call", strings.TrimPrefix(w.procedure, "/claudectl.v1."), "idle", e.Idle.Round(time.Millisecond).String(),
		"waiting_bytes", e.Waiting, "setting", e.Bound}
	if w.session != "" {
		attrs = append(attrs, "session", w.session, "resume_after_seq", w.sent.Load())
	}
	w.limits.log.Info("ended a stream whose client stopped reading; it may subscribe again", attrs...)
	// A deadline in the past: HTTP/2 resets the stream at once, HTTP/1
	// fails the blocked write.
	_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(-time.Second))
}

// stalled returns why the stream of ctx was ended, if err is a write that
// failed because its client stopped reading.
func stalled(ctx context.Context, err error) *StalledError {
	var e *StalledError
	if errors.As(err, &e) {
		return e
	}
	if sw := stallOf(ctx); sw != nil {
		return sw.cut.Load()
	}
	return nil
}

// stalledOr is what a stream's handler returns when its Send failed with
// err: for a client that stopped reading, ResourceExhausted saying so and
// where it may resume (the stream is gone by then; the message is for
// the daemon's interceptors and for a connection that can still carry
// it), else err.
func stalledOr(ctx context.Context, err error) error {
	e := stalled(ctx, err)
	if e == nil {
		return err
	}
	msg := e.Error()
	if sw := stallOf(ctx); sw != nil && sw.session != "" {
		msg += fmt.Sprintf("; subscribe again with after_seq %d", sw.sent.Load())
	}
	return connect.NewError(connect.CodeResourceExhausted, errors.New(msg))
}
