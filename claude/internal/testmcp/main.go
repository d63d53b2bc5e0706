// Command testmcp is a small stdio MCP server for claude's end-to-end
// tests: the tests build it into a temporary directory and configure it as
// an external MCP server of the CLI.
//
// It serves one tool, lookup_weather(city), whose answer names the server
// ("-name") so that a test can tell two instances apart. With -log FILE it
// appends one line per call to FILE, which lets a test see calls the CLI made.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type weatherArgs struct {
	City string `json:"city" jsonschema:"the city to look up"`
}

func main() {
	name := flag.String("name", "testmcp", "server name reported in answers")
	logFile := flag.String("log", "", "file to append a line to for each tool call")
	flag.Parse()

	s := mcp.NewServer(&mcp.Implementation{Name: *name, Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "lookup_weather",
		Description: "Looks up the weather of a city.",
		// Keep the tool in the model's tool list rather than deferred
		// behind the CLI's tool search, so a test can see it there.
		Meta: mcp.Meta{"anthropic/alwaysLoad": true},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in weatherArgs) (*mcp.CallToolResult, any, error) {
		if *logFile != "" {
			f, err := os.OpenFile(*logFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err == nil {
				fmt.Fprintf(f, "%s lookup_weather %s\n", *name, in.City)
				f.Close()
			}
		}
		text := fmt.Sprintf("%s says: sunny in %s", *name, in.City)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
