package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// MCP servers reach a session in two ways:
//
//   - In-process servers (Options.MCPServers) are *mcp.Server values of the
//     MCP Go SDK (github.com/modelcontextprotocol/go-sdk/mcp). They run in
//     this process; the CLI talks to them through mcp_message control
//     requests, which the session routes to them (mcp_transport.go).
//   - External servers (Options.MCPServerConfigs, Options.MCPConfig and
//     [Session.MCPSetServers]) are run or dialled by the CLI itself.
//
// The tools of a server named S reach the model as mcp__S__TOOL. In the
// default permission mode the CLI asks before it runs one: allow it with
// Options.AllowedTools ("mcp__S__TOOL", or "mcp__S" for all of S's tools) or
// answer in Options.CanUseTool, or the call is denied.

// An MCPServerConfig describes an external MCP server that the CLI runs (stdio)
// or connects to (http, sse).
type MCPServerConfig struct {
	// Type is "stdio", "http" or "sse". Empty means "stdio".
	Type string
	// Command, Args and Env start a stdio server. Env is added to the
	// CLI's environment for the server.
	Command string
	Args    []string
	Env     map[string]string
	// URL and Headers reach an http (streamable HTTP) or sse server.
	URL     string
	Headers map[string]string
}

// The transports an MCPServerConfig can name.
const (
	MCPStdio = "stdio"
	MCPHTTP  = "http"
	MCPSSE   = "sse"
)

// MarshalJSON writes c in the CLI's --mcp-config form, e.g.
// {"type":"stdio","command":"srv","args":["-v"]}.
func (c MCPServerConfig) MarshalJSON() ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	switch c.Type {
	case "", MCPStdio:
		return json.Marshal(struct {
			Type    string            `json:"type"`
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env,omitempty"`
		}{MCPStdio, c.Command, nonNil(c.Args), c.Env})
	default:
		return json.Marshal(struct {
			Type    string            `json:"type"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers,omitempty"`
		}{c.Type, c.URL, c.Headers})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// check reports what makes c unusable.
func (c MCPServerConfig) check() error {
	switch c.Type {
	case "", MCPStdio:
		if c.Command == "" {
			return fmt.Errorf("a stdio server needs a Command")
		}
		if c.URL != "" || c.Headers != nil {
			return fmt.Errorf("URL and Headers are for http and sse servers")
		}
	case MCPHTTP, MCPSSE:
		if c.URL == "" {
			return fmt.Errorf("an %s server needs a URL", c.Type)
		}
		if c.Command != "" || c.Args != nil || c.Env != nil {
			return fmt.Errorf("Command, Args and Env are for stdio servers")
		}
	default:
		return fmt.Errorf("unknown Type %q: want stdio, http or sse (pass other kinds as JSON in Options.MCPConfig)", c.Type)
	}
	return nil
}

// sdkServerEntry is how an in-process server is named to the CLI in
// --mcp-config and mcp_set_servers.
type sdkServerEntry struct {
	Type string `json:"type"` // "sdk"
	Name string `json:"name"`
}

// checkMCPOptions validates the MCP options; Start fails with its error.
func (o *Options) checkMCPOptions() error {
	for name, srv := range o.MCPServers {
		if name == "" || strings.TrimSpace(name) != name {
			return &OptionError{"MCPServers", name, "a server name must be non-empty, without surrounding spaces"}
		}
		if srv == nil {
			return &OptionError{"MCPServers", name, "the server is nil"}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.MCPServerConfigs)) {
		if name == "" || strings.TrimSpace(name) != name {
			return &OptionError{"MCPServerConfigs", name, "a server name must be non-empty, without surrounding spaces"}
		}
		if _, dup := o.MCPServers[name]; dup {
			return &OptionError{"MCPServerConfigs", name, "is also the name of an in-process server in MCPServers"}
		}
		if err := o.MCPServerConfigs[name].check(); err != nil {
			return &OptionError{"MCPServerConfigs", name, err.Error()}
		}
	}
	return nil
}

// mcpConfigArg returns the --mcp-config value (a JSON object
// {"mcpServers":{...}}) for the in-process servers and
// Options.MCPServerConfigs, or "" when there are none. It also validates
// the MCP options.
//
// In-process servers are named here as well as in initialize (see
// addMCPFields): from the command line the CLI knows them from its start,
// whatever comes first on stdin, the initialize request or a prompt. The
// CLI dials each of them once either way.
func (o *Options) mcpConfigArg() (string, error) {
	if err := o.checkMCPOptions(); err != nil {
		return "", err
	}
	if len(o.MCPServers) == 0 && len(o.MCPServerConfigs) == 0 {
		return "", nil
	}
	servers := make(map[string]any, len(o.MCPServers)+len(o.MCPServerConfigs))
	for name, c := range o.MCPServerConfigs {
		servers[name] = c
	}
	for name := range o.MCPServers {
		servers[name] = sdkServerEntry{"sdk", name}
	}
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		return "", &OptionError{"MCPServerConfigs", "", err.Error()}
	}
	return string(b), nil
}

