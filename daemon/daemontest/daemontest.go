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
}

// Daemon is a running test daemon. Everything it starts is stopped by the
// test's cleanup.
type Daemon struct {
	D   *daemon.Daemon
	Ctx context.Context // bounds the test (90 s)

	t    testing.TB
	opts Options
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
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "claudectl.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	broker := permission.NewBroker(o.Broker)
	d, err := daemon.New(ctx, &daemon.Options{DB: db, Engine: permission.NewEngine(nil), Broker: broker,
		CLIPath: bin, Env: srv.EnvMap(t.TempDir()), Logger: slog.New(slog.DiscardHandler),
		SubscriberBuffer: o.SubscriberBuffer, ReadBufferSize: o.ReadBufferSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // registered first, so it runs after Serve's cleanup
		d.Close()
		broker.Close()
		db.Close()
	})
	return &Daemon{D: d, Ctx: ctx, t: t, opts: o}
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
