package claude_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
)

// The session's capabilities: initialize's until a system/init lists its
// own, then the init's followed by what only initialize listed.
func TestSessionCapabilities(t *testing.T) {
	c := newMemConn()
	s, err := claude.Start(context.Background(), &claude.Options{Transport: memTransport{c}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if caps := s.Capabilities(); caps != nil {
		t.Errorf("Capabilities before the CLI said anything = %v, want nil", caps)
	}
	init := c.nextOf(t, "control_request")
	respond(c, init["request_id"], map[string]any{"capabilities": []string{"ui_surface_v1", "mcp_call_soft_error_result_v1"}})
	ir, err := s.Initialize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ir.Capabilities, []claude.Capability{"ui_surface_v1", claude.CapabilityMCPCallSoftErrorResult}) {
		t.Errorf("InitializeResponse.Capabilities = %v", ir.Capabilities)
	}
	if !s.HasCapability(claude.CapabilityMCPCallSoftErrorResult) || s.HasCapability(claude.CapabilityInterruptReceipt) {
		t.Errorf("after initialize: Capabilities = %v", s.Capabilities())
	}
	c.print(map[string]any{"type": "system", "subtype": "init", "session_id": "s", "model": "m", "tools": []string{}, "cwd": "/",
		"permissionMode": "default", "capabilities": []string{"interrupt_receipt_v1", "mcp_call_soft_error_result_v1", "brand_new_v9"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	si, ok := m.(*claude.SystemInit)
	if !ok || !si.HasCapability(claude.CapabilityInterruptReceipt) || !si.HasCapability("brand_new_v9") || si.HasCapability("ui_surface_v1") {
		t.Fatalf("system/init = %#v", m)
	}
	want := []claude.Capability{claude.CapabilityInterruptReceipt, claude.CapabilityMCPCallSoftErrorResult, "brand_new_v9", "ui_surface_v1"}
	if got := s.Capabilities(); !slices.Equal(got, want) {
		t.Errorf("Capabilities after system/init = %v, want %v", got, want)
	}
	si.Capabilities[0] = "changed by the reader" // the session keeps its own copy
	if !s.HasCapability(claude.CapabilityInterruptReceipt) {
		t.Errorf("the reader changing its message changed the session's capabilities: %v", s.Capabilities())
	}
}

// SetPermissionMode returns the mode the CLI says is in effect, "" when
// its answer names none, and the CLI's refusal as a *ControlError.
func TestSetPermissionModeInEffect(t *testing.T) {
	s, c := startMem(t, nil)
	type result struct {
		mode claude.PermissionMode
		err  error
	}
	ask := func(mode claude.PermissionMode, answer func(id any)) result {
		t.Helper()
		done := make(chan result, 1)
		go func() {
			m, err := s.SetPermissionMode(context.Background(), mode)
			done <- result{m, err}
		}()
		req := c.nextOf(t, "control_request")
		if got := req["request"].(map[string]any); got["subtype"] != "set_permission_mode" || got["mode"] != string(mode) {
			t.Errorf("request = %v", got)
		}
		answer(req["request_id"])
		return <-done
	}
	// The CLI answers with another mode than the one asked for.
	if r := ask(claude.PermissionAuto, func(id any) { respond(c, id, map[string]any{"mode": "default"}) }); r.mode != claude.PermissionDefault || r.err != nil {
		t.Errorf("answered default for auto: got %q, %v", r.mode, r.err)
	}
	if r := ask(claude.PermissionPlan, func(id any) { respond(c, id, map[string]any{"mode": "plan"}) }); r.mode != claude.PermissionPlan || r.err != nil {
		t.Errorf("answered plan: got %q, %v", r.mode, r.err)
	}
	// No mode in the answer, or not a string: no mode, and no error (the
	// switch succeeded).
	for _, answer := range []any{map[string]any{}, nil, map[string]any{"mode": 3}} {
		if r := ask(claude.PermissionAcceptEdits, func(id any) { respond(c, id, answer) }); r.mode != "" || r.err != nil {
			t.Errorf("answer %v: got %q, %v; want no mode and no error", answer, r.mode, r.err)
		}
	}
	r := ask(claude.PermissionBypassPermissions, func(id any) {
		c.print(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "error", "request_id": id,
			"error":      "Cannot set permission mode to bypassPermissions because the session was not launched with --dangerously-skip-permissions",
			"error_code": "bypass_not_launched"}})
	})
	var ce *claude.ControlError
	if !errors.As(r.err, &ce) || ce.Code != "bypass_not_launched" || r.mode != "" {
		t.Errorf("refused mode: got %q, %v", r.mode, r.err)
	}
}
