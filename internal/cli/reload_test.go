package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claudetest"
)

// limitMetric reads claudectl_cli_processes_limit (sessions.max_running
// in force) from the daemon's /metrics.
func limitMetric(t *testing.T, addr, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(res.Body, 1<<20))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "claudectl_cli_processes_limit "); ok {
			return v
		}
	}
	t.Fatalf("no claudectl_cli_processes_limit in /metrics (%s)", res.Status)
	return ""
}

// TestServeReloadsOnSIGHUP: SIGHUP (and claudectl reload) make serve read
// its settings file again. A broken file changes nothing, and the log and
// claudectl reload say where it is broken; a good one applies what can
// change live and names what needs a restart.
func TestServeReloadsOnSIGHUP(t *testing.T) {
	cli, err := filepath.Abs(claudetest.CLIPath(t))
	if err != nil {
		t.Fatal(err)
	}
	xdg := t.TempDir()
	file := filepath.Join(xdg, "claudectl", "settings.json")
	addr := freeAddr(t)
	good := `{"listen": "` + addr + `", "data_dir": "data", "cli": "` + cli + `", "sessions": {"max_running": 4}}`
	writeFile(t, file, good)
	getenv := map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": t.TempDir()}
	hangups := make(chan os.Signal, 1)
	s := startServeWith(t, getenv, false, hangups)
	tok, err := os.ReadFile(filepath.Join(xdg, "claudectl", "data", "token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	if got := limitMetric(t, s.addr, token); got != "4" {
		t.Fatalf("max_running at start: %s, want 4", got)
	}
	waitLog := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(s.stderr.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("the log never said %q:\n%s", what, s.stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	writeFile(t, file, strings.Replace(good, `"max_running": 4`, `"max_running": "two"`, 1))
	hangups <- syscall.SIGHUP
	waitLog(`msg="reload: the settings were not changed"`)
	if log := s.stderr.String(); !strings.Contains(log, `settings.json:1:`) || !strings.Contains(log, `invalid value \"two\" for sessions.max_running`) {
		t.Errorf("the log does not say where the file is broken:\n%s", log)
	}
	if got := limitMetric(t, s.addr, token); got != "4" {
		t.Errorf("max_running after a broken file: %s, want 4 still", got)
	}
	withToken := map[string]string{"CLAUDECTL_TOKEN": token}
	for k, v := range getenv {
		withToken[k] = v
	}
	o := claudectl(t, invocation{getenv: withToken}, "reload", "--server", s.addr)
	if o.code != 1 || !strings.Contains(o.stderr, "the settings were not changed") || !strings.Contains(o.stderr, "sessions.max_running") {
		t.Errorf("claudectl reload of a broken file: exit %d: %s", o.code, o.stderr)
	}

	writeFile(t, file, strings.Replace(strings.Replace(good, `"max_running": 4`, `"max_running": 2`, 1),
		`"data_dir"`, `"log_level": "debug", "daemon": {"full_sync": true}, "data_dir"`, 1))
	hangups <- syscall.SIGHUP
	waitLog(`msg="reloaded the settings"`)
	if got := limitMetric(t, s.addr, token); got != "2" {
		t.Errorf("max_running after SIGHUP: %s, want 2", got)
	}
	log := s.stderr.String()
	if !strings.Contains(log, "applied=log_level,sessions.max_running") || !strings.Contains(log, "restart_needed=daemon.full_sync") {
		t.Errorf("the log does not say what was applied and what needs a restart:\n%s", log)
	}
	o = claudectl(t, invocation{getenv: getenv}, "reload")
	if o.code != 0 || !strings.Contains(o.stdout, "Reloaded "+file+": nothing it can apply live changed") ||
		!strings.Contains(o.stdout, "restarts (the old values stay in force until then): daemon.full_sync") {
		t.Errorf("claudectl reload of the same file: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
	if code := s.stop(); code != 0 {
		t.Errorf("serve exited with %d after the reloads", code)
	}
}

// waitCommand runs until its context ends.
type waitCommand struct{}

func (waitCommand) Name() string    { return "wait" }
func (waitCommand) Summary() string { return "" }
func (waitCommand) Run(ctx context.Context, _ []string) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestHangupCancelsOtherCommands: for every command but serve, SIGHUP is a
// terminal that hung up: the command's context ends, and claudectl exits
// 129 (128 + SIGHUP).
func TestHangupCancelsOtherCommands(t *testing.T) {
	hangups := make(chan os.Signal, 1)
	env := (&Env{Stdout: io.Discard, Stderr: io.Discard, Hangups: hangups}).withDefaults()
	hangups <- syscall.SIGHUP
	if code := runCommand(context.Background(), env, waitCommand{}, nil); code != ExitHangup {
		t.Errorf("a command hung up: exit %d, want %d", code, ExitHangup)
	}
}
