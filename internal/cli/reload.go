package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/claudectl/claudectl/internal/serve"
)

// ReloadCommand is "claudectl reload": the daemon reads its settings file
// again, as on SIGHUP.
type ReloadCommand struct{ Env *Env }

// Name implements Command.
func (*ReloadCommand) Name() string { return "reload" }

// Summary implements Command.
func (*ReloadCommand) Summary() string {
	return "make the daemon read its settings file again (as SIGHUP does)"
}

const reloadUsage = `Usage: claudectl reload [flags]

Makes the daemon read its settings file again, as kill -HUP does, and
apply what can change while it runs: log_level, the permission timeouts
(permissions.*), sessions.idle_timeout and max_running, the stream limits
(daemon.max_streams, stream_write_timeout, stream_unsent_bytes) and
store.retention. The settings that change only at a restart are named,
and keep their old values until then. A file with an error changes
nothing: the error says where it is (the daemon's log says it too).
` + clientFlagsHelp

// Run implements Command.
func (c *ReloadCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	fs := newFlagSet("reload")
	cf.register(fs)
	pos, help, err := parseClient(env, reloadUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: reload takes no arguments", pos[0])
	}
	if _, serr := loadSettings("", env.Getenv); serr != nil && cf.server == "" && env.Getenv("CLAUDECTL_SERVER") == "" {
		// The daemon's address would come from the file: say why it is
		// looked for at the default one (the daemon will refuse the file
		// as well, and say why).
		fmt.Fprintf(env.Stderr, "claudectl reload: the settings file does not read (%v); looking for the daemon at %s (--server to name it)\n",
			serr, defaultServer)
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	res, err := dc.adminCall(ctx, "POST", "reload", nil, "reloading the settings")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var rep serve.ReloadReport
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&rep); err != nil {
		return exitWith(ExitFailure, "reloading the settings: the daemon's report does not parse: %v", err)
	}
	file := rep.File
	if file == "" {
		file = "no settings file (every setting at its default)"
	}
	switch {
	case len(rep.Applied) == 0 && len(rep.Restart) == 0:
		fmt.Fprintf(env.Stdout, "Reloaded %s: nothing changed.\n", file)
	case len(rep.Applied) > 0:
		fmt.Fprintf(env.Stdout, "Reloaded %s: applied %s.\n", file, strings.Join(rep.Applied, ", "))
	default:
		fmt.Fprintf(env.Stdout, "Reloaded %s: nothing it can apply live changed.\n", file)
	}
	if len(rep.Restart) > 0 {
		fmt.Fprintf(env.Stdout, "Changed, applied only when the daemon restarts (the old values stay in force until then): %s.\n",
			strings.Join(rep.Restart, ", "))
	}
	return nil
}
