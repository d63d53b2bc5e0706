package cli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/internal/serve"
)

// DemoListen is where "claudectl serve --demo" listens unless --listen
// says otherwise: beside a real daemon on the default 7777.
const DemoListen = "127.0.0.1:7778"

// demoListen is DemoListen; tests change it.
var demoListen = DemoListen

// demoPace is claudetest.DemoOptions.Pace for serve --demo; tests
// shorten it.
var demoPace time.Duration

// demo is the scripted model of "claudectl serve --demo" and the
// temporary directories it made. close undoes it all.
type demo struct {
	model    *claudetest.Server
	dataDir  string // made here, removed by close; "" when --data-dir was given
	filesDir string // where the model's scenes make files (DemoOptions.Dir)
}

// demoEnvRemoved are variables of the user's environment that could send
// the demo's CLIs elsewhere than the scripted model, or with a real
// credential: the demo removes them from the CLIs' environment.
var demoEnvRemoved = []string{
	"ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_CUSTOM_HEADERS",
	"CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY",
	"ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL", "ANTHROPIC_FOUNDRY_BASE_URL",
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
	"CLAUDE_CONFIG_DIR", "ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL",
}

// startDemo sets cfg up for the demo: a scripted model on 127.0.0.1, the
// CLIs pointed at it with a dummy key and their own HOME, and a
// temporary data directory unless one was given. It refuses an address
// beyond loopback: the demo is for this machine.
func startDemo(cfg *serve.Settings, listenGiven bool) (*demo, error) {
	if !listenGiven {
		cfg.Listen = demoListen
	}
	if !apiserver.IsLoopback(cfg.Listen) {
		return nil, badValue("listen", cfg.Listen, "--demo serves on 127.0.0.1 only")
	}
	d := &demo{}
	ok := false
	defer func() {
		if !ok {
			d.close()
		}
	}()
	var err error
	if cfg.DataDir == "" {
		if d.dataDir, err = os.MkdirTemp("", "claudectl-demo-"); err != nil {
			return nil, fmt.Errorf("demo data directory: %w", err)
		}
		cfg.DataDir = d.dataDir
	}
	// The CLIs' HOME holds the conversations' transcripts: it lives in the
	// data directory, with the sessions, so that a data directory given
	// outlives the demo with sessions that can be resumed when it
	// restarts (a temporary one is removed whole).
	home := filepath.Join(cfg.DataDir, "demo-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("demo home directory: %w", err)
	}
	// The files the scenes make (the tour's Write) go to a directory of
	// the demo's, not to the sessions' directories: trying the demo in a
	// checkout must not leave a file there.
	d.filesDir = filepath.Join(cfg.DataDir, "demo-files")
	if err := os.MkdirAll(d.filesDir, 0o700); err != nil {
		return nil, fmt.Errorf("demo files directory: %w", err)
	}
	d.model = claudetest.NewServer(claudetest.Demo(&claudetest.DemoOptions{Pace: demoPace, Dir: d.filesDir}))
	env := make(map[string]string, len(cfg.Env)+32)
	for k, v := range cfg.Env {
		env[k] = v
	}
	for _, k := range demoEnvRemoved {
		env[k] = "" // removed
	}
	for k, v := range d.model.EnvMap(home) {
		env[k] = v
	}
	env["ANTHROPIC_API_KEY"] = "sk-ant-demo-not-a-key"
	env["NO_PROXY"] = "127.0.0.1,localhost"
	cfg.Env = env
	ok = true
	return d, nil
}

// close stops the model and removes the directories the demo made.
// Idempotent.
func (d *demo) close() {
	if d.model != nil {
		d.model.Close()
		d.model = nil
	}
	if d.dataDir != "" {
		os.RemoveAll(d.dataDir)
		d.dataDir = ""
	}
}

