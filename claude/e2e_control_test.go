package claude_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wantControlError checks that err is a *ControlError of subtype whose
// message (the CLI's) contains msg.
func wantControlError(t *testing.T, err error, subtype, msg string) {
	t.Helper()
	var ce *claude.ControlError
	if !errors.As(err, &ce) || ce.Subtype != subtype || !strings.Contains(ce.Message, msg) {
		t.Errorf("%s: err = %v (%T), want a *ControlError with %q", subtype, err, err, msg)
	}
}

func TestE2EControlSettings(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("one")))
	s := e.start()
	e.turn(s, "hi")
	before, err := s.GetSettings(e.ctx)
	if err != nil {
		t.Fatalf("GetSettings: %v", err)
	}
	if len(before.Sources) != 0 || len(before.Raw) == 0 {
		t.Errorf("settings before: %s", before.Raw)
	}
	if err := s.ApplyFlagSettings(e.ctx, map[string]any{"model": "claude-sonnet-4-5"}); err != nil {
		t.Fatalf("ApplyFlagSettings: %v", err)
	}
	after, err := s.GetSettings(e.ctx)
	if err != nil {
		t.Fatalf("GetSettings: %v", err)
	}
	var eff struct{ Model string }
	_ = json.Unmarshal(after.Effective, &eff)
	if eff.Model != "claude-sonnet-4-5" || len(after.Sources) != 1 || after.Sources[0].Source != "flagSettings" {
		t.Errorf("settings after ApplyFlagSettings: %s", after.Raw)
	}
	// The CLI lets only some keys be written this way, and says which not.
	err = s.UpdateSettings(e.ctx, claude.SettingsLocal, map[string]any{"env": map[string]string{"X": "1"}})
	wantControlError(t, err, "update_settings", "not allowed: env")
	if err := s.UpdateSettings(e.ctx, claude.SettingsLocal, map[string]any{"outputStyle": "Concise"}); err != nil {
		t.Fatalf("UpdateSettings: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(e.opts.Cwd, ".claude", "settings.local.json"))
	var local struct{ OutputStyle string }
	if err != nil || json.Unmarshal(b, &local) != nil || local.OutputStyle != "Concise" {
		t.Errorf("settings.local.json after UpdateSettings: %s, %v", b, err)
	}
}

// A background Bash command: its output through TaskOutput, then StopTask.
func TestE2EControlTaskOutput(t *testing.T) {
	e := newE2E(t,
		claudetest.Reply(claudetest.ToolUse("Bash", map[string]any{"command": "echo bg-output; sleep 30", "run_in_background": true, "description": "bg"})),
		claudetest.Reply(claudetest.Text("started")))
	e.opts.AllowedTools = []string{"Bash"}
	s := e.start()
	msgs, _ := e.turn(s, "run it in the background")
	var taskID string
	for _, m := range msgs {
		if ts, ok := m.(*claude.TaskStarted); ok {
			taskID = ts.TaskID
		}
	}
	if taskID == "" {
		t.Fatal("no task_started")
	}
	var out *claude.TaskOutput
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if out, err = s.TaskOutput(e.ctx, taskID); err != nil || strings.Contains(out.Output, "bg-output") {
			break
		}
	}
	if err != nil || out.Output != "bg-output\n" || out.TotalBytes != int64(len("bg-output\n")) || out.Truncated {
		t.Errorf("TaskOutput = %+v, %v", out, err)
	}
	if err := s.StopTask(e.ctx, taskID); err != nil {
		t.Errorf("StopTask: %v", err)
	}
}

