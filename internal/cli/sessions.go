package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// SessionsCommand is "claudectl sessions": the daemon's sessions.
type SessionsCommand struct{ Env *Env }

// Name implements Command.
func (*SessionsCommand) Name() string { return "sessions" }

// Summary implements Command.
func (*SessionsCommand) Summary() string { return "list the daemon's sessions" }

const sessionsUsage = `Usage: claudectl sessions [flags]

Lists the sessions the daemon hosts: id, status, model, working directory
and cost so far; its title (TITLE: the title Claude Code gave it, else its
first prompt, quoted) once a session has one; the remote worker that runs it (WORKER) when any session
runs on one, or "terminal" for a claude started by hand whose requests come
through claudectl's hook (claudectl hook install), listed read-only; the session a fork was made from (PARENT) and why a failed
or closed session ended (ERROR, its first line: --json has all of it) when
any session has one; for a waiting session, the tool and the id of the
permission request it waits on (WAITING FOR: claudectl approve or deny
answers it, claudectl pending lists them all). When the daemon judges its Claude Code less than
likely compatible (degraded: see claudectl doctor --server), a line above
the table says why.
` + clientFlagsHelp

// sessionJSON is one session in sessions --json.
type sessionJSON struct {
	ID              string  `json:"id"`
	Status          string  `json:"status"`
	Model           string  `json:"model"`
	Cwd             string  `json:"cwd"`
	CostUSD         float64 `json:"cost_usd"`
	ClaudeSessionID string  `json:"claude_session_id,omitempty"`
	PermissionMode  string  `json:"permission_mode,omitempty"`
	Worker          string  `json:"worker,omitempty"`
	// WorkerName is the remote worker that runs it (or ran it last).
	WorkerName string `json:"worker_name,omitempty"`
	ParentID   string `json:"parent_id,omitempty"`
	Error      string `json:"error,omitempty"`
	// Title is the title Claude Code gave the session; FirstPrompt its
	// first prompt, which stands for it until it has one.
	Title       string `json:"title,omitempty"`
	FirstPrompt string `json:"first_prompt,omitempty"`
	// WaitingFor are the permission requests the session waits on.
	WaitingFor []waitingJSON `json:"waiting_for,omitempty"`
}

// waitingJSON is a request a session waits on, in sessions --json.
type waitingJSON struct {
	RequestID string `json:"request_id"`
	Tool      string `json:"tool"`
}

// waitingText says what a session waits for: "Bash (request 3f2a…)".
func waitingText(ws []waitingJSON) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("%s (request %s)", w.Tool, w.RequestID)
	}
	return strings.Join(parts, ", ")
}

// sessionToJSON returns s as sessions --json prints it.
func sessionToJSON(s *v1.Session) sessionJSON {
	return sessionJSON{ID: s.Id, Status: statusName(s.Status), Model: s.Model, Cwd: s.Cwd,
		CostUSD: s.GetTotals().GetCostUsd(), ClaudeSessionID: s.ClaudeSessionId,
		PermissionMode: s.PermissionMode, Worker: s.Worker, WorkerName: s.WorkerName, ParentID: s.ParentId, Error: s.Error,
		Title: s.Title, FirstPrompt: s.FirstPrompt}
}

// endedError returns the first line of the error of a failed or closed
// session, "" for a session that runs (its error is from an earlier CLI).
func endedError(s sessionJSON) string {
	if s.Status != "failed" && s.Status != "closed" {
		return ""
	}
	msg, _, _ := strings.Cut(strings.TrimSpace(s.Error), "\n")
	msg = strings.ReplaceAll(msg, "\t", " ") // a tab would start a cell
	if r := []rune(msg); len(r) > 100 {
		msg = string(r[:99]) + "…"
	}
	return msg
}

// Run implements Command.
func (c *SessionsCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var asJSON bool
	fs := newFlagSet("sessions")
	fs.BoolVar(&asJSON, "json", false, "print the sessions as a JSON array")
	cf.register(fs)
	pos, help, err := parseClient(env, sessionsUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: sessions takes no arguments", pos[0])
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	res, err := dc.sessions.ListSessions(ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
	if err != nil {
		return dc.explain(err, "listing sessions")
	}
	// What the waiting sessions wait for (an older daemon may not say).
	waiting := map[string][]waitingJSON{}
	if pres, err := dc.perms.ListPending(ctx, connect.NewRequest(&v1.ListPendingRequest{})); err == nil {
		for _, r := range pres.Msg.Requests {
			waiting[r.SessionId] = append(waiting[r.SessionId], waitingJSON{RequestID: r.RequestId, Tool: r.ToolName})
		}
	}
	list := make([]sessionJSON, 0, len(res.Msg.Sessions))
	for _, s := range res.Msg.Sessions {
		j := sessionToJSON(s)
		j.WaitingFor = waiting[s.Id]
		list = append(list, j)
	}
	if asJSON {
		return writeJSON(env.Stdout, list)
	}
	if h := dc.healthHeader(ctx); h != "" {
		fmt.Fprintln(env.Stdout, h)
	}
	if len(list) == 0 {
		fmt.Fprintln(env.Stdout, "No sessions.")
		return nil
	}
	// PARENT and ERROR are shown only when a session has one; ERROR is
	// last, so that a long one does not widen the columns. MODE, the
	// permission mode in effect as Claude Code reports it, only when a
	// session is not in the default one.
	var parents, errs, waits, remote, modes, titles bool
	for _, s := range list {
		titles = titles || titleText(s) != ""
		modes = modes || cmp.Or(s.PermissionMode, "default") != "default"
		remote = remote || (s.Worker != "" && s.Worker != "local")
		parents = parents || s.ParentID != ""
		errs = errs || endedError(s) != ""
		waits = waits || len(s.WaitingFor) > 0
	}
	var rows [][]string
	row := func(cells ...string) { rows = append(rows, cells) }
	head := []string{"ID", "STATUS", "MODEL", "CWD", "COST"}
	if modes {
		head = slices.Insert(head, 3, "MODE")
	}
	if titles {
		head = append(head, "TITLE")
	}
	if remote {
		head = append(head, "WORKER")
	}
	if parents {
		head = append(head, "PARENT")
	}
	if waits {
		head = append(head, "WAITING FOR")
	}
	if errs {
		head = append(head, "ERROR")
	}
	row(head...)
	for _, s := range list {
		cells := []string{s.ID, s.Status, cmp.Or(s.Model, "default"), s.Cwd, fmt.Sprintf("$%.4f", s.CostUSD)} // as the page says
		if modes {
			cells = slices.Insert(cells, 3, cmp.Or(s.PermissionMode, "default"))
		}
		if titles {
			cells = append(cells, orDash(titleText(s)))
		}
		if remote {
			cells = append(cells, cmp.Or(s.WorkerName, s.Worker))
		}
		if parents {
			cells = append(cells, orDash(s.ParentID))
		}
		if waits {
			cells = append(cells, orDash(waitingText(s.WaitingFor)))
		}
		if errs {
			cells = append(cells, orDash(endedError(s)))
		}
		row(cells...)
	}
	return writeTable(env.Stdout, rows)
}

// titleText is what the TITLE column says of a session: the title Claude
// Code gave it, else its first prompt (quoted), clipped to one short line.
func titleText(s sessionJSON) string {
	t := s.Title
	if t == "" && s.FirstPrompt != "" {
		t = "“" + s.FirstPrompt + "”"
	}
	t = strings.Join(strings.Fields(t), " ") // no tab or newline in a cell
	if r := []rune(t); len(r) > 48 {
		t = string(r[:47]) + "…"
	}
	return t
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
