// Package claude drives the Claude Code CLI (`claude`) from Go programs over
// its NDJSON control protocol: start the CLI, stream typed messages, answer
// permission prompts, interrupt, switch model or permission mode, resume and
// fork sessions.
//
// One prompt:
//
//	for m, err := range claude.Query(ctx, "List the Go files", &claude.Options{Cwd: dir}) {
//		if err != nil {
//			return err
//		}
//		if a, ok := m.(*claude.AssistantMessage); ok {
//			fmt.Print(a.Text())
//		}
//	}
//
// A session you steer:
//
//	s, err := claude.Start(ctx, &claude.Options{
//		IncludePartialMessages: true,
//		CanUseTool: func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
//			if req.ToolName == "Bash" {
//				return claude.Deny("no shell today"), nil
//			}
//			return claude.Allow(), nil
//		},
//	})
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	s.SendText(ctx, "Refactor main.go")
//	for m, err := range s.Turn(ctx) {
//		// *StreamEvent deltas, *AssistantMessage, *UserMessage (tool results), ..., *ResultMessage
//	}
//
// # Messages
//
// Every line the CLI prints is decoded into a [Message]: [*AssistantMessage],
// [*UserMessage], [*ResultMessage], [*StreamEvent], [*SystemInit] and the
// other system subtypes, and so on. The decoder is a tolerant reader: unknown
// fields are ignored, numbers sent as strings are accepted, and a type this
// package does not know arrives as [*UnknownMessage] carrying the raw line,
// never as an error. Every message keeps the bytes it was decoded from
// ([Message.Raw]); treat them as read-only.
//
// A line longer than [Options.MaxPayloadBytes] (10 MiB by default) is
// delivered truncated inside its large strings, still valid JSON, with the
// marker "[truncated: original_size=N bytes]"; memory stays bounded however
// long the line is.
//
// # Control
//
// Control requests are multiplexed by request id and bound to a context:
// [Session.Interrupt], [Session.SetModel], [Session.SetPermissionMode],
// [Session.SetMaxThinkingTokens], [Session.MCPStatus], [Session.RewindFiles],
// [Session.StopTask], [Session.ContextUsage], and [Session.Control] for any
// other subtype. The CLI's own requests (permission prompts through
// [Options.CanUseTool], cancellations) are answered in the background.
//
// # Errors
//
// Errors carry what went wrong and where: [*ExitError] (exit code or signal,
// the tail of the CLI's stderr, the session id, whether a turn was running),
// [*ControlError] (the request subtype and the CLI's error_code),
// [*NotFoundError] (every place searched for the CLI), [*OptionError]
// (which option, which value), [*ResultError] (from [ResultMessage.Err]).
//
// # Processes
//
// [ProcessTransport] runs the CLI in its own process group, killed with this
// process on Linux; [Session.Close] closes its input, waits, then sends
// SIGTERM and SIGKILL. When the CLI ends, however it ends, every process it
// started ends too, tools that detached included (on Linux; see
// [ProcessTransport] for how and where not). Other transports implement
// [Transport].
//
// # Testing
//
// The sibling package claudetest is a scripted fake of the Anthropic
// Messages API that the real CLI can run against, fully offline.
package claude
