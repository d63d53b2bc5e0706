package serve

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/store"
)

// The daemon's metrics are read when scraped (a collector, not counters
// spread through the sessions' paths): from the daemon's Stats, the
// store's writer stats and a count of the stored sessions. One registry,
// the Server's own (not Prometheus' global default), so that two daemons
// in one process (the tests) never share one.

// sessionStatuses are the stored statuses claudectl_sessions reports,
// each always (0 when no session is in it), so that a dashboard's series
// never vanish.
var sessionStatuses = []store.SessionStatus{store.StatusStarting, store.StatusRunning, store.StatusIdle,
	store.StatusQueued, store.StatusSuspended, store.StatusInterrupted, store.StatusClosed, store.StatusFailed}

var (
	descBuild = prometheus.NewDesc("claudectl_build_info",
		"The claudectl version of this daemon (always 1).", []string{"version"}, nil)
	descSessions = prometheus.NewDesc("claudectl_sessions",
		"Sessions in the store by status (every daemon's when several share it).", []string{"status"}, nil)
	descCLIs = prometheus.NewDesc("claudectl_cli_processes",
		"Sessions of this daemon with a live Claude Code CLI.", nil, nil)
	descMaxRunning = prometheus.NewDesc("claudectl_cli_processes_limit",
		"sessions.max_running: the most CLIs at once (0: no limit).", nil, nil)
	descQueued = prometheus.NewDesc("claudectl_sessions_queued",
		"Sessions waiting for a slot to start their CLI (sessions.max_running).", nil, nil)
	descSubscribers = prometheus.NewDesc("claudectl_subscribers",
		"Subscriptions following sessions' events (attached clients, pages).", nil, nil)
	descPending = prometheus.NewDesc("claudectl_permission_requests_pending",
		"Permission requests this daemon holds waiting for a person.", nil, nil)
	descPendingAge = prometheus.NewDesc("claudectl_permission_request_oldest_age_seconds",
		"How long the oldest pending permission request has waited (0: none waits).", nil, nil)
	descDecisions = prometheus.NewDesc("claudectl_permission_decisions_total",
		"Permission decisions audited since the daemon started, by outcome (allow, deny, withdrawn) and by who decided (person, rule, timeout, cli).",
		[]string{"outcome", "decider"}, nil)
	descCost = prometheus.NewDesc("claudectl_cost_usd_total",
		"What the sessions' turns cost since the daemon started, in US dollars as the CLI reports it, by model.", []string{"model"}, nil)
	descCLIVersion = prometheus.NewDesc("claudectl_cli_version_info",
		"A Claude Code CLI version that live sessions run (always 1).", []string{"version"}, nil)
	descEvents = prometheus.NewDesc("claudectl_events_appended_total",
		"Events this daemon stored in the sessions' logs since it started.", nil, nil)
	descCommit = prometheus.NewDesc("claudectl_store_commit_duration_seconds",
		"How long the store took to commit a group of events (one transaction).", nil, nil)
	descStoreFailing = prometheus.NewDesc("claudectl_store_write_failing",
		"1 while the store refuses writes (a full disk, the database server down), else 0.", nil, nil)
)

// collector reads the daemon's state at each scrape.
type collector struct {
	d   *daemon.Daemon
	db  store.Store // the store itself, not a test's wrapper: its optional interfaces
	log *slog.Logger
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBuild, descSessions, descCLIs, descMaxRunning, descQueued, descSubscribers,
		descPending, descPendingAge, descDecisions, descCost, descCLIVersion, descEvents, descCommit, descStoreFailing} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descBuild, 1, apiserver.Version)
	st := c.d.Stats()
	gauge(descCLIs, float64(st.CLIProcesses))
	gauge(descMaxRunning, float64(c.d.MaxRunning()))
	gauge(descQueued, float64(st.Queued))
	gauge(descSubscribers, float64(st.Subscribers))
	gauge(descPending, float64(st.Pending))
	age := 0.0
	if !st.OldestPending.IsZero() {
		age = max(time.Since(st.OldestPending).Seconds(), 0)
	}
	gauge(descPendingAge, age)
	for k, n := range st.Decisions {
		counter(descDecisions, float64(n), k.Outcome, k.Decider)
	}
	for model, usd := range st.CostUSD {
		counter(descCost, usd, model)
	}
	for _, v := range slices.Sorted(maps.Keys(st.CLIVersions)) {
		gauge(descCLIVersion, 1, v)
	}
	if sr, ok := c.db.(store.StatsReporter); ok {
		ws := sr.WriterStats()
		counter(descEvents, float64(ws.EventsAppended))
		ch <- prometheus.MustNewConstHistogram(descCommit, ws.Commits, ws.CommitSeconds, ws.CommitBuckets)
	}
	failing := 0.0
	if h, _ := c.d.StoreHealth(); !h.OK() {
		failing = 1
	}
	gauge(descStoreFailing, failing)
	if m, ok := c.db.(store.Maintainer); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		counts, err := m.CountSessions(ctx)
		cancel()
		if err != nil {
			// The other metrics are still served (promhttp.ContinueOnError).
			ch <- prometheus.NewInvalidMetric(descSessions, err)
			return
		}
		for _, s := range sessionStatuses {
			gauge(descSessions, float64(counts[s]), string(s))
		}
	}
}

// newMetrics returns the handler of the daemon's metrics: its own
// collector, and the Go runtime's and the process's (memory, goroutines,
// open files, CPU), which every Go daemon's dashboards expect.
func newMetrics(d *daemon.Daemon, db store.Store, log *slog.Logger) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&collector{d: d, db: db, log: log})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
		// A scrape reads the store once: a few at once is plenty for
		// any number of scrapers, and bounds what a client's loop costs.
		MaxRequestsInFlight: 4,
		Timeout:             15 * time.Second,
	})
}
