package claude

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// This file holds the bearer-token check shared by the HTTP handlers of
// WorkerListener and WebSocketTransport.

// bearerOK reports whether r carries "Authorization: Bearer <token>",
// the scheme in any case (RFC 7235), the token compared in constant time.
func bearerOK(r *http.Request, token string) bool {
	got, ok := bearer(r.Header.Get("Authorization"))
	if !ok || token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// bearer returns the token of an Authorization header's bearer
// credential; ok is false for any other scheme.
func bearer(h string) (token string, ok bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(token, " "), true
}

// authProblem describes, for the log, why a request was refused, without
// the token.
func authProblem(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "no Authorization header"
	}
	if _, ok := bearer(h); !ok {
		return "Authorization is not a bearer token"
	}
	return "wrong token"
}

// refuse answers 401 to a request without the right token, and closes its
// connection after the answer (HTTP/1; a GOAWAY on HTTP/2): a client
// without the token cannot go on sending requests on it, each refused and
// logged, so what a stranger can make us log is about a line per
// connection it opens.
func refuse(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	w.Header().Set("WWW-Authenticate", `Bearer realm="claudectl"`)
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}
