package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dts := func(v string) string {
		p := filepath.Join("..", "..", "..", ".tools", "claude-agent-sdk-"+v, "node_modules", "@anthropic-ai", "claude-agent-sdk", "sdk.d.ts")
		if _, err := os.Stat(p); err != nil {
			t.Skipf("the official SDK %s is not installed: %v", v, err)
		}
		return p
	}
	from, to := dts("0.3.330"), dts("0.3.332")
	table := filepath.Join("..", "..", "..", "docs", "parity.md")
	var out, errs bytes.Buffer
	if code := run([]string{"-table", table, from, to}, &out, &errs); code != 0 ||
		!strings.Contains(out.String(), "0.3.330 → 0.3.332") || !strings.Contains(out.String(), "+ PreSkillShellCommand") ||
		!strings.Contains(out.String(), "maps every name of 0.3.332") {
		t.Errorf("exit %d, stdout:\n%s\nstderr: %s", code, out.String(), errs.String())
	}
	// A table without the new hook event: it says so, and exits 1.
	md, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "parity.md")
	if err := os.WriteFile(old, bytes.ReplaceAll(md, []byte("| `PreSkillShellCommand` |"), []byte("| PreSkillShellCommand |")), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"-table", old, from, to}, &out, &errs); code != 1 || !strings.Contains(out.String(), "hook event (## Hook events): PreSkillShellCommand\n") {
		t.Errorf("a table without PreSkillShellCommand: exit %d, stdout:\n%s", code, out.String())
	}
	if code := run([]string{from}, &out, &errs); code != 2 {
		t.Errorf("one file: exit %d, want 2", code)
	}
}
