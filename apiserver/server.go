package apiserver

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/claudectl/claudectl/web"
)

// ErrTokenRequired is returned by NewServer for a non-loopback address
// without a token.
var ErrTokenRequired = errors.New("api: listening beyond loopback requires a token (--token-file)")

// ServerOptions configures NewServer; the zero value is a loopback
// server without a token.
type ServerOptions struct {
	// Token, when set, is required of every request ("Authorization:
	// Bearer TOKEN", the scheme in any case, the token compared in
	// constant time). Never logged.
	Token string
	// AllowedHosts are host names (without a port) a request's Host may
	// name besides loopback names and addresses, IP addresses, and the
	// listen address's own host.
	AllowedHosts []string
	// AllowedOrigins are the browser origins ("https://ops.example.com")
	// allowed besides the daemon's own; they alone get CORS headers.
	AllowedOrigins []string
	// Logger receives why requests were refused, and at Debug level the
	// net/http package's own messages (TLS handshake errors and the like);
	// nil means slog.Default().
	Logger *slog.Logger
	// TLS, when set, makes the server speak HTTPS (HTTP/1.1 and HTTP/2
	// negotiated by ALPN): serve it with ServeTLS(ln, "", "").
	TLS *tls.Config
	// Auth, when set, verifies the tokens of requests (the store's, with
	// Token and WorkerToken); nil means Token and WorkerToken alone.
	Auth *Auth
	// WorkerToken is the token remote workers present at WorkerPath; it
	// implies Workers.
	WorkerToken string
	// Workers says h serves WorkerPath (the worker listener). A request
	// there whose token is neither WorkerToken nor a worker's of Auth is
	// then refused here, 401, and logged once for its connection however
	// many HTTP/2 streams it opened; without Workers it goes to h, which
	// answers that it takes no workers.
	Workers bool
	// InsecureCleartext allows a token over plain HTTP on an address that
	// is not loopback (behind a TLS-terminating proxy, say).
	InsecureCleartext bool
	// WriteTimeout closes an HTTP/2 connection whose socket has accepted
	// nothing for this long (5 s at most) while the server had something
	// to write: a client that stopped reading the connection altogether,
	// whose streams cannot even be reset (HTTP/1's writes are watched per
	// call: Service.StreamWriteTimeout). Zero means
	// DefaultStreamWriteTimeout, negative never.
	WriteTimeout time.Duration
}

// ErrCleartext is returned by NewServer for a non-loopback address without
// TLS: the token and every transcript would cross the network in clear.
var ErrCleartext = errors.New("api: listening beyond loopback requires TLS (tls_cert_file and tls_key_file), or insecure_cleartext: true behind a proxy that provides it")

