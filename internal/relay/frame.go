package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Subprotocol is the WebSocket subprotocol a worker asks for.
const Subprotocol = "claudectl-worker.v1"

// Frame types; see the package documentation.
const (
	TypeHello  = "hello"
	TypeStart  = "start"
	TypeResume = "resume"
	TypeReject = "reject"
	TypeAck    = "ack"
	TypeLine   = "line"
	TypeEOF    = "eof"
	TypeClose  = "close"
	TypeStderr = "stderr"
	TypeExit   = "exit"

	// The control connection of a registered worker (see Host).
	TypeWelcome = "welcome" // controller → worker: registered
	TypeOpen    = "open"    // controller → worker: dial a link for this session
	TypeDecline = "decline" // worker → controller: cannot open that session
)

// Header is the JSON part of a frame.
type Header struct {
	Type string `json:"type"`
	// Seq numbers the sequenced frames (line, eof, close, stderr, exit)
	// from 1, per direction and session; 0 for the others.
	Seq uint64 `json:"seq,omitempty"`
	// Ack is the highest sequence number the sender consumed from the peer.
	Ack uint64 `json:"ack,omitempty"`

	Session string `json:"session,omitempty"` // hello, start, resume, open, decline
	// Held is set in the hello of a returning worker: the frames up to
	// it were acknowledged and are no longer kept, so a controller
	// taking the session over resumes after it at least.
	Held   uint64 `json:"held,omitempty"`
	Worker string `json:"worker,omitempty"` // hello: a name for logs
	// Claim is set in the hello of a link a registered worker opened for
	// the session an open frame named.
	Claim string `json:"claim,omitempty"`
	// Secret proves that a link comes from the worker the controller
	// chose. The controller makes one per session, sent in start, and one
	// per placement, sent in open; a hello resuming the session (Session)
	// carries the first, a hello claiming it (Claim) the second. It is
	// random, kept in memory only and never logged: the session's id is
	// in logs and stores, and proves nothing.
	Secret string `json:"secret,omitempty"`
	// Register is set in the hello of a registered worker's control
	// connection.
	Register *Registration `json:"register,omitempty"`
	Command  *Command      `json:"command,omitempty"` // start
	Orig     int64         `json:"orig,omitempty"`    // line: size before truncation
	Now      bool          `json:"now,omitempty"`     // close: no grace period
	Exit     *Exit         `json:"exit,omitempty"`    // exit
	Error    string        `json:"error,omitempty"`   // reject, decline
}

// Command is what the worker runs: its own CLI with these arguments, in its
// own environment changed by SetEnv and UnsetEnv.
type Command struct {
	Args         []string          `json:"args"`
	SetEnv       map[string]string `json:"set_env,omitempty"`
	UnsetEnv     []string          `json:"unset_env,omitempty"`
	Dir          string            `json:"dir,omitempty"`
	MaxLineBytes int               `json:"max_line_bytes,omitempty"`
}

// Environ returns base (KEY=VALUE entries) changed by SetEnv and UnsetEnv.
func (c *Command) Environ(base []string) []string {
	drop := make(map[string]bool, len(c.SetEnv)+len(c.UnsetEnv))
	for _, k := range c.UnsetEnv {
		drop[k] = true
	}
	for k := range c.SetEnv {
		drop[k] = true
	}
	out := make([]string, 0, len(base)+len(c.SetEnv))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.SetEnv)) {
		out = append(out, k+"="+c.SetEnv[k])
	}
	return out
}

// Exit is how the CLI ended.
type Exit struct {
	Code   int    `json:"code"`             // exit code; -1 when killed by a signal
	Signal string `json:"signal,omitempty"` // signal name when killed
	Stderr string `json:"stderr,omitempty"` // the tail of stderr
	// KeptRunningMS is set when the CLI closed its stdout but did not
	// exit, and the worker stopped it after this many milliseconds
	// (claude.ExitError.KeptRunning).
	KeptRunningMS int64 `json:"kept_running_ms,omitempty"`
	// Error is set when the CLI could not be started at all.
	Error string `json:"error,omitempty"`
}

// Frame is a header and its payload.
type Frame struct {
	Header
	Payload []byte
}

// Sequenced reports whether frames of type t carry a sequence number.
func Sequenced(t string) bool {
	switch t {
	case TypeLine, TypeEOF, TypeClose, TypeStderr, TypeExit:
		return true
	}
	return false
}

// Encode appends the wire form of h and payload to dst.
func Encode(dst []byte, h *Header, payload []byte) ([]byte, error) {
	if h.Type == TypeLine && h.Session == "" && h.Command == nil && h.Exit == nil && h.Error == "" {
		// The hot path, by hand: {"type":"line","seq":N,"ack":M,"orig":O}
		dst = append(dst, `{"type":"line","seq":`...)
		dst = strconv.AppendUint(dst, h.Seq, 10)
		if h.Ack != 0 {
			dst = append(dst, `,"ack":`...)
			dst = strconv.AppendUint(dst, h.Ack, 10)
		}
		if h.Orig != 0 {
			dst = append(dst, `,"orig":`...)
			dst = strconv.AppendInt(dst, h.Orig, 10)
		}
		dst = append(dst, '}', '\n')
	} else {
		b, err := json.Marshal(h)
		if err != nil {
			return dst, fmt.Errorf("relay: encoding %s frame: %w", h.Type, err)
		}
		dst = append(dst, b...)
		dst = append(dst, '\n')
	}
	return append(dst, payload...), nil
}

// ErrMalformed is wrapped by Decode's errors.
var ErrMalformed = errors.New("relay: malformed frame")

// Decode splits a message into its header and payload. The payload aliases
// msg.
func Decode(msg []byte) (*Frame, error) {
	i := bytes.IndexByte(msg, '\n')
	if i < 0 {
		return nil, fmt.Errorf("%w: no header line", ErrMalformed)
	}
	f := &Frame{Payload: msg[i+1:]}
	if err := json.Unmarshal(msg[:i], &f.Header); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if f.Type == "" {
		return nil, fmt.Errorf("%w: no type", ErrMalformed)
	}
	if Sequenced(f.Type) != (f.Seq != 0) {
		return nil, fmt.Errorf("%w: %s frame with seq %d", ErrMalformed, f.Type, f.Seq)
	}
	return f, nil
}
