// Package relay is the wire protocol between a remote worker ("claudectl
// worker", which runs the Claude Code CLI over stdio on its own machine) and
// the controller that drives the session (claude.WorkerListener), plus the
// worker's side of it.
//
// # Connection
//
// The worker dials the controller's WebSocket endpoint with
//
//	Authorization: Bearer <token>
//	Sec-WebSocket-Protocol: claudectl-worker.v1
//
// Every WebSocket message is one text frame made of a JSON header, a
// newline, and a payload whose meaning depends on the header's type:
//
//	{"type":"line","seq":7,"ack":3}\n{"type":"assistant",...}
//
// # Handshake
//
// The worker speaks first on every connection:
//
//	worker → hello  {"session":"", "worker":"host-123"}                         a fresh worker
//	worker → hello  {"session":"s-…", "secret":"…", "ack":N, "held":H}           a worker coming back
//
// A fresh worker waits, connected, until the controller has a session for it
// and answers start, which carries the command to run: the CLI's arguments,
// the environment changes to apply to the worker's own environment, the
// working directory and the line limit, and the session's secret. A
// returning worker gets resume with the controller's ack, or reject (the
// session is unknown or over, or the hello lacks the session's secret: the
// worker stops its CLI and exits with an error).
//
//	controller → start  {"session":"s-…","secret":"…","command":{"args":[…],"set_env":{…},"unset_env":[…],"dir":"…","max_line_bytes":N}}
//	controller → resume {"session":"s-…","ack":M}
//	controller → reject {"error":"…"}
//
// Every holder of the worker token may connect, and a session's id is no
// secret (it is in the controller's log and store): the secret is what
// proves that a link naming the session comes from the worker that runs
// it. It is random (256 bits), compared in constant time, kept in memory
// by both sides (a controller that must take sessions over after a restart
// stores its SHA-256 only) and never logged. A hello naming a session
// without its secret is refused and leaves the session's link alone.
//
// A worker's name (hello's "worker") is checked as a registered worker's
// is (ValidName); a hello with another is refused.
//
// # Registered workers
//
// A registered worker ([Host]) keeps a control connection open besides its
// sessions' links. Its hello carries a register object instead of a
// session ([Registration]):
//
//	worker → hello   {"worker":"gpu1","register":{"name":"gpu1","instance":"9f…","labels":{"gpu":"yes"},"capacity":4,"cli_version":"2.1.330","host":"h","pid":7,"grace_ms":120000}}
//	controller → welcome {}                          registered
//	controller → reject  {"error":"worker name \"gpu1\" is taken …"}
//
// The controller refuses a registration that fails Registration.Validate,
// or whose name a connected worker of another instance holds. To place a
// session on the worker it sends, on the control connection,
//
//	controller → open    {"session":"s-…","secret":"…"}
//	worker → decline     {"session":"s-…","error":"… at capacity …"}   when it cannot
//
// and the worker dials a new link for it whose hello claims the session
// with the open frame's secret, after which the link runs as any other
// (start, then sequenced frames):
//
//	worker → hello  {"session":"", "worker":"gpu1", "claim":"s-…", "secret":"…"}
//
// Only those frames travel on a control connection; unknown ones are
// ignored. When it drops, the worker dials again with backoff, trying its
// addresses in turn, and registers again; its sessions' links reconnect on
// their own.
//
// # Sequenced frames and replay
//
// After the handshake each side sends sequenced frames, numbered from 1 in
// its own direction for the life of the session, not of the connection:
//
//	controller → line   one NDJSON line for the CLI's stdin
//	controller → eof    close the CLI's stdin
//	controller → close  stop the CLI: end stdin, grace period, SIGTERM, SIGKILL ("now":true skips the grace)
//	worker → line       one line of the CLI's stdout ("orig" is its size before truncation, if cut)
//	worker → stderr     one line of the CLI's stderr
//	worker → exit       the CLI exited: code, signal, stderr tail, kept_running_ms if it had to be stopped after closing its stdout; always the last frame
//
// Every header may carry "ack": the highest sequence number the sender has
// consumed from the other side, in order; a bare {"type":"ack"} is sent when
// there is nothing else to say. A side keeps every frame it sent until the
// peer acknowledges it (a bounded window: when it is full, the sender stops
// reading from its source, which pauses the CLI or the session). When the
// link drops the worker dials again with backoff; the hello and resume carry
// each side's count of frames received, and each side sends again, in order,
// exactly the frames after it. A receiver drops any frame whose number it has
// already seen, so nothing is lost or delivered twice. Both sides ping every
// few seconds; a missing pong ends the connection, which starts the
// reconnection.
//
// A worker coming back may find another controller: the one it served died
// or restarted (its sessions are taken over through a shared store). That
// controller takes the session over at the frames it has stored, M: it
// answers resume with ack max(M, H) — H, the hello's "held", is the last
// frame the old controller acknowledged, which the worker no longer keeps —
// and numbers its own frames after N, the frames the worker received. A
// controller that keeps lines until they are stored acknowledges a line
// only then (claude.WorkerTransport.Hold), so M ≥ every line acknowledged
// and the worker sends again everything the new controller lacks. A
// controller that does not serve the session and will not take it over
// closes the connection without reject (the worker tries again, on its
// other addresses, with backoff); reject is for a session known to be over.
//
// The session ends when the worker has sent exit and the controller has
// acknowledged it: the worker then closes the connection with a normal
// closure and exits 0. A worker that cannot reach the controller for longer
// than its reconnect timeout stops the CLI and fails.
package relay
