// Package claudetest is a scripted fake of the Anthropic Messages API for
// offline tests of code that drives Claude Code (the claude CLI).
//
// A Server listens on 127.0.0.1 and answers the CLI's requests with Turns
// chosen by a Responder, usually a Script:
//
//	srv := claudetest.NewServer(claudetest.Script(
//		claudetest.Reply(
//			claudetest.Text("Let me look."),
//			claudetest.ToolUse("Bash", map[string]any{"command": "echo hi"}),
//		),
//		claudetest.Reply(claudetest.Text("It printed hi.")),
//	))
//	defer srv.Close()
//
//	cmd := exec.CommandContext(ctx, claudetest.CLIPath(t),
//		"--output-format", "stream-json", "--input-format", "stream-json",
//		"--verbose", "--permission-prompt-tool", "stdio")
//	cmd.Env = srv.Env(t.TempDir()) // HOME, API URL and key, offline switches
//	// ... write {"type":"user",...} lines to stdin, read stdout ...
//
//	req := srv.Requests()[1] // the request after the tool ran
//	out, isErr, ok := req.ToolResult(req.ToolUses()[0].ID)
//
// Replies are streamed as Anthropic server-sent events (message_start, ping,
// content_block_start, content_block_delta with text_delta, thinking_delta,
// signature_delta or input_json_delta, content_block_stop, message_delta,
// message_stop), or sent as one JSON message when the request does not ask
// for a stream. The model in the reply echoes the request's. A Turn can also
// be slow (Delay, DeltaDelay) or an HTTP error (Status).
//
// What the CLI (2.1.329) sends, as observed:
//
//   - One POST /v1/messages?beta=true with "stream":true per model call: a
//     user message is one request, plus one per tool round trip. Nothing
//     else is requested for a plain turn (no title or topic calls, no
//     count_tokens) when Server.Env is used.
//   - Assistant replies come back merged: one assistant message per reply,
//     whatever its number of blocks, so Script's turn counter is the number
//     of model calls made so far in the conversation. An interrupted reply
//     stays in the history and counts too.
//   - The first user message carries <system-reminder> text blocks before
//     the prompt, and a "system" role message may follow it;
//     Request.LastUserText leaves those out.
//   - After a set_model control request the CLI sends a non-streaming
//     max_tokens:1 probe without tools to the new model.
//   - An HTTP 400 is retried a few times with fewer beta features; 429, 5xx
//     and 529 are retried with backoff (system/api_retry lines on stdout).
//
// Requests to anything but /v1/messages, /v1/messages/count_tokens and the
// start-up connectivity check HEAD /api/hello (sent only when non-essential
// traffic is not disabled) are answered 404 with an Anthropic-style error and
// listed by Server.Unhandled.
//
// Close cancels open streams, and the server notices a client that goes
// away (an interrupt, a killed CLI) at once: no goroutine outlives Close.
package claudetest
