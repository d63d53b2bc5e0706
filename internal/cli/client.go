package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
)

// defaultServer is where the client commands find the daemon by default
// (claudectl serve listens on 127.0.0.1:7777).
const defaultServer = "http://127.0.0.1:7777"

const clientFlagsHelp = `
The daemon's address comes from --server, else CLAUDECTL_SERVER, else
` + defaultServer + `. A bearer token comes from --token-file, else
CLAUDECTL_TOKEN, if either is set.

Exit status: 0 done, 1 the daemon failed or is unreachable, 2 bad usage.
`

// clientFlags are the flags every daemon client command takes.
type clientFlags struct {
	server    string
	tokenFile string
}

func (f *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.server, "server", "", "the daemon's `URL` (default $CLAUDECTL_SERVER or "+defaultServer+")")
	fs.StringVar(&f.tokenFile, "token-file", "", "send the bearer token read from `FILE` (default $CLAUDECTL_TOKEN)")
}

// daemonClient talks to the daemon.
type daemonClient struct {
	addr     string
	httpc    *http.Client
	sessions claudectlv1connect.SessionServiceClient
	perms    claudectlv1connect.PermissionServiceClient
}

// dial resolves the address and token and returns the clients. Close it.
func (f *clientFlags) dial(env *Env) (*daemonClient, error) {
	server, flagName := f.server, "--server"
	if server == "" {
		server, flagName = strings.TrimSpace(env.Getenv("CLAUDECTL_SERVER")), "CLAUDECTL_SERVER"
	}
	if server == "" {
		server = defaultServer
	}
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		if flagName == "--server" {
			return nil, badValue("server", f.server, "must be an http:// or https:// URL such as "+defaultServer)
		}
		return nil, usagef("invalid CLAUDECTL_SERVER %q: must be an http:// or https:// URL such as %s", env.Getenv("CLAUDECTL_SERVER"), defaultServer)
	}
	server = strings.TrimRight(u.String(), "/")
	var token string
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, badValue("token-file", f.tokenFile, err.Error())
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return nil, badValue("token-file", f.tokenFile, "the file is empty")
		}
	} else {
		token = strings.TrimSpace(env.Getenv("CLAUDECTL_TOKEN"))
	}
	var rt http.RoundTripper = &http.Transport{Proxy: http.ProxyFromEnvironment}
	if token != "" {
		rt = bearer{token: token, next: rt}
	}
	httpc := &http.Client{Transport: rt}
	return &daemonClient{
		addr:     server,
		httpc:    httpc,
		sessions: claudectlv1connect.NewSessionServiceClient(httpc, server),
		perms:    claudectlv1connect.NewPermissionServiceClient(httpc, server),
	}, nil
}

func (c *daemonClient) Close() { c.httpc.CloseIdleConnections() }

// bearer adds "Authorization: Bearer TOKEN" to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func (b bearer) CloseIdleConnections() {
	if c, ok := b.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// explain turns an RPC error into a readable one (exit status 1); what says
// what was being done ("sending to session X").
func (c *daemonClient) explain(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) || isDialError(err) {
		return exitWith(ExitFailure, "cannot reach the claudectl daemon at %s (start it with `claudectl serve`)", c.addr)
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return exitWith(ExitFailure, "%s: %v", what, err)
	}
	msg := ce.Message()
	switch ce.Code() {
	case connect.CodeNotFound:
		return exitWith(ExitFailure, "%s: not found: %s", what, msg)
	case connect.CodeInvalidArgument:
		return exitWith(ExitFailure, "%s: invalid argument: %s", what, msg)
	case connect.CodeFailedPrecondition:
		return exitWith(ExitFailure, "%s: not possible now: %s", what, msg)
	case connect.CodeUnauthenticated:
		return exitWith(ExitFailure, "the daemon at %s refused the request: missing or bad bearer token (set --token-file or CLAUDECTL_TOKEN)", c.addr)
	case connect.CodePermissionDenied:
		return exitWith(ExitFailure, "%s: permission denied: %s", what, msg)
	case connect.CodeUnavailable:
		return exitWith(ExitFailure, "%s: the daemon at %s is unavailable: %s", what, c.addr, msg)
	case connect.CodeDeadlineExceeded:
		return exitWith(ExitFailure, "%s: timed out: %s", what, msg)
	case connect.CodeCanceled:
		return exitWith(ExitFailure, "%s: canceled", what)
	case connect.CodeResourceExhausted, connect.CodeOutOfRange:
		return exitWith(ExitFailure, "%s: %s", what, msg)
	case connect.CodeUnimplemented:
		return exitWith(ExitFailure, "%s: the daemon at %s does not support this (is it claudectl serve, and as new as this claudectl?): %s", what, c.addr, msg)
	default:
		return exitWith(ExitFailure, "%s: daemon error (%s): %s", what, ce.Code(), msg)
	}
}

