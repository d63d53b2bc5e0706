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
package permission
