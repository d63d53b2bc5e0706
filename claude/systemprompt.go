package claude

// SystemPrompt is the system prompt of a session, in every form the official
// SDKs accept (their systemPrompt option). It goes to the CLI in the
// initialize request, as they send it.
//
//   - nil (the default, as in the official SDKs): an empty custom prompt.
//     The model then gets the CLI's minimal prompt, without Claude Code's
//     own instructions.
//   - [CustomPrompt](text) or CustomPrompt(block, ...): a custom prompt,
//     replacing Claude Code's. CustomPrompt() with no text is an explicitly
//     empty prompt.
//   - SystemPrompt{File: path}: a custom prompt the CLI reads from a file
//     (--system-prompt-file; the Python SDK's {"type": "file"} form).
//   - [ClaudeCodePrompt](append): Claude Code's own prompt, with append
//     (if not empty) added at its end; set ExcludeDynamicSections to move
//     the per-user parts (working directory, memory, git status) into the
//     first user message so that the prompt is the same for every user.
type SystemPrompt struct {
	// Preset is PresetClaudeCode for Claude Code's own prompt, or "" for a
	// custom prompt made of Blocks.
	Preset string
	// Blocks are a custom prompt's blocks, in order. A block equal to
	// SystemPromptDynamicBoundary separates the part that is the same for
	// every session (cacheable across sessions) from the rest. No blocks is
	// an empty prompt.
	Blocks []string
	// File is a file the CLI reads a custom prompt from
	// (--system-prompt-file), instead of Blocks.
	File string
	// Append is added at the end of the prompt (initialize
	// appendSystemPrompt). The official SDKs offer it with the preset only;
	// the CLI adds it to a custom prompt too.
	Append string
	// ExcludeDynamicSections (with the preset only) strips the per-user
	// sections from the system prompt and sends them as the first user
	// message instead.
	ExcludeDynamicSections bool
	// Snapshot says whether the CLI records the rendered prompt once and
	// reuses it for the rest of the conversation, across resumes
	// (initialize systemPromptSnapshot). nil leaves the CLI's default.
	Snapshot *bool
}

// PresetClaudeCode names Claude Code's own system prompt (SystemPrompt.Preset).
const PresetClaudeCode = "claude_code"

// SystemPromptDynamicBoundary, as a block of a custom prompt, marks where
// the part that is the same for every session ends.
const SystemPromptDynamicBoundary = "__SYSTEM_PROMPT_DYNAMIC_BOUNDARY__"

// CustomPrompt returns a custom system prompt made of these blocks; with none
// it is an explicitly empty prompt.
func CustomPrompt(blocks ...string) *SystemPrompt {
	return &SystemPrompt{Blocks: blocks}
}

// ClaudeCodePrompt returns Claude Code's own system prompt with appendText
// added at its end ("" adds nothing).
func ClaudeCodePrompt(appendText string) *SystemPrompt {
	return &SystemPrompt{Preset: PresetClaudeCode, Append: appendText}
}

// SystemPromptFromFlags returns what the CLI's own --system-prompt and
// --append-system-prompt flags select: Claude Code's prompt unless
// systemPrompt (when not empty) replaces it, with appendSystemPrompt added.
// Programs that offer those two flags, as claude does, pass them through it.
func SystemPromptFromFlags(systemPrompt, appendSystemPrompt string) *SystemPrompt {
	if systemPrompt != "" {
		return &SystemPrompt{Blocks: []string{systemPrompt}, Append: appendSystemPrompt}
	}
	return ClaudeCodePrompt(appendSystemPrompt)
}

// check reports what makes p unusable, as an *OptionError.
func (p *SystemPrompt) check() error {
	if p == nil {
		return nil
	}
	switch p.Preset {
	case "":
		if p.File != "" && len(p.Blocks) > 0 {
			return &OptionError{"SystemPrompt.File", p.File, "cannot be combined with Blocks"}
		}
		if p.ExcludeDynamicSections {
			return &OptionError{"SystemPrompt.ExcludeDynamicSections", "true", "applies to the claude_code preset only (a custom prompt has no dynamic sections)"}
		}
	case PresetClaudeCode:
		if len(p.Blocks) > 0 || p.File != "" {
			return &OptionError{"SystemPrompt.Preset", p.Preset, "a preset prompt has no Blocks or File: use Append to add to it, or leave Preset empty for a custom prompt"}
		}
	default:
		return &OptionError{"SystemPrompt.Preset", p.Preset, `must be "claude_code" or empty (a custom prompt)`}
	}
	return nil
}

// addSystemPromptFields adds the system prompt fields of initialize, as the
// TypeScript SDK 0.3.330 sends them: a custom prompt (and the default, an
// empty one) as systemPrompt: [blocks...]; the preset as no systemPrompt,
// with appendSystemPrompt and excludeDynamicSections.
func (s *Session) addSystemPromptFields(fields map[string]any) error {
	p := s.opts.SystemPrompt
	if p == nil {
		fields["systemPrompt"] = []string{""}
		return nil
	}
	if p.Preset == "" && p.File == "" {
		blocks := p.Blocks
		if len(blocks) == 0 {
			blocks = []string{""}
		}
		fields["systemPrompt"] = blocks
	}
	if p.Append != "" {
		fields["appendSystemPrompt"] = p.Append
	}
	if p.ExcludeDynamicSections {
		fields["excludeDynamicSections"] = true
	}
	if p.Snapshot != nil {
		fields["systemPromptSnapshot"] = *p.Snapshot
	}
	return nil
}