func isDialError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// parseClient parses args for a client command and returns the positional
// arguments; help is true after -h (usage printed).
func parseClient(env *Env, text string, fs *flag.FlagSet, args []string) (pos []string, help bool, err error) {
	pos, err = parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(env.Stdout, text, fs)
		return nil, true, nil
	}
	return pos, false, err
}

// SessionsCommand is "claudectl sessions": the daemon's sessions.
type SessionsCommand struct{ Env *Env }

// Name implements Command.
func (*SessionsCommand) Name() string { return "sessions" }

// Summary implements Command.
func (*SessionsCommand) Summary() string { return "list the daemon's sessions" }

const sessionsUsage = `Usage: claudectl sessions [flags]

Lists the sessions the daemon hosts: id, status, model, working directory
and cost so far; the session a fork was made from (PARENT) and why a failed
or closed session ended (ERROR, its first line: --json has all of it) when
any session has one.
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
	ParentID        string  `json:"parent_id,omitempty"`
	Error           string  `json:"error,omitempty"`
}

// sessionToJSON returns s as sessions --json prints it.
func sessionToJSON(s *v1.Session) sessionJSON {
	return sessionJSON{ID: s.Id, Status: statusName(s.Status), Model: s.Model, Cwd: s.Cwd,
		CostUSD: s.GetTotals().GetCostUsd(), ClaudeSessionID: s.ClaudeSessionId,
		PermissionMode: s.PermissionMode, Worker: s.Worker, ParentID: s.ParentId, Error: s.Error}
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
	list := make([]sessionJSON, 0, len(res.Msg.Sessions))
	for _, s := range res.Msg.Sessions {
		list = append(list, sessionToJSON(s))
	}
	if asJSON {
		return writeJSON(env.Stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(env.Stdout, "No sessions.")
		return nil
	}
	// PARENT and ERROR are shown only when a session has one; ERROR is
	// last, so that a long one does not widen the columns.
	var parents, errs bool
	for _, s := range list {
		parents = parents || s.ParentID != ""
		errs = errs || endedError(s) != ""
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	row := func(cells ...string) {
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	head := []string{"ID", "STATUS", "MODEL", "CWD", "COST"}
	if parents {
		head = append(head, "PARENT")
	}
	if errs {
		head = append(head, "ERROR")
	}
	row(head...)
	for _, s := range list {
		cells := []string{s.ID, s.Status, orDash(s.Model), s.Cwd, fmt.Sprintf("$%.4f", s.CostUSD)}
		if parents {
			cells = append(cells, orDash(s.ParentID))
		}
		if errs {
			cells = append(cells, orDash(endedError(s)))
		}
		row(cells...)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// statusName is SESSION_STATUS_IDLE as "idle".
func statusName(s v1.SessionStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "SESSION_STATUS_"))
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// SendCommand is "claudectl send ID TEXT".
type SendCommand struct{ Env *Env }

// Name implements Command.
func (*SendCommand) Name() string { return "send" }

// Summary implements Command.
func (*SendCommand) Summary() string { return "send a message to a daemon session" }

const sendUsage = `Usage: claudectl send [flags] SESSION_ID TEXT...

Sends TEXT to the session as a user message: a new turn, or queued behind
the running one. Several words are joined with spaces.
` + clientFlagsHelp

// Run implements Command.
func (c *SendCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	fs := newFlagSet("send")
	cf.register(fs)
	pos, help, err := parseClient(env, sendUsage, fs, args)
	if help || err != nil {
		return err
	}
	switch {
	case len(pos) == 0 || strings.TrimSpace(pos[0]) == "":
		return usagef("missing SESSION_ID: send needs SESSION_ID TEXT")
	case len(pos) == 1:
		return usagef("missing TEXT: send needs SESSION_ID TEXT")
	}
	id, text := pos[0], strings.Join(pos[1:], " ")
	if strings.TrimSpace(text) == "" {
		return usagef("TEXT is empty")
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	_, err = dc.sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: text}))
	if err != nil {
		return dc.explain(err, fmt.Sprintf("sending to session %s", id))
	}
	fmt.Fprintf(env.Stdout, "Sent to session %s.\n", id)
	return nil
}

// DecideCommand is "claudectl approve" or "claudectl deny".
type DecideCommand struct {
	Env   *Env
	Allow bool
}

// Name implements Command.
func (c *DecideCommand) Name() string {
	if c.Allow {
		return "approve"
	}
	return "deny"
}

// Summary implements Command.
func (c *DecideCommand) Summary() string {
	if c.Allow {
		return "allow a pending permission request"
	}
	return "deny a pending permission request"
}

const approveUsage = `Usage: claudectl approve [flags] REQUEST_ID

