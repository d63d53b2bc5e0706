package claude

import "context"

// A Transport connects a session to a Claude Code CLI. [ProcessTransport]
// runs the CLI as a child process and speaks over its stdin and stdout; other
// transports (a WebSocket the CLI dials, a remote worker) carry the same
// NDJSON lines.
type Transport interface {
	// Start launches the CLI described by cmd, or arranges for it to connect,
	// and returns the connection once lines can be written to it. The
	// context governs the whole life of the connection: when it is done the
	// CLI is torn down.
	Start(ctx context.Context, cmd *Command) (Conn, error)
}

// Command describes the CLI to run: what [Options] turned into.
type Command struct {
	Path string   // the executable
	Args []string // arguments, without the executable
	Env  []string // the complete environment, KEY=VALUE
	Dir  string   // working directory; empty means the current one
	// MaxLineBytes is the largest output line delivered whole; longer lines
	// are delivered truncated (see [Options.MaxPayloadBytes]).
	MaxLineBytes int
}

// A Line is one line of CLI output, without its newline.
type Line struct {
	Data []byte // owned by the receiver
	// OriginalSize is the line's length before truncation, or 0 when the
	// line was not truncated.
	OriginalSize int64
	// Seq numbers the line in a Conn that counts what it delivers (a
	// remote worker's: its frame number, see [Session.Release]); 0 in
	// the others.
	Seq uint64
}

// A Conn is a live connection to one CLI.
//
// ReadLine is called from one goroutine at a time, WriteLine likewise (the
// session serialises writes); the two run concurrently with each other.
// Close may be called from any goroutine, at any time, more than once; it
// unblocks ReadLine and WriteLine.
type Conn interface {
	// ReadLine returns the next non-blank line the CLI wrote. It returns
	// io.EOF when the CLI's output has ended. Once it has returned an
	// error the session is over: the CLI must then be gone, or be made
	// to go, within a bounded time, since the session waits for Wait
	// ([ProcessTransport] stops a CLI that keeps running).
	ReadLine() (Line, error)
	// WriteLine writes one complete line, which ends in '\n'. It returns
	// when ctx ends, written or not; a line it has begun must still reach
	// the CLI whole, or the input end with it: never another line glued
	// to half of it.
	WriteLine(ctx context.Context, line []byte) error
	// CloseWrite tells the CLI there is no more input (closes its stdin),
	// after the line being written if any; it does not block on a writer.
	CloseWrite() error
	// Close tears the connection down: it ends the input, gives the CLI a
	// grace period to exit, then terminates it. It returns once the CLI is
	// gone, with the same result as Wait.
	Close() error
	// Wait blocks until the CLI has exited and returns nil for a clean exit
	// or an *ExitError (exit code or signal, stderr tail).
	Wait() error
	// StderrTail returns the last part of what the CLI wrote on stderr.
	StderrTail() string
}

// bufferedConn is implemented by connections that can tell whether a
// complete line is already buffered, which lets the session batch lines
// without waiting.
type bufferedConn interface {
	Buffered() int
}

// memoryKiller is implemented by connections whose CLI runs under a memory
// limit ([ProcessTransport.Limits]): how many of its processes the limit
// has killed so far.
type memoryKiller interface {
	MemoryKills() int64
}
