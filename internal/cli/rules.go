package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

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

// Run implements Command: it checks the subcommand and its arguments, then
// dials the daemon and makes the subcommand's call.
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
	if asJSON && sub != "list" && sub != "ls" {
		return usagef("--json only goes with rules list")
	}
	var call rulesCall
	switch sub {
	case "list", "ls":
		call, err = rulesList(rest, asJSON)
	case "add":
		call, err = rulesAdd(rest, project, session)
	case "rm", "remove":
		call, err = rulesRemove(rest)
	default:
		return usagef("%s: rules needs list, add or rm", didYouMean(fmt.Sprintf("unknown subcommand %q", sub), sub, []string{"list", "add", "rm", "remove"}))
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

// rulesCall is a rules subcommand whose arguments have been checked: it
// makes its call to the daemon and prints the outcome.
type rulesCall func(context.Context, *Env, *daemonClient) error

// rulesList checks the arguments of rules list (rest, after "list").
func rulesList(rest []string, asJSON bool) (rulesCall, error) {
	if len(rest) > 0 {
		return nil, usagef("unexpected argument %q: rules list takes no arguments", rest[0])
	}
	return func(ctx context.Context, env *Env, dc *daemonClient) error {
		return listRules(ctx, env, dc, asJSON)
	}, nil
}

// rulesAdd checks the arguments of rules add (rest: PATTERN BEHAVIOR) and
// its scope flags.
func rulesAdd(rest []string, project, session string) (rulesCall, error) {
	switch {
	case len(rest) == 0:
		return nil, usagef("missing PATTERN: rules add needs PATTERN allow|deny|ask")
	case len(rest) == 1:
		return nil, usagef("missing BEHAVIOR: rules add needs PATTERN allow|deny|ask")
	case len(rest) > 2:
		return nil, usagef("unexpected argument %q: rules add takes PATTERN and BEHAVIOR (quote the pattern)", rest[2])
	}
	if strings.TrimSpace(rest[0]) == "" {
		return nil, usagef("PATTERN is empty")
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
		return nil, usagef("invalid BEHAVIOR %q: must be allow, deny or ask", rest[1])
	}
	switch {
	case project != "" && session != "":
		return nil, usagef("--project and --session exclude each other")
	case project != "":
		dir, err := checkDir("project", project)
		if err != nil {
			return nil, err
		}
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			dir = r
		}
		rule.Scope, rule.ScopeValue = v1.RuleScope_RULE_SCOPE_PROJECT, dir
	case session != "":
		rule.Scope, rule.ScopeValue = v1.RuleScope_RULE_SCOPE_SESSION, session
	}
	return func(ctx context.Context, env *Env, dc *daemonClient) error {
		res, err := dc.perms.AddRule(ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: rule}))
		if err != nil {
			var ce *connect.Error
			if errors.As(err, &ce) && ce.Code() == connect.CodeInvalidArgument {
				// The daemon judges the pattern: a bad one is bad usage.
				return usagef("%s", userMessage(ce.Message()))
			}
			if session != "" && connect.CodeOf(err) == connect.CodeNotFound {
				return noSession(session)
			}
			return dc.explain(err, "adding the rule")
		}
		r := res.Msg.Rule
		fmt.Fprintf(env.Stdout, "Added rule %s: %s %s (%s).\n", r.Id, behaviorName(r.Behavior), r.Pattern, scopeText(r))
		return nil
	}, nil
}

// rulesRemove checks the arguments of rules rm (rest: RULE_ID).
func rulesRemove(rest []string) (rulesCall, error) {
	if len(rest) == 0 || strings.TrimSpace(rest[0]) == "" {
		return nil, usagef("missing RULE_ID: rules rm needs the id that rules list shows")
	}
	if len(rest) > 1 {
		return nil, usagef("unexpected argument %q: rules rm takes one RULE_ID", rest[1])
	}
	id := rest[0]
	// A rule's id is the number rules list shows: anything else is a
	// mistyped argument, not a rule the daemon may or may not have.
	if n, err := strconv.ParseInt(id, 10, 64); err != nil || n <= 0 {
		return nil, usagef("invalid RULE_ID %q: must be the number rules list shows, such as 3", id)
	}
	return func(ctx context.Context, env *Env, dc *daemonClient) error {
		if _, err := dc.perms.RemoveRule(ctx, connect.NewRequest(&v1.RemoveRuleRequest{RuleId: id})); err != nil {
			if connect.CodeOf(err) == connect.CodeNotFound {
				return exitWith(ExitFailure, "no rule %s (claudectl rules list shows them)", id)
			}
			return dc.explain(err, fmt.Sprintf("removing rule %s", id))
		}
		fmt.Fprintf(env.Stdout, "Removed rule %s.\n", id)
		return nil
	}, nil
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