// NewServer returns an http.Server for h on addr that speaks HTTP/1.1 and
// unencrypted HTTP/2 (h2c, for gRPC) through the standard library's
// Protocols. A request whose Host names a host that is not allowed
// (against DNS rebinding) or that comes from a browser page of another
// origin is refused with 403, and the reason logged (once per
// connection); with a token, a request without it gets 401. An address
// that is not loopback is refused without a token.
//
// A refused request ends its connection. HTTP/1.1 closes it after the
// answer. On HTTP/2, served on a GuardListener, a connection that has not
// carried the token is read no further after its first refusal and closed
// hangUpGrace later: streams the client opened after it are never
// started, and those read before it are answered 503 unless refused
// themselves. A connection that has carried the token is shut down
// gracefully instead (GOAWAY): its streams already open finish, so a
// client's own mistake does not cut off its other calls.
func NewServer(addr string, h http.Handler, o *ServerOptions) (*http.Server, error) {
	var opts ServerOptions
	if o != nil {
		opts = *o
	}
	if opts.Token == "" && !IsLoopback(addr) {
		return nil, fmt.Errorf("%w: %s is not a loopback address", ErrTokenRequired, addr)
	}
	if opts.TLS == nil && !opts.InsecureCleartext && !IsLoopback(addr) {
		return nil, fmt.Errorf("%w: %s is not a loopback address", ErrCleartext, addr)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Token != "" {
		auth := opts.Auth
		if auth == nil {
			auth, _ = NewAuth(context.Background(), &AuthOptions{Token: opts.Token, WorkerToken: opts.WorkerToken, Logger: opts.Logger})
		}
		h = requireToken(h, auth, opts.Workers || opts.WorkerToken != "")
	}
	h = checkOrigin(h, addr, &opts)
	h = hangUpRefused(h)
	var p http.Protocols
	p.SetHTTP1(true)
	if opts.TLS != nil {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	// ErrorLog: net/http's own messages ("http: TLS handshake error from
	// …", h2's "timeout waiting for SETTINGS frames") would otherwise go to
	// the standard logger, in plain text past the configured format and
	// level, and anyone who can open a socket can cause one per connection:
	// Debug, where they help whoever looks into a client's failure.
	// A connection whose socket takes nothing holds every message its
	// streams were writing, large or small, and none of them can even be
	// reset: it is closed after the grace a large message gets.
	var h2 http.HTTP2Config
	switch {
	case opts.WriteTimeout == 0:
		h2.WriteByteTimeout = min(DefaultStreamWriteTimeout, stallGrace)
	case opts.WriteTimeout > 0:
		h2.WriteByteTimeout = min(opts.WriteTimeout, stallGrace)
	}
	return &http.Server{Addr: addr, Handler: h, Protocols: &p, HTTP2: &h2, TLSConfig: opts.TLS, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10, ConnContext: withConn,
		ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug)}, nil
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

// bearerToken returns the token of r's "Authorization: Bearer TOKEN", or
// "" when r carries none. The scheme is case-insensitive (RFC 7235 §2.1:
// "bearer TOKEN" is the same credential) and may be followed by more than
// one space; the token is taken as it is.
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimLeft(token, " ")
}

// tokenIs reports whether got is the token want, in constant time; an
// empty token is never one.
func tokenIs(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// requireToken lets through the requests whose token auth verifies, with
// the identity it stands for in their context (IdentityOf), and the page's
// files, which need none. What a verified identity may do is the
// authorizer's business (authz.go). A refusal says nothing of the token
// but, for one the daemon made, its name: revoked or expired.
func requireToken(h http.Handler, auth *Auth, workers bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := bearerToken(r)
		if r.URL.Path == WorkerPath {
			if ok := auth.workerOK(got); ok || !workers {
				if ok {
					markAuthenticated(r.Context())
				}
				h.ServeHTTP(w, r) // or its answer that it takes no workers
				return
			}
			// Refused here, not by the worker listener behind: here a
			// connection's refusal is logged once (refusing), however
			// many HTTP/2 streams it opened at once.
			limited := auth.refuseWorker(got, r.RemoteAddr)
			if refusing(r) {
				auth.log.Warn("worker connection refused", "remote", r.RemoteAddr, "reason", workerAuthProblem(r, limited))
			}
			w.Header().Set("Connection", "close")
			if limited {
				http.Error(w, "claudectl: too many failed authentications from this address: try again later", http.StatusTooManyRequests)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="claudectl"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && web.IsPage(r.URL.Path) {
			h.ServeHTTP(w, r) // the page's files: public code; the API calls it makes carry the token
			return
		}
		if strings.HasPrefix(r.URL.Path, "/auth/") {
			h.ServeHTTP(w, r) // the sign-in (oidc.go): it is how a page gets a token
			return
		}
		if r.URL.Path == PushActPath {
			h.ServeHTTP(w, r) // a notification's action: its capability is the credential (notify.go)
			return
		}
		cookie := false
		if got == "" {
			// A signed-in page's requests carry its token in a cookie, and
			// must prove they come from the page (CSRFHeader): the browser
			// adds the cookie to whatever asks, a form of another site too.
			if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
				if !csrfOK(r, c.Value) {
					refusing(r)
					w.Header().Set("Connection", "close")
					http.Error(w, "claudectl: a request signed in by cookie must carry the "+CSRFHeader+" header (the page sends it)", http.StatusForbidden)
					return
				}
				got, cookie = c.Value, true
			}
		}
		id, err := auth.verify(got, r.RemoteAddr)
		if err != nil {
			refusing(r)                           // not logged: the client is told, and a stranger could fill the log
			w.Header().Set("Connection", "close") // no idle socket left to whoever lacks the token
			ae := err.(*authError)
			grpcCode, httpCode, code := "16", http.StatusUnauthorized, "unauthenticated" // UNAUTHENTICATED
			if ae.limited {
				grpcCode, httpCode, code = "8", http.StatusTooManyRequests, "resource_exhausted" // RESOURCE_EXHAUSTED
			}
			if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
				w.Header().Set("Content-Type", "application/grpc")
				w.Header().Set("Grpc-Status", grpcCode)
				w.Header().Set("Grpc-Message", grpcPercentEncode(ae.msg))
				w.WriteHeader(http.StatusOK)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(httpCode)
			b, _ := json.Marshal(map[string]string{"code": code, "message": ae.msg})
			w.Write(b)
			return
		}
		id.Remote = r.RemoteAddr
		id.ClientKind = clientKind(r.Header.Get(ClientHeader))
		if cookie {
			id.ClientKind = "page"
		}
		markAuthenticated(r.Context())
		h.ServeHTTP(w, r.WithContext(withIdentity(r.Context(), id)))
	})
}

// workerAuthProblem says why a worker's request at WorkerPath was
// refused, for the log; never the token.
func workerAuthProblem(r *http.Request, limited bool) string {
	switch {
	case limited:
		return "too many failed authentications from this address"
	case r.Header.Get("Authorization") == "":
		return "no Authorization header"
	case bearerToken(r) == "":
		return "Authorization is not a bearer token"
	}
	return "wrong token"
}

// clientKind is what a client says it is, as the audit trail records it:
// "page", "cli", or "api" for anything else.
func clientKind(h string) string {
	switch h = strings.ToLower(strings.TrimSpace(h)); h {
	case "page", "cli":
		return h
	}
	return "api"
}

// grpcPercentEncode encodes a Grpc-Message header value as gRPC's
// protocol says: bytes outside printable ASCII, and '%', as %XX.
func grpcPercentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c > '~' || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// hangUpGrace is how long an HTTP/2 connection hung up after a refusal
// stays open, unread, so that the answers already written reach the
// client before the close (which resets a connection with unread data).
const hangUpGrace = 100 * time.Millisecond

// hangUpRefused completes, for HTTP/2, what refusing does: a stream of a
// connection already refused and not known to carry the token (read
// before the hang-up took effect) is answered 503 without being looked
// at, and a refusal by h itself (the worker listener's 401, which says
// "Connection: close" as ours do) hangs the connection up too. net/http
// alone turns "Connection: close" on HTTP/2 into a graceful GOAWAY that
// still answers every stream already read, up to 250 a connection, each
// 403 logged, and reads the connection for a second more. HTTP/1 needs
// none of this: net/http closes the connection after the answer.
func hangUpRefused(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := guardOf(r.Context())
		if c == nil || r.ProtoMajor < 2 {
			h.ServeHTTP(w, r)
			return
		}
		if c.refused.Load() && !c.authed.Load() {
			// A stream read before its connection was hung up, the client
			// not known: nothing is served on a connection being closed.
			c.hangUp(hangUpGrace)
			http.Error(w, "claudectl: this connection is being closed: a request on it was refused", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
		if w.Header().Get("Connection") == "close" { // refused by h: the worker listener's 401
			refusing(r)
		}
	})
}

// checkOrigin refuses requests whose Host is not one this daemon answers
// to, or that a browser sends from a page of another origin; it answers
// CORS preflights for the origins allowed explicitly.
func checkOrigin(h http.Handler, addr string, o *ServerOptions) http.Handler {
	listenHost, _, _ := net.SplitHostPort(addr)
	log := o.Logger // set by NewServer
	hostOK := func(host string) bool {
		if host == "" || strings.EqualFold(host, "localhost") || strings.EqualFold(host, listenHost) {
			return true
		}
		if net.ParseIP(strings.Trim(host, "[]")) != nil {
			return true // an address, not a name: DNS rebinding needs a name
		}
		return slices.ContainsFunc(o.AllowedHosts, func(a string) bool { return strings.EqualFold(a, host) })
	}
	// refuse answers 403 and says why in a log line. why quotes what the
	// client sent through clip, and the path is clipped too: whoever sends
	// them needs no token, and headers may be 64 KiB.
	refuse := func(w http.ResponseWriter, r *http.Request, why, fix string) {
		if refusing(r) {
			log.Warn("refused a request", "reason", why, "fix", fix, "remote", r.RemoteAddr, "path", clip(r.URL.Path))
		}
		w.Header().Set("Connection", "close") // as for a 401: no socket left open to a refused client
		http.Error(w, "claudectl: "+why, http.StatusForbidden)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			host = hh
		}
		if !hostOK(host) {
			refuse(w, r, fmt.Sprintf("Host %q is not one this daemon answers to", clip(r.Host)),
				"add the name to allowed_hosts in settings.json")
			return
		}
		origin := r.Header.Get("Origin")
		if origin == "" { // not from a browser page
			h.ServeHTTP(w, r)
			return
		}
		explicit := slices.Contains(o.AllowedOrigins, origin)
		if !explicit && !sameOrigin(origin, r.Host) {
			refuse(w, r, fmt.Sprintf("a page of origin %q may not call this daemon", clip(origin)),
				"add the origin to allowed_origins in settings.json")
			return
		}
		if explicit {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Add("Vary", "Origin")
			w.Header().Set("Access-Control-Expose-Headers", "Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
				w.Header().Set("Access-Control-Allow-Headers", r.Header.Get("Access-Control-Request-Headers"))
				w.Header().Set("Access-Control-Max-Age", "7200")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether a browser origin is the daemon's own: the
// page was served by the host and port the request is addressed to.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// maxLogged bounds what a log line quotes of a value a client sent.
const maxLogged = 200

// clip returns s whole when it has at most maxLogged bytes, else its first
// maxLogged bytes (cut at a character boundary), an ellipsis and the
// length of the whole, so a line says the value was longer and by how much.
func clip(s string) string {
	if len(s) <= maxLogged {
		return s
	}
	n := maxLogged
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:n], len(s))
}
