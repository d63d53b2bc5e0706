package claude

import "time"

// DropWebSocket closes the CLI's current connection of a WebSocketTransport
// Conn with a close handshake, as a failing network would end it.
func DropWebSocket(c Conn) error { return c.(*wsConn).drop() }

// WebSocketStats reports how many connections the CLI made, how many
// messages it sent twice (dropped) and how many HTTP posts arrived.
func WebSocketStats(c Conn) (connections, dups, posts int) {
	wc := c.(*wsConn)
	wc.mu.Lock()
	defer wc.mu.Unlock()
	return wc.connections, wc.dups, wc.posts
}

// WebSocketURL returns the URL and token the CLI was given.
func WebSocketURL(c Conn) (url, token, postURL string) {
	wc := c.(*wsConn)
	return wc.url, wc.token, "http://" + wc.url[len("ws://"):len(wc.url)-len(wc.wsPath)] + wc.postPath
}

// SetWorkerPing sets a WorkerListener's ping timings.
func SetWorkerPing(l *WorkerListener, interval, timeout time.Duration) {
	l.pingInterval, l.pingTimeout = interval, timeout
}

// SetBeforeWelcome has l call f with a registering worker's name right
// before it writes the worker's welcome frame.
func SetBeforeWelcome(l *WorkerListener, f func(name string)) { l.beforeWelcome = f }