func TestE2EControlReloads(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("one")))
	s := e.start()
	e.turn(s, "hi")
	pr, err := s.ReloadPlugins(e.ctx, &claude.ReloadPluginsOptions{RefuseIfBusy: true})
	if err != nil {
		t.Fatalf("ReloadPlugins: %v", err)
	}
	if len(pr.Commands) == 0 || pr.Commands[0].Name == "" || pr.ErrorCount != 0 {
		t.Errorf("ReloadPlugins: %.300s", pr.Raw)
	}
	// A skill written to the project after start is found by the reload.
	dir := filepath.Join(e.opts.Cwd, ".claude", "skills", "greeter")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	skill := "---\nname: greeter\ndescription: Greets people warmly.\n---\nSay hello.\n"
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(skill), 0o644); err != nil {
		t.Fatal(err)
	}
	skills, err := s.ReloadSkills(e.ctx)
	if err != nil {
		t.Fatalf("ReloadSkills: %v", err)
	}
	i := slices.IndexFunc(skills, func(sk claude.SkillInfo) bool { return sk.Name == "greeter" })
	if i < 0 {
		t.Errorf("ReloadSkills: %d skills, not the new one", len(skills))
	} else if !strings.HasPrefix(skills[i].Description, "Greets people warmly.") || len(skills[i].Raw) == 0 {
		t.Errorf("ReloadSkills: %+v", skills[i])
	}
	styles, err := s.ReloadOutputStyles(e.ctx)
	if err != nil || !slices.Contains(styles, "default") {
		t.Errorf("ReloadOutputStyles = %v, %v", styles, err)
	}
}

func TestE2EControlReadFile(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("one")))
	if err := os.WriteFile(filepath.Join(e.opts.Cwd, "f.txt"), []byte("hello file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := e.start()
	if _, err := s.Initialize(e.ctx); err != nil {
		t.Fatal(err)
	}
	f, err := s.ReadFile(e.ctx, "f.txt", &claude.ReadFileOptions{MaxBytes: 5})
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	if f.Contents != "hello" || !f.Truncated || f.AbsPath != filepath.Join(e.opts.Cwd, "f.txt") {
		t.Errorf("ReadFile = %+v", f)
	}
	f, err = s.ReadFile(e.ctx, "f.txt", nil)
	if err != nil || f.Contents != "hello file\n" || f.Truncated {
		t.Errorf("ReadFile = %+v, %v", f, err)
	}
	_, err = s.ReadFile(e.ctx, "no-such.txt", nil)
	wantControlError(t, err, "read_file", "no-such.txt")
}

func TestE2EControlModelsUsageContext(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("one")))
	s := e.start()
	_, res := e.turn(s, "hi")
	models, err := s.SupportedModels(e.ctx)
	if err != nil {
		t.Fatalf("SupportedModels: %v", err)
	}
	if len(models) == 0 || models[0].Value == "" || models[0].DisplayName == "" {
		t.Errorf("SupportedModels = %+v", models)
	}
	u, err := s.Usage(e.ctx)
	if err != nil {
		t.Fatalf("Usage: %v", err)
	}
	if u.Session.TotalCostUSD <= 0 || u.Session.TotalCostUSD != res.TotalCostUSD || len(u.Session.ModelUsage) == 0 {
		t.Errorf("Usage: %s (result cost %v)", u.Raw, res.TotalCostUSD)
	}
	for _, detail := range []claude.ContextDetail{"", claude.ContextSummary, claude.ContextFull} {
		cu, err := s.ContextUsageReport(e.ctx, detail)
		if err != nil {
			t.Fatalf("ContextUsageReport(%q): %v", detail, err)
		}
		if cu.TotalTokens <= 0 || cu.MaxTokens <= 0 || len(cu.Categories) == 0 {
			t.Errorf("ContextUsageReport(%q): %.300s", detail, cu.Raw)
		}
	}
	_, err = s.ContextUsageReport(e.ctx, "everything")
	wantControlError(t, err, "get_context_usage", "detail must be")
}

func TestE2EControlTasksAndQueue(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("one")))
	s := e.start()
	e.turn(s, "hi")
	moved, err := s.BackgroundTasks(e.ctx, "toolu_none")
	if err != nil || moved {
		t.Errorf("BackgroundTasks(unknown) = %v, %v; want false", moved, err)
	}
	_, err = s.TaskOutput(e.ctx, "no-such-task")
	wantControlError(t, err, "get_task_output", "no shell or Monitor task")
	cancelled, err := s.CancelQueuedMessage(e.ctx, "00000000-0000-4000-8000-000000000000")
	if err != nil || cancelled {
		t.Errorf("CancelQueuedMessage(unknown) = %v, %v; want false", cancelled, err)
	}
	_, err = s.SetMCPPermissionModeOverride(e.ctx, "nope", claude.PermissionAcceptEdits)
	wantControlError(t, err, "set_mcp_permission_mode_override", "tighten-only")
	if _, err := s.SetMCPPermissionModeOverride(e.ctx, "nope", claude.PermissionDefault); err != nil {
		t.Errorf("SetMCPPermissionModeOverride(default): %v", err)
	}
	again, err := s.Reinitialize(e.ctx)
	if err != nil || len(again.Commands) == 0 {
		t.Errorf("Reinitialize = %v, %v", again, err)
	}
}

