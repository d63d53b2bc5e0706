package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// HookEventName names a hook event, as in the CLI's hook_event_name.
type HookEventName string

// The hook events the CLI knows (2.1.332). Inputs are typed for the common
// ones (see [HookInput]); the others arrive as a [*RawHookInput]. A CLI
// that does not know an event ignores the hooks registered for it (before
// 2.1.332, PreSkillShellCommand never fires).
const (
	HookPreToolUse          HookEventName = "PreToolUse"
	HookPostToolUse         HookEventName = "PostToolUse"
	HookPostToolUseFailure  HookEventName = "PostToolUseFailure"
	HookPostToolBatch       HookEventName = "PostToolBatch"
	HookNotification        HookEventName = "Notification"
	HookUserPromptSubmit    HookEventName = "UserPromptSubmit"
	HookUserPromptExpansion HookEventName = "UserPromptExpansion"
	HookSessionStart        HookEventName = "SessionStart"
	HookSessionEnd          HookEventName = "SessionEnd"
	HookStop                HookEventName = "Stop"
	HookStopFailure         HookEventName = "StopFailure"
	HookSubagentStart       HookEventName = "SubagentStart"
	HookSubagentStop        HookEventName = "SubagentStop"
	HookPreCompact          HookEventName = "PreCompact"
	HookPostCompact         HookEventName = "PostCompact"
	HookPreModelSwitch      HookEventName = "PreModelSwitch"
	HookPostModelSwitch     HookEventName = "PostModelSwitch"
	HookPermissionRequest   HookEventName = "PermissionRequest"
	HookPermissionDenied    HookEventName = "PermissionDenied"
	HookSetup               HookEventName = "Setup"
	HookTeammateIdle        HookEventName = "TeammateIdle"
	HookTaskCreated         HookEventName = "TaskCreated"
	HookTaskCompleted       HookEventName = "TaskCompleted"
	HookElicitation         HookEventName = "Elicitation"
	HookElicitationResult   HookEventName = "ElicitationResult"
	HookConfigChange        HookEventName = "ConfigChange"
	HookWorktreeCreate      HookEventName = "WorktreeCreate"
	HookWorktreeRemove      HookEventName = "WorktreeRemove"
	HookInstructionsLoaded  HookEventName = "InstructionsLoaded"
	HookCwdChanged          HookEventName = "CwdChanged"
	HookFileChanged         HookEventName = "FileChanged"
	HookDirectoryAdded      HookEventName = "DirectoryAdded"
	HookMessageDisplay      HookEventName = "MessageDisplay"
	// HookPreSkillShellCommand fires before a shell command that a skill's
	// or command's text holds (!`cmd`) runs as the skill or command loads
	// (2.1.332): see [PreSkillShellCommandInput]. Only an allow lets it run
	// (and then the CLI's own checks still apply); deny, ask and defer keep
	// it from running, and so does any UpdatedInput.
	HookPreSkillShellCommand HookEventName = "PreSkillShellCommand"
)

// HookEventNames lists the hook events in the order the CLI documents them.
// Callback ids are numbered in this order (see [Options.Hooks]).
var HookEventNames = []HookEventName{
	HookPreToolUse, HookPostToolUse, HookPostToolUseFailure, HookPostToolBatch,
	HookNotification, HookUserPromptSubmit, HookUserPromptExpansion,
	HookSessionStart, HookSessionEnd, HookStop, HookStopFailure,
	HookSubagentStart, HookSubagentStop, HookPreCompact, HookPostCompact,
	HookPreModelSwitch, HookPostModelSwitch, HookPermissionRequest,
	HookPermissionDenied, HookSetup, HookTeammateIdle, HookTaskCreated,
	HookTaskCompleted, HookElicitation, HookElicitationResult, HookConfigChange,
	HookWorktreeCreate, HookWorktreeRemove, HookInstructionsLoaded,
	HookCwdChanged, HookFileChanged, HookDirectoryAdded, HookMessageDisplay,
	HookPreSkillShellCommand,
}

