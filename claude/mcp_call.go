package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// MCPCallOptions are the options of [Session.MCPCall]. Each asks for a
// behaviour that a CLI lists as a capability; a CLI without it ignores the
// option (check [Session.HasCapability] where that matters).
type MCPCallOptions struct {
	// SoftErrorResult asks for the tool's own error (CallToolResult.isError)
	// as a result, MCPCallResult.IsError set with the server's content,
	// structured content and _meta, rather than as an error holding its
	// text alone. Other failures (no such tool, a server not connected, a
	// refusal, a timeout) are errors either way. CapabilityMCPCallSoftErrorResult
	// (2.1.331).
	SoftErrorResult bool
	// ResultNotForModel says the result goes to a program, not a model:
	// the server's own content blocks, unresized and untruncated (up to
	// 10,485,760 characters). They are untrusted third-party data.
	// CapabilityMCPCallResultNotForModel.
	ResultNotForModel bool
	// CheckPermissions decides the call as the model's own call to the
	// tool would be (rules, the permission mode, PreToolUse and PostToolUse
	// hooks, Options.CanUseTool); a refused call does not reach the server
	// and is an error starting "The tool did not run: ". A PreToolUse hook
	// that times out refuses the call, and so do most of its failures
	// (2.1.332). CapabilityMCPCallCheckPermissions: an older CLI runs the
	// tool with no check.
	CheckPermissions bool
}

// MCPCallResult is an MCP tool's result, from [Session.MCPCall].
type MCPCallResult struct {
	// Content is the tool's content blocks, as MCP defines them.
	Content []json.RawMessage `json:"content"`
	// StructuredContent is the tool's structured result, if any.
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	// IsError is the tool's own error (with MCPCallOptions.SoftErrorResult).
	IsError bool `json:"isError,omitempty"`
	// Meta is the result's _meta (the CLI adds the server's name and
	// version).
	Meta json.RawMessage `json:"_meta,omitempty"`
	// Raw is the whole answer.
	Raw json.RawMessage `json:"-"`
}

// Text returns the text of the result's text blocks, one per line.
func (r *MCPCallResult) Text() string {
	var parts []string
	for _, c := range r.Content {
		var b struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(c, &b) == nil && b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// MCPCall calls a tool of an MCP server the CLI runs (an external server:
// the CLI refuses in-process ones, which a program calls directly) without
// a model turn; the result stays out of the model's context. tool is the
// tool's full name, mcp__SERVER__TOOL; args its arguments (nil for none).
// A server not yet connected is started and waited for (up to 30 s). The
// tool's own error is a *ControlError holding its text, unless
// SoftErrorResult is honoured. Not bounded by Options.ControlTimeout: a
// tool runs as long as the CLI lets it (and CheckPermissions may ask a
// person); ctx bounds the wait.
func (s *Session) MCPCall(ctx context.Context, tool string, args any, opts *MCPCallOptions) (*MCPCallResult, error) {
	if args == nil {
		args = map[string]any{}
	}
	payload := map[string]any{"tool": tool, "arguments": args}
	if opts != nil {
		if opts.SoftErrorResult {
			payload["soft_error_result"] = true
		}
		if opts.ResultNotForModel {
			payload["result_not_for_model"] = true
		}
		if opts.CheckPermissions {
			payload["check_permissions"] = true
		}
	}
	raw, err := s.Control(ctx, "mcp_call", payload)
	if err != nil {
		return nil, err
	}
	r := &MCPCallResult{Raw: raw}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("claude: decoding mcp_call response: %w", err)
	}
	return r, nil
}
