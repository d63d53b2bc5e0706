package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/internal/serve"
)

// TestServeDemo runs "claudectl serve --demo" with no API key anywhere in
// claudectl's environment, then uses it as the banner says: a prompt
// streams its reply, a Bash request is approved with "claudectl approve"
// from another client, a question is answered in "claudectl attach", and
// the demo's temporary directories are gone after it stops.
func TestServeDemo(t *testing.T) {
	old := demoPace
	demoPace = time.Millisecond
	defer func() { demoPace = old }()
	// Nothing but what the CLI search needs: no ANTHROPIC_API_KEY.
	getenv := map[string]string{"HOME": t.TempDir(), "PATH": os.Getenv("PATH")}
	s := startServe(t, getenv, "--demo", "--listen", freeAddr(t), "--cli", claudetest.CLIPath(t))
	// The banner follows the "serving" line.
	waitFor(t, "the demo's banner", func() bool { return strings.Contains(s.stderr.String(), "Ctrl-C stops the demo.") })
	banner := s.stderr.String()
	for _, want := range []string{"DEMO: every session talks to a SCRIPTED model", "No API key is used",
		"export CLAUDECTL_SERVER=http://" + s.addr, "run 'show me a tool'", "approve REQUEST_ID", "attach SESSION_ID",
		"(temporary: removed when the demo stops)"} {
		if !strings.Contains(banner, want) {
			t.Errorf("the banner lacks %q:\n%s", want, banner)
		}
	}
	if strings.Contains(banner, "read it by themselves") {
		t.Errorf("the demo's token is not where clients look by themselves, yet the start-up says so:\n%s", banner)
	}
	m := regexp.MustCompile(`Data directory: (\S+)`).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("no data directory in the banner:\n%s", banner)
	}
	dataDir := m[1]
	token, err := os.ReadFile(serve.TokenPath(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	client := map[string]string{"CLAUDECTL_SERVER": "http://" + s.addr, "CLAUDECTL_TOKEN": strings.TrimSpace(string(token))}
	inv := invocation{getenv: client}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	auth := connect.WithInterceptors(bearerInterceptor(client["CLAUDECTL_TOKEN"]))
	sessions := claudectlv1connect.NewSessionServiceClient(&http.Client{Transport: tr}, "http://"+s.addr, auth)
	perms := claudectlv1connect.NewPermissionServiceClient(&http.Client{Transport: tr}, "http://"+s.addr, auth)

	// A prompt the model does not know: the help, streamed in many deltas.
	o := claudectl(t, inv, "run", "--cwd", t.TempDir(), "--keep", "hello")
	if o.code != 0 || !strings.Contains(o.stdout, "scripted model") || !strings.Contains(o.stdout, "'show me a tool'") {
		t.Fatalf("run hello: exit %d, stdout %q", o.code, o.stdout)
	}
	id := regexp.MustCompile(`daemon session (\S+)`).FindStringSubmatch(o.stderr)
	if id == nil {
		t.Fatalf("no session id on stderr: %q", o.stderr)
	}
	if n := countDeltas(t, ctx, sessions, client["CLAUDECTL_TOKEN"], id[1]); n < 20 {
		t.Errorf("the reply came in %d text deltas: it does not stream", n)
	}

	// Bash ls waits for permission; another client approves it.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "hello.txt"), "hi")
	stdin, hold := io.Pipe() // a terminal nobody types on
	defer hold.Close()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		env := &Env{Stdin: stdin, Stdout: &stdout, Stderr: &stderr, StdinIsTerminal: func() bool { return true },
			Getenv: func(k string) string { return client[k] }}
		done <- Main(ctx, env, []string{"run", "--cwd", dir, "show me a tool"})
	}()
	var reqID string
	waitFor(t, "the Bash permission request", func() bool {
		res, err := perms.ListPending(ctx, connect.NewRequest(&v1.ListPendingRequest{}))
		if err != nil || len(res.Msg.Requests) == 0 {
			return false
		}
		if r := res.Msg.Requests[0]; r.ToolName == "Bash" {
			reqID = r.RequestId
		}
		return reqID != ""
	})
	if o := claudectl(t, inv, "approve", reqID); o.code != 0 {
		t.Fatalf("approve: exit %d, stderr %q", o.code, o.stderr)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("run 'show me a tool': exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("run did not end after the approval\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "hello.txt") || !strings.Contains(stdout.String(), "The directory holds 1 entries") {
		t.Errorf("the reply does not report what ls listed:\n%s", stdout.String())
	}

	// A question, answered in attach.
	res, err := sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir(), IncludePartialMessages: true}, Prompt: "ask me a question"}))
	if err != nil {
		t.Fatal(err)
	}
	qid := res.Msg.Session.Id
	ainv := inv
	ainv.tty, ainv.stdin = true, "2\n"
	live, wait := background(t, ainv, "attach", qid)
	waitFor(t, "the reply to the answer", func() bool { return strings.Contains(live.String(), "you chose Thinking") })
	if o := claudectl(t, inv, "close", qid); o.code != 0 {
		t.Fatalf("close: exit %d, stderr %q", o.code, o.stderr)
	}
	if o := wait(); o.code != 0 || !strings.Contains(o.stderr, "Which part of claudectl would you like to see next?") {
		t.Errorf("attach: exit %d, stderr %q", o.code, o.stderr)
	}

	if code := s.stop(); code != 0 {
		t.Fatalf("serve --demo exit %d", code)
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("the demo's data directory %s is still there after it stopped (%v)", dataDir, err)
	}
}

