package claude

import (
	"context"
	"encoding/json"
	"fmt"
)

// CanUseToolFunc decides whether a tool may run. It is called on its own
// goroutine for each permission prompt; several may run at once. ctx is
// cancelled when the CLI withdraws the request (control_cancel_request) or
// the session ends. Returning an error sends the CLI an error response,
// which it treats as a denial. It may call the session's methods, Close
// included. Close waits only a second for a callback that ignores its ctx;
// its goroutine is then abandoned (see [Session.Close]).
type CanUseToolFunc func(ctx context.Context, req *PermissionRequest) (PermissionResult, error)

// PermissionRequest is the CLI's can_use_tool request, whole.
type PermissionRequest struct {
	RequestID   string          `json:"-"`
	ToolName    string          `json:"tool_name"`
	DisplayName string          `json:"display_name,omitempty"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Input       json.RawMessage `json:"input"`
	ToolUseID   string          `json:"tool_use_id,omitempty"`
	AgentID     string          `json:"agent_id,omitempty"`
	// Suggestions are permission updates the CLI proposes for "always allow".
	Suggestions    []PermissionUpdate `json:"permission_suggestions,omitempty"`
	BlockedPath    string             `json:"blocked_path,omitempty"`
	DecisionReason string             `json:"decision_reason,omitempty"`
	// Raw is the whole request payload.
	Raw json.RawMessage `json:"-"`
}

// PermissionUpdate is a change to permission rules or mode, as the CLI
// suggests them and as an allow decision may apply them.
type PermissionUpdate struct {
	Type        string           `json:"type"` // addRules, replaceRules, removeRules, setMode, addDirectories, removeDirectories
	Rules       []PermissionRule `json:"rules,omitempty"`
	Behavior    string           `json:"behavior,omitempty"` // allow, deny, ask
	Destination string           `json:"destination,omitempty"`
	Mode        PermissionMode   `json:"mode,omitempty"`
	Directories []string         `json:"directories,omitempty"`
}

// PermissionRule names a tool and, optionally, a rule content such as
// "git status:*".
type PermissionRule struct {
	ToolName    string `json:"toolName"`
	RuleContent string `json:"ruleContent,omitempty"`
}

// PermissionResult is the answer to a [PermissionRequest]. Build one with
// [Allow], [AllowInput] or [Deny].
type PermissionResult struct {
	// Allow says whether the tool may run.
	Allow bool
	// UpdatedInput replaces the tool's input; nil keeps the original.
	UpdatedInput json.RawMessage
	// UpdatedPermissions are applied when allowing (e.g. the request's
	// Suggestions, for "always allow").
	UpdatedPermissions []PermissionUpdate
	// Message tells the model why it was denied.
	Message string
	// Interrupt stops the turn after a denial.
	Interrupt bool
}

// Allow returns a result that lets the tool run with its original input.
func Allow() PermissionResult { return PermissionResult{Allow: true} }

// AllowInput returns a result that lets the tool run with input replaced by v
// (marshalled to JSON).
func AllowInput(v any) (PermissionResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return PermissionResult{}, fmt.Errorf("claude: AllowInput: %w", err)
	}
	return PermissionResult{Allow: true, UpdatedInput: b}, nil
}

// Deny returns a result that refuses the tool with a message for the model.
func Deny(message string) PermissionResult { return PermissionResult{Message: message} }

// wire returns the control_response payload for req.
func (r PermissionResult) wire(req *PermissionRequest) map[string]any {
	if r.Allow {
		in := r.UpdatedInput
		if len(in) == 0 {
			in = req.Input
		}
		if len(in) == 0 {
			in = json.RawMessage("{}")
		}
		m := map[string]any{"behavior": "allow", "updatedInput": in}
		if len(r.UpdatedPermissions) > 0 {
			m["updatedPermissions"] = r.UpdatedPermissions
		}
		if req.ToolUseID != "" {
			m["toolUseID"] = req.ToolUseID
		}
		return m
	}
	msg := r.Message
	if msg == "" {
		msg = "Permission denied."
	}
	m := map[string]any{"behavior": "deny", "message": msg}
	if r.Interrupt {
		m["interrupt"] = true
	}
	if req.ToolUseID != "" {
		m["toolUseID"] = req.ToolUseID
	}
	return m
}

// Question is one question of an AskUserQuestion tool call.
type Question struct {
	Question    string           `json:"question"`
	Header      string           `json:"header,omitempty"`
	Options     []QuestionOption `json:"options,omitempty"`
	MultiSelect bool             `json:"multiSelect,omitempty"`
}

// QuestionOption is one choice offered for a [Question].
type QuestionOption struct {
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// UnmarshalJSON accepts an option as an object or as a plain string.
func (o *QuestionOption) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &o.Label)
	}
	type plain QuestionOption // avoid recursion
	return json.Unmarshal(b, (*plain)(o))
}

// AnswerFunc answers the questions of an AskUserQuestion call: it returns a
// map from question text to answer (for several choices, labels joined by
// ", ").
type AnswerFunc func(ctx context.Context, questions []Question) (map[string]string, error)

// AnswerQuestions returns a [CanUseToolFunc] that answers AskUserQuestion
// calls with answer and passes every other request to next (nil next allows
// nothing else: other tools are denied).
func AnswerQuestions(answer AnswerFunc, next CanUseToolFunc) CanUseToolFunc {
	return func(ctx context.Context, req *PermissionRequest) (PermissionResult, error) {
		if req.ToolName != "AskUserQuestion" {
			if next == nil {
				return Deny("No permission handler for " + req.ToolName + "."), nil
			}
			return next(ctx, req)
		}
		var input map[string]json.RawMessage
		if err := json.Unmarshal(req.Input, &input); err != nil {
			return PermissionResult{}, fmt.Errorf("claude: AskUserQuestion input: %w", err)
		}
		var qs []Question
		if err := json.Unmarshal(input["questions"], &qs); err != nil {
			return PermissionResult{}, fmt.Errorf("claude: AskUserQuestion questions: %w", err)
		}
		answers, err := answer(ctx, qs)
		if err != nil {
			return PermissionResult{}, err
		}
		a, err := json.Marshal(answers)
		if err != nil {
			return PermissionResult{}, err
		}
		input["answers"] = a
		b, err := json.Marshal(input)
		if err != nil {
			return PermissionResult{}, err
		}
		return PermissionResult{Allow: true, UpdatedInput: b}, nil
	}
}