// A HookMatcher is a group of callbacks for one hook event and the filter
// that selects when they run.
type HookMatcher struct {
	// Matcher filters the event. For the tool events (PreToolUse,
	// PostToolUse, PostToolUseFailure, PermissionRequest, PermissionDenied)
	// it is a tool name ("Bash"), several ("Write|Edit") or a regular
	// expression ("mcp__.*"); other events match it against their own
	// selector (SessionStart's source, PreCompact's trigger, ...). Empty
	// matches every occurrence.
	Matcher string
	// Timeout bounds each callback: its ctx ends after Timeout, and the CLI
	// stops waiting then (for PreToolUse the tool is then not run). It is
	// sent to the CLI in whole seconds, rounded up. Zero leaves the CLI's
	// default.
	Timeout time.Duration
	// Hooks are the callbacks. The CLI may call them concurrently.
	Hooks []HookFunc
	// OnFailure is what the CLI does when a callback fails (returns an
	// error, panics or times out): HookFailureContinue (the default: it
	// warns and goes on as if the hook had said nothing) or
	// HookFailureBlock (it blocks what the hook guards, e.g. a PreToolUse
	// tool is not run).
	OnFailure HookFailure
}

// HookFailure is what the CLI does when a hook callback fails
// (HookMatcher.OnFailure).
type HookFailure string

// The values of HookMatcher.OnFailure.
const (
	HookFailureContinue HookFailure = "continue"
	HookFailureBlock    HookFailure = "block"
)

// A HookFunc is called when its hook event fires. in is the event's input:
// a *PreToolUseInput for PreToolUse and so on (see [HookInput]); [HookFor]
// adapts a function taking the concrete type. The output tells the CLI what
// to do; nil (or a zero HookOutput) lets things go on unchanged.
//
// It runs on its own goroutine. ctx is cancelled when the CLI stops waiting
// (the matcher's Timeout, or a control_cancel_request), or the session ends.
// An error or a panic is reported to the CLI as a failed hook, which it
// treats as an empty answer: it prints a warning and goes on (a PreToolUse
// tool still runs), unless the matcher's OnFailure is HookFailureBlock. To
// block something, return an output that says so, such as [DenyTool].
// It may call the session's methods, Close included; Close waits only a
// second for a hook that ignores its ctx (see [Session.Close]).
type HookFunc func(ctx context.Context, in HookInput) (*HookOutput, error)

// HookFor adapts a callback for one input type, such as
// func(context.Context, *PreToolUseInput) (*HookOutput, error), to a
// HookFunc. Called with an input of another type, the HookFunc returns an
// error (the hook was registered under the wrong event).
func HookFor[T HookInput](f func(ctx context.Context, in T) (*HookOutput, error)) HookFunc {
	return func(ctx context.Context, in HookInput) (*HookOutput, error) {
		t, ok := in.(T)
		if !ok {
			var want T
			return nil, fmt.Errorf("claude: hook for %T called with %T (event %s)", want, in, in.Common().HookEventName)
		}
		return f(ctx, t)
	}
}

// validateHooks reports the first hook registration that cannot work.
func (o *Options) validateHooks() error {
	for event, ms := range o.Hooks {
		if event == "" {
			return &OptionError{"Hooks", "", "an event name is empty"}
		}
		for i, m := range ms {
			where := string(event) + "[" + strconv.Itoa(i) + "]"
			if m.Timeout < 0 {
				return &OptionError{"Hooks", where, "Timeout must not be negative"}
			}
			if m.OnFailure != "" && m.OnFailure != HookFailureContinue && m.OnFailure != HookFailureBlock {
				return &OptionError{"Hooks", where + ".OnFailure=" + string(m.OnFailure), `OnFailure must be "continue" or "block"`}
			}
			for j, f := range m.Hooks {
				if f == nil {
					return &OptionError{"Hooks", where + ".Hooks[" + strconv.Itoa(j) + "]", "is nil"}
				}
			}
		}
	}
	return nil
}

// hookCallback is one registered HookFunc and what it was registered with.
type hookCallback struct {
	id      string
	event   HookEventName
	timeout time.Duration
	fn      HookFunc
}

