package claude

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// This file holds the bearer-token check shared by the HTTP handlers of
// WorkerListener and WebSocketTransport.

// bearerOK reports whether r carries "Authorization: Bearer <token>",
// compared in constant time.
func bearerOK(r *http.Request, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// authProblem describes, for the log, why a request was refused, without
// the token.
func authProblem(r *http.Request) string {
	switch h := r.Header.Get("Authorization"); {
	case h == "":
		return "no Authorization header"
	case !strings.HasPrefix(h, "Bearer "):
		return "Authorization is not a bearer token"
	default:
		return "wrong token"
	}
}

// refuse answers 401 to a request without the right token.
func refuse(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="claudectl"`)
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}