// Interrupt reports the queued prompts (none here: prompts sent during a
// turn join it); the turn ends as interrupted and the session goes on.
func TestE2EInterruptWith(t *testing.T) {
	e := newE2E(t, slowTurn(), claudetest.Reply(claudetest.Text("after")))
	e.opts.IncludePartialMessages = true
	s := e.start()
	if err := s.SendText(e.ctx, "one"); err != nil {
		t.Fatal(err)
	}
	for m, err := range s.Messages(e.ctx) {
		if err != nil {
			t.Fatal(err)
		}
		// After some text: interrupted before any, the turn leaves no
		// assistant message and the next request reads as the first.
		if ev, ok := m.(*claude.StreamEvent); ok && ev.Event.Delta != nil && ev.Event.Delta.Type == "text_delta" {
			break
		}
	}
	r, err := s.InterruptWith(e.ctx, &claude.InterruptOptions{CancelQueued: true})
	if err != nil {
		t.Fatalf("InterruptWith: %v", err)
	}
	if r.StillQueued == nil || len(r.StillQueued) != 0 || r.Cancelled == nil {
		t.Errorf("InterruptWith = %+v, want the CLI's empty still_queued and cancelled lists", r)
	}
	_, res := e.collect(s)
	if res.Subtype != "error_during_execution" {
		t.Errorf("interrupted turn ended with %q", res.Subtype)
	}
	if msgs, _ := e.turn(s, "again"); assistantText(msgs) != "after" {
		t.Errorf("next turn: %q", assistantText(msgs))
	}
}

// resourceServerEnv turns the test binary into a stdio MCP server with one
// ui:// resource (the CLI reads resources only of servers it runs itself)
// and two tools, echo(text) and fail (a tool error, with structured
// content), for mcp_call.
const resourceServerEnv = "CLAUDECTL_TEST_MCP_RESOURCE_SERVER"

func runResourceServer() int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "res", Version: "1.0.0"}, nil)
	srv.AddResource(&mcp.Resource{URI: "ui://res/panel", Name: "panel", MIMEType: "text/html"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/html", Text: "<p>hi</p>"}}}, nil
		})
	type echoArgs struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Says text back."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Fails as a tool does."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the disk is full"}},
				StructuredContent: map[string]any{"code": 28}}, nil, nil
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

func TestE2EControlReadMCPResource(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("one")))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e.opts.MCPServerConfigs = map[string]claude.MCPServerConfig{
		"res": {Command: self, Env: map[string]string{resourceServerEnv: "1"}},
	}
	s := e.start()
	e.turn(s, "hi")
	var contents []claude.MCPResourceContents
	// The CLI connects the server in the background.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		contents, err = s.ReadMCPResource(e.ctx, "res", "ui://res/panel")
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("ReadMCPResource: %v", err)
	}
	if len(contents) != 1 || contents[0].Text != "<p>hi</p>" || contents[0].URI != "ui://res/panel" || contents[0].MimeType != "text/html" {
		t.Errorf("ReadMCPResource = %+v", contents)
	}
	_, err = s.ReadMCPResource(e.ctx, "res", "file:///etc/passwd")
	wantControlError(t, err, "mcp_read_resource", "ui://")
}

