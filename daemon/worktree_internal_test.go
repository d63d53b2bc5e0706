package daemon

import (
	"encoding/json"
	"testing"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// TestInProject: a project's path rule holds for the files its worktree
// sessions name in their worktree, and only for the rules.
func TestInProject(t *testing.T) {
	wt := store.Worktree{Path: "/data/worktrees/S1", Repo: "/src/app"}
	rule, err := permission.NewRule("Edit(./src/**)", permission.Deny, permission.Scope{ProjectDir: "/src/app"})
	if err != nil {
		t.Fatal(err)
	}
	e := permission.NewEngine(nil)
	if err := e.Put(rule); err != nil {
		t.Fatal(err)
	}
	at := permission.Scope{ProjectDir: "/src/app", SessionID: "S1"}
	for _, tc := range []struct {
		path string
		deny bool
	}{
		{"/data/worktrees/S1/src/main.go", true},
		{"/data/worktrees/S1/README", false},
		{"/data/worktrees/S2/src/main.go", false}, // another session's
		{"/src/app/src/main.go", true},
	} {
		in, _ := json.Marshal(map[string]any{"file_path": tc.path, "old_string": "a", "new_string": "b"})
		req := &claude.PermissionRequest{ToolName: "Edit", Input: in}
		got := e.Evaluate(inProject(req, wt), at).Behavior == permission.Deny
		if got != tc.deny {
			t.Errorf("Edit %s: denied %v, want %v", tc.path, got, tc.deny)
		}
		if string(req.Input) != string(in) {
			t.Errorf("the CLI's request was changed: %s", req.Input)
		}
	}
}
