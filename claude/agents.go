package claude

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// Sub-agents. The model starts a sub-agent with the Agent tool (listed as
// "Task" in system/init); custom ones come from [Options.Agents]. The CLI
// prints the sub-agent's messages on the same stream as the main thread's,
// interleaved with them, each carrying parent_tool_use_id (the id of the
// Agent tool call) and agent_id; [ThreadOf] tells them apart. Its progress
// is reported by *TaskStarted, *TaskProgress, *TaskUpdated and
// *TaskNotification, whose ToolUseID is that same tool call id.
//
// Sub-agents run in the background by default: the Agent call returns at
// once, the main turn may end (with its result) while the sub-agent still
// works, and when it finishes the CLI starts another main turn on its own to
// report back (a new *SystemInit and *ResultMessage), even after
// [Session.CloseInput]. [Session.Turn] stops at the first result;
// [Session.UntilIdle] reads on until all of it is done.

// Thread identifies the conversation a message belongs to: the main thread
// (the zero Thread) or a sub-agent.
type Thread struct {
	// ParentToolUseID is the id of the Agent (Task) tool call that started
	// the sub-agent.
	ParentToolUseID string
	// AgentID identifies the sub-agent's run.
	AgentID string
}

// IsMain reports whether t is the main thread.
func (t Thread) IsMain() bool { return t == Thread{} }

// ThreadOf returns the thread m belongs to, from its parent_tool_use_id and
// agent_id: those of *AssistantMessage, *UserMessage and *StreamEvent, the
// ParentToolUseID of *ToolProgress and the AgentID of *PermissionDenied.
// Other messages belong to the main thread (task_* system messages are
// about a sub-agent but printed by the main thread; their ToolUseID is the
// sub-agent's ParentToolUseID).
func ThreadOf(m Message) Thread {
	switch m := m.(type) {
	case *AssistantMessage:
		return Thread{m.ParentToolUseID, m.AgentID}
	case *UserMessage:
		return Thread{m.ParentToolUseID, m.AgentID}
	case *StreamEvent:
		return Thread{m.ParentToolUseID, m.AgentID}
	case *ToolProgress:
		return Thread{ParentToolUseID: m.ParentToolUseID}
	case *PermissionDenied:
		return Thread{AgentID: m.AgentID}
	}
	return Thread{}
}

// UntilIdle returns an iterator over the messages until the CLI is idle:
// through the result of the current turn and of every turn that background
// work (a background sub-agent or shell) then starts on its own, up to and
// including the *SessionStateChanged "idle" message that follows the last
// result. Call it after [Session.Send], or after [Session.Turn] to read what
// follows the turn; when everything read so far already ends in idle and
// nothing was sent since, it yields nothing.
//
// It relies on the CLI reporting its state (session_state_changed, which
// the session asks for); with a CLI that does not, it stops at the next
// result, like Turn. If the session ends first, a clean exit after a result
// stops the iteration and any other end yields the error last (io.EOF for a
// clean exit before any result).
func (s *Session) UntilIdle(ctx context.Context) iter.Seq2[Message, error] {
	return func(yield func(Message, error) bool) {
		if s.idle.reached() {
			return
		}
		for {
			m, err := s.Next(ctx)
			if err != nil {
				if !errors.Is(err, io.EOF) || !s.idle.resultSinceSend() {
					yield(nil, err)
				}
				return
			}
			if !yield(m, nil) || s.idle.reached() {
				return
			}
		}
	}
}

// idleState follows, at the reader's position in the stream, whether the
// CLI has gone idle after the last prompt. Send counts prompts; Next
// observes every message read.
type idleState struct {
	sent atomic.Uint64 // prompts written by Send

	mu           sync.Mutex // guards the fields below
	reported     bool       // the CLI reports its state (a session_state_changed was read)
	state        string     // the last state read
	resultRead   bool       // a result was read ...
	sentAtResult uint64     // ... when sent was this
}

// observe records m, which the reader has just read.
func (st *idleState) observe(m Message) {
	switch m := m.(type) {
	case *SessionStateChanged:
		st.mu.Lock()
		st.reported, st.state = true, m.State
		st.mu.Unlock()
	case *ResultMessage:
		st.mu.Lock()
		st.resultRead, st.sentAtResult = true, st.sent.Load()
		st.mu.Unlock()
	}
}

// resultSinceSend reports whether a result was read after the last prompt
// was sent.
func (st *idleState) resultSinceSend() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.resultRead && st.sentAtResult == st.sent.Load()
}

// reached reports whether the reader is at the point where the CLI went
// idle: a result was read since the last prompt, and the CLI then said it
// is idle (or it does not report its state). The CLI prints "idle" after
// the last result, but a stale "idle" (one that ended an earlier prompt)
// may still be unread when a new prompt is sent; requiring a result since
// the last prompt skips it.
func (st *idleState) reached() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.resultRead && st.sentAtResult == st.sent.Load() && (!st.reported || st.state == "idle")
}

// addAgentFields adds the "agents" field of initialize: the custom
// sub-agents of Options.Agents. (They go in initialize rather than the
// --agents flag because one argument is limited to 128 KiB on Linux, and
// prompts can be long.)
func (s *Session) addAgentFields(fields map[string]any) error {
	if len(s.opts.Agents) > 0 {
		fields["agents"] = s.opts.Agents
	}
	return nil
}

