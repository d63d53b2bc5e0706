package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	randv2 "math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Limits of the control connection.
const (
	// controlReadLimit bounds one frame from the other side of a control
	// connection: only small frames travel there.
	controlReadLimit = 64 << 10
	// DefaultStopTimeout is how long Host.Run waits for its CLIs to exit
	// and report it once it is told to stop.
	DefaultStopTimeout = 10 * time.Second
	maxSessionID       = 128
	// unreachableWarnEvery spaces the warnings of a worker that cannot
	// reach any controller.
	unreachableWarnEvery = 30 * time.Second
)

// A Host is a registered worker: it keeps a control connection to a
// controller open, says who it is in its hello (name, labels, capacity, CLI
// version), and for each session the controller places on it (an open
// frame) runs a [Worker] that dials a link of its own for that session.
// When the control connection drops, Run dials again with backoff, trying
// URLs in turn, for as long as ctx lasts; the sessions' CLIs keep running
// and their links reconnect by themselves.
//
// URLs, Token, Registration.Name and Start must be set.
type Host struct {
	// URLs are the controllers' endpoints, tried in turn.
	URLs  []string
	Token string
	// Registration describes the worker; an empty Instance is made up,
	// a zero Capacity means 1.
	Registration Registration
	Start        StartFunc
	// ReconnectTimeout is each session's Worker.ReconnectTimeout; zero
	// means the registration's grace period.
	ReconnectTimeout time.Duration
	BufferBytes      int
	HTTPClient       *http.Client
	Logger           *slog.Logger
	// StopTimeout bounds how long Run waits, once ctx ends, for the CLIs it
	// runs to exit gracefully and the controller to hear of it; then they
	// are killed. Zero means DefaultStopTimeout.
	StopTimeout               time.Duration
	PingInterval, PingTimeout time.Duration

	mu       sync.Mutex
	running  map[string]*hostSession
	stopping bool
	wg       sync.WaitGroup // session goroutines
}

