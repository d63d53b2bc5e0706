package claude_test

import (
	"context"
	"fmt"

	"github.com/claudectl/claudectl/claude"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool written in Go, served to the CLI by an in-process MCP server.
func ExampleOptions_mcpServers() {
	type args struct {
		City string `json:"city" jsonschema:"the city to look up"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "lookup_weather",
		Description: "Looks up the weather of a city.",
		Meta:        mcp.Meta{"anthropic/alwaysLoad": true}, // offer it in full, not behind tool search
	}, func(ctx context.Context, req *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sunny in " + in.City}}}, nil, nil
	})

	ctx := context.Background()
	opts := &claude.Options{
		MCPServers: map[string]*mcp.Server{"weather": srv},
		// The model calls it as mcp__weather__lookup_weather; allow it,
		// or the CLI asks CanUseTool (and denies it when that is nil).
		AllowedTools: []string{"mcp__weather__lookup_weather"},
		// An external server that the CLI runs.
		MCPServerConfigs: map[string]claude.MCPServerConfig{
			"files": {Command: "my-mcp-server", Args: []string{"--root", "/srv"}},
		},
	}
	for m, err := range claude.Query(ctx, "What's the weather in Paris?", opts) {
		if err != nil {
			fmt.Println(err)
			return
		}
		if r, ok := m.(*claude.ResultMessage); ok {
			fmt.Println(r.Result)
		}
	}
}
