package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claudetest"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	cli := claudetest.CLIPath(t)
	want := claudetest.CLIVersion(t)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		o := claudectl(t, invocation{getenv: map[string]string{"CLAUDE_BIN": cli}}, args...)
		if o.code != 0 {
			t.Fatalf("%v: exit %d", args, o.code)
		}
		for _, line := range []string{"claudectl    " + apiserver.Version + " (go", "Claude Code  " + want + " at " + cli, "API          claudectl.v1"} {
			if !strings.Contains(o.stdout, line) {
				t.Errorf("%v: stdout lacks %q:\n%s", args, line, o.stdout)
			}
		}
	}
	// No CLI anywhere: still exit 0, the CLI "not found".
	o := claudectl(t, invocation{getenv: map[string]string{"PATH": t.TempDir(), "HOME": t.TempDir()}}, "version", "--json", "--cli", filepath.Join(t.TempDir(), "claude"))
	var info versionInfo
	if o.code != 0 || json.Unmarshal([]byte(o.stdout), &info) != nil {
		t.Fatalf("version --json without a CLI: exit %d, stdout %q", o.code, o.stdout)
	}
	if info.CLIVersion != "" || !strings.HasPrefix(info.CLIError, "not found") || info.API != "claudectl.v1" || info.Claudectl == "" {
		t.Errorf("version --json without a CLI: %+v", info)
	}
	if o := claudectl(t, invocation{}, "version", "extra"); o.code != ExitUsage {
		t.Errorf("version extra: exit %d, want %d", o.code, ExitUsage)
	}
}
