package apiserver

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/claudectl/claudectl/store"
)

// MetricsPath is where the daemon serves its metrics in Prometheus' text
// format: on the API's address, and on metrics_listen when one is set.
const MetricsPath = "/metrics"

// MetricsHandler serves h (the daemon's Prometheus handler) to the
// requests mayReadMetrics lets in, and answers the others 403. Behind
// NewServer's token check, a request without a good token never gets
// here (401); served without one (metrics_listen on loopback, for a local
// scraper), every request is the daemon's owner's.
func MetricsHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "claudectl: the metrics are read with GET", http.StatusMethodNotAllowed)
			return
		}
		if !mayReadMetrics(r) {
			refuseJSON(w, "reading the metrics needs a token of the viewer role or better that is not scoped to directories or a session")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// mayReadMetrics is the one place that says who may read the metrics: a
// token that may read sessions (viewer or better) over the whole daemon.
// The metrics name no session, prompt or person, but they count every
// session's, which a token scoped to some is not to see.
func mayReadMetrics(r *http.Request) bool {
	id := IdentityOf(r.Context())
	return id.Can(PermRead) && !id.Scoped()
}

// refuseJSON answers 403 with the API's JSON error.
func refuseJSON(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	w.Write([]byte(`{"code":"permission_denied","message":"` + msg + `"}`))
}

// AdminPath is the prefix of the operator's endpoints (internal/serve's
// admin.go): claudectl backup, prune and reload call them.
const AdminPath = "/v1/admin/"

// AdminHandler serves h (the operator's endpoints: backup, prune,
// reload) to the requests mayAdminister lets in, answers the others 403,
// and enters each call in the audit trail of db (nil: none) as the API's
// calls are: the action ("Backup", "Prune", "Reload"), who, and the
// outcome.
func AdminHandler(h http.Handler, db store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := IdentityOf(r.Context())
		name := strings.TrimPrefix(r.URL.Path, AdminPath)
		action := strings.ToUpper(name[:min(1, len(name))]) + name[min(1, len(name)):]
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		if !mayAdminister(r) {
			refuseJSON(rec, action+" needs a token of the admin role that is not scoped to directories or a session")
		} else {
			h.ServeHTTP(rec, r)
		}
		if db == nil {
			return
		}
		e := &store.AuditEntry{User: id.User, Token: id.Token, ClientKind: id.ClientKind, Remote: id.Remote,
			Action: action, Detail: r.Method + " " + r.URL.Path, Outcome: "ok"}
		if r.URL.RawQuery != "" {
			e.Detail += "?" + r.URL.RawQuery
		}
		if rec.status != http.StatusOK {
			e.Outcome = strconv.Itoa(rec.status) + " " + http.StatusText(rec.status)
		}
		if err := db.AddAudit(context.WithoutCancel(r.Context()), e); err != nil {
			slog.Default().Warn("writing the audit trail failed", "action", e.Action, "user", e.User, "err", err)
		}
	})
}

// statusRecorder remembers the status a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (the backup's
// write deadlines).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// mayAdminister is the one place that says who may back up, prune and
// reload the daemon: a token of the admin role over the whole daemon (the
// daemon's own token is one). A backup is every transcript and the audit.
func mayAdminister(r *http.Request) bool {
	id := IdentityOf(r.Context())
	return id.Role == RoleAdmin && !id.Scoped()
}
