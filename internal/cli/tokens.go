package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// TokensCommand is "claudectl tokens create|list|revoke".
type TokensCommand struct{ Env *Env }

// Name implements Command.
func (*TokensCommand) Name() string { return "tokens" }

// Summary implements Command.
func (*TokensCommand) Summary() string {
	return "create, list or revoke the daemon's API tokens (admin)"
}

const tokensUsage = `Usage:
  claudectl tokens create NAME --role ROLE [--user USER] [--expires 30d] [--dir PATH]... [--session ID]
  claudectl tokens list [--all] [--json]
  claudectl tokens revoke NAME

Manages who may use the daemon. A token belongs to a user and has a role:
  viewer    reads sessions, events, pending requests, rules and decisions
  operator  viewer + creates, prompts, interrupts, resumes, forks and closes sessions
  approver  viewer + answers permission requests
  admin     everything, rules, tokens and the audit trail included
  worker    connects a remote worker (claudectl worker), and nothing else
--dir (repeatable) limits a token to sessions in those directories, --session
to one session. create prints the token, once, and nothing else on standard
output: the daemon keeps only its hash. A revoked token is refused from its
next request on. These commands need an admin token (the daemon's own token
file is one). See docs/security.md.
` + clientFlagsHelp

// Run implements Command.
func (c *TokensCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var asJSON, all bool
	var role, user, expires, session string
	var dirs []string
	fs := newFlagSet("tokens")
	fs.StringVar(&role, "role", "", "create: the token's `ROLE` (viewer, operator, approver, admin, worker)")
	fs.StringVar(&user, "user", "", "create: the `USER` it belongs to (default: its name)")
	fs.StringVar(&expires, "expires", "", "create: how long it works (`DURATION`: 90m, 12h, 30d; default forever)")
	fs.Var(stringList{name: "dir", values: &dirs}, "dir", "create: limit it to sessions in `PATH` or below (repeatable)")
	fs.StringVar(&session, "session", "", "create: limit it to the session `ID`")
	fs.BoolVar(&asJSON, "json", false, "list: print the tokens as a JSON array")
	fs.BoolVar(&all, "all", false, "list: revoked tokens too")
	cf.register(fs)
	pos, help, err := parseClient(env, tokensUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("missing subcommand: tokens needs create, list or revoke")
	}
	sub, rest := pos[0], pos[1:]
	creating := role != "" || user != "" || expires != "" || len(dirs) > 0 || session != ""
	if creating && sub != "create" {
		return usagef("--role, --user, --expires, --dir and --session only go with tokens create")
	}
	if (asJSON || all) && sub != "list" && sub != "ls" {
		return usagef("--json and --all only go with tokens list")
	}
	var call func(context.Context, *Env, *daemonClient) error
	switch sub {
	case "create":
		call, err = tokensCreate(rest, role, user, expires, dirs, session)
	case "list", "ls":
		if len(rest) > 0 {
			return usagef("unexpected argument %q: tokens list takes no arguments", rest[0])
		}
		call = func(ctx context.Context, env *Env, dc *daemonClient) error {
			return listTokens(ctx, env, dc, all, asJSON)
		}
	case "revoke", "rm":
		switch {
		case len(rest) == 0:
			return usagef("missing NAME: tokens revoke needs the token's name (claudectl tokens list shows them)")
		case len(rest) > 1:
			return usagef("unexpected argument %q: tokens revoke takes one NAME", rest[1])
		}
		name := rest[0]
		call = func(ctx context.Context, env *Env, dc *daemonClient) error {
			res, err := dc.auth.RevokeToken(ctx, connect.NewRequest(&v1.RevokeTokenRequest{Name: name}))
			if err != nil {
				return dc.explain(err, fmt.Sprintf("revoking token %q", name))
			}
			fmt.Fprintf(env.Stderr, "Revoked token %q of user %s: it is refused from now on.\n", res.Msg.Token.Name, res.Msg.Token.User)
			return nil
		}
	default:
		return usagef("%s: tokens needs create, list or revoke", didYouMean(fmt.Sprintf("unknown subcommand %q", sub), sub, []string{"create", "list", "revoke"}))
	}
	if err != nil {
		return err
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	return call(ctx, env, dc)
}

// parseLifetime reads --expires: a Go duration ("90m", "12h") or a number
// of days ("30d").
func parseLifetime(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil {
			return 0, badValue("expires", s, "a duration such as 90m, 12h or 30d")
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, badValue("expires", s, "a duration such as 90m, 12h or 30d")
	}
	return d, nil
}

func tokensCreate(rest []string, role, user, expires string, dirs []string, session string) (func(context.Context, *Env, *daemonClient) error, error) {
	switch {
	case len(rest) == 0:
		return nil, usagef("missing NAME: tokens create needs NAME --role ROLE")
	case len(rest) > 1:
		return nil, usagef("unexpected argument %q: tokens create takes one NAME", rest[1])
	case role == "":
		return nil, usagef("missing --role: one of viewer, operator, approver, admin, worker")
	}
	req := &v1.CreateTokenRequest{Name: rest[0], Role: role, User: user, SessionId: session}
	if expires != "" {
		d, err := parseLifetime(expires)
		if err != nil {
			return nil, err
		}
		if d <= 0 {
			return nil, badValue("expires", expires, "is in the past: give how long from now the token works (30d), or leave it out for never")
		}
		req.ExpiresInSeconds = int64(max(1, d/time.Second))
	}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, badValue("dir", d, err.Error())
		}
		req.Dirs = append(req.Dirs, abs)
	}
	return func(ctx context.Context, env *Env, dc *daemonClient) error {
		res, err := dc.auth.CreateToken(ctx, connect.NewRequest(req))
		if err != nil {
			return dc.explain(err, fmt.Sprintf("creating token %q", req.Name))
		}
		fmt.Fprintln(env.Stdout, res.Msg.Secret)
		t := res.Msg.Token
		fmt.Fprintf(env.Stderr, "Created token %q for user %s, role %s%s%s. It is shown this once: the daemon keeps only its hash.\n",
			t.Name, t.User, t.Role, tokenScopeText(t.Dirs, t.SessionId), expiryText(t.ExpiresAt))
		return nil
	}, nil
}

