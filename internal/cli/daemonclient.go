package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/internal/serve"
)

// defaultServer is where the client commands find the daemon by default
// (claudectl serve listens on 127.0.0.1:7777).
const defaultServer = "http://127.0.0.1:7777"

const clientFlagsHelp = `
` + findDaemonHelp + `
Exit status: 0 done, 1 the daemon failed or is unreachable, 2 bad usage.
`

// findDaemonHelp says, in every client command's usage, where the
// daemon's address and token come from (as dial finds them).
const findDaemonHelp = `The daemon's address comes from --server, else CLAUDECTL_SERVER, else
the listen address of claudectl serve's settings file, else
` + defaultServer + `. A bearer token comes from --token-file, else
CLAUDECTL_TOKEN, else (for a daemon on this machine) the daemon's token
file: the token_file of claudectl serve's settings file, else the token
the daemon wrote in its data dir (the settings file's data_dir, else the
default).
`

// tokenDefaultHelp ends --token-file's help: where the token comes from
// without it.
const tokenDefaultHelp = "(default: the CLAUDECTL_TOKEN variable, else the daemon's token file: the token_file of claudectl serve's settings, else the token in its data dir)"

// clientFlags are the flags every daemon client command takes.
type clientFlags struct {
	server    string
	tokenFile string
}

func (f *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.server, "server", "", "the daemon's `URL` (default $CLAUDECTL_SERVER, else the listen address of claudectl serve's settings, else "+defaultServer+")")
	fs.StringVar(&f.tokenFile, "token-file", "", "send the bearer token read from `FILE` "+tokenDefaultHelp)
}

// daemonClient talks to the daemon.
type daemonClient struct {
	addr string
	// tokenNote says why a token file of a daemon on this machine was not
	// used ("" when none was found unusable): said when the daemon then
	// refuses the request for want of a token.
	tokenNote string
	httpc     *http.Client
	sessions  claudectlv1connect.SessionServiceClient
	perms     claudectlv1connect.PermissionServiceClient
	health    claudectlv1connect.HealthServiceClient
	workers   claudectlv1connect.WorkerServiceClient
	auth      claudectlv1connect.AuthServiceClient
	budget    claudectlv1connect.BudgetServiceClient
	notify    claudectlv1connect.NotifyServiceClient
	terminal  claudectlv1connect.TerminalServiceClient
}

// dial resolves the address and token and returns the clients. Close it.
func (f *clientFlags) dial(env *Env) (*daemonClient, error) {
	server, flagName := f.server, "--server"
	if server == "" {
		server, flagName = strings.TrimSpace(env.Getenv("CLAUDECTL_SERVER")), "CLAUDECTL_SERVER"
	}
	settings, settingsErr := loadSettings("", env.Getenv)
	if server == "" {
		server = settingsServer(settings)
	}
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		if flagName == "--server" {
			return nil, badValue("server", f.server, "must be an http:// or https:// URL such as "+defaultServer)
		}
		return nil, usagef("invalid CLAUDECTL_SERVER %q: must be an http:// or https:// URL such as %s", env.Getenv("CLAUDECTL_SERVER"), defaultServer)
	}
	server = strings.TrimRight(u.String(), "/")
	var token string
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, badValue("token-file", f.tokenFile, err.Error())
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return nil, badValue("token-file", f.tokenFile, "the file is empty")
		}
	} else {
		token = strings.TrimSpace(env.Getenv("CLAUDECTL_TOKEN"))
	}
	var tokenNote string
	if token == "" && apiserver.IsLoopback(net.JoinHostPort(u.Hostname(), "0")) {
		// A daemon of this user on this machine: the token in its token
		// file. Never sent to a daemon elsewhere.
		token, tokenNote = localToken(env.Getenv, settings, settingsErr)
	}
	var rt http.RoundTripper = &http.Transport{Proxy: http.ProxyFromEnvironment}
	rt = bearer{token: token, next: rt}
	httpc := &http.Client{Transport: rt}
	return &daemonClient{
		addr:      server,
		tokenNote: tokenNote,
		httpc:     httpc,
		sessions:  claudectlv1connect.NewSessionServiceClient(httpc, server),
		perms:     claudectlv1connect.NewPermissionServiceClient(httpc, server),
		health:    claudectlv1connect.NewHealthServiceClient(httpc, server),
		workers:   claudectlv1connect.NewWorkerServiceClient(httpc, server),
		auth:      claudectlv1connect.NewAuthServiceClient(httpc, server),
		budget:    claudectlv1connect.NewBudgetServiceClient(httpc, server),
		notify:    claudectlv1connect.NewNotifyServiceClient(httpc, server),
		terminal:  claudectlv1connect.NewTerminalServiceClient(httpc, server),
	}, nil
}

