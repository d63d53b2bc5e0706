package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// HookCommand is "claudectl hook": claudectl's hook in the person's
// Claude Code settings, so that a claude started by hand in a terminal
// sends its permission dialogs to the daemon (and from there to the inbox,
// phones and webhooks), falling back to its own dialog when the daemon
// cannot be reached or nobody answers in time.
type HookCommand struct{ Env *Env }

// Name implements Command.
func (*HookCommand) Name() string { return "hook" }

// Summary implements Command.
func (*HookCommand) Summary() string {
	return "send the permission dialogs of claude started in a terminal to the daemon (install, uninstall)"
}

const hookUsage = `Usage: claudectl hook install [--wait D] [--server URL] [--settings FILE]
       claudectl hook uninstall [--settings FILE]
       claudectl hook run [--wait D]   (what Claude Code runs)

install adds claudectl's hook to your Claude Code settings (~/.claude/
settings.json, or $CLAUDE_CONFIG_DIR's) for the PermissionRequest,
Notification, Stop and SessionEnd events, merged into what is there: your
other hooks and settings stay as they are, and the file as it was is kept
beside it (settings.json.claudectl-backup). From then on an interactive
claude started anywhere sends its permission requests to the daemon: they
are listed by claudectl pending, shown on the page and on subscribed phones,
sent to webhooks, and the answer goes back to that terminal. When the daemon
cannot be reached, or nobody answers within --wait (default 2m), Claude
Code's own dialog asks in the terminal: the hook never blocks silently.
Such sessions are listed as terminal sessions, read-only.

uninstall removes exactly what install added (and the file, if install made
it). --server is written into the hook's command; without it the hook finds
the daemon as the other commands do (CLAUDECTL_SERVER, claudectl serve's
settings, the token file of a daemon of yours on this machine).
`

// hookEvents are the hook events claudectl's hook is installed for.
var hookEvents = []string{"PermissionRequest", "Notification", "Stop", "SessionEnd"}

// hookMark starts the command of every hook claudectl installs (an
// assignment the shell Claude Code runs it with takes as such): how
// uninstall and a second install recognise theirs, whatever claudectl's
// path.
const hookMark = "CLAUDECTL_HOOK=1 "

// defaultHookWait is how long a terminal's request waits for a person
// before Claude Code's own dialog asks.
const defaultHookWait = 2 * time.Minute

// Run implements Command.
func (c *HookCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var settings, self string
	wait := defaultHookWait
	fs := newFlagSet("hook")
	fs.StringVar(&settings, "settings", "", "install, uninstall: the Claude Code settings `FILE` (default ~/.claude/settings.json)")
	fs.DurationVar(&wait, "wait", defaultHookWait, "how long a request waits for a person before the terminal's own dialog asks (`D`)")
	fs.StringVar(&self, "claudectl", "", "install: the claudectl `PATH` the hook runs (default this one)")
	cf.register(fs)
	pos, help, err := parseClient(env, hookUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("hook needs one of install, uninstall or run")
	}
	if wait < time.Second || wait > time.Hour {
		return badValue("wait", wait.String(), "1s to 1h")
	}
	if settings == "" {
		settings = claudeSettingsPath(env.Getenv)
	}
	switch pos[0] {
	case "install":
		if self == "" {
			if self, err = os.Executable(); err != nil {
				return fmt.Errorf("finding claudectl's own path for the hook's command: %w (give it with --claudectl PATH)", err)
			}
		}
		cmd := hookMark + shellQuote(self) + " hook run"
		if wait != defaultHookWait {
			cmd += " --wait " + wait.String()
		}
		if cf.server != "" {
			cmd += " --server " + shellQuote(cf.server)
		}
		if cf.tokenFile != "" {
			cmd += " --token-file " + shellQuote(cf.tokenFile)
		}
		backup, err := installHook(settings, cmd, wait)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "Installed claudectl's hook in %s (%s).\n", settings, strings.Join(hookEvents, ", "))
		if backup != "" {
			fmt.Fprintf(env.Stdout, "The file as it was is in %s.\n", backup)
		}
		fmt.Fprintln(env.Stdout, "claude sessions started from now on send their permission requests to the daemon; claudectl hook uninstall removes it.")
		return nil
	case "uninstall":
		removed, err := uninstallHook(settings)
		if err != nil {
			return err
		}
		if removed == 0 {
			fmt.Fprintf(env.Stdout, "claudectl's hook is not in %s: nothing to remove.\n", settings)
		} else {
			fmt.Fprintf(env.Stdout, "Removed claudectl's hook from %s.\n", settings)
		}
		return nil
	case "run":
		return runHook(ctx, env, &cf, wait)
	}
	return usagef("unknown subcommand %q: hook needs install, uninstall or run", pos[0])
}