// addMCPFields adds the "sdkMcpServers" field of initialize: the names of
// the in-process servers, which the CLI then reaches through mcp_message
// requests.
func (s *Session) addMCPFields(fields map[string]any) error {
	if len(s.opts.MCPServers) > 0 {
		fields["sdkMcpServers"] = slices.Sorted(maps.Keys(s.opts.MCPServers))
	}
	return nil
}

// MCPSetServersResult is the CLI's answer to [Session.MCPSetServers].
type MCPSetServersResult struct {
	// Added and Removed name the servers that were added and removed.
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	// Errors maps a server name to why it could not be set up.
	Errors map[string]string `json:"errors"`
}

// MCPSetServers replaces the set of external MCP servers added by earlier
// calls with servers (keyed by name); an empty map removes them all. The
// servers given at Start (Options.MCPServerConfigs and MCPConfig) and the
// in-process servers (Options.MCPServers) are kept: the CLI counts
// in-process servers in the set it replaces, so the session names them
// again in every call. The result says what was added and removed, and
// which servers the CLI could not set up (Errors), which does not make the
// call fail. MCPSetServers returns an error, without asking the CLI, when
// a config is unusable or names an in-process server.
func (s *Session) MCPSetServers(ctx context.Context, servers map[string]MCPServerConfig) (*MCPSetServersResult, error) {
	all := make(map[string]any, len(servers)+len(s.opts.MCPServers))
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		if _, ok := s.opts.MCPServers[name]; ok {
			return nil, fmt.Errorf("claude: MCPSetServers: %q is an in-process server of Options.MCPServers", name)
		}
		if err := servers[name].check(); err != nil {
			return nil, fmt.Errorf("claude: MCPSetServers: server %q: %w", name, err)
		}
		all[name] = servers[name]
	}
	for name := range s.opts.MCPServers {
		all[name] = sdkServerEntry{"sdk", name}
	}
	raw, err := s.Control(ctx, "mcp_set_servers", map[string]any{"servers": all})
	if err != nil {
		return nil, err
	}
	var r MCPSetServersResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("claude: decoding mcp_set_servers response: %w", err)
	}
	return &r, nil
}

// MCPReconnect asks the CLI to reconnect the named external MCP server, for
// example one that failed. An unknown name is a *ControlError ("Server not
// found: NAME"). CLI 2.1.329 refuses it for in-process servers; use
// [Session.MCPToggle] off and on to restart one.
func (s *Session) MCPReconnect(ctx context.Context, name string) error {
	_, err := s.Control(ctx, "mcp_reconnect", map[string]any{"serverName": name})
	return err
}

// MCPToggle enables or disables the named MCP server. A disabled server
// is shown as "disabled" by [Session.MCPStatus] and the CLI refuses calls
// to its tools (CLI 2.1.329 still lists them to the model, and answers a
// call with the error "No such tool available: ... switched off").
// Enabling it connects it again; an in-process server then gets a fresh
// MCP session. An unknown name is a *ControlError.
func (s *Session) MCPToggle(ctx context.Context, name string, enabled bool) error {
	_, err := s.Control(ctx, "mcp_toggle", map[string]any{"serverName": name, "enabled": enabled})
	return err
}