func (c *daemonClient) Close() { c.httpc.CloseIdleConnections() }

// localToken finds the token of a daemon of this user on this machine
// where claudectl serve puts it: the token_file of its settings file, else
// the token it generated in its data_dir (relative paths taken from the
// settings file's directory, as serve takes them), else in the default
// data dir, the first that holds a token. note says why a file there
// could not be used (other users can read it, it is empty, the settings
// file is broken), "" when each one was fine or simply missing; it is said
// only if the daemon refuses the request for want of the token.
func localToken(getenv func(string) string, s *serve.Settings, settingsErr error) (token, note string) {
	var notes []string
	if settingsErr != nil {
		notes = append(notes, "the settings file claudectl serve reads was not used: "+settingsErr.Error())
	}
	named := "" // a token_file the settings file names: its absence is worth a word
	if settingsErr == nil {
		named = s.TokenFile
	}
	for _, p := range localTokenPaths(getenv, s, settingsErr) {
		b, err := readPrivateFile(p)
		if err == nil {
			if token = strings.TrimSpace(string(b)); token != "" {
				// Notes too: the daemon may be the one whose file was not used.
				return token, strings.Join(notes, "; ")
			}
			err = errors.New("the file is empty")
		}
		if errors.Is(err, fs.ErrNotExist) && p != named {
			continue
		}
		notes = append(notes, fmt.Sprintf("the token file %s was not used: %s", p, describeIOError(err)))
	}
	return "", strings.Join(notes, "; ")
}

// localTokenPaths are the files localToken reads, in order, given
// claudectl serve's default settings file s (settingsErr when it could not
// be read).
func localTokenPaths(getenv func(string) string, s *serve.Settings, settingsErr error) []string {
	var paths []string
	switch {
	case settingsErr != nil:
	case s.TokenFile != "":
		paths = append(paths, s.TokenFile)
	case s.DataDir != "":
		paths = append(paths, serve.TokenPath(s.DataDir))
	}
	if p := serve.TokenPath(serve.DefaultDataDir(getenv)); !slices.Contains(paths, p) {
		paths = append(paths, p)
	}
	return paths
}

