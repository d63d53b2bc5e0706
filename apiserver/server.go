package apiserver

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// ErrTokenRequired is returned by NewServer for a non-loopback address
// without a token.
var ErrTokenRequired = errors.New("api: listening beyond loopback requires a token (--token-file)")

// NewServer returns an http.Server for h on addr that speaks HTTP/1.1 and
// unencrypted HTTP/2 (h2c, for gRPC) through the standard library's
// Protocols. A non-empty token is required on every request
// ("Authorization: Bearer TOKEN", compared in constant time); an address
// that is not loopback is refused without one.
func NewServer(addr string, h http.Handler, token string) (*http.Server, error) {
	if token == "" && !IsLoopback(addr) {
		return nil, fmt.Errorf("%w: %s is not a loopback address", ErrTokenRequired, addr)
	}
	if token != "" {
		h = requireToken(h, token)
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{Addr: addr, Handler: h, Protocols: &p, ReadHeaderTimeout: 10 * time.Second}, nil
}

// IsLoopback reports whether addr (host:port) listens on loopback only.
// An empty host (all interfaces) is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func requireToken(h http.Handler, token string) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == WorkerPath { // the worker listener checks its own token
			h.ServeHTTP(w, r)
			return
		}
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			// Say nothing about the token: neither what came nor what was expected.
			if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
				w.Header().Set("Content-Type", "application/grpc")
				w.Header().Set("Grpc-Status", "16") // UNAUTHENTICATED
				w.Header().Set("Grpc-Message", "missing or bad bearer token")
				w.WriteHeader(http.StatusOK)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"code":"unauthenticated","message":"missing or bad bearer token"}`)
			return
		}
		h.ServeHTTP(w, r)
	})
}