func tokenScopeText(dirs []string, session string) string {
	var s string
	if len(dirs) > 0 {
		s += ", in " + strings.Join(dirs, ", ")
	}
	if session != "" {
		s += ", session " + session
	}
	return s
}

func expiryText(t *timestamppb.Timestamp) string {
	if t == nil {
		return ", never expires"
	}
	return ", expires " + t.AsTime().Local().Format(time.DateTime)
}

// tokenJSON is one token in tokens list --json.
type tokenJSON struct {
	Name       string     `json:"name"`
	User       string     `json:"user"`
	Role       string     `json:"role"`
	Dirs       []string   `json:"dirs,omitempty"`
	SessionID  string     `json:"session_id,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	CreatedBy  string     `json:"created_by"`
	CreatedAt  *time.Time `json:"created_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	RevokedBy  string     `json:"revoked_by,omitempty"`
}

func optTime(t *timestamppb.Timestamp) *time.Time {
	if t == nil {
		return nil
	}
	v := t.AsTime()
	return &v
}

func timeCell(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.Local().Format(time.DateTime)
}

func listTokens(ctx context.Context, env *Env, dc *daemonClient, all, asJSON bool) error {
	res, err := dc.auth.ListTokens(ctx, connect.NewRequest(&v1.ListTokensRequest{IncludeRevoked: all}))
	if err != nil {
		return dc.explain(err, "listing tokens")
	}
	list := make([]tokenJSON, 0, len(res.Msg.Tokens))
	for _, t := range res.Msg.Tokens {
		list = append(list, tokenJSON{Name: t.Name, User: t.User, Role: t.Role, Dirs: t.Dirs, SessionID: t.SessionId,
			ExpiresAt: optTime(t.ExpiresAt), CreatedBy: t.CreatedBy, CreatedAt: optTime(t.CreatedAt),
			LastUsedAt: optTime(t.LastUsedAt), RevokedAt: optTime(t.RevokedAt), RevokedBy: t.RevokedBy})
	}
	if asJSON {
		return writeJSON(env.Stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(env.Stdout, "No tokens but the daemon's own. Make one with: claudectl tokens create NAME --role ROLE")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tUSER\tROLE\tSCOPE\tEXPIRES\tLAST USED\tCREATED BY")
	for _, t := range list {
		scope := strings.TrimPrefix(tokenScopeText(t.Dirs, t.SessionID), ", ")
		expires := timeCell(t.ExpiresAt, "never")
		if t.RevokedAt != nil {
			expires = "revoked " + timeCell(t.RevokedAt, "")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.User, t.Role, orDash(scope), expires,
			timeCell(t.LastUsedAt, "never"), t.CreatedBy)
	}
	return tw.Flush()
}

// WhoamiCommand is "claudectl whoami".
type WhoamiCommand struct{ Env *Env }

// Name implements Command.
func (*WhoamiCommand) Name() string { return "whoami" }

// Summary implements Command.
func (*WhoamiCommand) Summary() string { return "say who the daemon takes this client's token for" }

const whoamiUsage = `Usage: claudectl whoami [flags]

Says which token the daemon takes this client's for: its user, name, role,
scopes, expiry and what it may do.
` + clientFlagsHelp

// Run implements Command.
func (c *WhoamiCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var asJSON bool
	fs := newFlagSet("whoami")
	fs.BoolVar(&asJSON, "json", false, "print it as a JSON object")
	cf.register(fs)
	pos, help, err := parseClient(env, whoamiUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: whoami takes no arguments", pos[0])
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	res, err := dc.auth.Whoami(ctx, connect.NewRequest(&v1.WhoamiRequest{}))
	if err != nil {
		return dc.explain(err, "asking who this token is")
	}
	m := res.Msg
	if asJSON {
		return writeJSON(env.Stdout, struct {
			User        string     `json:"user"`
			Token       string     `json:"token"`
			Role        string     `json:"role"`
			Dirs        []string   `json:"dirs,omitempty"`
			SessionID   string     `json:"session_id,omitempty"`
			Permissions []string   `json:"permissions"`
			ExpiresAt   *time.Time `json:"expires_at,omitempty"`
		}{m.User, m.Token, m.Role, m.Dirs, m.SessionId, m.Permissions, optTime(m.ExpiresAt)})
	}
	fmt.Fprintf(env.Stdout, "user %s, token %q, role %s%s%s\nmay: %s\n", m.User, m.Token, m.Role, tokenScopeText(m.Dirs, m.SessionId),
		expiryText(m.ExpiresAt), strings.Join(m.Permissions, ", "))
	return nil
}
