package claude

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/coder/websocket"

	"github.com/claudectl/claudectl/internal/relay"
)

// This file holds the take-over of a session whose CLI runs on a worker
// that comes back from another controller (WorkerListener.Adopt).

// ErrUnknownRelaySession is wrapped by an Adopt error that says the session
// the worker came back for is over or was never known: the worker stops its
// CLI.
var ErrUnknownRelaySession = errors.New("claude: unknown relay session")

// A WorkerReturn is a worker that came back for a relay session the
// listener does not serve: the controller that served it died or
// restarted.
type WorkerReturn struct {
	Session string // the relay session's id
	Worker  string // the worker's name
	// WorkerHas counts the frames the worker received from the previous
	// controller; Held is the last of its own frames that controller
	// acknowledged (the worker no longer keeps them).
	WorkerHas, Held uint64

	// proof is the SHA-256 of the secret the worker's hello presented
	// (the secret itself stays in the listener, unprinted).
	proof string
}

// Proves reports whether the worker presented the secret of the relay
// session whose hash is secretHash (the session Conn's RelaySecretHash,
// stored by the controller that started it), in constant time. Only such
// a worker is the one that runs the session: anyone holding the worker
// token may name a session id, which is in logs and stores. An empty
// secretHash proves nothing.
func (r *WorkerReturn) Proves(secretHash string) bool {
	return secretHash != "" && r.proof != "" && subtle.ConstantTimeCompare([]byte(r.proof), []byte(secretHash)) == 1
}

// adoptTimeout bounds WorkerListener.Adopt: the worker, unanswered, pings
// meanwhile and gives up after relay.DefaultPingTimeout.
var adoptTimeout = 10 * time.Second

// returning is a worker's connection waiting for Adopt's answer.
type returning struct {
	wl     *workerLink
	back   *WorkerReturn
	secret string      // the hello's, which the session keeps once taken over
	rc     *workerConn // made by adopt, inside Adopt
}

// adoptReturn asks Adopt about the worker on wl, which came back for a
// session the listener does not serve, and returns the session's Conn if
// Adopt took it over; else it has answered the worker and returns nil.
func (l *WorkerListener) adoptReturn(wl *workerLink, hello *relay.Frame) *workerConn {
	sid := hello.Session
	ret := &returning{wl: wl, secret: hello.Secret,
		back: &WorkerReturn{Session: sid, Worker: wl.name, WorkerHas: hello.Ack, Held: hello.Held, proof: secretHash(hello.Secret)}}
	l.mu.Lock()
	if l.closed || l.returning[sid] != nil {
		l.mu.Unlock()
		wl.c.Close(websocket.StatusTryAgainLater, "the session is being taken over")
		return nil
	}
	l.returning[sid] = ret
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(l.ctx, adoptTimeout)
	err := l.Adopt(ctx, ret.back)
	cancel()
	l.mu.Lock()
	delete(l.returning, sid)
	rc := ret.rc
	l.mu.Unlock()
	switch {
	case err != nil && errors.Is(err, ErrUnknownRelaySession):
		l.logger().Warn("claude: worker came back for a session it may not resume", "worker", wl.name, "session", relay.Clip(sid), "err", err)
		relay.WriteFrame(l.ctx, wl.c, &relay.Header{Type: relay.TypeReject, Error: err.Error()}, nil)
		wl.c.Close(websocket.StatusNormalClosure, "")
		return nil
	case err != nil || rc == nil:
		why := "not taken over here"
		if err != nil {
			why = err.Error()
		}
		l.logger().Info("claude: worker came back for a session served elsewhere", "worker", wl.name, "session", relay.Clip(sid), "reason", why)
		wl.c.Close(websocket.StatusTryAgainLater, truncateReason(why))
		return nil
	}
	l.logger().Info("claude: took over a remote session", "worker", wl.name, "session", sid,
		"from_frame", rc.received(), "worker_has", hello.Ack)
	return rc
}

// truncateReason keeps a close reason within the 123 bytes a close frame
// holds.
func truncateReason(s string) string {
	if len(s) > 120 {
		return s[:120]
	}
	return s
}

// adopt is WorkerTransport.Start with Resume: the Conn of the session a
// returning worker waits for, taken over at t.Resume.Received.
func (l *WorkerListener) adopt(ctx context.Context, c *Command, t *WorkerTransport) (Conn, error) {
	l.init()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sid := t.Resume.Session
	l.mu.Lock()
	ret := l.returning[sid]
	if l.closed || ret == nil || ret.rc != nil || l.sessions[sid] != nil {
		l.mu.Unlock()
		return nil, &StartError{Path: "remote worker", Err: fmt.Errorf("no worker waits to be taken over for relay session %s", sid)}
	}
	if !ret.back.Proves(t.Resume.SecretHash) {
		l.mu.Unlock()
		return nil, &StartError{Path: "remote worker " + ret.wl.name, Err: fmt.Errorf("the worker that came back for relay session %s did not present its secret (WorkerResume.SecretHash): it may not be the worker that runs it", sid)}
	}
	rc := l.newConn(ctx, c, t)
	rc.id, rc.secret = sid, ret.secret
	rc.attached = true
	// The worker sends again what it holds, from after Held: the lines
	// up to Received are stored (skipped) but for the CLI's requests
	// still open, which the dead controller held for whoever takes over.
	rc.recv, rc.consumed = ret.back.Held, ret.back.Held
	rc.skipTo = t.Resume.Received
	rc.out = relay.NewOutboxAfter(orDefault(l.BufferBytes, relay.DefaultBufferBytes), ret.back.WorkerHas)
	rc.worker, rc.placed = ret.wl.name, true
	if e := l.registry[ret.wl.name]; e != nil {
		rc.grace = e.reg.Grace()
	}
	// Away until its link is attached: if that connection drops first,
	// the session waits for the worker's grace period, as for any cut.
	rc.lostAt = time.Now()
	l.sessions[sid] = rc
	ret.rc = rc
	l.mu.Unlock()
	for _, line := range t.Resume.Unsent { // the worker ends each with a newline
		if _, err := rc.out.Push(ctx, relay.Header{Type: relay.TypeLine}, line); err != nil {
			l.mu.Lock()
			delete(l.sessions, sid)
			ret.rc = nil
			l.mu.Unlock()
			rc.out.Close()
			return nil, &StartError{Path: "remote worker " + rc.worker, Err: fmt.Errorf("writing again the lines it did not receive: %w", err)}
		}
	}
	rc.bg.Add(1)
	go rc.watch()
	return rc, nil
}
