package claude_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/internal/sdksurface"
)

// TestParityTable keeps docs/parity.md current: every name of the official
// TypeScript SDK's surface, read from the sdk.d.ts that the Makefile pins
// (CLAUDE_AGENT_SDK_VERSION, installed into .tools/), must be mapped by
// the table of its section (in backquotes in its first column): the fields
// of Options, the methods of Query, the control request subtypes, the
// message types, the hook events, the capabilities and the startup
// failure reasons.
func TestParityTable(t *testing.T) {
	path := agentSDKDTS(t)
	surface, table := readParity(t, path)
	unmapped := sdksurface.Unmapped(surface, sdksurface.Mapped(table))
	for _, k := range sdksurface.Kinds {
		for _, name := range unmapped[k] {
			t.Errorf("docs/parity.md does not map the TypeScript SDK's %s `%s` (%s): add a row to its table under \"## %s\" saying what the Go SDK does",
				k, name, path, sdksurface.Sections[k])
		}
	}
}

// The parity check fails for an entry removed from the table, of every
// kind: TestParityTable is not passing because it checks nothing. The
// entry's name goes from its row (the row with it, when it was the row's
// only name).
func TestParityTableCatchesMissingRows(t *testing.T) {
	surface, table := readParity(t, agentSDKDTS(t))
	for _, k := range sdksurface.Kinds {
		name := surface[k][len(surface[k])/2].Name // one from the middle of each kind
		var kept []string
		removed := 0
		section := ""
		for _, line := range strings.Split(table, "\n") {
			if title, ok := strings.CutPrefix(line, "## "); ok {
				section = title
			}
			cells := strings.Split(line, "|")
			if section == sdksurface.Sections[k] && len(cells) > 2 && strings.Contains(cells[1], "`"+name+"`") {
				removed++
				cells[1] = strings.Replace(cells[1], "`"+name+"`", "", 1)
				if !strings.Contains(cells[1], "`") {
					continue // its only name: the row goes
				}
				line = strings.Join(cells, "|")
			}
			kept = append(kept, line)
		}
		if removed != 1 {
			t.Errorf("%s `%s`: %d rows of \"## %s\" name it, want 1", k, name, removed, sdksurface.Sections[k])
			continue
		}
		if got := sdksurface.Unmapped(surface, sdksurface.Mapped(strings.Join(kept, "\n"))); !slices.Equal(got[k], []string{name}) {
			t.Errorf("with the row of %s `%s` removed, the unmapped names are %v; want it alone", k, name, got)
		}
	}
}

// readParity reads the surface of the sdk.d.ts at path and docs/parity.md.
func readParity(t *testing.T, path string) (sdksurface.Surface, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the TypeScript SDK's types: %v", err)
	}
	surface, err := sdksurface.Read(string(b))
	if err != nil {
		t.Fatal(err)
	}
	table, err := os.ReadFile(filepath.Join("..", "docs", "parity.md"))
	if err != nil {
		t.Fatal(err)
	}
	return surface, string(table)
}

// agentSDKDTS returns the pinned sdk.d.ts: $CLAUDECTL_TEST_AGENT_SDK_DTS
// (set by the Makefile), else the newest under ../.tools. Missing, it fails
// the test under CI=true and skips it otherwise.
func agentSDKDTS(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CLAUDECTL_TEST_AGENT_SDK_DTS"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	} else if found, _ := filepath.Glob(filepath.Join("..", ".tools", "claude-agent-sdk-*", "node_modules", "@anthropic-ai", "claude-agent-sdk", "sdk.d.ts")); len(found) > 0 {
		slices.Sort(found)
		return found[len(found)-1]
	}
	msg := "the TypeScript SDK's sdk.d.ts is not installed (CLAUDECTL_TEST_AGENT_SDK_DTS=" + os.Getenv("CLAUDECTL_TEST_AGENT_SDK_DTS") + "); `make test` installs it"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
