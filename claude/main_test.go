package claude_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// When started as a stand-in CLI (see fakecli_test.go), be that instead.
	if mode := os.Getenv(fakeCLIEnv); mode != "" {
		os.Exit(runFakeCLI(mode))
	}
	// When started as a stdio MCP server (see e2e_control_test.go), be that.
	if os.Getenv(resourceServerEnv) != "" {
		os.Exit(runResourceServer())
	}
	goleak.VerifyTestMain(m)
}
