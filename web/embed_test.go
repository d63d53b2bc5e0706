package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/claudectl/claudectl/web"
)

func TestIsPage(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/index.html": true, "/assets/index-abc.js": true,
		"/claudectl.v1.SessionService/ListSessions": false, "/assets/../claudectl.v1.SessionService/ListSessions": false,
		"/assets//x": false, "/assets/./x": false, "/v1/worker": false, "": false, "/sw.js": true, "/sw.js/x": false,
	} {
		if got := web.IsPage(p); got != want {
			t.Errorf("IsPage(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestHandler(t *testing.T) {
	h := web.Handler()
	get := func(path, enc string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		if enc != "" {
			r.Header.Set("Accept-Encoding", enc)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := get("/sw.js", ""); w.Code != 200 || !strings.Contains(w.Body.String(), `addEventListener("push"`) ||
		w.Header().Get("Cache-Control") != "no-cache" || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/javascript") {
		t.Errorf("GET /sw.js: %d %v %.100s", w.Code, w.Header(), w.Body.String())
	}
	w := get("/", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `<div id="app">`) {
		t.Fatalf("GET /: %d %.200s", w.Code, w.Body.String())
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	if w.Header().Get("Cache-Control") != "no-cache" {
		t.Errorf("index.html Cache-Control %q", w.Header().Get("Cache-Control"))
	}
	// The script index.html names is served, gzipped when asked, cached for good.
	i := strings.Index(w.Body.String(), `src="/assets/`)
	if i < 0 {
		t.Fatal("index.html names no script")
	}
	src := w.Body.String()[i+5:]
	src = src[:strings.IndexByte(src, '"')]
	js := get(src, "gzip, br")
	if js.Code != 200 || js.Header().Get("Content-Encoding") != "gzip" || !strings.Contains(js.Header().Get("Cache-Control"), "immutable") {
		t.Errorf("GET %s: %d, encoding %q, cache %q", src, js.Code, js.Header().Get("Content-Encoding"), js.Header().Get("Cache-Control"))
	}
	if plain := get(src, ""); plain.Header().Get("Content-Encoding") != "" || plain.Body.Len() <= js.Body.Len() {
		t.Errorf("without gzip: encoding %q, %d bytes (gzipped %d)", plain.Header().Get("Content-Encoding"), plain.Body.Len(), js.Body.Len())
	}
	for _, p := range []string{"/nope", "/assets/nope.js", "/embed.go"} {
		if c := get(p, "").Code; c != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, c)
		}
	}
	r := httptest.NewRequest("POST", "/", nil)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d", w.Code)
	}
}
