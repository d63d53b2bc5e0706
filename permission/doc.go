// Package permission decides the CLI's tool-use requests for the daemon:
// rules first, then people.
//
// An [Engine] holds rules in Claude Code's own syntax ("Bash(git status:*)",
// "Edit(src/**)", "mcp__github") with a behavior (allow, deny, ask) and a
// scope (global, a project directory, a session), and evaluates each
// can_use_tool request before anyone is asked: deny beats ask beats allow.
// What no rule settles goes to a [Broker], which shows it to every client
// watching the session, takes the first valid decision, and denies the
// tool when nobody decides in time. [RulesFromSuggestions] turns the CLI's
// permission_suggestions into the rules to store for "always allow".
//
// A daemon's permission callback looks like this:
//
//	func (d *daemon) canUseTool(ctx context.Context, s *session, req *claude.PermissionRequest) (claude.PermissionResult, error) {
//		at := permission.Scope{ProjectDir: s.cwd, SessionID: s.id}
//		switch dec := d.rules.Evaluate(req, at); dec.Behavior {
//		case permission.Allow:
//			d.audit(req, "allow", "rule", dec.Rule)
//			return claude.Allow(), nil
//		case permission.Deny:
//			d.audit(req, "deny", "rule", dec.Rule)
//			return claude.Deny("Denied by rule " + dec.Rule.String()), nil
//		}
//		// ask, or no rule: a person decides. ctx ends on control_cancel_request.
//		ch, err := d.broker.Submit(ctx, s.id, req)
//		if err != nil {
//			return claude.PermissionResult{}, err
//		}
//		r := <-ch
//		if r.Outcome == permission.Withdrawn { // the CLI took it back, or the daemon is stopping
//			return claude.PermissionResult{}, fmt.Errorf("withdrawn by %s", r.By)
//		}
//		d.audit(req, r.Result, r.By, nil)
//		return r.Result, nil
//	}
//
// A client's "always allow" is an allow decision that also stores the
// request's suggestions:
//
//	rules, _, _ := permission.RulesFromSuggestions(req.Suggestions, at)
//	// store each rule, then d.rules.Add(rules...)
//	res := claude.Allow()
//	res.UpdatedPermissions = req.Suggestions
//	err := d.broker.Resolve(req.RequestID, res, "client:alice")
//
// # How long a decision takes
//
// Matching never backtracks. In a Bash, Agent or Skill pattern the pieces
// between the stars each match text of their own length, so each is looked
// for once, where it first occurs after the one before; in a file pattern
// the runs of segments between the "**"s are looked for the same way, each
// segment matched as [path.Match] does. A rule thus takes at worst time
// proportional to the length of its pattern times the length of what it is
// matched against, and in practice about linear in the latter: no
// pattern, however many stars it has, can make a decision slow, as
// "Bash(*a*a*a*a*a*a*a*b)" made the backtracking matcher this replaced.
// A Bash rule matched against the whole line is matched once, however many
// parts the line has.
//
// Sizes are bounded too:
//
//   - A pattern (the text between a rule's parentheses) has at most
//     [MaxPatternLen] bytes, 4 KiB: [ParseRule], [NewRule] and [Engine.Add]
//     refuse a longer one with a [*SyntaxError] naming the rule and the
//     limit.
//   - Patterns are matched only against a Bash command, URL, agent type or
//     skill name of at most [MaxCommandLen] bytes (1 MiB) and a file path of
//     at most [MaxPathLen] bytes (4 KiB, PATH_MAX on Linux); nothing is
//     truncated. A request whose input is longer is decided by the rules without a pattern as far as the
//     patterns could not have changed the outcome (a deny rule for the
//     whole tool denies it; an ask rule for it asks unless a deny rule has a
//     pattern; an allow rule allows it unless a deny or ask rule has one)
//     and otherwise goes to a person, with a reason saying why.
//
// The worst patterns we know of (BenchmarkMatchWorst) take about 30 ms to
// match a 4 KiB path and 10 ms to match a 1 MiB command on one core; an
// ordinary rule takes a few microseconds at most (BenchmarkMatch).
package permission