// claudeSettingsPath is the person's Claude Code settings file.
func claudeSettingsPath(getenv func(string) string) string {
	if d := getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return filepath.Join(d, "settings.json")
	}
	return filepath.Join(getenv("HOME"), ".claude", "settings.json")
}

// readSettings reads a Claude Code settings file as a JSON object; a
// missing file is an empty one (exists false).
func readSettings(path string) (obj map[string]any, mode fs.FileMode, exists bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]any{}, 0o600, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, 0, false, err
	}
	obj = map[string]any{}
	if len(bytes.TrimSpace(b)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber() // numbers stay as written
		if err := dec.Decode(&obj); err != nil {
			return nil, 0, false, fmt.Errorf("%s is not a JSON object (%v): fix it or give another file with --settings; nothing was changed", path, err)
		}
	}
	return obj, st.Mode().Perm(), true, nil
}

// writeSettings writes obj to path through a temporary file and a rename:
// a crash leaves the old file or the new one, never half of one.
func writeSettings(path string, obj map[string]any, mode fs.FileMode) error {
	b, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".settings-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ours reports whether a hook entry ({"type": "command", "command": …})
// is one claudectl installed.
func ours(h any) bool {
	m, ok := h.(map[string]any)
	if !ok {
		return false
	}
	cmd, _ := m["command"].(string)
	return strings.HasPrefix(cmd, hookMark)
}

// stripOurs removes claudectl's hooks from the settings' hooks object and
// says how many; groups and events left empty by it go too.
func stripOurs(obj map[string]any) (int, error) {
	hooks, ok := obj["hooks"].(map[string]any)
	if !ok {
		if obj["hooks"] != nil {
			return 0, fmt.Errorf("its \"hooks\" is not an object")
		}
		return 0, nil
	}
	removed := 0
	for event, v := range hooks {
		groups, ok := v.([]any)
		if !ok {
			continue
		}
		var keep []any
		for _, g := range groups {
			gm, ok := g.(map[string]any)
			if !ok {
				keep = append(keep, g)
				continue
			}
			hs, _ := gm["hooks"].([]any)
			var left []any
			for _, h := range hs {
				if ours(h) {
					removed++
				} else {
					left = append(left, h)
				}
			}
			if len(left) == len(hs) {
				keep = append(keep, g)
			} else if len(left) > 0 {
				gm["hooks"] = left
				keep = append(keep, gm)
			}
		}
		if len(keep) == 0 {
			delete(hooks, event)
		} else {
			hooks[event] = keep
		}
	}
	if len(hooks) == 0 {
		delete(obj, "hooks")
	}
	return removed, nil
}

// installHook merges claudectl's hook running cmd into the settings at
// path, replacing one installed before, and returns the backup it made of
// the file ("" when it made none: no file, or a backup there already).
func installHook(path, cmd string, wait time.Duration) (backup string, err error) {
	obj, mode, exists, err := readSettings(path)
	if err != nil {
		return "", err
	}
	if exists {
		backup = path + ".claudectl-backup"
		if _, err := os.Stat(backup); err == nil {
			backup = "" // the first one, from before any install, stays
		} else if err := copyFile(path, backup, mode); err != nil {
			return "", fmt.Errorf("keeping a backup of %s: %w; nothing was changed", path, err)
		}
	}
	if _, err := stripOurs(obj); err != nil {
		return "", fmt.Errorf("%s: %w; nothing was changed", path, err)
	}
	hooks, _ := obj["hooks"].(map[string]any)
	if hooks == nil {
		hooks = map[string]any{}
		obj["hooks"] = hooks
	}
	for _, event := range hookEvents {
		entry := map[string]any{"type": "command", "command": cmd}
		if event == "PermissionRequest" {
			// Claude Code's own bound on the hook: beyond the wait, so
			// that the hook's answer (or its fall-back) is what counts.
			entry["timeout"] = int(wait.Seconds()) + 30
		}
		group := map[string]any{"hooks": []any{entry}}
		if event == "PermissionRequest" {
			group["matcher"] = "*"
		}
		groups, _ := hooks[event].([]any)
		hooks[event] = append(groups, group)
	}
	if err := writeSettings(path, obj, mode); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return backup, nil
}

// uninstallHook removes claudectl's hooks from the settings at path. A
// file install created, left empty, is removed.
func uninstallHook(path string) (int, error) {
	obj, mode, exists, err := readSettings(path)
	if err != nil || !exists {
		return 0, err
	}
	removed, err := stripOurs(obj)
	if err != nil {
		return 0, fmt.Errorf("%s: %w; nothing was changed", path, err)
	}
	if removed == 0 {
		return 0, nil
	}
	if _, err := os.Stat(path + ".claudectl-backup"); errors.Is(err, fs.ErrNotExist) && len(obj) == 0 {
		return removed, os.Remove(path) // install made it
	}
	return removed, writeSettings(path, obj, mode)
}

func copyFile(from, to string, mode fs.FileMode) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, mode)
}

