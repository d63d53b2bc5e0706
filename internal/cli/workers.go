package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// WorkersCommand is "claudectl workers": the daemon's registered remote
// workers.
type WorkersCommand struct{ Env *Env }

// Name implements Command.
func (*WorkersCommand) Name() string { return "workers" }

// Summary implements Command.
func (*WorkersCommand) Summary() string { return "list the daemon's remote workers" }

const workersUsage = `Usage: claudectl workers [flags]

Lists the remote workers registered with the daemon ("claudectl worker
--name N --label k=v --capacity C"): name, state (connected; reconnecting,
since when; lost: gone longer than its grace period, its sessions failed),
load (sessions running, and spare CLIs waiting on a worker started with
--spares, / capacity), labels, the version of its Claude Code and the
sessions it runs. A session asks for one with worker set to its name,
or with worker_labels.
` + clientFlagsHelp

// workerJSON is one worker in workers --json.
type workerJSON struct {
	Name       string            `json:"name"`
	State      string            `json:"state"`
	Since      time.Time         `json:"since"`
	LastSeen   time.Time         `json:"last_seen"`
	Labels     map[string]string `json:"labels,omitempty"`
	Capacity   int32             `json:"capacity"`
	Sessions   []string          `json:"sessions"`
	CLIVersion string            `json:"cli_version,omitempty"`
	Host       string            `json:"host,omitempty"`
	PID        int32             `json:"pid,omitempty"`
	Address    string            `json:"address,omitempty"`
	GraceSecs  int64             `json:"grace_seconds"`
	// TakesSpares: started with --spares; Spares: spare CLIs waiting on
	// it now (not in Sessions; each holds a slot of Capacity).
	TakesSpares bool  `json:"takes_spares"`
	Spares      int32 `json:"spares"`
}

func workerStateName(s v1.WorkerState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "WORKER_STATE_"))
}

func workerToJSON(w *v1.Worker) workerJSON {
	return workerJSON{Name: w.Name, State: workerStateName(w.State), Since: w.GetStateSince().AsTime(),
		LastSeen: w.GetLastSeen().AsTime(), Labels: w.Labels, Capacity: w.Capacity,
		Sessions: append([]string{}, w.SessionIds...), CLIVersion: w.CliVersion, Host: w.Host, PID: w.Pid,
		Address: w.Address, GraceSecs: w.GraceSeconds, TakesSpares: w.TakesSpares, Spares: w.Spares}
}

// workerStateText is the STATE cell: "connected", "reconnecting 12s",
// "lost 3m".
func workerStateText(w workerJSON, now time.Time) string {
	if w.State == "connected" {
		return w.State
	}
	return fmt.Sprintf("%s %s", w.State, now.Sub(w.Since).Round(time.Second))
}

func labelsText(labels map[string]string) string {
	kv := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kv = append(kv, k+"="+labels[k])
	}
	return strings.Join(kv, ",")
}

// Run implements Command.
func (c *WorkersCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var asJSON bool
	fs := newFlagSet("workers")
	fs.BoolVar(&asJSON, "json", false, "print the workers as a JSON array")
	cf.register(fs)
	pos, help, err := parseClient(env, workersUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: workers takes no arguments", pos[0])
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	res, err := dc.workers.ListWorkers(ctx, connect.NewRequest(&v1.ListWorkersRequest{}))
	if err != nil {
		return dc.explain(err, "listing workers")
	}
	list := make([]workerJSON, 0, len(res.Msg.Workers))
	for _, w := range res.Msg.Workers {
		list = append(list, workerToJSON(w))
	}
	if asJSON {
		return writeJSON(env.Stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(env.Stdout, "No workers. Start one with: claudectl worker --connect ws://HOST:PORT/v1/worker --token-file FILE --name NAME")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tLOAD\tLABELS\tCLI\tHOST\tSESSIONS")
	for _, w := range list {
		sessions := orDash(strings.Join(w.Sessions, ","))
		if w.Spares > 0 {
			sessions += fmt.Sprintf(" (+%d spare)", w.Spares)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", w.Name, workerStateText(w, now), len(w.Sessions)+int(w.Spares), w.Capacity,
			orDash(labelsText(w.Labels)), orDash(w.CLIVersion), orDash(w.Host), sessions)
	}
	return tw.Flush()
}
