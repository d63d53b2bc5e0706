package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
)

// skillCommand is the shell command of the test skill: read-only, so the
// CLI runs it without asking anyone unless a hook stops it. It prints
// "RAN42", which its text does not hold.
const skillCommand = "printf RAN%s 42"

// A skill's shell command (!`cmd` in its text, run as the skill loads)
// reaches no can_use_tool: the CLI runs a read-only one without asking.
// The daemon decides it as a Bash call of the same command (2.1.332's
// PreSkillShellCommand hook): a rule settles it, else a person does, and
// it runs only if one of them allowed it. On the real CLI.
func TestSkillShellCommandDecidedLikeBash(t *testing.T) {
	cases := []struct {
		name string
		rule *store.Rule // added before the session starts
		// decide answers the request a person was asked, if one was.
		decide  *daemon.Decision
		ran     bool
		asked   bool
		byRule  bool
		storedR string // the rule an always stored
	}{
		{name: "a person denies", decide: &daemon.Decision{Client: "alice", Message: "not in my repo"}, asked: true},
		{name: "a person allows always", decide: &daemon.Decision{Client: "alice", Allow: true, Always: true}, asked: true, ran: true,
			storedR: "Bash(" + skillCommand + ")"},
		{name: "a rule allows", rule: &store.Rule{Spec: "Bash(printf:*)", Behavior: "allow"}, ran: true, byRule: true},
		{name: "a rule denies", rule: &store.Rule{Spec: "Bash(printf:*)", Behavior: "deny"}, byRule: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			td := daemontest.Start(t, nil,
				claudetest.Reply(claudetest.ToolUse("Skill", map[string]any{"skill": "shelly"})),
				claudetest.Reply(claudetest.Text("Done.")))
			d, ctx := td.D, td.Ctx
			if c.rule != nil {
				if err := d.AddRule(ctx, c.rule); err != nil {
					t.Fatal(err)
				}
			}
			cwd := t.TempDir()
			skill := filepath.Join(cwd, ".claude", "skills", "shelly", "SKILL.md")
			if err := os.MkdirAll(filepath.Dir(skill), 0o755); err != nil {
				t.Fatal(err)
			}
			text := "---\nname: shelly\ndescription: Says what a command printed.\n---\nThe command printed: !`" + skillCommand + "`.\n"
			if err := os.WriteFile(skill, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: cwd}, "use shelly")
			if err != nil {
				t.Fatal(err)
			}
			var asked *daemon.PermissionRequest
			var resolved *daemon.PermissionResolved
			sawResult := false
			for ev, err := range d.Subscribe(ctx, s.ID, 0) {
				if err != nil {
					t.Fatal(err)
				}
				switch b := ev.Body.(type) {
				case *daemon.PermissionRequest:
					asked = b
					if c.decide == nil {
						t.Fatalf("a person was asked about %s %s although a rule settles it", b.ToolName, b.Input)
					}
					dec := *c.decide
					dec.RequestID = b.RequestID
					if _, _, err := d.Decide(ctx, dec); err != nil {
						t.Fatal(err)
					}
				case *daemon.PermissionResolved:
					resolved = b
				}
				sawResult = sawResult || ev.Type == "result"
				if st, ok := ev.Body.(*daemon.StatusChange); ok && sawResult && st.Status == store.StatusIdle {
					break
				}
			}
			if (asked != nil) != c.asked {
				t.Fatalf("a person was asked: %v, want %v", asked != nil, c.asked)
			}
			if asked != nil {
				var in struct{ Command string }
				if err := json.Unmarshal(asked.Input, &in); err != nil || asked.ToolName != "Bash" || in.Command != skillCommand ||
					!strings.Contains(asked.Description, "skill shelly") || !strings.Contains(asked.Description, "Claude loaded") {
					t.Errorf("the request: tool %s, input %s, description %q", asked.ToolName, asked.Input, asked.Description)
				}
				if c.storedR != "" && (len(asked.AlwaysRules) != 1 || asked.AlwaysRules[0].Pattern != c.storedR || asked.AlwaysRules[0].ProjectDir != cwd) {
					t.Errorf("always would store %+v, want %s for the project", asked.AlwaysRules, c.storedR)
				}
			}
			if resolved == nil || resolved.ToolName != "Bash" || (resolved.Behavior == "allow") != c.ran ||
				strings.HasPrefix(resolved.By, "rule") != c.byRule {
				t.Errorf("permission_resolved %+v; want allowed %v, by a rule %v", resolved, c.ran, c.byRule)
			}
			reqs := td.Model.Requests()
			if len(reqs) < 2 {
				t.Fatalf("%d requests to the model, want 2", len(reqs))
			}
			got := string(reqs[1].Raw)
			if ran := strings.Contains(got, "RAN42"); ran != c.ran {
				t.Errorf("the command ran = %v, want %v; what the model got: %.400s", ran, c.ran, got)
			}
			if !c.ran && !strings.Contains(got, "not run") {
				t.Errorf("the model was not told the command did not run: %.400s", got)
			}
			decs, err := d.Decisions(ctx, store.DecisionFilter{SessionID: s.ID})
			if err != nil || len(decs) != 1 || decs[0].ToolName != "Bash" {
				t.Errorf("the audit trail: %+v, %v; want the one decision", decs, err)
			}
			if c.storedR != "" {
				rules, _ := d.Rules(ctx)
				if len(rules) != 1 || rules[0].Spec != c.storedR {
					t.Errorf("rules after always: %+v", rules)
				}
			}
		})
	}
}