type hostSession struct {
	drain  chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// ErrNameTaken is wrapped by the error of a Host whose name belongs to
// another worker that is connected.
var ErrNameTaken = errors.New("relay: worker name taken")

// Running returns the sessions the host runs now.
func (h *Host) Running() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]string, 0, len(h.running))
	for id := range h.running {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (h *Host) logger() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

// Run registers with a controller and serves the sessions it places here
// until ctx ends; then it stops every CLI (gracefully first, see
// StopTimeout) and returns nil once they are gone. It returns an error when
// the registration is invalid or refused (wrapping ErrRejected: a bad token,
// a name taken by another live worker; a *RefusedError for a handshake
// answered 401, 403 or 404). Call it once.
func (h *Host) Run(ctx context.Context) error {
	if h.Start == nil {
		panic("relay: Host.Start is nil")
	}
	if len(h.URLs) == 0 {
		panic("relay: Host.URLs is empty")
	}
	reg := h.Registration
	if reg.Instance == "" {
		b := make([]byte, 8)
		rand.Read(b)
		reg.Instance = hex.EncodeToString(b)
	}
	if reg.Capacity == 0 {
		reg.Capacity = 1
	}
	if err := reg.Validate(); err != nil {
		return err
	}
	h.mu.Lock()
	h.running = map[string]*hostSession{}
	h.mu.Unlock()
	defer h.shutdown()
	logger := h.logger()
	backoff := minBackoff
	var lastWarn time.Time
	for attempt := 1; ; attempt++ {
		url := h.URLs[(attempt-1)%len(h.URLs)]
		c, _, err := dial(ctx, h.HTTPClient, url, h.Token)
		if err == nil {
			var up bool
			up, err = h.control(ctx, c, url, &reg)
			if errors.Is(err, ErrRejected) {
				return err
			}
			if up {
				backoff, lastWarn = minBackoff, time.Time{}
			}
			if ctx.Err() == nil {
				logger.Warn("claudectl worker: control link lost; reconnecting", "url", url, "err", err, "running", len(h.Running()))
			}
		} else {
			if rerr := refused(url, err); rerr != nil {
				return rerr
			}
			if ctx.Err() == nil {
				// Say so now and then: a worker that never reaches its
				// controller must not look like one waiting for sessions.
				level := slog.LevelDebug
				if time.Since(lastWarn) >= unreachableWarnEvery {
					level, lastWarn = slog.LevelWarn, time.Now()
				}
				if busy := (*BusyError)(nil); errors.As(err, &busy) {
					logger.Log(ctx, level, "claudectl worker: "+busy.Error()+"; trying again", "attempt", attempt)
				} else {
					logger.Log(ctx, level, "claudectl worker: cannot reach the controller; trying again", "url", url, "attempt", attempt, "err", err)
				}
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		d := backoff/2 + randv2.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// control runs one control connection: the registration, then the open
// frames, until the connection or ctx ends. up reports whether the
// controller accepted the registration.
func (h *Host) control(ctx context.Context, c *websocket.Conn, url string, reg *Registration) (up bool, err error) {
	defer c.CloseNow()
	c.SetReadLimit(controlReadLimit)
	hello := &Header{Type: TypeHello, Worker: reg.Name, Register: reg}
	if err := WriteFrame(ctx, c, hello, nil); err != nil {
		return false, err
	}
	actx, cancel := context.WithTimeout(ctx, dialTimeout)
	f, err := ReadFrame(actx, c)
	cancel()
	if err != nil {
		return false, err
	}
	switch f.Type {
	case TypeWelcome:
	case TypeReject:
		c.Close(websocket.StatusNormalClosure, "")
		return false, fmt.Errorf("%w: %s", ErrRejected, f.Error)
	default:
		return false, fmt.Errorf("%w: %s frame instead of welcome", ErrMalformed, f.Type)
	}
	h.logger().Info("claudectl worker: registered", "url", url, "name", reg.Name, "capacity", reg.Capacity, "running", len(h.Running()))
	lctx, cancelLink := context.WithCancelCause(ctx)
	defer cancelLink(nil)
	link := &Link{Conn: c, PingInterval: h.PingInterval, PingTimeout: h.PingTimeout,
		Handle: func(f *Frame) error { return h.handleControl(lctx, c, url, reg, f) }}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := link.PingLoop(lctx); err != nil {
			cancelLink(err)
			c.CloseNow()
		}
	}()
	go func() { // the reader ends with ctx too
		defer wg.Done()
		<-lctx.Done()
		c.CloseNow()
	}()
	err = link.ReadLoop(lctx)
	cancelLink(err)
	wg.Wait()
	return true, linkErr(lctx, err)
}

// handleControl acts on one frame of the control connection.
func (h *Host) handleControl(ctx context.Context, c *websocket.Conn, url string, reg *Registration, f *Frame) error {
	if f.Type != TypeOpen {
		return nil // pings are the WebSocket's; anything newer is ignored
	}
	if f.Session == "" || len(f.Session) > maxSessionID {
		return fmt.Errorf("%w: open of session %q", ErrMalformed, f.Session)
	}
	h.mu.Lock()
	if _, ok := h.running[f.Session]; ok {
		h.mu.Unlock()
		return nil // asked again after a reconnection: its link is on its way
	}
	if h.stopping || len(h.running) >= reg.Capacity {
		n := len(h.running)
		stopping := h.stopping
		h.mu.Unlock()
		why := fmt.Sprintf("worker %s is at capacity (%d of %d sessions)", reg.Name, n, reg.Capacity)
		if stopping {
			why = "worker " + reg.Name + " is stopping"
		}
		return WriteFrame(ctx, c, &Header{Type: TypeDecline, Session: f.Session, Error: why}, nil)
	}
	// The session's link goes first to the controller that asked.
	urls := []string{url}
	for _, u := range h.URLs {
		if u != url {
			urls = append(urls, u)
		}
	}
	sctx, cancel := context.WithCancel(context.Background())
	hs := &hostSession{drain: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	h.running[f.Session] = hs
	h.wg.Add(1)
	h.mu.Unlock()
	w := &Worker{
		URLs: urls, Token: h.Token, Name: reg.Name, Claim: f.Session, claimSecret: f.Secret, Drain: hs.drain,
		Start:            h.Start,
		ReconnectTimeout: cmpOr(h.ReconnectTimeout, reg.Grace()),
		BufferBytes:      h.BufferBytes, HTTPClient: h.HTTPClient, Logger: h.Logger,
		PingInterval: h.PingInterval, PingTimeout: h.PingTimeout,
	}
	go func() {
		defer h.wg.Done()
		defer close(hs.done)
		defer cancel()
		err := w.Run(sctx)
		h.mu.Lock()
		delete(h.running, f.Session)
		h.mu.Unlock()
		if err != nil {
			h.logger().Warn("claudectl worker: session ended with an error", "session", f.Session, "err", err)
		} else {
			h.logger().Info("claudectl worker: session over", "session", f.Session)
		}
	}()
	return nil
}

// shutdown stops every CLI, gracefully first, and waits for them.
func (h *Host) shutdown() {
	h.mu.Lock()
	h.stopping = true
	sessions := make([]*hostSession, 0, len(h.running))
	for _, hs := range h.running {
		sessions = append(sessions, hs)
	}
	h.mu.Unlock()
	if len(sessions) > 0 {
		h.logger().Info("claudectl worker: stopping the CLIs", "sessions", len(sessions))
	}
	timer := time.NewTimer(cmpOr(h.StopTimeout, DefaultStopTimeout))
	defer timer.Stop()
	for _, hs := range sessions {
		close(hs.drain)
	}
	expired := false
	for _, hs := range sessions {
		if !expired {
			select {
			case <-hs.done:
				continue
			case <-timer.C:
				expired = true
			}
		}
		hs.cancel() // no grace left: the CLI is killed
	}
	h.wg.Wait()
}
