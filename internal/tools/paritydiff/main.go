// Command paritydiff says what changed between two versions of the official
// TypeScript Agent SDK that the Go SDK maps (option fields, query methods,
// control request subtypes, message types, hook events, capabilities,
// startup failure reasons), and which names of the newer one
// docs/parity.md does not map yet. make parity-diff FROM=x TO=y runs it on
// the two versions' sdk.d.ts, installing them into .tools/ first.
//
//	go run ./internal/tools/paritydiff [-table docs/parity.md] FROM/sdk.d.ts TO/sdk.d.ts
//
// It exits 1 when docs/parity.md lacks a name of TO (TestParityTable would
// fail once TO is pinned), 2 on bad arguments or unreadable files.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/claudectl/claudectl/internal/sdksurface"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("paritydiff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	table := fs.String("table", "docs/parity.md", "the parity table to check the newer version against (\"\": none)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: paritydiff [-table docs/parity.md] FROM/sdk.d.ts TO/sdk.d.ts")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return 2
	}
	from, fromVersion, err := read(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "paritydiff:", err)
		return 2
	}
	to, toVersion, err := read(fs.Arg(1))
	if err != nil {
		fmt.Fprintln(stderr, "paritydiff:", err)
		return 2
	}
	fmt.Fprintf(stdout, "@anthropic-ai/claude-agent-sdk %s → %s, what the Go SDK maps:\n", fromVersion, toVersion)
	sdksurface.Print(stdout, sdksurface.Diff(from, to))
	if *table == "" {
		return 0
	}
	md, err := os.ReadFile(*table)
	if err != nil {
		fmt.Fprintln(stderr, "paritydiff:", err)
		return 2
	}
	unmapped := sdksurface.Unmapped(to, sdksurface.Mapped(string(md)))
	if len(unmapped) == 0 {
		fmt.Fprintf(stdout, "%s maps every name of %s.\n", *table, toVersion)
		return 0
	}
	fmt.Fprintf(stdout, "%s does not map yet (add a row to the section named, saying what the Go SDK does):\n", *table)
	for _, k := range sdksurface.Kinds {
		if names := unmapped[k]; len(names) > 0 {
			fmt.Fprintf(stdout, "  %s (## %s): %s\n", k, sdksurface.Sections[k], strings.Join(names, ", "))
		}
	}
	return 1
}

// read reads an sdk.d.ts and the version of the package.json beside it
// (its path when there is none).
func read(path string) (sdksurface.Surface, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	s, err := sdksurface.Read(string(b))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	version := path
	if pj, err := os.ReadFile(filepath.Join(filepath.Dir(path), "package.json")); err == nil {
		var p struct{ Version string }
		if json.Unmarshal(pj, &p) == nil && p.Version != "" {
			version = p.Version
		}
	}
	return s, version, nil
}
