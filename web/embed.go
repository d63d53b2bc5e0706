// Package web is the page claudectl serve serves at its address: the
// built assets of this folder's TypeScript (see README.md), embedded, so
// that a claudectl binary has the page with nothing else to install. The
// page uses the daemon's API as any client does; this package only serves
// its files.
package web

import (
	"bytes"
	"compress/gzip"
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
)

//go:embed dist
var dist embed.FS

// ContentSecurityPolicy is sent with the page: its own scripts, styles and
// API only, nothing from elsewhere, no inline script, never in a frame.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// IsPage reports whether a GET of urlPath is for the page's files (which
// need no token: they are public code, the same in every claudectl)
// rather than the API.
func IsPage(urlPath string) bool {
	if urlPath != "/" && path.Clean(urlPath) != urlPath { // no "..", "//" or "." past the check
		return false
	}
	return urlPath == "/" || urlPath == "/index.html" || urlPath == ServiceWorkerPath || strings.HasPrefix(urlPath, "/assets/")
}

// ServiceWorkerPath is the page's service worker (public/sw.js): it shows
// the daemon's Web Push messages and answers their Allow and Deny. At the
// root, its scope is the whole page; never cached for long, so that a new
// claudectl's worker replaces the old one.
const ServiceWorkerPath = "/sw.js"

type file struct {
	body, gz []byte
	ctype    string
}

var (
	loadOnce sync.Once
	files    map[string]*file
)

// load reads the embedded files once and gzips those worth it.
func load() {
	files = map[string]*file{}
	fs.WalkDir(dist, "dist", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := dist.ReadFile(p)
		if err != nil {
			return err
		}
		f := &file{body: b, ctype: mime.TypeByExtension(path.Ext(p))}
		if len(b) > 1024 {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			zw.Write(b)
			zw.Close()
			f.gz = buf.Bytes()
		}
		files[strings.TrimPrefix(p, "dist")] = f
		return nil
	})
}

// Handler serves the page: index.html at / (never cached: it names the
// current assets) and the hashed assets under /assets/ (cached for good).
// Anything else is 404.
func Handler() http.Handler {
	loadOnce.Do(load)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := r.URL.Path
		if p == "/" {
			p = "/index.html"
		}
		f := files[p]
		if f == nil || !IsPage(r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.ctype)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		switch p {
		case "/index.html":
			h.Set("Content-Security-Policy", ContentSecurityPolicy)
			h.Set("X-Frame-Options", "DENY")
			h.Set("Cache-Control", "no-cache")
		case ServiceWorkerPath:
			// A worker's policy is its own response's: it fetches the
			// daemon's /push/act, nothing else.
			h.Set("Content-Security-Policy", ContentSecurityPolicy)
			h.Set("Cache-Control", "no-cache")
		default:
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		}
		body := f.body
		if f.gz != nil {
			h.Add("Vary", "Accept-Encoding")
			if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				h.Set("Content-Encoding", "gzip")
				body = f.gz
			}
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method == http.MethodHead {
			return
		}
		w.Write(body)
	})
}