// settingsServer returns the address client commands use without --server
// and CLAUDECTL_SERVER: the listen address of claudectl serve's default
// settings file s (nil when it could not be read; https with its
// tls_cert_file), else defaultServer. A daemon listening on every address
// ("0.0.0.0:7777", ":7777") is reached on loopback.
func settingsServer(s *serve.Settings) string {
	if s == nil || s.Listen == "" {
		return defaultServer
	}
	host, port, err := net.SplitHostPort(s.Listen)
	if err != nil {
		return defaultServer
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http"
	if s.TLSCertFile != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// bearer adds "Authorization: Bearer TOKEN" (when there is a token) and
// the client header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	r.Header.Set(apiserver.ClientHeader, "cli") // for the audit trail, a hint
	return b.next.RoundTrip(r)
}

func (b bearer) CloseIdleConnections() {
	if c, ok := b.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// explain turns an RPC error into a readable one (exit status 1); what says
// what was being done ("sending to session X").
func (c *daemonClient) explain(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) || isDialError(err) {
		return exitWith(ExitFailure, "cannot reach the claudectl daemon at %s (start it with `claudectl serve`)", c.addr)
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return exitWith(ExitFailure, "%s: %v", what, err)
	}
	msg := userMessage(ce.Message())
	switch ce.Code() {
	case connect.CodeNotFound:
		if m := storeNotFound.FindStringSubmatch(ce.Message()); m != nil {
			if list, ok := listHint[strings.ToLower(m[1])]; ok {
				return exitWith(ExitFailure, "%s: no %s %s (%s)", what, strings.ToLower(m[1]), m[2], list)
			}
		}
		if strings.Contains(ce.Message(), "no such pending request") {
			return exitWith(ExitFailure, "%s: it is not pending (claudectl pending lists the requests that are)", what)
		}
		if msg == "not found" {
			return exitWith(ExitFailure, "%s: not found", what)
		}
		if strings.HasPrefix(msg, "no ") { // the daemon's own words: "no session X (...)"
			return exitWith(ExitFailure, "%s: %s", what, msg)
		}
		return exitWith(ExitFailure, "%s: not found: %s", what, msg)
	case connect.CodeInvalidArgument:
		if m, ok := strings.CutPrefix(msg, "invalid "); ok { // "invalid options.worker "x": …"
			return exitWith(ExitFailure, "%s: invalid %s", what, strings.TrimPrefix(m, "options."))
		}
		return exitWith(ExitFailure, "%s: invalid argument: %s", what, msg)
	case connect.CodeFailedPrecondition:
		return exitWith(ExitFailure, "%s: not possible now: %s", what, msg)
	case connect.CodeUnauthenticated:
		if strings.HasPrefix(msg, "token ") { // revoked or expired: the daemon names it
			return exitWith(ExitFailure, "the daemon at %s refused the request: %s", c.addr, msg)
		}
		if c.tokenNote != "" {
			return exitWith(ExitFailure, "the daemon at %s refused the request: missing or bad bearer token (set --token-file or CLAUDECTL_TOKEN); %s", c.addr, c.tokenNote)
		}
		return exitWith(ExitFailure, "the daemon at %s refused the request: missing or bad bearer token (set --token-file or CLAUDECTL_TOKEN)", c.addr)
	case connect.CodePermissionDenied:
		return exitWith(ExitFailure, "%s: permission denied: %s", what, msg)
	case connect.CodeUnavailable:
		return exitWith(ExitFailure, "%s: the daemon at %s is unavailable: %s", what, c.addr, msg)
	case connect.CodeDeadlineExceeded:
		return exitWith(ExitFailure, "%s: timed out: %s", what, msg)
	case connect.CodeCanceled:
		return exitWith(ExitFailure, "%s: canceled", what)
	case connect.CodeResourceExhausted, connect.CodeOutOfRange:
		return exitWith(ExitFailure, "%s: %s", what, msg)
	case connect.CodeUnimplemented:
		return exitWith(ExitFailure, "%s: the daemon at %s does not support this (is it claudectl serve, and as new as this claudectl?): %s", what, c.addr, msg)
	default:
		return exitWith(ExitFailure, "%s: daemon error (%s): %s", what, ce.Code(), msg)
	}
}

// storeNotFound matches the store's "not found" for one record:
// "sqlite: DeleteRule 2: not found", "sqlite: GetSession X: not found".
var storeNotFound = regexp.MustCompile(`^sqlite: [A-Z][a-z]*(Session|Rule) "?([^":]+)"?: not found$`)

// listHint says which command lists the records of a kind.
var listHint = map[string]string{
	"session": "claudectl sessions lists them",
	"rule":    "claudectl rules list shows them",
}

// layerPrefix matches the names of internal layers that start the
// messages of older daemons: "daemon: ", "permission: ", "sqlite:
// GetSession X: " (the store's call too).
var layerPrefix = regexp.MustCompile(`^(daemon|permission|store|claude|apiserver): |^sqlite: [A-Za-z]+( [^:]+)?: `)

// userMessage is a message of the daemon's (or the SDK's, or an event's)
// without the names of its internal layers and API methods: the API's own
// rule (apiserver.ClientMessage, which the daemon applies to its errors
// since), and the store's calls that older daemons named.
func userMessage(msg string) string {
	for {
		loc := layerPrefix.FindStringIndex(msg)
		if loc == nil || loc[1] >= len(msg) {
			return plainWords.Replace(apiserver.ClientMessage(msg))
		}
		msg = msg[loc[1]:]
	}
}

// plainWords says the daemon's and the SDK's words for the terminal:
// a command rather than its RPC, Claude Code rather than "the CLI".
var plainWords = strings.NewReplacer(
	"ResumeSession (claudectl resume)", "claudectl resume",
	"CLI exited with code", "Claude Code exited with code",
	"CLI was terminated by signal", "Claude Code was killed by signal",
	" mid-turn", " during the turn",
)

func isDialError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// parseClient parses args for a client command and returns the positional
// arguments; help is true after -h (usage printed).
func parseClient(env *Env, text string, fs *flag.FlagSet, args []string) (pos []string, help bool, err error) {
	pos, err = parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(env.Stdout, text, fs)
		return nil, true, nil
	}
	return pos, false, err
}

