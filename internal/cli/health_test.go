package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/internal/testdisk"
	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/postgres/pgtest"
)

// startDegradedDaemon runs a daemon whose (in-process) CLI prints a
// system/init without Bash, and one session on it, and waits until the
// daemon has judged it.
func startDegradedDaemon(t *testing.T) (*testDaemon, string) {
	t.Helper()
	cli := &daemontest.InProcessCLI{Init: func(f map[string]any) {
		f["tools"] = slices.DeleteFunc(f["tools"].([]string), func(s string) bool { return s == "Bash" })
	}}
	d, _ := startDaemonModel(t, &daemontest.Options{Transport: cli})
	id := d.create(t, t.TempDir(), "go")
	waitFor(t, "the daemon to judge the session", func() bool {
		o := claudectl(t, invocation{getenv: d.tokenEnv()}, "doctor", "--server", d.url)
		return strings.Contains(o.stdout, "Bash tool")
	})
	return d, id
}

func TestDoctorServerShowsDegradation(t *testing.T) {
	d, id := startDegradedDaemon(t)
	o := claudectl(t, invocation{getenv: d.tokenEnv()}, "doctor", "--server", d.url)
	if o.code != 0 {
		t.Fatalf("doctor --server: exit %d, stderr %q", o.code, o.stderr)
	}
	for _, want := range []string{"Daemon:", d.url, "Version:        " + claudetest.CLIVersion(t), "Compatibility:  degraded",
		"Reasons:", "[degraded]", "missing_feature Bash tool", "session " + id, "CLI versions:",
		claude.TestedMaxVersion + ": degraded (local, 1 live)", "Degraded:", id + " lacks Bash tool",
		"Sessions:       1 with a live CLI (no limit), 0 queued, 0 suspended"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("doctor --server output lacks %q:\n%s", want, o.stdout)
		}
	}

	o = claudectl(t, invocation{getenv: d.tokenEnv()}, "doctor", "--server", d.url, "--json")
	var rep daemonDoctorReport
	if err := json.Unmarshal([]byte(o.stdout), &rep); err != nil || o.code != 0 {
		t.Fatalf("doctor --server --json: exit %d, %v:\n%s", o.code, err, o.stdout)
	}
	if rep.Compatibility != "degraded" || !rep.OK || len(rep.Reasons) != 1 || rep.Reasons[0].Subject != "Bash tool" ||
		rep.Reasons[0].LastSeen == "" || len(rep.DegradedSessions) != 1 || rep.DegradedSessions[0].SessionID != id ||
		!strings.HasPrefix(rep.StoreLocation, "sqlite /") || !strings.HasSuffix(rep.StoreLocation, "claudectl.db") {
		t.Errorf("doctor --server --json: %+v", rep)
	}

	if o := claudectl(t, invocation{getenv: d.tokenEnv()}, "doctor", "--server", d.url, "--cli", "/bin/true"); o.code != 2 || !strings.Contains(o.stderr, "--server") {
		t.Errorf("doctor --server --cli: exit %d, stderr %q; want 2 naming --server", o.code, o.stderr)
	}
}

func TestSessionsHeaderWhenDegraded(t *testing.T) {
	d, id := startDegradedDaemon(t)
	o := claudectl(t, d.inv(), "sessions")
	if o.code != 0 {
		t.Fatalf("sessions: exit %d, stderr %q", o.code, o.stderr)
	}
	lines := strings.Split(o.stdout, "\n")
	if !strings.HasPrefix(lines[0], "Claude Code "+claudetest.CLIVersion(t)+": degraded: ") || !strings.Contains(lines[0], "Bash tool") ||
		!strings.Contains(lines[0], "claudectl doctor --server "+d.url) {
		t.Errorf("sessions' first line %q; want the degradation header", lines[0])
	}
	if len(lines) < 3 || !strings.HasPrefix(lines[1], "ID") || !strings.Contains(lines[2], id) {
		t.Errorf("sessions output:\n%s", o.stdout)
	}
	// --json stays a JSON array.
	o = claudectl(t, d.inv(), "sessions", "--json")
	if !strings.HasPrefix(strings.TrimSpace(o.stdout), "[") {
		t.Errorf("sessions --json: %q", o.stdout)
	}
}

