package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	// Timeout bounds each tool call of this server (whole milliseconds on
	// the wire; the CLI ignores less than a second). Zero leaves the CLI's
	// default (MCP_TOOL_TIMEOUT).
	Timeout time.Duration
	// AlwaysLoad, when set, says whether the server's tools are always
	// offered to the model in full (true) or always deferred behind the
	// CLI's tool search (false). nil leaves the CLI's default.
	AlwaysLoad *bool
	// Tools are per-tool permission policies for an http or sse server.
	Tools []MCPToolPolicy
}

// MCPToolPolicy is the permission policy this program declares for one tool
// of an MCP server.
type MCPToolPolicy struct {
	// Name is the tool's name on its server (not mcp__S__T).
	Name string `json:"name"`
	// PermissionPolicy is "always_allow", "always_ask" (ask CanUseTool before
	// every call, even where a rule allows it) or "always_deny".
	PermissionPolicy string `json:"permission_policy,omitempty"`
	// OrgMaxPermission caps the permission: "allow", "ask" or "blocked".
	OrgMaxPermission string `json:"org_max_permission,omitempty"`
}

// MCPServerSettings are the settings of an in-process server (the official
// SDK's createSdkMcpServer options and McpSdkServerConfig).
type MCPServerSettings struct {
	// Timeout bounds each tool call (whole milliseconds on the wire; the CLI
	// ignores less than a second); zero leaves the CLI's default. It is read
	// when the server is first registered.
	Timeout time.Duration
	// AlwaysLoad offers every tool of the server to the model in full, never
	// deferred behind the CLI's tool search: the session marks each tool
	// the server lists with _meta "anthropic/alwaysLoad": true, unless the
	// tool sets that key itself.
	AlwaysLoad bool
	// Tools are per-tool permission policies; for in-process servers the CLI
	// honours "always_ask" and "always_deny" (grant with AllowedTools or
	// CanUseTool instead of "always_allow").
	Tools []MCPToolPolicy
}

// wire returns the sdkMcpServerConfigs / mcp_set_servers fields of st.
func (st MCPServerSettings) wire() map[string]any {
	m := map[string]any{}
	if st.Timeout > 0 {
		m["timeout"] = st.Timeout.Milliseconds()
	}
	if st.Tools != nil {
		m["tools"] = st.Tools
	}
	return m
}