// countDeltas counts the text deltas session id logged.
func countDeltas(t *testing.T, ctx context.Context, sessions claudectlv1connect.SessionServiceClient, token, id string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req := connect.NewRequest(&v1.SubscribeRequest{SessionId: id})
	req.Header().Set("Authorization", "Bearer "+token)
	stream, err := sessions.Subscribe(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	n := 0
	for stream.Receive() {
		ev := stream.Msg().Event
		if ev.GetTextDelta() != nil {
			n++
		}
		if ev.GetMessage().GetType() == "result" {
			break
		}
	}
	if n == 0 && stream.Err() != nil {
		t.Fatalf("Subscribe: %v", stream.Err())
	}
	return n
}

// bearerInterceptor sends the daemon's token with unary calls.
func bearerInterceptor(token string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	}
}

// The demo refuses to listen beyond loopback, and keeps the user's
// environment from sending its CLIs anywhere but the scripted model.
func TestDemoSettings(t *testing.T) {
	cfg := &serve.Settings{Listen: "0.0.0.0:7778"}
	if _, err := startDemo(cfg, true); err == nil || !strings.Contains(err.Error(), "127.0.0.1 only") {
		t.Errorf("startDemo on 0.0.0.0: %v, want a refusal", err)
	}
	cfg = &serve.Settings{Env: map[string]string{"ANTHROPIC_BASE_URL": "https://api.anthropic.com", "FOO": "bar"}}
	d, err := startDemo(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	dataDir, home := cfg.DataDir, filepath.Join(cfg.DataDir, "demo-home")
	if cfg.Listen != DemoListen || dataDir == "" || !strings.Contains(dataDir, "claudectl-demo-") {
		t.Errorf("listen %q, data dir %q: want %s and a temporary directory", cfg.Listen, dataDir, DemoListen)
	}
	for k, want := range map[string]string{"ANTHROPIC_BASE_URL": d.model.URL, "ANTHROPIC_API_KEY": "sk-ant-demo-not-a-key",
		"HOME": home, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "HTTPS_PROXY": "", "ANTHROPIC_AUTH_TOKEN": "",
		"CLAUDE_CODE_USE_BEDROCK": "", "FOO": "bar"} {
		if got, ok := cfg.Env[k]; !ok || got != want {
			t.Errorf("the CLIs' %s = %q (set %v), want %q", k, got, ok, want)
		}
	}
	if !strings.HasPrefix(d.model.URL, "http://127.0.0.1:") {
		t.Errorf("the model is at %s, want 127.0.0.1", d.model.URL)
	}
	d.close()
	d.close()
	for _, p := range []string{dataDir, home} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after close (%v)", p, err)
		}
	}

	// With a data directory of the user's, the CLIs' HOME (their
	// transcripts) is in it and stays with it, so that its sessions can be
	// resumed when the demo restarts.
	given := t.TempDir()
	cfg = &serve.Settings{DataDir: given}
	if d, err = startDemo(cfg, false); err != nil {
		t.Fatal(err)
	}
	d.close()
	if home := filepath.Join(given, "demo-home"); cfg.Env["HOME"] != home {
		t.Errorf("with --data-dir the CLIs' HOME is %q, want %q", cfg.Env["HOME"], home)
	} else if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		t.Errorf("the CLIs' HOME in the data directory given is gone after the demo: %v", err)
	}
}