func TestSessionsNoHeaderWhenCompatible(t *testing.T) {
	d, _ := startDaemonModel(t, &daemontest.Options{Transport: &daemontest.InProcessCLI{}})
	id := d.create(t, t.TempDir(), "go")
	o := claudectl(t, d.inv(), "sessions")
	if o.code != 0 || !strings.HasPrefix(o.stdout, "ID") || !strings.Contains(o.stdout, id) {
		t.Errorf("sessions: exit %d, output:\n%s", o.code, o.stdout)
	}
}

// TestDoctorServerInAnOutage: while the daemon's store is down (its
// PostgreSQL server stopped; SQLite on a full disk), HealthDetails still
// answers, with store.ok false, why in the user's words and what it could
// not read; it never shows the database's user, nor does the daemon's
// log; doctor --server prints a report that says so (exit 69), and the
// sessions command says why it cannot list them.
func TestDoctorServerInAnOutage(t *testing.T) {
	t.Run("postgres stopped", func(t *testing.T) {
		srv := pgtest.Own(t) // stopped after the daemon's cleanup
		logs := new(daemontest.LogBuffer)
		dd := daemontest.Start(t, &daemontest.Options{StoreURL: srv.URL(), Transport: &daemontest.InProcessCLI{}, Log: logs})
		d := outageClient(t, dd)
		if h := d.details(t); !h.Store.Ok || h.Sessions != 0 {
			t.Fatalf("before the outage: store %v", h.Store)
		}
		srv.Stop()

		where := fmt.Sprintf("(PostgreSQL at 127.0.0.1:%d/", srv.Port)
		h := d.details(t)
		st := h.Store
		if h.Ok || st.Ok || !strings.Contains(st.ReadError, "the store cannot read: ") ||
			!strings.Contains(st.ReadError, "database server") || !strings.Contains(st.ReadError, where) ||
			!slices.Equal(st.Unread, []string{"sessions"}) {
			t.Errorf("HealthDetails with the server stopped: ok %v, store %v; want not ok, the read failure naming the server, sessions unread", h.Ok, st)
		}
		if h.ClaudeCode.GetVersion() == "" {
			t.Errorf("HealthDetails with the server stopped lacks what the daemon knows itself: %v", h)
		}
		o := claudectl(t, invocation{getenv: d.tokenEnv()}, "doctor", "--server", d.url)
		if o.code != ExitUnavailable {
			t.Errorf("doctor --server: exit %d, want %d; stderr %q", o.code, ExitUnavailable, o.stderr)
		}
		for _, want := range []string{"Version:        " + claudetest.CLIVersion(t), "Store:          cannot read: ",
			where, "suspended unknown (the store could not be read)"} {
			if !strings.Contains(o.stdout, want) {
				t.Errorf("doctor --server output lacks %q:\n%s%s", want, o.stdout, o.stderr)
			}
		}
		ls := claudectl(t, invocation{getenv: d.tokenEnv()}, "sessions", "--server", d.url)
		if ls.code == 0 || !strings.Contains(ls.stderr, "the store cannot read") {
			t.Errorf("sessions with the server stopped: exit %d, stderr %q; want the store's failure", ls.code, ls.stderr)
		}
		// The daemon's listener for other daemons' events fails too, and
		// logs it.
		waitFor(t, "the daemon to log the lost server", func() bool { return strings.Contains(logs.String(), "retrying") })
		for what, text := range map[string]string{"HealthDetails": st.String(), "doctor --server": o.stdout + o.stderr,
			"sessions": ls.stderr, "the daemon's log": logs.String()} {
			for _, secret := range []string{"user=", "postgres@", "`postgres`", `"postgres"`} {
				if strings.Contains(text, secret) {
					t.Errorf("%s shows the database's user (%s):\n%s", what, secret, text)
				}
			}
		}
	})

	t.Run("sqlite full disk", func(t *testing.T) {
		if daemontest.OnPostgres() {
			t.Skip("a full disk is SQLite's")
		}
		dataDir := testdisk.Small(t, "8m")
		if dataDir == "" {
			return // run in a mount namespace
		}
		dd := daemontest.Start(t, &daemontest.Options{DataDir: dataDir, Transport: &daemontest.InProcessCLI{}})
		d := outageClient(t, dd)
		db := dd.DB()
		scratch := &store.Session{Cwd: t.TempDir(), Status: store.StatusClosed}
		if err := db.CreateSession(dd.Ctx, scratch); err != nil {
			t.Fatal(err)
		}
		// The disk full: a ballast takes what it can, then the store's
		// writes the rest.
		ballast, err := os.Create(filepath.Join(dataDir, "ballast"))
		if err != nil {
			t.Fatal(err)
		}
		defer ballast.Close()
		for chunk := make([]byte, 64<<10); ; {
			if _, err := ballast.Write(chunk); err != nil {
				break
			}
		}
		for _, size := range []int{4000, 300, 30, 1} {
			pad := []byte(`{"type":"pad","x":"` + strings.Repeat("x", size) + `"}`)
			for i := 0; ; i++ {
				_, err := db.Append(dd.Ctx, &store.Event{SessionID: scratch.ID, Direction: store.FromDaemon, Type: "pad", Raw: pad})
				if errors.Is(err, store.ErrWriteFailed) {
					break
				}
				if err != nil || i > 100_000 {
					t.Fatalf("filling the disk: %d writes, %v", i, err)
				}
			}
		}

		h := d.details(t)
		st := h.Store
		if h.Ok || st.Ok || !strings.Contains(st.Error, "disk full") || !strings.Contains(st.Error, dataDir) ||
			st.FailingSince == nil || (st.ReadError != "") != (len(st.Unread) > 0) {
			t.Errorf("HealthDetails on a full disk: ok %v, store %v; want not ok, the disk full in the data dir, since when", h.Ok, st)
		}
		if st.ReadError == "" && h.Sessions != 1 {
			t.Errorf("HealthDetails on a full disk: %d sessions, want the 1 it could read", h.Sessions)
		}
		o := claudectl(t, invocation{getenv: d.tokenEnv()}, "doctor", "--server", d.url)
		if o.code != ExitUnavailable || !strings.Contains(o.stdout, "Store:          cannot write since ") ||
			!strings.Contains(o.stdout, "disk full") || !strings.Contains(o.stdout, "Sessions:") {
			t.Errorf("doctor --server on a full disk: exit %d, want %d and the store's failure:\n%s%s", o.code, ExitUnavailable, o.stdout, o.stderr)
		}
		ls := claudectl(t, invocation{getenv: d.tokenEnv()}, "sessions", "--server", d.url)
		if !strings.Contains(ls.stdout+ls.stderr, "disk full") {
			t.Errorf("sessions on a full disk: exit %d, %q %q; want it to say the disk is full", ls.code, ls.stdout, ls.stderr)
		}
	})
}

// outageDaemon is a test daemon with its HealthService.
type outageDaemon struct {
	*testDaemon
	health claudectlv1connect.HealthServiceClient
}

func outageClient(t *testing.T, dd *daemontest.Daemon) *outageDaemon {
	url, httpc := dd.Serve()
	return &outageDaemon{testDaemon: &testDaemon{url: url, token: dd.Token(), ctx: dd.Ctx,
		sessions: claudectlv1connect.NewSessionServiceClient(httpc, url)},
		health: claudectlv1connect.NewHealthServiceClient(httpc, url)}
}

// details asks HealthDetails, which must answer.
func (d *outageDaemon) details(t *testing.T) *v1.HealthDetailsResponse {
	t.Helper()
	res, err := d.health.HealthDetails(d.ctx, connect.NewRequest(&v1.HealthDetailsRequest{}))
	if err != nil {
		t.Fatalf("HealthDetails: %v", err)
	}
	return res.Msg
}