func checkToolPolicies(tools []MCPToolPolicy) error {
	for _, p := range tools {
		if p.Name == "" {
			return fmt.Errorf("a tool policy needs the tool's Name")
		}
		if p.PermissionPolicy != "" && !slices.Contains([]string{"always_allow", "always_ask", "always_deny"}, p.PermissionPolicy) {
			return fmt.Errorf("tool %s: PermissionPolicy %q: want always_allow, always_ask or always_deny", p.Name, p.PermissionPolicy)
		}
		if p.OrgMaxPermission != "" && !slices.Contains([]string{"allow", "ask", "blocked"}, p.OrgMaxPermission) {
			return fmt.Errorf("tool %s: OrgMaxPermission %q: want allow, ask or blocked", p.Name, p.OrgMaxPermission)
		}
	}
	return nil
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
	var timeout int64
	if c.Timeout > 0 {
		timeout = c.Timeout.Milliseconds()
	}
	switch c.Type {
	case "", MCPStdio:
		return json.Marshal(struct {
			Type       string            `json:"type"`
			Command    string            `json:"command"`
			Args       []string          `json:"args"`
			Env        map[string]string `json:"env,omitempty"`
			Timeout    int64             `json:"timeout,omitempty"`
			AlwaysLoad *bool             `json:"alwaysLoad,omitempty"`
		}{MCPStdio, c.Command, nonNil(c.Args), c.Env, timeout, c.AlwaysLoad})
	default:
		return json.Marshal(struct {
			Type       string            `json:"type"`
			URL        string            `json:"url"`
			Headers    map[string]string `json:"headers,omitempty"`
			Tools      []MCPToolPolicy   `json:"tools,omitempty"`
			Timeout    int64             `json:"timeout,omitempty"`
			AlwaysLoad *bool             `json:"alwaysLoad,omitempty"`
		}{c.Type, c.URL, c.Headers, c.Tools, timeout, c.AlwaysLoad})
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
		if c.URL != "" || c.Headers != nil || c.Tools != nil {
			return fmt.Errorf("URL, Headers and Tools are for http and sse servers")
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
	if c.Timeout < 0 {
		return fmt.Errorf("the Timeout must not be negative")
	}
	return checkToolPolicies(c.Tools)
}

// sdkSetEntry is how an in-process server is named in mcp_set_servers:
// {"type":"sdk","name":N, "timeout":..., "tools":[...]}, as the TypeScript
// SDK names it (it re-sends the settings each time).
func sdkSetEntry(name string, st MCPServerSettings) map[string]any {
	m := st.wire()
	m["type"], m["name"] = "sdk", name
	return m
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
	for _, name := range slices.Sorted(maps.Keys(o.MCPServerSettings)) {
		if _, ok := o.MCPServers[name]; !ok {
			return &OptionError{"MCPServerSettings", name, "names no in-process server of MCPServers"}
		}
		st := o.MCPServerSettings[name]
		if st.Timeout < 0 {
			return &OptionError{"MCPServerSettings", name, "Timeout must not be negative"}
		}
		if err := checkToolPolicies(st.Tools); err != nil {
			return &OptionError{"MCPServerSettings", name, err.Error()}
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
// {"mcpServers":{...}}) for Options.MCPServerConfigs, or "" when there are
// none (or they go in initialize). It also validates the MCP options.
//
// In-process servers are named in initialize only (see addMCPFields), as
// the TypeScript SDK names them: named on the command line too, the CLI
// would connect them itself, with a handshake of its own, and report
// nothing for them until that is done, whatever manifests initialize
// brings. Start writes initialize before any prompt, so the CLI knows them
// before the first turn.
func (o *Options) mcpConfigArg() (string, error) {
	if err := o.checkMCPOptions(); err != nil {
		return "", err
	}
	external := o.MCPServerConfigs
	if o.MCPServersInInitialize {
		external = nil // in initialize (addMCPFields)
	}
	if len(external) == 0 {
		return "", nil
	}
	servers := make(map[string]any, len(external))
	for name, c := range external {
		servers[name] = c
	}
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		return "", &OptionError{"MCPServerConfigs", "", err.Error()}
	}
	return string(b), nil
}

// addMCPFields adds the MCP fields of initialize: "sdkMcpServers", the names
// of the in-process servers, which the CLI then reaches through mcp_message
// requests; "sdkMcpServerConfigs", their settings; "sdkMcpServerManifests",
// what each answered to initialize and tools/list (captured by Start, so
// the CLI has their tools at once); and "mcpServers", the external servers
// with Options.MCPServersInInitialize.
func (s *Session) addMCPFields(fields map[string]any) error {
	if len(s.opts.MCPServers) > 0 {
		fields["sdkMcpServers"] = slices.Sorted(maps.Keys(s.opts.MCPServers))
		configs := map[string]any{}
		for name, st := range s.opts.MCPServerSettings {
			if w := st.wire(); len(w) > 0 {
				configs[name] = w
			}
		}
		if len(configs) > 0 {
			fields["sdkMcpServerConfigs"] = configs
		}
		if m := s.captureMCPManifests(); len(m) > 0 { // mcp_transport.go
			fields["sdkMcpServerManifests"] = m
		}
	}
	if s.opts.MCPServersInInitialize && len(s.opts.MCPServerConfigs) > 0 {
		fields["mcpServers"] = s.opts.MCPServerConfigs
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
// in-process servers (Options.MCPServers, [Session.AddMCPServer]) are
// kept: the CLI counts in-process servers in the set it replaces, so the
// session names them again in every call. The result says what was added
// and removed, and which servers the CLI could not set up (Errors), which
// does not make the call fail. MCPSetServers returns an error, without
// asking the CLI, when a config is unusable or names an in-process server.
func (s *Session) MCPSetServers(ctx context.Context, servers map[string]MCPServerConfig) (*MCPSetServersResult, error) {
	s.mcpSetMu.Lock()
	defer s.mcpSetMu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		if s.mcp.has(name) {
			return nil, fmt.Errorf("claude: MCPSetServers: %q is an in-process server", name)
		}
		if err := servers[name].check(); err != nil {
			return nil, fmt.Errorf("claude: MCPSetServers: server %q: %w", name, err)
		}
	}
	r, err := s.setMCPServers(ctx, servers)
	if err == nil {
		s.mcpExternal = maps.Clone(servers)
	}
	return r, err
}

// setMCPServers sends mcp_set_servers with the external servers and every
// in-process server the session has now. The caller holds mcpSetMu.
func (s *Session) setMCPServers(ctx context.Context, external map[string]MCPServerConfig) (*MCPSetServersResult, error) {
	all := make(map[string]any, len(external))
	for name, c := range external {
		all[name] = c
	}
	for name, st := range s.mcp.settingsByName() {
		all[name] = sdkSetEntry(name, st)
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

// AddMCPServer adds an in-process MCP server to the running session under
// name (the official setMcpServers with a createSdkMcpServer server), with
// settings (nil for none). The CLI connects it at once, through the
// session, and offers its tools from the next model request on; the result
// says whether it was added (Added) or failed (Errors). Adding a name the
// session already has as an in-process server replaces that server.
// External servers keep what [Session.MCPSetServers] last set.
func (s *Session) AddMCPServer(ctx context.Context, name string, srv *mcp.Server, settings *MCPServerSettings) (*MCPSetServersResult, error) {
	if name == "" || strings.TrimSpace(name) != name {
		return nil, &OptionError{"name", name, "a server name must be non-empty, without surrounding spaces"}
	}
	if srv == nil {
		return nil, &OptionError{"srv", name, "the server is nil"}
	}
	var st MCPServerSettings
	if settings != nil {
		st = *settings
	}
	if st.Timeout < 0 {
		return nil, &OptionError{"settings.Timeout", st.Timeout.String(), "must not be negative"}
	}
	if err := checkToolPolicies(st.Tools); err != nil {
		return nil, &OptionError{"settings.Tools", name, err.Error()}
	}
	s.mcpSetMu.Lock()
	defer s.mcpSetMu.Unlock()
	if _, ok := s.mcpExternal[name]; ok {
		return nil, &OptionError{"name", name, "is the name of an external server set with MCPSetServers"}
	}
	if _, ok := s.opts.MCPServerConfigs[name]; ok {
		return nil, &OptionError{"name", name, "is the name of an external server of Options.MCPServerConfigs"}
	}
	if s.mcp.has(name) {
		// A new server under an old name: the CLI keeps its connection to
		// a name it already has, so take the old one away first.
		s.mcp.remove(name)
		if _, err := s.setMCPServers(ctx, s.mcpExternal); err != nil {
			return nil, err
		}
	}
	s.mcp.add(name, srv, st)
	r, err := s.setMCPServers(ctx, s.mcpExternal)
	if err != nil {
		s.mcp.remove(name)
		return nil, err
	}
	return r, nil
}

// RemoveMCPServer removes an in-process MCP server, one of
// Options.MCPServers or added with [Session.AddMCPServer], from the running
// session: the CLI disconnects it and its tools are no longer offered, and
// the session closes its connection to the server (cancelling running tool
// handlers). An unknown name is an error, without asking the CLI.
func (s *Session) RemoveMCPServer(ctx context.Context, name string) (*MCPSetServersResult, error) {
	s.mcpSetMu.Lock()
	defer s.mcpSetMu.Unlock()
	srv, st, ok := s.mcp.lookup(name)
	if !ok {
		return nil, fmt.Errorf("claude: RemoveMCPServer: %q is not an in-process server of this session", name)
	}
	s.mcp.remove(name)
	r, err := s.setMCPServers(ctx, s.mcpExternal)
	if err != nil {
		s.mcp.add(name, srv, st)
		return nil, err
	}
	return r, nil
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
