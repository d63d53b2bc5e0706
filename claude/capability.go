package claude

import "slices"

// A Capability names a protocol feature the CLI says it supports, listed in
// system/init's capabilities (and, partly, in the initialize response's).
// Check the capability of the behaviour you use rather than the CLI's
// version: the CLI adds one with each behaviour a program may rely on, and
// a CLI without it ignores the request fields that ask for it. The set is
// open: a CLI lists capabilities this package does not name (ui_surface_v1,
// msg_lifecycle_v1, ...); they are kept as they are.
type Capability string

// The capabilities the official SDK's types document (0.3.332).
const (
	// CapabilityInterruptReceipt: an interrupt's answer lists the queued
	// prompts that still run (InterruptResult.StillQueued).
	CapabilityInterruptReceipt Capability = "interrupt_receipt_v1"
	// CapabilityInterruptCancelQueued: an interrupt honours
	// InterruptOptions.CancelQueued (InterruptResult.Cancelled).
	CapabilityInterruptCancelQueued Capability = "interrupt_cancel_queued_v1"
	// CapabilityAskUserQuestionUnanswered: an AskUserQuestion answer may
	// say how a question went unanswered (annotations[question].unanswered:
	// "skipped", "replied_in_chat" or "dismissed"); a CLI without it may
	// refuse the whole answer.
	CapabilityAskUserQuestionUnanswered Capability = "ask_user_question_unanswered_v1"
	// CapabilityReloadPluginsRefuseIfBusy: ReloadPluginsOptions.RefuseIfBusy
	// is honoured.
	CapabilityReloadPluginsRefuseIfBusy Capability = "reload_plugins_refuse_if_busy_v1"
	// CapabilityMCPReadResource: the mcp_read_resource request
	// ([Session.ReadMCPResource]) is served.
	CapabilityMCPReadResource Capability = "mcp_read_resource_v1"
	// CapabilityMCPToolUIMeta: MCP tools' MCP Apps _meta members are passed
	// to the host.
	CapabilityMCPToolUIMeta Capability = "mcp_tool_ui_meta_v1"
	// CapabilityMCPStatusNoConfig: mcp_status rows of a cloud session's
	// worker leave the servers' configuration out.
	CapabilityMCPStatusNoConfig Capability = "mcp_status_no_config_v1"
	// CapabilityMCPCallResultNotForModel: MCPCallOptions.ResultNotForModel
	// is honoured.
	CapabilityMCPCallResultNotForModel Capability = "mcp_call_result_not_for_model_v1"
	// CapabilityMCPCallCheckPermissions: MCPCallOptions.CheckPermissions is
	// honoured (an older CLI runs the tool with no check).
	CapabilityMCPCallCheckPermissions Capability = "mcp_call_check_permissions_v1"
	// CapabilityMCPCallSoftErrorResult: MCPCallOptions.SoftErrorResult is
	// honoured: a tool's own error comes back as an MCPCallResult with
	// IsError set, not as an error (2.1.331).
	CapabilityMCPCallSoftErrorResult Capability = "mcp_call_soft_error_result_v1"
	// CapabilityQueuedNotifications: the CLI accepts queued_notification
	// messages (a cloud session backend's).
	CapabilityQueuedNotifications Capability = "queued_notifications"
)

// HasCapability reports whether this system/init lists c.
func (m *SystemInit) HasCapability(c Capability) bool { return slices.Contains(m.Capabilities, c) }

// Capabilities returns what the CLI says it supports: the capabilities of
// its latest system/init, followed by those only its initialize response
// lists. Before either has arrived (system/init comes with the first
// turn; initialize's answer a second or so after Start) it returns nil, so
// ask after [Session.Initialize] or once a turn has begun. A CLI too old to
// list capabilities has none.
func (s *Session) Capabilities() []Capability {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.initCaps)
	if s.initResp != nil {
		for _, c := range s.initResp.Capabilities {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// HasCapability reports whether the CLI says it supports c (see
// [Session.Capabilities]: false before the CLI has said anything).
func (s *Session) HasCapability(c Capability) bool { return slices.Contains(s.Capabilities(), c) }
