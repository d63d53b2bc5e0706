package store

import (
	"fmt"
	"time"
)

// Direction says which way an event travelled.
type Direction int8

// The directions, with explicit numbers: they are stored.
const (
	// FromCLI is a line the CLI wrote on its stdout.
	FromCLI Direction = 1
	// ToCLI is a line the daemon wrote on the CLI's stdin (a prompt, a
	// control response).
	ToCLI Direction = 2
	// FromDaemon is an event the daemon made itself and never sent to the
	// CLI: a status change, a permission decision, a client's note. It is
	// logged so that a replay shows it in order with the rest.
	FromDaemon Direction = 3
)

// Valid reports whether d is one of the directions above.
func (d Direction) Valid() bool { return d >= FromCLI && d <= FromDaemon }

func (d Direction) String() string {
	switch d {
	case FromCLI:
		return "from-cli"
	case ToCLI:
		return "to-cli"
	case FromDaemon:
		return "from-daemon"
	}
	return fmt.Sprintf("Direction(%d)", int8(d))
}

// An Event is one entry of a session's log: the raw NDJSON line as it
// crossed the wire (or the daemon's own record), numbered within its session.
type Event struct {
	// SessionID names the session. Required; the session must exist.
	SessionID string
	// Seq numbers the session's events 1, 2, 3, … without gaps. The store
	// assigns it when the event is appended.
	Seq int64
	// Time is when the event happened; zero means when it is appended.
	Time      time.Time
	Direction Direction
	// Type and Subtype are the line's "type" and, for system and control
	// lines, its subtype ("init", "can_use_tool"), for filtering without
	// decoding Raw. Type is required.
	Type    string
	Subtype string
	// Raw is the line, without its newline. The store truncates one longer
	// than its payload limit (see jsonl.Truncate), keeping it valid JSON.
	Raw []byte
	// OriginalSize is the length of the line before any truncation. Zero
	// on append means len(Raw); the store keeps the larger of the two, so a
	// line already cut by the reader keeps its true size.
	OriginalSize int64
	// RelayFrame is, on append, for a line of a CLI on a remote worker,
	// the relay frame it came in (claude.LineSeq; FromCLI) or its number
	// among the lines written to the CLI over the relay (ToCLI); the store
	// raises the session's Relay.Received or Relay.Sent to it in the same
	// transaction, so that the counts never cover a line that is not
	// stored. Zero otherwise, and in the events read back.
	RelayFrame int64
}

// Truncated reports whether Raw holds less than the original line.
func (e *Event) Truncated() bool { return e.OriginalSize > int64(len(e.Raw)) }
