package cli

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
)

// testDaemon is an in-process daemon on 127.0.0.1 whose sessions run the
// real CLI against a scripted fake API (as in daemon/api's tests).
type testDaemon struct {
	url      string
	token    string // the generated token, for the client commands
	ctx      context.Context
	sessions claudectlv1connect.SessionServiceClient
	perms    claudectlv1connect.PermissionServiceClient
}

func startDaemon(t *testing.T, turns ...claudetest.Turn) *testDaemon {
	t.Helper()
	return startDaemonToken(t, "", turns...)
}

// startDaemonToken is startDaemon requiring the bearer token (if not "").
func startDaemonToken(t *testing.T, token string, turns ...claudetest.Turn) *testDaemon {
	t.Helper()
	d := daemontest.Start(t, &daemontest.Options{Token: token}, turns...)
	url, httpc := d.Serve()
	td := &testDaemon{url: url, ctx: d.Ctx, sessions: claudectlv1connect.NewSessionServiceClient(httpc, url),
		perms: claudectlv1connect.NewPermissionServiceClient(httpc, url)}
	if token == "" {
		td.token = d.Token() // generated: the client finds it as it would in the data dir
	}
	return td
}

// tokenEnv is the environment that gives client commands the daemon's
// generated token.
func (d *testDaemon) tokenEnv() map[string]string {
	return map[string]string{"CLAUDECTL_TOKEN": d.token}
}

// inv points the client commands at the daemon through CLAUDECTL_SERVER
// (and the token it generated through CLAUDECTL_TOKEN).
func (d *testDaemon) inv() invocation {
	env := map[string]string{"CLAUDECTL_SERVER": d.url}
	if d.token != "" {
		env["CLAUDECTL_TOKEN"] = d.token
	}
	return invocation{getenv: env}
}

func TestClientToken(t *testing.T) {
	d := startDaemonToken(t, "s3cret")
	o := claudectl(t, d.inv(), "rules", "list")
	if o.code != 1 || !strings.Contains(o.stderr, "bearer token") {
		t.Errorf("without a token: exit %d, stderr %q", o.code, o.stderr)
	}
	inv := d.inv()
	inv.getenv["CLAUDECTL_TOKEN"] = "s3cret"
	if o := claudectl(t, inv, "rules", "list"); o.code != 0 {
		t.Errorf("CLAUDECTL_TOKEN: exit %d, stderr %q", o.code, o.stderr)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if o := claudectl(t, d.inv(), "sessions", "--token-file", file); o.code != 0 {
		t.Errorf("--token-file: exit %d, stderr %q", o.code, o.stderr)
	}
}

func TestClientDaemonUnreachable(t *testing.T) {
	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{
		{"sessions", "--server", addr},
		{"send", "--server", addr, "s1", "hello"},
		{"approve", "--server", addr, "r1"},
		{"deny", "--server", addr, "r1"},
		{"rules", "list", "--server", addr},
	} {
		o := claudectl(t, invocation{}, args...)
		want := "cannot reach the claudectl daemon at " + addr + " (start it with `claudectl serve`)"
		if o.code != 1 || !strings.Contains(o.stderr, want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", args, o.code, o.stderr, want)
		}
	}
}

func TestClientUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sessions", "extra"}, `"extra"`},
		{[]string{"send"}, "SESSION_ID"},
		{[]string{"send", "s1"}, "TEXT"},
		{[]string{"approve"}, "REQUEST_ID"},
		{[]string{"approve", "r1", "r2"}, `"r2"`},
		{[]string{"approve", "r1", "--message", "x"}, "--message"},
		{[]string{"deny", "r1", "--always"}, "--always"},
		{[]string{"rules"}, "subcommand"},
		{[]string{"rules", "frob"}, `"frob"`},
		{[]string{"rules", "add"}, "PATTERN"},
		{[]string{"rules", "add", "Bash"}, "BEHAVIOR"},
		{[]string{"rules", "add", "Bash", "maybe"}, `"maybe"`},
		{[]string{"rules", "add", "Bash", "allow", "--project", "/no/such/dir"}, "--project"},
		{[]string{"rules", "add", "Bash", "allow", "--project", ".", "--session", "s"}, "--session"},
		{[]string{"rules", "add", "Bash", "allow", "--json"}, "--json only goes with rules list"},
		{[]string{"rules", "list", "--project", "."}, "--project and --session only go with rules add"},
		{[]string{"rules", "list", "--session", "s"}, "--session"},
		{[]string{"rules", "rm"}, "RULE_ID"},
		{[]string{"rules", "rm", "abc"}, `invalid RULE_ID "abc"`},
		{[]string{"rules", "rm", "0"}, `invalid RULE_ID "0"`},
		{[]string{"sessions", "--server", "ftp://x"}, "--server"},
		{[]string{"sessions", "--token-file", "/no/such/file"}, "--token-file"},
	} {
		o := claudectl(t, invocation{}, tc.args...)
		if o.code != ExitUsage || !strings.Contains(o.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", tc.args, o.code, o.stderr, tc.want)
		}
	}
	o := claudectl(t, invocation{}, "rules", "-h")
	if o.code != 0 || !strings.Contains(o.stdout, "rules add") || !strings.Contains(o.stdout, "CLAUDECTL_SERVER") {
		t.Errorf("rules -h: exit %d, stdout %q", o.code, o.stdout)
	}
}