// CLI 2.1.37 never answers get_context_usage: the request fails after
// Options.ControlTimeout instead of blocking until ctx ends.
func TestE2EControlTimeout(t *testing.T) {
	bin := os.Getenv("CLAUDECTL_TEST_CLI_WS")
	if bin == "" {
		t.Skip("CLAUDECTL_TEST_CLI_WS (CLI 2.1.37) not set")
	}
	e := newE2E(t, claudetest.Reply(claudetest.Text("one")))
	e.opts.CLIPath = bin
	e.opts.ControlTimeout = 1500 * time.Millisecond
	s := e.start()
	e.turn(s, "hi")
	start := time.Now()
	_, err := s.ContextUsage(e.ctx)
	var te *claude.ControlTimeoutError
	if !errors.As(err, &te) || !errors.Is(err, claude.ErrControlTimeout) || te.Subtype != "get_context_usage" || te.Timeout != 1500*time.Millisecond {
		t.Fatalf("ContextUsage = %v (%T), want a *ControlTimeoutError", err, err)
	}
	if d := time.Since(start); d < 1400*time.Millisecond || d > 20*time.Second { // not until ctx ends
		t.Errorf("failed after %v, want about 1.5 s", d)
	}
	// The session still works.
	if _, err := s.SetPermissionMode(e.ctx, claude.PermissionAcceptEdits); err != nil {
		t.Errorf("SetPermissionMode after a timeout: %v", err)
	}
}

// rewriteConn changes the initialize request on its way to the CLI.
type rewriteConn struct {
	claude.Conn
	rewrite func([]byte) []byte
}

func (c *rewriteConn) WriteLine(ctx context.Context, line []byte) error {
	return c.Conn.WriteLine(ctx, c.rewrite(line))
}

type rewriteTransport struct{ rewrite func([]byte) []byte }

func (t *rewriteTransport) Start(ctx context.Context, cmd *claude.Command) (claude.Conn, error) {
	c, err := (&claude.ProcessTransport{}).Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &rewriteConn{Conn: c, rewrite: t.rewrite}, nil
}

// An initialize request the CLI refuses ends the session at once with the
// CLI's message, for Initialize and for the reader alike.
func TestE2EInitializeError(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("one")))
	e.opts.Transport = &rewriteTransport{rewrite: func(line []byte) []byte {
		return bytes.Replace(line, []byte(`"subtype":"initialize"`), []byte(`"subtype":"initialize","sdkMcpServers":"bogus"`), 1)
	}}
	start := time.Now()
	s := e.start()
	if err := s.SendText(e.ctx, "hi"); err != nil && !errors.Is(err, claude.ErrClosed) {
		t.Fatalf("SendText: %v", err)
	}
	_, err := s.Initialize(e.ctx)
	wantControlError(t, err, "initialize", "sdkMcpServers")
	var readErr error
	for _, err := range s.Messages(e.ctx) {
		if err != nil {
			readErr = err
		}
	}
	wantControlError(t, readErr, "initialize", "sdkMcpServers")
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %v", d)
	}
	s.Close()
}

// Breaking out of a Query loop mid-turn: Close interrupts the turn, so the
// CLI exits at once instead of finishing it during the grace period.
func TestE2ECloseAfterAbandonedTurn(t *testing.T) {
	e := newE2E(t, slowTurn())
	e.opts.IncludePartialMessages = true
	var broke time.Time
	for m, err := range claude.Query(e.ctx, "talk slowly", e.opts) {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := m.(*claude.StreamEvent); ok {
			broke = time.Now()
			break
		}
	}
	// Query's deferred Close has returned when the loop statement ends.
	if broke.IsZero() {
		t.Fatal("no stream event")
	}
	if d := time.Since(broke); d > 1500*time.Millisecond {
		t.Errorf("Close after breaking out mid-turn took %v, want well under 2 s", d)
	} else {
		t.Logf("Close after breaking out mid-turn took %v", d)
	}
}

