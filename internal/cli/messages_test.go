package cli

import (
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"
)

func TestUserMessage(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"sqlite: DeleteRule 2: not found":         "not found",
		"permission: no such pending request":     "no such pending request",
		`daemon: no session "x" (claudectl ...)`:  `no session "x" (claudectl ...)`,
		"permission: bad rule \"Bash(\": missing": "bad rule \"Bash(\": missing",
		"plain words": "plain words",
		"daemon: session X is idle: it has no CLI process; ResumeSession (claudectl resume) starts one": "session X is idle: it has no CLI process; claudectl resume starts one",
		"claude: CLI exited with code 3 mid-turn (session X); stderr: boom":                             "Claude Code exited with code 3 during the turn (session X); stderr: boom",
		"daemon: creating session: sqlite: append: disk I/O error":                                      "creating session: append: disk I/O error",
		`daemon: invalid options.model "daemon: x": bad`:                                                `invalid options.model "daemon: x": bad`,
	} {
		if got := userMessage(in); got != want {
			t.Errorf("userMessage(%q) = %q, want %q", in, got, want)
		}
	}
	m := storeNotFound.FindStringSubmatch("sqlite: DeleteRule 2: not found")
	if m == nil || m[1] != "Rule" || m[2] != "2" {
		t.Errorf("storeNotFound: %q", m)
	}
}

// TestExplainInvalidArgument: the daemon's "invalid FIELD" is said
// without "invalid argument:" before it, nor the API's "options." prefix.
func TestExplainInvalidArgument(t *testing.T) {
	t.Parallel()
	dc := &daemonClient{addr: "http://127.0.0.1:7777"}
	err := dc.explain(connect.NewError(connect.CodeInvalidArgument, errors.New(`daemon: invalid options.worker "gpu": no worker gpu is connected`)), "creating a session")
	if want := `creating a session: invalid worker "gpu": no worker gpu is connected`; err.Error() != want {
		t.Errorf("explain = %q, want %q", err, want)
	}
}

// TestMessagesSayItOnce: doctor and serve with a --cli that is not Claude
// Code say what is wrong once.
func TestMessagesSayItOnce(t *testing.T) {
	t.Parallel()
	o := claudectl(t, invocation{}, "doctor", "--cli", "/bin/true")
	if o.code != ExitUnavailable {
		t.Errorf("doctor --cli /bin/true: exit %d, want %d", o.code, ExitUnavailable)
	}
	if n := strings.Count(o.stdout, "GNU coreutils"); n > 1 {
		t.Errorf("doctor --cli /bin/true shows true's output %d times:\n%s", n, o.stdout)
	}
	if !strings.Contains(o.stdout, "it is not Claude Code") {
		t.Errorf("doctor --cli /bin/true does not say it is not Claude Code:\n%s", o.stdout)
	}

	o = claudectl(t, invocation{getenv: map[string]string{"XDG_DATA_HOME": t.TempDir()}}, "serve", "--cli", "/nonexistent", "--listen", "127.0.0.1:0")
	if o.code != ExitNotFound || strings.Count(strings.ToLower(o.stderr), "not found") != 1 || !strings.Contains(o.stderr, "/nonexistent: does not exist") ||
		strings.Contains(o.stderr, "claude:") {
		t.Errorf("serve --cli /nonexistent: exit %d, stderr %q; want %d saying not found once, without the SDK's name", o.code, o.stderr, ExitNotFound)
	}

	// serve and run (without a daemon) check the CLI as doctor does, and
	// end with the same status.
	for _, args := range [][]string{{"serve", "--listen", "127.0.0.1:0"}, {"run", "hi"}} {
		o = claudectl(t, invocation{getenv: map[string]string{"XDG_DATA_HOME": t.TempDir(), "XDG_CONFIG_HOME": t.TempDir()}}, append(args, "--cli", "/bin/true")...)
		if o.code != ExitUnavailable || strings.Count(o.stderr, "it is not Claude Code") != 1 || strings.Contains(o.stderr, "claude:") ||
			strings.Contains(o.stderr, "WARN") || strings.Contains(o.stderr, "without a result") {
			t.Errorf("%s --cli /bin/true: exit %d, stderr %q; want %d saying once that it is not Claude Code", args[0], o.code, o.stderr, ExitUnavailable)
		}
	}
	old := script(t, `[ "$1" = --version ] && { echo "1.0.3 (Claude Code)"; exit 0; }; echo '{"type":"text"}'`)
	o = claudectl(t, invocation{}, "run", "--cli", old, "hi")
	if o.code != ExitConfig || !strings.Contains(o.stderr, "Claude Code 1.0.3 is too old") || strings.Contains(o.stderr, "WARN") {
		t.Errorf("run --cli OLD: exit %d, stderr %q; want %d saying it is too old", o.code, o.stderr, ExitConfig)
	}
}

// TestTokenFileHelp: --token-file's default is where the token comes from,
// not a file named by $CLAUDECTL_TOKEN.
func TestTokenFileHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"sessions", "-h"}, {"pending", "-h"}, {"run", "-h"}} {
		o := claudectl(t, invocation{}, args...)
		if o.code != 0 || strings.Contains(o.stdout, "(default $CLAUDECTL_TOKEN)") ||
			!strings.Contains(o.stdout, "default: the CLAUDECTL_TOKEN variable, else the daemon's token file: the token_file of claudectl serve's settings, else the token in its data dir") {
			t.Errorf("%v: exit %d, --token-file's help:\n%s", args, o.code, o.stdout)
		}
	}
}

// TestHelpPlaceholders: every flag that takes a value names it (FILE,
// MODE), never flag's bare "value".
func TestHelpPlaceholders(t *testing.T) {
	t.Parallel()
	for _, c := range Commands(&Env{}) {
		o := claudectl(t, invocation{}, c.Name(), "-h")
		for l := range strings.SplitSeq(o.stdout, "\n") {
			if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[0], "--") && f[1] == "value" {
				t.Errorf("%s -h: %q", c.Name(), l)
			}
		}
	}
}

// TestUnknownSessionSaidAlike: every command that takes a session id says
// the same of one the daemon does not know, in the user's words (send
// said "sending to session X: no session "X" (…)", rules add "adding the
// rule: …").
func TestUnknownSessionSaidAlike(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, args := range [][]string{
		{"send", "no-such-session", "hello"},
		{"resume", "no-such-session"},
		{"fork", "no-such-session"},
		{"close", "no-such-session"},
		{"interrupt", "no-such-session"},
		{"attach", "no-such-session"},
		{"pending", "--session", "no-such-session"},
		{"rules", "add", "Bash(ls:*)", "allow", "--session", "no-such-session"},
	} {
		o := claudectl(t, d.inv(), args...)
		if want := "claudectl " + args[0] + ": no session no-such-session (claudectl sessions lists them)\n"; o.code != ExitFailure || o.stderr != want {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", args, o.code, o.stderr, ExitFailure, want)
		}
	}
}