// wireHookMatcher is one matcher of initialize's "hooks" field.
type wireHookMatcher struct {
	Matcher         string      `json:"matcher,omitempty"`
	HookCallbackIDs []string    `json:"hookCallbackIds"`
	Timeout         int64       `json:"timeout,omitempty"` // seconds
	OnFailure       HookFailure `json:"onFailure,omitempty"`
}

// hookRegistry is the session's hooks, numbered. It is built by Start and
// read-only afterwards.
type hookRegistry struct {
	byID map[string]*hookCallback
	wire map[HookEventName][]wireHookMatcher // initialize's "hooks"
}

// newHookRegistry numbers the callbacks "hook_0", "hook_1", ... across all
// matchers: events in the order of HookEventNames (then other names in
// lexical order), matchers and callbacks in slice order.
func newHookRegistry(hooks map[HookEventName][]HookMatcher) *hookRegistry {
	r := &hookRegistry{byID: map[string]*hookCallback{}, wire: map[HookEventName][]wireHookMatcher{}}
	events := make([]HookEventName, 0, len(hooks))
	for e := range hooks {
		if !slices.Contains(HookEventNames, e) {
			events = append(events, e)
		}
	}
	slices.Sort(events)
	events = append(slices.DeleteFunc(slices.Clone(HookEventNames), func(e HookEventName) bool {
		_, ok := hooks[e]
		return !ok
	}), events...)
	for _, e := range events {
		for _, m := range hooks[e] {
			if len(m.Hooks) == 0 {
				continue
			}
			wm := wireHookMatcher{Matcher: m.Matcher, HookCallbackIDs: []string{}, OnFailure: m.OnFailure}
			if m.Timeout > 0 {
				wm.Timeout = int64((m.Timeout + time.Second - 1) / time.Second)
			}
			for _, f := range m.Hooks {
				id := "hook_" + strconv.Itoa(len(r.byID))
				r.byID[id] = &hookCallback{id: id, event: e, timeout: m.Timeout, fn: f}
				wm.HookCallbackIDs = append(wm.HookCallbackIDs, id)
			}
			r.wire[e] = append(r.wire[e], wm)
		}
	}
	return r
}

// addHookFields adds the "hooks" field of initialize.
func (s *Session) addHookFields(fields map[string]any) error {
	if s.hooks != nil && len(s.hooks.wire) > 0 {
		fields["hooks"] = s.hooks.wire
	}
	return nil
}

// answerHook answers a hook_callback request: {callback_id, input,
// tool_use_id}. The response is the hook's output.
func (s *Session) answerHook(ctx context.Context, req json.RawMessage) (any, error) {
	var hc struct {
		CallbackID string          `json:"callback_id"`
		Input      json.RawMessage `json:"input"`
	}
	if err := unmarshal(req, &hc); err != nil {
		return nil, fmt.Errorf("decoding hook_callback request: %w", err)
	}
	var cb *hookCallback
	if s.hooks != nil {
		cb = s.hooks.byID[hc.CallbackID]
	}
	if cb == nil {
		//lint:ignore ST1005 the official SDKs' words, which the CLI relays
		return nil, fmt.Errorf("No hook callback found for ID: %s", hc.CallbackID)
	}
	in, err := decodeHookInput(hc.Input, cb.event)
	if err != nil {
		return nil, fmt.Errorf("claude: hook %s (%s): decoding input: %w", cb.id, cb.event, err)
	}
	if cb.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cb.timeout)
		defer cancel()
	}
	out, err := s.callHook(ctx, cb, in)
	if err != nil {
		return nil, fmt.Errorf("claude: hook %s (%s): %w", cb.id, cb.event, err)
	}
	b, err := json.Marshal(out.wire(in.Common().HookEventName))
	if err != nil {
		return nil, fmt.Errorf("claude: hook %s (%s): encoding output: %w", cb.id, cb.event, err)
	}
	return json.RawMessage(b), nil
}

// callHook calls the callback, turning a panic into an error.
func (s *Session) callHook(ctx context.Context, cb *hookCallback, in HookInput) (out *HookOutput, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.logger.Error("claude: hook callback panicked", "callback_id", cb.id, "event", cb.event, "panic", r)
			out, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	return cb.fn(ctx, in)
}