// On the real CLI: SetPermissionMode returns the mode in effect, a refused
// mode (bypassPermissions, which needs the session launched with it) is a
// *ControlError with the CLI's code and leaves the mode as it was, and the
// session knows the capabilities that system/init and initialize list.
func TestE2EPermissionModeInEffectAndCapabilities(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("one")), claudetest.Reply(claudetest.Text("two")))
	s := e.start()
	ir, err := s.Initialize(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ir.Capabilities) == 0 {
		t.Errorf("the initialize response lists no capabilities: %.300s", ir.Raw)
	}
	msgs, _ := e.turn(s, "first")
	var init *claude.SystemInit
	for _, m := range msgs {
		if si, ok := m.(*claude.SystemInit); ok {
			init = si
		}
	}
	// Every CLI this SDK is tested with (2.1.329 on) lists the interrupt
	// receipt.
	if init == nil || !init.HasCapability(claude.CapabilityInterruptReceipt) || !s.HasCapability(claude.CapabilityInterruptReceipt) {
		t.Fatalf("system/init capabilities %v, session %v", init, s.Capabilities())
	}
	for _, c := range ir.Capabilities {
		if !s.HasCapability(c) {
			t.Errorf("the session lacks %s, which initialize listed", c)
		}
	}
	if mode, err := s.SetPermissionMode(e.ctx, claude.PermissionPlan); err != nil || mode != claude.PermissionPlan {
		t.Fatalf("SetPermissionMode(plan) = %q, %v", mode, err)
	}
	mode, err := s.SetPermissionMode(e.ctx, claude.PermissionBypassPermissions)
	var ce *claude.ControlError
	if !errors.As(err, &ce) || ce.Code != "bypass_not_launched" || mode != "" {
		t.Fatalf("SetPermissionMode(bypassPermissions) = %q, %v; want the CLI's refusal (bypass_not_launched)", mode, err)
	}
	msgs, _ = e.turn(s, "second")
	for _, m := range msgs {
		if si, ok := m.(*claude.SystemInit); ok && si.PermissionMode != string(claude.PermissionPlan) {
			t.Errorf("after the refusal the mode is %q, want plan still", si.PermissionMode)
		}
	}
}

// MCPCall on the real CLI: a tool's result, a tool's own error as an error,
// or with SoftErrorResult (2.1.331, mcp_call_soft_error_result_v1) as a
// result with its structured content; CheckPermissions asks CanUseTool,
// whose denial keeps the call from the server. And the experimental
// prompt_draft_activity is acknowledged.
func TestE2EMCPCall(t *testing.T) {
	e := newE2E(t, claudetest.Reply(claudetest.Text("one")))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e.opts.MCPServerConfigs = map[string]claude.MCPServerConfig{
		"res": {Command: self, Env: map[string]string{resourceServerEnv: "1"}},
	}
	var asked atomic.Value
	e.opts.CanUseTool = func(ctx context.Context, req *claude.PermissionRequest) (claude.PermissionResult, error) {
		asked.Store(req.ToolName)
		return claude.Deny("not now"), nil
	}
	s := e.start()
	e.turn(s, "hi")
	if !s.HasCapability(claude.CapabilityMCPCallSoftErrorResult) {
		t.Fatalf("the CLI does not list %s: %v", claude.CapabilityMCPCallSoftErrorResult, s.Capabilities())
	}
	r, err := s.MCPCall(e.ctx, "mcp__res__echo", map[string]any{"text": "hi"}, nil)
	if err != nil || r.Text() != "echo: hi" || r.IsError {
		t.Fatalf("MCPCall(echo) = %+v, %v", r, err)
	}
	_, err = s.MCPCall(e.ctx, "mcp__res__fail", nil, nil)
	wantControlError(t, err, "mcp_call", "the disk is full")
	r, err = s.MCPCall(e.ctx, "mcp__res__fail", nil, &claude.MCPCallOptions{SoftErrorResult: true})
	if err != nil || !r.IsError || r.Text() != "the disk is full" || string(r.StructuredContent) != `{"code":28}` {
		t.Errorf("MCPCall(fail, soft error result) = %+v, %v", r, err)
	}
	_, err = s.MCPCall(e.ctx, "mcp__res__echo", map[string]any{"text": "hi"}, &claude.MCPCallOptions{CheckPermissions: true})
	wantControlError(t, err, "mcp_call", "The tool did not run")
	if got, _ := asked.Load().(string); got != "mcp__res__echo" {
		t.Errorf("CanUseTool was asked about %q, want mcp__res__echo", got)
	}
	if err := s.NotePromptDraftActivity(e.ctx); err != nil {
		t.Errorf("NotePromptDraftActivity: %v", err)
	}
}
