package permission

import (
	"errors"

	"github.com/claudectl/claudectl/claude"
)

// RulesFromSuggestions turns the permission_suggestions of a request into
// the rules to store when a person answers "always allow", for a request
// made in at. Send the suggestions back to the CLI too, as the allow's
// UpdatedPermissions, so the running process applies them at once.
//
//   - addRules becomes one rule per entry, with the entry's behavior
//     (allow when empty).
//   - setMode acceptEdits becomes allow Edit(./**): edits anywhere in the
//     project, which is what that mode grants.
//   - The destination picks the scope: userSettings is global,
//     projectSettings and localSettings are the project of at, session and
//     cliArg (and none) are the session of at.
//
// Suggestions that cannot be expressed as rules (other modes, replaceRules,
// removeRules, directories) are returned in skipped. A suggested rule that
// does not parse is skipped too, and its error joined into err; the rules
// that do parse are returned all the same.
func RulesFromSuggestions(sugs []claude.PermissionUpdate, at Scope) (rules []Rule, skipped []claude.PermissionUpdate, err error) {
	var errs []error
	for _, u := range sugs {
		scope := scopeFor(u.Destination, at)
		switch {
		case u.Type == "addRules":
			b := Behavior(u.Behavior)
			if b == None {
				b = Allow
			}
			for _, pr := range u.Rules {
				spec := pr.ToolName
				if pr.RuleContent != "" {
					spec += "(" + pr.RuleContent + ")"
				}
				r, e := NewRule(spec, b, scope)
				if e != nil {
					errs = append(errs, e)
					skipped = append(skipped, claude.PermissionUpdate{Type: u.Type, Rules: []claude.PermissionRule{pr},
						Behavior: u.Behavior, Destination: u.Destination})
					continue
				}
				rules = append(rules, r)
			}
		case u.Type == "setMode" && u.Mode == claude.PermissionAcceptEdits:
			r, _ := NewRule("Edit(./**)", Allow, scope)
			rules = append(rules, r)
		default:
			skipped = append(skipped, u)
		}
	}
	return rules, skipped, errors.Join(errs...)
}

func scopeFor(destination string, at Scope) Scope {
	switch destination {
	case "userSettings":
		return Scope{}
	case "projectSettings", "localSettings":
		return Scope{ProjectDir: at.ProjectDir}
	}
	return Scope{SessionID: at.SessionID}
}
