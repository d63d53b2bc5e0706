package sdksurface_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/internal/sdksurface"
)

// dts reads the sdk.d.ts of an installed official SDK version (make
// parity-diff installs them into .tools/), or skips.
func dts(t *testing.T, version string) sdksurface.Surface {
	t.Helper()
	path := filepath.Join("..", "..", ".tools", "claude-agent-sdk-"+version, "node_modules", "@anthropic-ai", "claude-agent-sdk", "sdk.d.ts")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("the official SDK %s is not installed (make parity-diff FROM=%s TO=%s installs it): %v", version, version, version, err)
	}
	s, err := sdksurface.Read(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// From 0.3.330 to 0.3.332 the diff finds what issue 38 found by hand:
// setPermissionMode's new answer, mcp_call's soft_error_result, the
// PreSkillShellCommand hook, the mcp_call_soft_error_result_v1 capability
// and the sideload_flags_disabled startup failure, and nothing else.
func TestDiff330To332(t *testing.T) {
	from, to := dts(t, "0.3.330"), dts(t, "0.3.332")
	var out bytes.Buffer
	sdksurface.Print(&out, sdksurface.Diff(from, to))
	want := `option: no change
method:
  ~ setPermissionMode
      was: setPermissionMode(mode: PermissionMode): Promise<void>
      now: setPermissionMode(mode: PermissionMode): Promise<SDKControlSetPermissionModeResponse | undefined>
control request:
  ~ mcp_call: members +soft_error_result
message: no change
hook event:
  + PreSkillShellCommand
capability:
  + mcp_call_soft_error_result_v1
startup failure reason:
  + sideload_flags_disabled
`
	if out.String() != want {
		t.Errorf("diff 0.3.330 → 0.3.332:\n%s\nwant:\n%s", out.String(), want)
	}
	for k, n := range map[sdksurface.Kind]int{sdksurface.Option: 70, sdksurface.Method: 30, sdksurface.ControlRequest: 41,
		sdksurface.Message: 43, sdksurface.HookEvent: 34, sdksurface.Capability: 11, sdksurface.StartupFailure: 25} {
		if got := len(to[k]); got != n {
			t.Errorf("0.3.332 has %d names of kind %s, want %d: %v", got, k, n, to.Names(k))
		}
	}
}

// Mapped reads the first column of each kind's section table, and a name
// outside it (another column, another section, prose) maps nothing.
func TestMapped(t *testing.T) {
	md := strings.Join([]string{
		"# Parity", "", "Prose naming `interrupt` maps nothing.", "",
		"## Control requests", "", "| subtype | Go |", "|---|---|",
		"| `interrupt` | `Interrupt`, see `set_model` |",
		"| `mcp_status`, `mcp_toggle` | … |", "",
		"## Hook events", "", "| event | Go |", "|---|---|", "| `Stop` | `HookStop` |", "",
		"## Python", "", "| x | y |", "|---|---|", "| `Setup` | z |",
	}, "\n")
	got := sdksurface.Mapped(md)
	for _, c := range []struct {
		k    sdksurface.Kind
		name string
		want bool
	}{
		{sdksurface.ControlRequest, "interrupt", true},
		{sdksurface.ControlRequest, "mcp_toggle", true},
		{sdksurface.ControlRequest, "set_model", false},
		{sdksurface.ControlRequest, "Interrupt", false},
		{sdksurface.HookEvent, "Stop", true},
		{sdksurface.HookEvent, "Setup", false},
		{sdksurface.Option, "interrupt", false},
	} {
		if got[c.k][c.name] != c.want {
			t.Errorf("Mapped: %s %q = %v, want %v", c.k, c.name, got[c.k][c.name], c.want)
		}
	}
	s := sdksurface.Surface{sdksurface.HookEvent: {{Name: "Setup"}, {Name: "Stop"}}}
	if u := sdksurface.Unmapped(s, got); len(u) != 1 || len(u[sdksurface.HookEvent]) != 1 || u[sdksurface.HookEvent][0] != "Setup" {
		t.Errorf("Unmapped = %v, want Setup alone", u)
	}
}

// A file it cannot read is an error that says so, not an empty surface.
func TestReadRefusesOtherLayouts(t *testing.T) {
	for _, src := range []string{"", "export declare type Options = {\n    a?: string;\n};\n"} {
		if _, err := sdksurface.Read(src); err == nil {
			t.Errorf("Read(%.40q): no error", src)
		}
	}
}