// TestServeTokenInURLOnlyOnATerminal: the web page's address that logs a
// browser in (the token in its fragment) is printed only when stderr is a
// terminal, by serve and serve --demo alike: "serve --demo > log 2>&1"
// must not leave the token in the log. Elsewhere they say where the token
// file is.
func TestServeTokenInURLOnlyOnATerminal(t *testing.T) {
	cli := claudetest.CLIPath(t)
	for _, demoMode := range []bool{false, true} {
		for _, tty := range []bool{false, true} {
			data := t.TempDir()
			args := []string{"--listen", freeAddr(t), "--data-dir", data, "--cli", cli}
			printed := "Web page: "
			if demoMode {
				args, printed = append(args, "--demo"), "Ctrl-C stops the demo."
			}
			getenv := map[string]string{"HOME": t.TempDir(), "XDG_CONFIG_HOME": t.TempDir(), "PATH": os.Getenv("PATH")}
			s := startServeTerm(t, getenv, tty, args...)
			waitFor(t, "the web page's address", func() bool { return strings.Contains(s.stderr.String(), printed) })
			if code := s.stop(); code != 0 {
				t.Fatalf("demo %v, terminal %v: serve exited with %d", demoMode, tty, code)
			}
			b, err := os.ReadFile(serve.TokenPath(data))
			if err != nil {
				t.Fatal(err)
			}
			token, out := strings.TrimSpace(string(b)), s.stderr.String()
			switch {
			case tty && !strings.Contains(out, "http://"+s.addr+"/#token="+token):
				t.Errorf("demo %v, stderr a terminal: no address that logs the browser in:\n%s", demoMode, out)
			case !tty && strings.Contains(out, token):
				t.Errorf("demo %v, stderr no terminal: the token is printed:\n%s", demoMode, out)
			case !tty && !strings.Contains(out, "log in with the token in "+serve.TokenPath(data)):
				t.Errorf("demo %v, stderr no terminal: it does not say where the token is:\n%s", demoMode, out)
			}
		}
	}
}

// TestDocsTokenInURLOnlyOnATerminal: the READMEs say what
// TestServeTokenInURLOnlyOnATerminal checks, for serve --demo too (web/README
// said the demo always printed the address with the token).
func TestDocsTokenInURLOnlyOnATerminal(t *testing.T) {
	for _, doc := range []string{"../../README.md", "../../web/README.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(b)), " ")
		if !strings.Contains(text, "#token=…") {
			t.Errorf("%s no longer shows the login address: check this test", doc)
		}
		if regexp.MustCompile(`(?i)--demo[^.]*always prints`).MatchString(text) {
			t.Errorf("%s says serve --demo always prints the address with the token: it does only when its stderr is a terminal", doc)
		}
		if !strings.Contains(text, "when its stderr is a terminal") && !strings.Contains(text, "when their stderr is a terminal") {
			t.Errorf("%s does not say the address with the token is printed only to a terminal", doc)
		}
	}
}

