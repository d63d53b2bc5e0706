package permission_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/permission"
)

func TestRulesFromSuggestions(t *testing.T) {
	at := permission.Scope{ProjectDir: "/p", SessionID: "s1"}
	sugs := []claude.PermissionUpdate{
		{Type: "addRules", Rules: []claude.PermissionRule{{ToolName: "Bash", RuleContent: "git status:*"}, {ToolName: "WebSearch"}},
			Behavior: "allow", Destination: "localSettings"},
		{Type: "addRules", Rules: []claude.PermissionRule{{ToolName: "Read", RuleContent: "//tmp/**"}}, Destination: "session"},
		{Type: "addRules", Rules: []claude.PermissionRule{{ToolName: "Bash", RuleContent: "rm:*"}}, Behavior: "deny", Destination: "userSettings"},
		{Type: "setMode", Mode: claude.PermissionAcceptEdits, Destination: "session"},
		{Type: "setMode", Mode: claude.PermissionBypassPermissions, Destination: "session"},
		{Type: "addDirectories", Directories: []string{"/tmp"}, Destination: "session"},
		{Type: "addRules", Rules: []claude.PermissionRule{{ToolName: "WebFetch", RuleContent: "example.com"}}, Destination: "session"},
	}
	rules, skipped, err := permission.RulesFromSuggestions(sugs, at)
	var got []string
	for _, r := range rules {
		got = append(got, fmt.Sprintf("%s %s %s", r.Behavior, r, r.Scope.Kind()))
	}
	want := []string{
		"allow Bash(git status:*) project",
		"allow WebSearch project",
		"allow Read(//tmp/**) session",
		"deny Bash(rm:*) global",
		"allow Edit(./**) session",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if len(skipped) != 3 || skipped[0].Mode != claude.PermissionBypassPermissions || skipped[1].Type != "addDirectories" || skipped[2].Rules[0].ToolName != "WebFetch" {
		t.Errorf("skipped: %+v", skipped)
	}
	if !errors.Is(err, permission.ErrSyntax) {
		t.Errorf("err %v, want the WebFetch rule's syntax error", err)
	}
	if rules[4].Scope != (permission.Scope{SessionID: "s1"}) || rules[0].Scope != (permission.Scope{ProjectDir: "/p"}) {
		t.Errorf("scopes: %+v, %+v", rules[4].Scope, rules[0].Scope)
	}

	// The acceptEdits rule lets edits in the project through, not others.
	e := permission.NewEngine(nil)
	if err := e.Add(rules[4]); err != nil {
		t.Fatal(err)
	}
	if d := e.Evaluate(file("Write", "/p/a/b.txt"), at); d.Behavior != permission.Allow {
		t.Errorf("Write in the project: %+v", d)
	}
	if d := e.Evaluate(file("Write", "/etc/passwd"), at); d.Behavior != permission.None {
		t.Errorf("Write outside the project: %+v", d)
	}
}