Allows the pending permission request. With --always, the CLI's suggested
permission is also stored as a rule. The first decision wins: if someone
else decided first, approve fails and says who.
` + clientFlagsHelp

const denyUsage = `Usage: claudectl deny [flags] REQUEST_ID

Denies the pending permission request, with --message telling Claude why.
The first decision wins: if someone else decided first, deny fails and
says who.
` + clientFlagsHelp

// Run implements Command.
func (c *DecideCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	name := c.Name()
	var cf clientFlags
	var always bool
	var message string
	fs := newFlagSet(name)
	text := denyUsage
	if c.Allow {
		text = approveUsage
		fs.BoolVar(&always, "always", false, "also store the CLI's suggested permission as a rule")
	} else {
		fs.StringVar(&message, "message", "", "tell Claude why, in `TEXT`")
	}
	cf.register(fs)
	pos, help, err := parseClient(env, text, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) == 0 || strings.TrimSpace(pos[0]) == "" {
		return usagef("missing REQUEST_ID: %s needs the id of a pending request", name)
	}
	if len(pos) > 1 {
		return usagef("unexpected argument %q: %s takes one REQUEST_ID", pos[1], name)
	}
	id := pos[0]
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	b := v1.Behavior_BEHAVIOR_DENY
	if c.Allow {
		b = v1.Behavior_BEHAVIOR_ALLOW
	}
	res, err := dc.perms.Decide(ctx, connect.NewRequest(&v1.DecideRequest{RequestId: id, Behavior: b,
		Message: message, Always: always, Client: "claudectl"}))
	if err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) && ce.Code() == connect.CodeFailedPrecondition && strings.Contains(ce.Message(), "already") {
			// The first decision wins; the message names the winner.
			return exitWith(ExitFailure, "too late: %s (the first decision wins)", strings.TrimPrefix(ce.Message(), "permission: "))
		}
		return dc.explain(err, fmt.Sprintf("deciding request %s", id))
	}
	d := res.Msg.Decision
	verb := "Denied"
	if c.Allow {
		verb = "Allowed"
	}
	fmt.Fprintf(env.Stdout, "%s %s", verb, id)
	if d.GetToolName() != "" {
		fmt.Fprintf(env.Stdout, " (%s in session %s)", d.ToolName, d.SessionId)
	}
	fmt.Fprintln(env.Stdout, ".")
	return nil
}

// RulesCommand is "claudectl rules list|add|rm".
type RulesCommand struct{ Env *Env }

// Name implements Command.
func (*RulesCommand) Name() string { return "rules" }

// Summary implements Command.
func (*RulesCommand) Summary() string { return "list, add or remove the daemon's permission rules" }

const rulesUsage = `Usage:
  claudectl rules list [flags]
  claudectl rules add [flags] PATTERN allow|deny|ask [--project DIR | --session ID]
  claudectl rules rm [flags] RULE_ID