// TestServeDemoJSONLogs: with --log-format json every line serve --demo
// writes is a JSON object, its banner too (one line with what the text
// banner says: the scripted model, the data directory, how clients reach
// the daemon), so "serve --demo --log-format json 2>&1 | jq" works.
func TestServeDemoJSONLogs(t *testing.T) {
	var stdout, stderr lockedBuffer
	env := &Env{Stdout: &stdout, Stderr: &stderr, StderrIsTerminal: func() bool { return true },
		Getenv: func(k string) string { return map[string]string{"HOME": t.TempDir(), "PATH": os.Getenv("PATH")}[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	addr := freeAddr(t)
	go func() {
		code <- Main(ctx, env, []string{"serve", "--demo", "--log-format", "json", "--listen", addr, "--cli", claudetest.CLIPath(t)})
	}()
	waitFor(t, "the demo's banner", func() bool {
		return strings.Contains(stderr.String(), `"scripted_model"`) || strings.Contains(stderr.String(), "Ctrl-C stops the demo.")
	})
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("serve --demo exit %d; stderr:\n%s", c, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve --demo did not stop; stderr:\n%s", stderr.String())
	}
	var demoLine map[string]any
	for line := range strings.Lines(stderr.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a line of serve --demo --log-format json is not JSON: %q", line)
			continue
		}
		if rec["scripted_model"] != nil {
			demoLine = rec
		}
	}
	if demoLine == nil {
		t.Fatalf("no demo line in:\n%s", stderr.String())
	}
	for k, want := range map[string]string{"server": "http://" + addr, "scripted_model": "http://127.0.0.1:"} {
		if got, _ := demoLine[k].(string); !strings.HasPrefix(got, want) {
			t.Errorf("the demo line's %s is %q, want %q…: %v", k, got, want, demoLine)
		}
	}
	for _, k := range []string{"data_dir", "token_file", "try"} {
		if s, _ := demoLine[k].(string); s == "" {
			t.Errorf("the demo line has no %s: %v", k, demoLine)
		}
	}
	if strings.Contains(stderr.String(), "#token=") {
		t.Errorf("a JSON log line carries the token in the page's address:\n%s", stderr.String())
	}
}

// TestDemoBannerCommandsWorkAnywhere runs the built claudectl as a person
// would from a checkout ("./bin/claudectl serve --demo", claudectl not on
// PATH, in a directory whose name has a space): the banner's commands are
// for another terminal, so they must work from any directory there, as
// the shell reads them.
func TestDemoBannerCommandsWorkAnywhere(t *testing.T) {
	t.Parallel()
	checkout := filepath.Join(t.TempDir(), "my checkout")
	bin := filepath.Join(checkout, "bin", "claudectl")
	if err := os.MkdirAll(filepath.Dir(bin), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(buildClaudectl(t), bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("./bin/claudectl", "serve", "--demo", "--listen", freeAddr(t), "--cli", claudetest.CLIPath(t))
	cmd.Dir = checkout
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Errorf("serve --demo: %v\n%s", err, stderr.String())
		}
	}()
	waitFor(t, "the demo's banner", func() bool { return strings.Contains(stderr.String(), "Ctrl-C stops the demo.") })
	m := regexp.MustCompile(`(?m)^    (.+) sessions$`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no claudectl sessions line in the banner:\n%s", stderr.String())
	}
	self := m[1]
	if want := "'" + bin + "'"; self != want {
		t.Errorf("the banner runs claudectl as %s, want %s (absolute, quoted for the shell)", self, want)
	}
	// In the other terminal, elsewhere.
	sh := exec.Command("/bin/sh", "-c", self+" version")
	sh.Dir = t.TempDir()
	if out, err := sh.CombinedOutput(); err != nil || !strings.Contains(string(out), "claudectl") {
		t.Errorf("%s version, run in another directory: %v\n%s", self, err, out)
	}
}

// TestServeDemoTourInACheckout takes the demo's tour as the banner says,
// from a checkout: it answers the three prompts on the terminal (allow
// Bash, the question's second option, allow the Write, shown as a diff)
// and leaves no file in the checkout; the file is in the demo's own
// directory.
func TestServeDemoTourInACheckout(t *testing.T) {
	old := demoPace
	demoPace = time.Millisecond
	defer func() { demoPace = old }()
	data := t.TempDir()
	s := startServe(t, map[string]string{"HOME": t.TempDir(), "PATH": os.Getenv("PATH")},
		"--demo", "--listen", freeAddr(t), "--data-dir", data, "--cli", claudetest.CLIPath(t))
	waitFor(t, "the demo's banner", func() bool { return strings.Contains(s.stderr.String(), "Ctrl-C stops the demo.") })
	files := filepath.Join(data, "demo-files")
	if !strings.Contains(s.stderr.String(), "the files the demo writes go to "+files+".") {
		t.Errorf("the banner does not say where the demo's files go:\n%s", s.stderr.String())
	}
	token, err := os.ReadFile(serve.TokenPath(data))
	if err != nil {
		t.Fatal(err)
	}
	checkout := t.TempDir()
	writeFile(t, filepath.Join(checkout, "main.go"), "package main\n")
	inv := invocation{tty: true, stdin: "y\n2\ny\n",
		getenv: map[string]string{"CLAUDECTL_SERVER": "http://" + s.addr, "CLAUDECTL_TOKEN": strings.TrimSpace(string(token))}}
	o := claudectl(t, inv, "run", "--cwd", checkout, "tour")
	if o.code != 0 || !strings.Contains(o.stdout, "That was the tour: streaming, thinking, a Bash command approved, a question answered and a file written") {
		t.Fatalf("the tour: exit %d, stdout:\n%s", o.code, o.stdout)
	}
	for _, want := range []string{"Allow Bash: ", "[Next] Which part of claudectl would you like to see next?",
		"+# claudectl demo", "Allow Write: " + filepath.Join(files, claudetest.DemoFile) + "?"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("the tour's prompts lack %q:\n%s", want, o.stderr)
		}
	}
	if ents, err := os.ReadDir(checkout); err != nil || len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the checkout after the tour holds %v (%v), want only main.go", names, err)
	}
	if !fileExists(filepath.Join(files, claudetest.DemoFile)) {
		t.Errorf("%s is not in the demo's directory %s", claudetest.DemoFile, files)
	}
}