// statusName is SESSION_STATUS_IDLE as "idle".
func statusName(s v1.SessionStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "SESSION_STATUS_"))
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// lifecycleError explains an error of command name on session id. A
// refusal because of the session's state keeps the daemon's words and
// adds what to do instead.
func lifecycleError(dc *daemonClient, err error, name, id string) error {
	what := map[string]string{"resume": "resuming", "fork": "forking", "close": "closing", "interrupt": "interrupting",
		"merge": "merging", "discard": "discarding the worktree of"}[name] +
		" session " + id
	if connect.CodeOf(err) == connect.CodeNotFound {
		return noSession(id)
	}
	explained := dc.explain(err, what)
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition {
		return explained
	}
	var hint string
	switch msg := ce.Message(); {
	case name == "resume" && strings.Contains(msg, "already running"):
		hint = fmt.Sprintf("it still has its CLI: claudectl send %s TEXT talks to it, claudectl close %s ends it", id, id)
	case name == "interrupt" && strings.Contains(msg, "not running"):
		hint = fmt.Sprintf("no turn can run without a CLI: claudectl resume %s starts one", id)
	default:
		return explained
	}
	return exitWith(ExitFailure, "%v (%s)", explained, hint)
}

// resolveSession returns the id of the session whose id is id or, failing
// that, starts with id, as approve and deny take a request's; several are
// a usage error (exit 2) listing them. With none, or when the daemon
// cannot list its sessions, id is returned as it is: the call then says
// there is no such session.
func resolveSession(ctx context.Context, dc *daemonClient, id string) (string, error) {
	_, err := dc.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		return id, nil
	}
	res, err := dc.sessions.ListSessions(ctx, connect.NewRequest(&v1.ListSessionsRequest{}))
	if err != nil {
		return id, nil
	}
	var matches []*v1.Session
	for _, s := range res.Msg.Sessions {
		if strings.HasPrefix(s.Id, id) {
			matches = append(matches, s)
		}
	}
	switch len(matches) {
	case 0:
		return id, nil
	case 1:
		return matches[0].Id, nil
	}
	var b strings.Builder
	for _, s := range matches {
		fmt.Fprintf(&b, "\n  %s  %s in %s", s.Id, statusName(s.Status), s.Cwd)
	}
	return "", exitWith(ExitUsage, "%q is the start of %d sessions; give more of the id:%s", id, len(matches), b.String())
}

// runSessionCall runs a command that makes one call about one session and
// prints what call says it did.
func runSessionCall(ctx context.Context, env *Env, name, text string, args []string,
	call func(context.Context, *daemonClient, string) (string, error)) error {
	env = env.withDefaults()
	var cf clientFlags
	fs := newFlagSet(name)
	cf.register(fs)
	pos, help, err := parseClient(env, text, fs, args)
	if help || err != nil {
		return err
	}
	switch {
	case len(pos) == 0 || strings.TrimSpace(pos[0]) == "":
		return usagef("missing SESSION_ID: %s needs the id of a daemon session (see claudectl sessions)", name)
	case len(pos) > 1:
		return usagef("unexpected argument %q: %s takes one SESSION_ID", pos[1], name)
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	id, err := resolveSession(ctx, dc, pos[0])
	if err != nil {
		return err
	}
	done, err := call(ctx, dc, id)
	if err != nil {
		return lifecycleError(dc, err, name, id)
	}
	fmt.Fprintln(env.Stdout, done)
	return nil
}
