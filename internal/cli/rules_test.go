package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestClientRules(t *testing.T) {
	d := startDaemon(t)
	o := claudectl(t, d.inv(), "rules", "add", "Bash(touch:*)", "allow")
	if o.code != 0 || !strings.Contains(o.stdout, "Added rule") {
		t.Fatalf("rules add: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	id := regexp.MustCompile(`Added rule (\S+):`).FindStringSubmatch(o.stdout)[1]

	// --server wins over the environment.
	inv := d.inv()
	inv.getenv["CLAUDECTL_SERVER"] = "http://127.0.0.1:1"
	o = claudectl(t, inv, "rules", "list", "--server", d.url)
	if o.code != 0 || !strings.Contains(o.stdout, "Bash(touch:*)") || !strings.Contains(o.stdout, "allow") || !strings.Contains(o.stdout, id) {
		t.Fatalf("rules list: exit %d, stdout %q", o.code, o.stdout)
	}

	o = claudectl(t, d.inv(), "rules", "list", "--json")
	var rules []ruleJSON
	if err := json.Unmarshal([]byte(o.stdout), &rules); err != nil || len(rules) != 1 ||
		rules[0].ID != id || rules[0].Pattern != "Bash(touch:*)" || rules[0].Behavior != "allow" || rules[0].Scope != "global" {
		t.Fatalf("rules list --json = %+v (%v)", rules, err)
	}

	dir := t.TempDir()
	o = claudectl(t, d.inv(), "rules", "add", "Read(./src/**)", "deny", "--project", dir)
	if o.code != 0 || !strings.Contains(o.stdout, "project ") {
		t.Fatalf("rules add --project: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}

	o = claudectl(t, d.inv(), "rules", "rm", id)
	if o.code != 0 {
		t.Fatalf("rules rm: exit %d, stderr %q", o.code, o.stderr)
	}
	o = claudectl(t, d.inv(), "rules", "list")
	if o.code != 0 || strings.Contains(o.stdout, "Bash(touch:*)") || !strings.Contains(o.stdout, "Read(./src/**)") {
		t.Fatalf("rules list after rm: exit %d, stdout %q", o.code, o.stdout)
	}
	o = claudectl(t, d.inv(), "rules", "rm", id)
	if want := "claudectl rules: no rule " + id + " (claudectl rules list shows them)\n"; o.code != 1 || o.stderr != want {
		t.Errorf("rules rm twice: exit %d, stderr %q; want 1 and %q", o.code, o.stderr, want)
	}
	// A pattern the daemon cannot parse is bad usage, said without its layers.
	o = claudectl(t, d.inv(), "rules", "add", "Bash(ls", "allow")
	if o.code != 2 || !strings.HasPrefix(o.stderr, "claudectl rules: ") || strings.Contains(o.stderr, "permission:") ||
		!strings.Contains(o.stderr, "Bash(ls") {
		t.Errorf("rules add of a bad pattern: exit %d, stderr %q; want 2", o.code, o.stderr)
	}
}