// AgentDefinition defines a custom sub-agent (the official AgentDefinition,
// field for field). Description and Prompt are required; the zero value of
// every other field leaves the CLI's default.
type AgentDefinition struct {
	// Description says when to use the agent.
	Description string `json:"description"`
	// Prompt is the agent's system prompt.
	Prompt string `json:"prompt"`
	// Tools are the tools the agent may use; nil inherits the parent's.
	Tools []string `json:"tools,omitempty"`
	// DisallowedTools are tools the agent may not use; "mcp__S" or
	// "mcp__S__*" removes every tool of server S, "mcp__*" all MCP tools.
	DisallowedTools []string `json:"disallowedTools,omitempty"`
	// Model is a model alias ("sonnet", "opus", "haiku"), a model id, or
	// "inherit" (the main thread's model).
	Model string `json:"model,omitempty"`
	// MCPServers are the agent's MCP servers: by name (a server the session
	// has) or with their own config. An in-process server (Options.MCPServers)
	// can only be named.
	MCPServers []AgentMCPServer `json:"mcpServers,omitempty"`
	// CriticalSystemReminder is added to the agent's system prompt
	// (experimental in the CLI: criticalSystemReminder_EXPERIMENTAL).
	CriticalSystemReminder string `json:"criticalSystemReminder_EXPERIMENTAL,omitempty"`
	// Skills are skills preloaded into the agent's context, by name.
	Skills []string `json:"skills,omitempty"`
	// InitialPrompt is sent as the first user turn when the agent runs the
	// main thread (Options.Agent).
	InitialPrompt string `json:"initialPrompt,omitempty"`
	// MaxTurns limits the agent's agentic turns; 0 is no limit.
	MaxTurns int `json:"maxTurns,omitempty"`
	// AutoCompactWindow is the token count at which the agent, as a
	// sub-agent, compacts its conversation (it can only lower the inherited
	// window); 0 inherits it.
	AutoCompactWindow int `json:"autoCompactWindow,omitempty"`
	// Background runs the agent as a background task when it is invoked.
	Background bool `json:"background,omitempty"`
	// OmitClaudeMd runs the agent, as a sub-agent, without the user, project
	// and local CLAUDE.md files.
	OmitClaudeMd bool `json:"omitClaudeMd,omitempty"`
	// Memory is the scope of the agent's memory files: "user", "project"
	// or "local".
	Memory string `json:"memory,omitempty"`
	// Effort is "low", "medium", "high", "xhigh", "max", or a whole number
	// (sent as a JSON number).
	Effort AgentEffort `json:"effort,omitempty"`
	// PermissionMode is the agent's permission mode.
	PermissionMode PermissionMode `json:"permissionMode,omitempty"`
	// Observer is an agent type (or up to four, comma-separated) started as
	// a background observer whenever this agent runs.
	Observer string `json:"observer,omitempty"`
	// ObserverMessage is added to each activity digest sent to the observer.
	ObserverMessage string `json:"observerMessage,omitempty"`
}

// AgentEffort is an agent's reasoning effort: a level name or a whole
// number.
type AgentEffort string

// MarshalJSON writes a number as a JSON number and a level as a string.
func (e AgentEffort) MarshalJSON() ([]byte, error) {
	if n, err := strconv.Atoi(string(e)); err == nil {
		return []byte(strconv.Itoa(n)), nil
	}
	return json.Marshal(string(e))
}

// An AgentMCPServer is one of a sub-agent's MCP servers: Name alone refers to
// a server the session has; with Config, the agent gets its own server of
// that name.
type AgentMCPServer struct {
	Name   string
	Config *MCPServerConfig
}

// MarshalJSON writes the name as a string, or {name: config}.
func (s AgentMCPServer) MarshalJSON() ([]byte, error) {
	if s.Config == nil {
		return json.Marshal(s.Name)
	}
	return json.Marshal(map[string]*MCPServerConfig{s.Name: s.Config})
}

// check reports what makes d unusable; Field is relative to the agent.
func (d AgentDefinition) check() *OptionError {
	switch {
	case d.Description == "":
		return &OptionError{"Description", "", "is required"}
	case d.Prompt == "":
		return &OptionError{"Prompt", "", "is required"}
	case d.MaxTurns < 0:
		return &OptionError{"MaxTurns", strconv.Itoa(d.MaxTurns), "must not be negative"}
	case d.AutoCompactWindow < 0:
		return &OptionError{"AutoCompactWindow", strconv.Itoa(d.AutoCompactWindow), "must not be negative"}
	case d.Memory != "" && d.Memory != "user" && d.Memory != "project" && d.Memory != "local":
		return &OptionError{"Memory", d.Memory, `must be "user", "project" or "local"`}
	case d.PermissionMode != "" && !slices.Contains(PermissionModes, d.PermissionMode):
		return &OptionError{"PermissionMode", string(d.PermissionMode), "must be one of " + joinModes()}
	}
	if e := string(d.Effort); e != "" && !slices.Contains(effortLevels, e) {
		if n, err := strconv.Atoi(e); err != nil || n <= 0 {
			return &OptionError{"Effort", e, "must be low, medium, high, xhigh, max or a positive whole number"}
		}
	}
	for i, m := range d.MCPServers {
		if m.Name == "" {
			return &OptionError{"MCPServers", "[" + strconv.Itoa(i) + "]", "a server needs a Name"}
		}
		if m.Config != nil {
			if err := m.Config.check(); err != nil {
				return &OptionError{"MCPServers", m.Name, err.Error()}
			}
		}
	}
	return nil
}
