package permission_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/permission"
)

func Example() {
	rules := permission.NewEngine(nil)
	for _, spec := range []struct {
		rule string
		b    permission.Behavior
	}{
		{"Bash(git status:*)", permission.Allow},
		{"Bash(rm:*)", permission.Deny},
		{"Edit(src/**)", permission.Allow},
	} {
		r, err := permission.NewRule(spec.rule, spec.b, permission.Scope{ProjectDir: "/src/app"})
		if err != nil {
			panic(err)
		}
		rules.Add(r)
	}
	at := permission.Scope{ProjectDir: "/src/app", SessionID: "s1"}
	ask := func(tool, input string) *claude.PermissionRequest {
		return &claude.PermissionRequest{RequestID: tool + input, ToolName: tool, Input: json.RawMessage(input)}
	}
	for _, req := range []*claude.PermissionRequest{
		ask("Bash", `{"command":"git status --short"}`),
		ask("Bash", `{"command":"git status && rm -rf build"}`),
		ask("Edit", `{"file_path":"/src/app/src/main.go"}`),
		ask("Bash", `{"command":"make"}`),
	} {
		fmt.Printf("%s %s: %q\n", req.ToolName, req.Input, rules.Evaluate(req, at).Behavior)
	}

	// What no rule settles waits for a person.
	broker := permission.NewBroker(nil)
	defer broker.Close()
	req := ask("Bash", `{"command":"make"}`)
	ch, _ := broker.Submit(context.Background(), "s1", req)
	broker.Resolve(req.RequestID, claude.Allow(), "client:alice")
	err := broker.Resolve(req.RequestID, claude.Deny("no"), "client:bob")
	r := <-ch
	fmt.Println(r.Outcome, "by", r.By, "allow:", r.Result.Allow)
	fmt.Println(err != nil)
	// Output:
	// Bash {"command":"git status --short"}: "allow"
	// Bash {"command":"git status && rm -rf build"}: "deny"
	// Edit {"file_path":"/src/app/src/main.go"}: "allow"
	// Bash {"command":"make"}: ""
	// decided by client:alice allow: true
	// true
}
