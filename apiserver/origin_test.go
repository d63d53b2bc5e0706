package apiserver_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/web"
)

// TestHostAndOrigin plays a page that DNS-rebinds its name to 127.0.0.1
// and a page of another origin: both are refused, with the reason logged;
// loopback names, addresses, the daemon's own origin and origins allowed
// in the settings pass, and only the latter get CORS headers.
func TestHostAndOrigin(t *testing.T) {
	var logs bytes.Buffer
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	hs, err := apiserver.NewServer("127.0.0.1:7777", ok, &apiserver.ServerOptions{
		AllowedHosts: []string{"claude.example.com"}, AllowedOrigins: []string{"https://ops.example.com"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host, origin string
		want         int
		cors         bool
	}{
		{"127.0.0.1:7777", "", 200, false},
		{"localhost:7777", "", 200, false},
		{"[::1]:7777", "", 200, false},
		{"192.168.1.20:7777", "", 200, false},
		{"claude.example.com:7777", "", 200, false},
		{"evil.example:7777", "", 403, false},                         // DNS rebinding
		{"evil.example:7777", "http://evil.example:7777", 403, false}, // the same, from its page
		{"127.0.0.1:7777", "http://127.0.0.1:7777", 200, false},       // the daemon's own page
		{"127.0.0.1:7777", "http://evil.example", 403, false},
		{"127.0.0.1:7777", "null", 403, false},
		{"127.0.0.1:7777", "https://ops.example.com", 200, true},
	} {
		r := httptest.NewRequest("POST", "/claudectl.v1.SessionService/ListSessions", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		w := httptest.NewRecorder()
		hs.Handler.ServeHTTP(w, r)
		if w.Code != tc.want || (w.Header().Get("Access-Control-Allow-Origin") != "") != tc.cors {
			t.Errorf("Host %s, Origin %q: status %d, CORS %q; want %d, CORS %v", tc.host, tc.origin, w.Code,
				w.Header().Get("Access-Control-Allow-Origin"), tc.want, tc.cors)
		}
	}
	for _, want := range []string{`Host \"evil.example:7777\" is not one this daemon answers to`, `origin \"http://evil.example\"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}

	// A preflight from an allowed origin is answered; from another, refused.
	r := httptest.NewRequest("OPTIONS", "/claudectl.v1.SessionService/ListSessions", nil)
	r.Host = "127.0.0.1:7777"
	r.Header.Set("Origin", "https://ops.example.com")
	r.Header.Set("Access-Control-Request-Method", "POST")
	r.Header.Set("Access-Control-Request-Headers", "content-type,connect-protocol-version")
	w := httptest.NewRecorder()
	hs.Handler.ServeHTTP(w, r)
	if w.Code != 204 || w.Header().Get("Access-Control-Allow-Headers") != "content-type,connect-protocol-version" {
		t.Errorf("preflight: %d %v", w.Code, w.Header())
	}
}

// TestPageNeedsNoTokenAPIDoes: with a token, the web page's files are
// served to anyone (public code), everything else still needs the token,
// and a path that only looks like the page's is not let through.
func TestPageNeedsNoTokenAPIDoes(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/", web.Handler())
	mux.HandleFunc("/claudectl.v1.SessionService/ListSessions", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	hs, err := apiserver.NewServer("127.0.0.1:7777", mux, &apiserver.ServerOptions{Token: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path, auth string
		want               int
	}{
		{"GET", "/", "", 200},
		{"HEAD", "/index.html", "", 200},
		{"POST", "/", "", 401},
		{"POST", "/claudectl.v1.SessionService/ListSessions", "", 401},
		{"GET", "/claudectl.v1.SessionService/ListSessions", "", 401},
		{"GET", "/assets/../claudectl.v1.SessionService/ListSessions", "", 401},
		{"POST", "/claudectl.v1.SessionService/ListSessions", "Bearer secret", 200},
		{"GET", "/", "Bearer wrong", 200}, // the login screen loads whatever the browser holds
	} {
		r := httptest.NewRequest(tc.method, "/", nil)
		r.URL.Path = tc.path
		r.Host = "127.0.0.1:7777"
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		w := httptest.NewRecorder()
		hs.Handler.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s %s (auth %q): %d, want %d", tc.method, tc.path, tc.auth, w.Code, tc.want)
		}
	}
}
