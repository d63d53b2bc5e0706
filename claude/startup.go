package claude

// A StartupFailureReason says why the CLI refused to start, so that a
// program can offer the fix instead of a retry. The CLI puts it on the
// result it prints before exiting (error_during_execution, no turns,
// errors holding the CLI's message): [ResultMessage.StartupFailureReason],
// and [ResultError.StartupFailureReason] of that result's Err. The SDK
// asks for those results (CLAUDE_CODE_STARTUP_FAILURE_RESULTS=1 in the
// CLI's environment, unless Options.Env sets it); without it the CLI says
// most of them on stderr alone. The set is open: a newer CLI may give a
// reason this package does not name.
type StartupFailureReason string

// The startup failure reasons the official SDK's types document (0.3.332).
const (
	// Managed settings pin a first-party or Cloud gateway sign-in, and an
	// API key or auth token is configured instead.
	StartupOrgPinAPIKeyConflict StartupFailureReason = "org_pin_api_key_conflict"
	// Managed settings list the API providers this machine may use, and
	// the session is set up for another.
	StartupProviderNotAllowed StartupFailureReason = "provider_not_allowed"
	// The sign-in's organization could not be verified against the pin
	// (network, or a revoked token).
	StartupOrgVerifyFailed StartupFailureReason = "org_verify_failed"
	// The sign-in belongs to an organization the pin does not allow.
	StartupOrgPinMismatch StartupFailureReason = "org_pin_mismatch"
	// Managed settings could not be read, the pin names no organization,
	// or managed model settings leave no model to use.
	StartupManagedSettingsInvalid StartupFailureReason = "managed_settings_invalid"
	// Managed settings the organization requires could not be loaded.
	StartupRemoteSettingsRequiredUnavailable StartupFailureReason = "remote_settings_required_unavailable"
	// The Cloud gateway ended this sign-in.
	StartupGatewaySigninRequired StartupFailureReason = "gateway_signin_required"
	// The Cloud gateway refused managed settings for this account.
	StartupGatewayAccessDenied StartupFailureReason = "gateway_access_denied"
	// A proxy setting is not a complete URL.
	StartupProxyInvalid StartupFailureReason = "proxy_invalid"
	// The per-user temp directory is unsafe or could not be created.
	StartupTempDirUnusable StartupFailureReason = "temp_dir_unusable"
	// The working directory was deleted, moved or cannot be read.
	StartupCwdUnavailable StartupFailureReason = "cwd_unavailable"
	// Windows has no shell tool (Git Bash or PowerShell).
	StartupShellToolMissing StartupFailureReason = "shell_tool_missing"
	// The conversation to resume or continue runs as a background session.
	StartupSessionHeldByBackground StartupFailureReason = "session_held_by_background"
	// The session's worktree failed its safety checks, or the resume was
	// launched from inside it.
	StartupWorktreeResumeRefused StartupFailureReason = "worktree_resume_refused"
	// The session's worktree could not be verified now; a retry may work.
	StartupWorktreeUnverified StartupFailureReason = "worktree_unverified"
	// This CLI is older than the minimum Anthropic requires.
	StartupCLIVersionTooOld StartupFailureReason = "cli_version_too_old"
	// bypassPermissions was asked for while running as root.
	StartupBypassRoot StartupFailureReason = "bypass_root"
	// The organization requires its policy limits and managed settings,
	// and they could not be loaded; a retry may work.
	StartupOrgConfigRequiredUnavailable StartupFailureReason = "org_config_required_unavailable"
	// The organization requires its policy limits and managed settings,
	// and Anthropic refused them for this sign-in.
	StartupOrgConfigRefused StartupFailureReason = "org_config_refused"
	// A working sandbox is required and cannot run here.
	StartupSandboxRequiredUnavailable StartupFailureReason = "sandbox_required_unavailable"
	// With --await-initialize, the first line was not initialize.
	StartupInitializeNotFirst StartupFailureReason = "initialize_not_first"
	// A configuration file read at start-up is not valid JSON
	// (ResultMessage.InvalidConfigFile names it); every start fails
	// until it is repaired.
	StartupConfigFileInvalid StartupFailureReason = "config_file_invalid"
	// Managed settings sent in initialize could not be used.
	StartupManagedSettingsNotDelivered StartupFailureReason = "managed_settings_not_delivered"
	// Fields named by --initialize-fields could not be used.
	StartupInitializeFieldsNotDelivered StartupFailureReason = "initialize_fields_not_delivered"
	// An administrator's managed setting disableSideloadFlags forbids a
	// launch that names plugins, agents or MCP servers of its own
	// (--mcp-config, --plugin-dir, --agents, ...); a launch without them
	// is not refused (2.1.331).
	StartupSideloadFlagsDisabled StartupFailureReason = "sideload_flags_disabled"
)

// Retryable reports whether the CLI says a new start may succeed by
// itself (worktree_unverified, org_config_required_unavailable); for the
// other reasons the fix is a change (of the launch, the machine, a
// setting, an administrator's policy), not a retry.
func (r StartupFailureReason) Retryable() bool {
	return r == StartupWorktreeUnverified || r == StartupOrgConfigRequiredUnavailable
}

// InvalidConfigFile names the configuration file that is not valid JSON,
// with a config_file_invalid startup failure.
type InvalidConfigFile struct {
	Path string `json:"path"`
	// IsGlobal is set for Claude Code's global config file, the only one
	// with backups.
	IsGlobal bool `json:"is_global"`
	// BackupSearched says whether the search for a backup is known to
	// have ended; BackupPath is the backup the message names, if any.
	BackupSearched bool   `json:"backup_searched"`
	BackupPath     string `json:"backup_path,omitempty"`
}
