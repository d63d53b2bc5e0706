// Package linkcut is a TCP proxy on 127.0.0.1 for tests that cut a network
// link in the middle of a conversation.
package linkcut

import (
	"io"
	"net"
	"sync"
)

// A Proxy forwards each connection it accepts to Target. Cut ends the
// connections open now, abruptly, as a failing network would; new ones are
// accepted as before.
type Proxy struct {
	Addr   string // host:port to connect to instead of the target
	target string
	ln     net.Listener

	mu       sync.Mutex
	conns    map[net.Conn]bool
	accepted int
	wg       sync.WaitGroup
}

// New starts a proxy to target (host:port). Close stops it.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = true, true
		p.accepted++
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut closes every open connection at once, in both directions; data in
// flight is lost. It returns how many connections it cut.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // RST, not FIN
		}
		c.Close()
	}
	n := len(p.conns) / 2
	clear(p.conns)
	return n
}

// Accepted returns how many connections were accepted so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Close stops accepting, cuts the connections and waits for its goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
