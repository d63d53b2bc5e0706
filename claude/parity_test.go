package claude_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestParityTable keeps docs/parity.md current: every field of the
// official TypeScript SDK's Options type and every method of its Query
// interface, read from the sdk.d.ts that the Makefile pins
// (CLAUDE_AGENT_SDK_VERSION, installed into .tools/), must be named in the
// table (as `name`).
func TestParityTable(t *testing.T) {
	path := agentSDKDTS(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the TypeScript SDK's types: %v", err)
	}
	src := string(b)
	options, err := declMembers(src, "export declare type Options = {")
	if err != nil {
		t.Fatal(err)
	}
	methods, err := declMembers(src, "export declare interface Query extends")
	if err != nil {
		t.Fatal(err)
	}
	if len(options) < 50 || len(methods) < 25 {
		t.Fatalf("read only %d Options fields and %d Query methods from %s: has its layout changed?", len(options), len(methods), path)
	}
	table, err := os.ReadFile(filepath.Join("..", "docs", "parity.md"))
	if err != nil {
		t.Fatal(err)
	}
	mentioned := map[string]bool{}
	for _, m := range regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*)`").FindAllStringSubmatch(string(table), -1) {
		mentioned[m[1]] = true
	}
	for _, group := range []struct {
		what  string
		names []string
	}{{"Options field", options}, {"Query method", methods}} {
		for _, name := range group.names {
			if !mentioned[name] {
				t.Errorf("docs/parity.md does not mention the TypeScript SDK's %s `%s` (%s)", group.what, name, path)
			}
		}
	}
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

// declMembers returns the names of the top-level members of the TypeScript
// declaration that starts with head: `name?: type;` fields and
// `name(args): type;` methods, comments skipped.
func declMembers(src, head string) ([]string, error) {
	i := strings.Index(src, head)
	if i < 0 {
		return nil, &parseError{"no " + strings.TrimSpace(head)}
	}
	src = src[i:]
	src = src[strings.Index(src, "{")+1:]
	src = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(src, "")
	member := regexp.MustCompile(`^\s*(?:readonly\s+)?([A-Za-z_$][A-Za-z0-9_$]*)\??\s*[:(<]`)
	var names []string
	depth := 0
	for _, line := range strings.Split(src, "\n") {
		if k := strings.Index(line, "//"); k >= 0 {
			line = line[:k]
		}
		if depth == 0 {
			if strings.HasPrefix(strings.TrimSpace(line), "}") {
				return names, nil
			}
			if m := member.FindStringSubmatch(line); m != nil && !slices.Contains(names, m[1]) {
				names = append(names, m[1])
			}
		}
		depth += strings.Count(line, "{") + strings.Count(line, "(") - strings.Count(line, "}") - strings.Count(line, ")")
		if depth < 0 {
			return names, nil
		}
	}
	return nil, &parseError{"unterminated " + strings.TrimSpace(head)}
}

type parseError struct{ msg string }

func (e *parseError) Error() string { return "sdk.d.ts: " + e.msg }