// banner is what serve --demo prints once it serves: that it is a demo,
// where its data is, and the commands to try. tokenInURL is
// serve.Options.TokenInPageURL: only on a terminal does the web page's
// address carry the token (written to a log, the address would put the
// token there); elsewhere the banner says where the token is instead.
func (d *demo) banner(w io.Writer, srv *serve.Server, dataDir string, tokenInURL bool) {
	self := selfCommand()
	url := "http://" + srv.Addr
	where := dataDir + " (yours: it stays after the demo)"
	if d.dataDir != "" {
		where = dataDir + " (temporary: removed when the demo stops)"
	}
	tokenExport := "CLAUDECTL_TOKEN=$(cat " + shellQuote(serve.TokenPath(dataDir)) + ")"
	if srv.TokenFile == "" {
		tokenExport = "CLAUDECTL_TOKEN=...the token of your token_file..."
	}
	page, pageHow := srv.PageURL(), "the address logs it in"
	if !tokenInURL {
		page, pageHow = url+"/", "log in with the token in "+serve.TokenPath(dataDir)
		if srv.TokenFile == "" {
			pageHow = "log in with the token of your token_file"
		}
	}
	bar := strings.Repeat("=", 76)
	fmt.Fprintf(w, `
%s
  DEMO: every session talks to a SCRIPTED model on %s, not to Claude.
  No API key is used and nothing leaves this machine. The real Claude Code
  CLI runs the sessions and their tools (in the directory you run them in);
  the files the demo writes go to %s.
%s
  Data directory: %s

  Web page (watch, steer and approve from a browser; %s):
    %s

  In another terminal, point claudectl at this demo:
    export CLAUDECTL_SERVER=%s %s

  then try (the model answers by keyword):
    %s run 'tour'
        streaming, thinking, a command to allow, a question, a file written
    %s run 'show me a tool'
        Bash ls waits for permission: answer y there, or from a third terminal
        (export the same two variables) find it and approve it:
    %s sessions
    %s approve REQUEST_ID
    %s run --keep 'ask me a question'
        answer there, or from another terminal: %s attach SESSION_ID
    %s run 'write a file'
        writes %s there, once you allow it

  Prompts the demo model knows:
%s

  Ctrl-C stops the demo.
%s

`, bar, d.model.URL, d.filesDir, bar, where, pageHow, page, url, tokenExport, self, self, self, self, self, self, self, claudetest.DemoFile,
		claudetest.DemoKeywords, bar)
}

// logBanner is the banner as one line of the daemon's log, for
// log_format json, whose every line is a JSON object: the scripted model,
// the data directory, where clients reach the daemon and the prompts to
// try. The web page's address never carries the token there (a log is
// not a terminal); tokenFile is the configured token_file, "" when the
// daemon generated its token.
func (d *demo) logBanner(srv *serve.Server, dataDir, tokenFile string) {
	if srv.TokenFile != "" {
		tokenFile = srv.TokenFile
	}
	var prompts []string
	for line := range strings.Lines(claudetest.DemoKeywords) {
		if p, _, ok := strings.Cut(strings.TrimSpace(line), "  "); ok {
			prompts = append(prompts, p)
		}
	}
	srv.Log.Info("demo: every session talks to a scripted model, not to Claude; no API key is used and nothing leaves this machine",
		"scripted_model", d.model.URL, "server", "http://"+srv.Addr, "web_page", "http://"+srv.Addr+"/",
		"data_dir", dataDir, "data_dir_temporary", d.dataDir != "", "files_dir", d.filesDir, "token_file", tokenFile,
		"client_env", "CLAUDECTL_SERVER=http://"+srv.Addr+" CLAUDECTL_TOKEN=$(cat "+shellQuote(tokenFile)+")",
		"try", selfCommand()+" run 'tour'", "prompts", prompts)
}

// selfCommand is how the user runs this claudectl from another terminal,
// in whatever directory that one is: "claudectl" when that is what PATH
// finds, else the executable's absolute path, quoted for the shell. Not a
// path relative to this directory (./bin/claudectl), which works only
// from here.
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil || strings.HasSuffix(filepath.Base(exe), ".test") {
		return "claudectl"
	}
	if p, err := exec.LookPath("claudectl"); err == nil && sameFile(p, exe) {
		return "claudectl"
	}
	return shellQuote(exe)
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '+' || r == ',' ||
			r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
