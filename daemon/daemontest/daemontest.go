// Package daemontest runs an in-process claudectl daemon for tests: its
// sessions run the real claude CLI (claudetest.CLIPath) against a scripted
// fake of the Messages API, and its API can be served on 127.0.0.1.
package daemontest

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/claudetest"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/api"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store/sqlite"
)

// Options adjusts the daemon; a nil *Options means the defaults.
type Options struct {
	// SubscriberBuffer is daemon.Options.SubscriberBuffer (0: its default).
	SubscriberBuffer int
	// Token, if set, is required of API clients (Serve).
	Token string
	// CLIPath, if set, runs this executable instead of the real CLI (a
	// stand-in for benchmarks); the scripted model still serves it.
	CLIPath string
	// ReadBufferSize is daemon.Options.ReadBufferSize (0: its default).
	ReadBufferSize int
	// Broker configures the permission broker (nil: its defaults).
	Broker *permission.BrokerOptions
	// WorkerToken, if set, makes the daemon host remote workers (served
	// by Serve at api.WorkerPath) that present this token.
	WorkerToken string
}

// Daemon is a running test daemon. Everything it starts is stopped by the
// test's cleanup.
type Daemon struct {
	D     *daemon.Daemon
	Ctx   context.Context    // bounds the test (90 s)
	Model *claudetest.Server // the scripted Messages API the CLIs talk to

	t       testing.TB
	opts    Options
	bin     string
	env     map[string]string
	dbPath  string
	db      *sqlite.DB
	broker  *permission.Broker
	workers *claude.WorkerListener
}

// Start starts a daemon whose sessions answer with the scripted turns.
func Start(t testing.TB, opts *Options, turns ...claudetest.Turn) *Daemon {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	bin := o.CLIPath
	if bin == "" {
		bin = claudetest.CLIPath(t)
	}
	srv := claudetest.NewServer(claudetest.Script(turns...))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	d := &Daemon{Ctx: ctx, Model: srv, t: t, opts: o, bin: bin, env: srv.EnvMap(t.TempDir()),
		dbPath: filepath.Join(t.TempDir(), "claudectl.db")}
	d.open()
	t.Cleanup(d.stop) // registered first, so it runs after Serve's cleanup
	return d
}

// open opens the store and starts a daemon on it, as claudectl serve does.
func (d *Daemon) open() {
	t := d.t
	t.Helper()
	db, err := sqlite.Open(d.Ctx, d.dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	broker := permission.NewBroker(d.opts.Broker)
	if d.opts.WorkerToken != "" {
		d.workers = &claude.WorkerListener{Token: d.opts.WorkerToken, WaitTimeout: 60 * time.Second,
			Logger: slog.New(slog.DiscardHandler)}
	}
	dd, err := daemon.New(d.Ctx, &daemon.Options{DB: db, Engine: permission.NewEngine(nil), Broker: broker,
		CLIPath: d.bin, Env: d.env, Logger: slog.New(slog.DiscardHandler), Workers: d.workers,
		SubscriberBuffer: d.opts.SubscriberBuffer, ReadBufferSize: d.opts.ReadBufferSize})
	if err != nil {
		t.Fatal(err)
	}
	d.D, d.db, d.broker = dd, db, broker
}

func (d *Daemon) stop() {
	d.D.Close()
	if d.workers != nil {
		d.workers.Close()
	}
	d.broker.Close()
	d.db.Close()
}

// Restart stops the daemon as claudectl serve stops on SIGTERM and starts
// a new one on the same database (d.D changes). Not for use with Serve.
func (d *Daemon) Restart() {
	d.t.Helper()
	d.stop()
	d.open()
}

// Serve serves the daemon's API on 127.0.0.1 and returns its base URL and
// an HTTP client for it.
func (d *Daemon) Serve() (url string, client *http.Client) {
	t := d.t
	t.Helper()
	hs, err := api.NewServer("127.0.0.1:0", api.NewHandler(&api.Service{D: d.D}), d.opts.Token)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); hs.Serve(ln) }()
	httpc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		d.D.Close() // ends the sessions, and so the streams
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		hs.Shutdown(sctx)
		<-served
		httpc.CloseIdleConnections()
	})
	return "http://" + ln.Addr().String(), httpc
}