// runHook is the hook Claude Code runs: its input on stdin, a
// PermissionRequest's decision on stdout. It never fails the hook (exit
// 0 always): when the daemon cannot answer, the terminal asks.
func runHook(ctx context.Context, env *Env, cf *clientFlags, wait time.Duration) error {
	in, err := io.ReadAll(io.LimitReader(env.Stdin, 4<<20))
	if err != nil {
		return nil
	}
	var head struct {
		Event string `json:"hook_event_name"`
	}
	if json.Unmarshal(in, &head) != nil {
		fmt.Fprintln(env.Stderr, "claudectl hook: the hook's input is not JSON; Claude Code decides alone")
		return nil
	}
	dc, err := cf.dial(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "claudectl hook: %v; Claude Code asks in the terminal\n", err)
		return nil
	}
	defer dc.Close()
	if head.Event != "PermissionRequest" {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := dc.terminal.ReportTerminal(rctx, connect.NewRequest(&v1.ReportTerminalRequest{HookInput: in})); err != nil {
			fmt.Fprintf(env.Stderr, "claudectl hook: telling the daemon of %s: %v\n", head.Event, err)
		}
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, wait+10*time.Second)
	defer cancel()
	res, err := dc.terminal.AskTerminal(actx, connect.NewRequest(&v1.AskTerminalRequest{HookInput: in, WaitSeconds: int32(wait / time.Second)}))
	if err != nil {
		fmt.Fprintf(env.Stderr, "claudectl hook: the daemon did not take the request (%v); Claude Code asks in the terminal\n", err)
		return nil
	}
	if !res.Msg.Decided {
		fmt.Fprintf(env.Stderr, "claudectl hook: nobody answered request %s within %s; Claude Code asks in the terminal\n", res.Msg.RequestId, wait)
		return nil
	}
	decision := map[string]any{"behavior": "deny", "message": res.Msg.Message}
	if res.Msg.Behavior == v1.Behavior_BEHAVIOR_ALLOW {
		decision = map[string]any{"behavior": "allow"}
		if len(res.Msg.UpdatedInput) > 0 {
			decision["updatedInput"] = json.RawMessage(res.Msg.UpdatedInput)
		}
	}
	return writeJSONLine(env.Stdout, map[string]any{"hookSpecificOutput": map[string]any{
		"hookEventName": "PermissionRequest", "decision": decision}})
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
