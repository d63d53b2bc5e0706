package claude

import (
	"context"
	"fmt"
	"sync"

	"github.com/coder/websocket"

	"github.com/claudectl/claudectl/internal/relay"
)

// This file holds one WebSocket connection of a worker to a WorkerListener:
// a fresh worker waits on it for a session, a returning one resumes its own.

// assignment hands a waiting worker a new session; the handler reports on
// result whether the start frame went out.
type assignment struct {
	rc     *workerConn
	result chan error
}

// workerLink is one connection of a worker, served by ServeHTTP.
type workerLink struct {
	l      *WorkerListener
	c      *websocket.Conn
	name   string
	remote string
	claim  string // the session a registered worker opened this link for
	secret string // the hello's (relay.Header.Secret)
	assign chan assignment
	gone   chan struct{} // closed when the handler stops waiting for an assignment

	mu sync.Mutex
	rc *workerConn
}

func (wl *workerLink) handle(f *relay.Frame) error {
	wl.mu.Lock()
	rc := wl.rc
	wl.mu.Unlock()
	if rc == nil {
		return fmt.Errorf("%w: %s frame before start", relay.ErrMalformed, f.Type)
	}
	return rc.handle(f)
}

// serve runs the connection: a fresh worker (rc nil) first waits for a
// session, a returning one resumes rc from the worker's ack.
func (wl *workerLink) serve(rc *workerConn, from uint64) {
	l := wl.l
	ctx, cancel := context.WithCancelCause(l.ctx)
	defer cancel(nil)
	link := &relay.Link{Conn: wl.c, Handle: wl.handle, PingInterval: l.pingInterval, PingTimeout: l.pingTimeout}
	wl.mu.Lock()
	wl.rc = rc
	wl.mu.Unlock()
	if rc != nil {
		wl.c.SetReadLimit(rc.readLimit())
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer wl.c.CloseNow()
	wg.Add(2)
	go func() {
		defer wg.Done()
		err := link.ReadLoop(ctx)
		cancel(err)
		wl.c.CloseNow()
	}()
	go func() {
		defer wg.Done()
		if err := link.PingLoop(ctx); err != nil {
			cancel(err)
			wl.c.CloseNow()
		}
	}()

	if rc == nil {
		if wl.claim != "" {
			if !l.claimed(wl.claim, wl.name, wl.secret, wl) {
				l.logger().Warn("claude: worker opened a link for a session nobody waits for", "worker", wl.name, "session", relay.Clip(wl.claim))
				relay.WriteFrame(ctx, wl.c, &relay.Header{Type: relay.TypeReject, Error: "no session " + wl.claim + " waits for worker " + wl.name}, nil)
				wl.c.Close(websocket.StatusNormalClosure, "")
				close(wl.gone)
				return
			}
		} else {
			l.addIdle(wl)
		}
		select {
		case a := <-wl.assign:
			rc = a.rc
			wl.mu.Lock()
			wl.rc = rc
			wl.mu.Unlock()
			wl.c.SetReadLimit(rc.readLimit())
			err := relay.WriteFrame(ctx, wl.c, &relay.Header{Type: relay.TypeStart, Session: rc.id, Secret: rc.secret, Command: rc.cmd}, nil)
			a.result <- err
			if err != nil {
				return
			}
		case <-ctx.Done():
			l.removeIdle(wl)
			close(wl.gone)
			return
		}
		close(wl.gone)
		from = 0
		l.logger().Info("claude: remote session started", "worker", wl.name, "remote", wl.remote, "session", rc.id)
	} else {
		if err := relay.WriteFrame(ctx, wl.c, &relay.Header{Type: relay.TypeResume, Session: rc.id, Ack: rc.received()}, nil); err != nil {
			return
		}
		rc.out.Ack(from)
		l.logger().Info("claude: remote worker came back", "worker", wl.name, "remote", wl.remote, "session", rc.id, "worker_has", from)
	}
	rc.attach(wl)
	link.Out, link.From, link.Ack, link.AckChanged = rc.out, from, rc.consumedSeq, rc.ackChanged
	err := link.WriteLoop(ctx)
	if err != nil {
		cancel(err)
	}
	wl.c.CloseNow()
	<-ctx.Done()
	rc.detach(wl, context.Cause(ctx))
}
