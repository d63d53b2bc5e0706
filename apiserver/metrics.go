package apiserver

import (
	"net/http"
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