Manages the daemon's permission rules. PATTERN is in Claude Code's form:
"Bash(git status:*)", "Read(./src/**)". A rule is global unless scoped to a
project directory (--project) or a session (--session).
` + clientFlagsHelp

// Run implements Command.
func (c *RulesCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var asJSON bool
	var project, session string
	fs := newFlagSet("rules")
	fs.BoolVar(&asJSON, "json", false, "list: print the rules as a JSON array")
	fs.StringVar(&project, "project", "", "add: scope the rule to the project `DIR`")
	fs.StringVar(&session, "session", "", "add: scope the rule to the session `ID`")
	cf.register(fs)
	pos, help, err := parseClient(env, rulesUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("missing subcommand: rules needs list, add or rm")
	}
	sub, rest := pos[0], pos[1:]
	if sub != "add" && (project != "" || session != "") {
		return usagef("--project and --session only go with rules add")
	}
	var req func(*daemonClient) error
	switch sub {
	case "list", "ls":
		if len(rest) > 0 {
			return usagef("unexpected argument %q: rules list takes no arguments", rest[0])
		}
		req = func(dc *daemonClient) error { return listRules(ctx, env, dc, asJSON) }
	case "add":
		switch {
		case len(rest) == 0:
			return usagef("missing PATTERN: rules add needs PATTERN allow|deny|ask")
		case len(rest) == 1:
			return usagef("missing BEHAVIOR: rules add needs PATTERN allow|deny|ask")
		case len(rest) > 2:
			return usagef("unexpected argument %q: rules add takes PATTERN and BEHAVIOR (quote the pattern)", rest[2])
		}
		if strings.TrimSpace(rest[0]) == "" {
			return usagef("PATTERN is empty")
		}
		rule := &v1.Rule{Pattern: rest[0], Scope: v1.RuleScope_RULE_SCOPE_GLOBAL}
		switch rest[1] {
		case "allow":
			rule.Behavior = v1.Behavior_BEHAVIOR_ALLOW
		case "deny":
			rule.Behavior = v1.Behavior_BEHAVIOR_DENY
		case "ask":
			rule.Behavior = v1.Behavior_BEHAVIOR_ASK
		default:
			return usagef("invalid BEHAVIOR %q: must be allow, deny or ask", rest[1])
		}
		switch {
		case project != "" && session != "":
			return usagef("--project and --session exclude each other")
		case project != "":
			dir, err := checkDir("project", project)
			if err != nil {
				return err
			}
			if r, err := filepath.EvalSymlinks(dir); err == nil {
				dir = r
			}
			rule.Scope, rule.ScopeValue = v1.RuleScope_RULE_SCOPE_PROJECT, dir
		case session != "":
			rule.Scope, rule.ScopeValue = v1.RuleScope_RULE_SCOPE_SESSION, session
		}
		req = func(dc *daemonClient) error {
			res, err := dc.perms.AddRule(ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: rule}))
			if err != nil {
				return dc.explain(err, "adding the rule")
			}
			r := res.Msg.Rule
			fmt.Fprintf(env.Stdout, "Added rule %s: %s %s (%s).\n", r.Id, behaviorName(r.Behavior), r.Pattern, scopeText(r))
			return nil
		}
	case "rm", "remove":
		if len(rest) == 0 || strings.TrimSpace(rest[0]) == "" {
			return usagef("missing RULE_ID: rules rm needs the id that rules list shows")
		}
		if len(rest) > 1 {
			return usagef("unexpected argument %q: rules rm takes one RULE_ID", rest[1])
		}
		id := rest[0]
		req = func(dc *daemonClient) error {
			if _, err := dc.perms.RemoveRule(ctx, connect.NewRequest(&v1.RemoveRuleRequest{RuleId: id})); err != nil {
				return dc.explain(err, fmt.Sprintf("removing rule %s", id))
			}
			fmt.Fprintf(env.Stdout, "Removed rule %s.\n", id)
			return nil
		}
	default:
		return usagef("unknown subcommand %q: rules needs list, add or rm", sub)
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	return req(dc)
}

// ruleJSON is one rule in rules list --json.
type ruleJSON struct {
	ID       string `json:"id"`
	Pattern  string `json:"pattern"`
	Behavior string `json:"behavior"`
	Scope    string `json:"scope"`
	Value    string `json:"scope_value,omitempty"`
}

func listRules(ctx context.Context, env *Env, dc *daemonClient, asJSON bool) error {
	res, err := dc.perms.ListRules(ctx, connect.NewRequest(&v1.ListRulesRequest{}))
	if err != nil {
		return dc.explain(err, "listing rules")
	}
	list := make([]ruleJSON, 0, len(res.Msg.Rules))
	for _, r := range res.Msg.Rules {
		scope := strings.ToLower(strings.TrimPrefix(r.Scope.String(), "RULE_SCOPE_"))
		if r.Scope == v1.RuleScope_RULE_SCOPE_UNSPECIFIED {
			scope = "global"
		}
		list = append(list, ruleJSON{ID: r.Id, Pattern: r.Pattern, Behavior: behaviorName(r.Behavior), Scope: scope, Value: r.ScopeValue})
	}
	if asJSON {
		return writeJSON(env.Stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(env.Stdout, "No rules.")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBEHAVIOR\tPATTERN\tSCOPE")
	for i, r := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ID, r.Behavior, r.Pattern, scopeText(res.Msg.Rules[i]))
	}
	return tw.Flush()
}

func behaviorName(b v1.Behavior) string {
	return strings.ToLower(strings.TrimPrefix(b.String(), "BEHAVIOR_"))
}

func scopeText(r *v1.Rule) string {
	switch r.Scope {
	case v1.RuleScope_RULE_SCOPE_PROJECT:
		return "project " + r.ScopeValue
	case v1.RuleScope_RULE_SCOPE_SESSION:
		return "session " + r.ScopeValue
	}
	return "global"
}