// lastConversation is the conversation of the model's last request.
func lastConversation(t *testing.T, model *claudetest.Server) string {
	t.Helper()
	reqs := model.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model got no request")
	}
	return reqs[len(reqs)-1].Transcript()
}

func (d *testDaemon) session(t *testing.T, id string) *v1.Session {
	t.Helper()
	res, err := d.sessions.GetSession(d.ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg.Session
}

// waitStatus waits until session id has status st.
func (d *testDaemon) waitStatus(t *testing.T, id string, st v1.SessionStatus) {
	t.Helper()
	waitFor(t, "session "+id+" to be "+statusName(st), func() bool { return d.session(t, id).Status == st })
}

func TestLifecycleUsageAndErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"resume"}, "SESSION_ID"},
		{[]string{"resume", "s1", " "}, "PROMPT is empty"},
		{[]string{"resume", "--attach", "--json", "s1"}, "--attach"},
		{[]string{"fork"}, "SESSION_ID"},
		{[]string{"fork", "--bogus", "s1"}, "bogus"},
		{[]string{"close"}, "SESSION_ID"},
		{[]string{"close", "s1", "s2"}, `"s2"`},
		{[]string{"interrupt"}, "SESSION_ID"},
		{[]string{"interrupt", "s1", "s2"}, `"s2"`},
		{[]string{"close", "--server", "ftp://x", "s1"}, "--server"},
	} {
		o := claudectl(t, invocation{}, tc.args...)
		if o.code != ExitUsage || !strings.Contains(o.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", tc.args, o.code, o.stderr, tc.want)
		}
	}
	for _, name := range []string{"resume", "fork", "close", "interrupt"} {
		o := claudectl(t, invocation{}, name, "-h")
		if o.code != 0 || !strings.Contains(o.stdout, "Usage: claudectl "+name) || !strings.Contains(o.stdout, "CLAUDECTL_SERVER") {
			t.Errorf("%s -h: exit %d, stdout %q", name, o.code, o.stdout)
		}
	}

	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	for _, name := range []string{"resume", "fork", "close", "interrupt"} {
		o := claudectl(t, invocation{getenv: map[string]string{"CLAUDECTL_SERVER": addr}}, name, "s1")
		want := "cannot reach the claudectl daemon at " + addr + " (start it with `claudectl serve`)"
		if o.code != 1 || !strings.Contains(o.stderr, want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", name, o.code, o.stderr, want)
		}
	}

	d := startDaemonToken(t, "s3cret")
	for _, name := range []string{"resume", "close", "interrupt"} {
		o := claudectl(t, d.inv(), name, "no-such-session")
		if o.code != 1 || !strings.Contains(o.stderr, "bearer token") {
			t.Errorf("%s without the token: exit %d, stderr %q", name, o.code, o.stderr)
		}
		inv := d.inv()
		inv.getenv["CLAUDECTL_TOKEN"] = "s3cret"
		o = claudectl(t, inv, name, "no-such-session")
		if o.code != 1 || o.stderr != "claudectl "+name+": no session no-such-session (claudectl sessions lists them)\n" {
			t.Errorf("%s of an unknown session: exit %d, stderr %q", name, o.code, o.stderr)
		}
	}
}
