package apiserver

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/claudectl/claudectl/store"
)

// Sign-in for the page with OpenID Connect: the authorization code flow
// with PKCE against a configured issuer. A person the provider vouches
// for, and whose email or groups the settings map to a role, gets a token
// of that role made for the sign-in (a store token like any other: it
// expires, is revoked by signing out or by claudectl tokens revoke, and
// the audit trail names the person), held in an HttpOnly, SameSite=Strict
// cookie that the page's own requests carry. Requests authenticated by
// the cookie must also carry the Claudectl-Csrf header, whose value the
// page reads from a second cookie that only pages of the daemon's origin
// can read: a request another site makes the browser send has neither.

// The cookies of a signed-in page, and of a sign-in under way.
const (
	SessionCookie = "claudectl_session"
	CSRFCookie    = "claudectl_csrf"
	// CSRFHeader is what cookie-authenticated requests carry: the value of
	// CSRFCookie.
	CSRFHeader  = "Claudectl-Csrf"
	stateCookie = "claudectl_signin"
)

// The paths of the sign-in: none needs a token.
const (
	AuthConfigPath   = "/auth/config"
	AuthLoginPath    = "/auth/login"
	AuthCallbackPath = "/auth/callback"
	AuthLogoutPath   = "/auth/logout"
)

// A RoleMapping gives the people whose email is Email, or who are in the
// group Group (the provider's groups claim), a role. Exactly one of Email
// and Group is set; "*" as Group matches anyone the provider vouches for.
type RoleMapping struct {
	Group string `json:"group,omitempty"`
	Email string `json:"email,omitempty"`
	Role  string `json:"role"`
}

// OIDCOptions configures NewOIDC.
type OIDCOptions struct {
	// Issuer is the provider's issuer URL; required.
	Issuer string
	// ClientID and ClientSecret are the daemon's client at the provider;
	// ClientID is required.
	ClientID, ClientSecret string
	// RedirectURL is where the provider sends the browser back: the
	// daemon's AuthCallbackPath. Empty means the address the page was
	// opened at (its scheme, host and port) and AuthCallbackPath.
	RedirectURL string
	// Scopes asked for; nil means openid, email, profile and groups.
	Scopes []string
	// GroupsClaim names the ID token's claim that lists the person's
	// groups; empty means "groups".
	GroupsClaim string
	// Roles map people to roles, the first that matches wins; nobody
	// else gets in.
	Roles []RoleMapping
	// SessionTTL is how long a sign-in lasts; zero means 12 hours.
	SessionTTL time.Duration
	// Store keeps the users and the sign-ins' tokens; Auth is told of
	// new ones. Both required.
	Store store.Store
	Auth  *Auth
	// Secure marks the cookies Secure (the daemon speaks TLS).
	Secure bool
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// OIDC serves the sign-in (its Handler, at /auth/).
type OIDC struct {
	o OIDCOptions

	mu       sync.Mutex
	provider *oidc.Provider // discovered at the first sign-in; guarded by mu
}

// NewOIDC checks o; the provider is asked for its configuration at the
// first sign-in, so that a daemon starts while its provider is down.
func NewOIDC(o *OIDCOptions) (*OIDC, error) {
	opts := *o
	if opts.Issuer == "" || opts.ClientID == "" {
		return nil, errors.New("auth.oidc: issuer and client_id are required")
	}
	if u, err := url.Parse(opts.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("auth.oidc.issuer %q: not an http(s) URL", opts.Issuer)
	}
	if len(opts.Roles) == 0 {
		return nil, errors.New("auth.oidc.roles: empty, so nobody could sign in: map groups or emails to roles")
	}
	for i, m := range opts.Roles {
		if (m.Group == "") == (m.Email == "") {
			return nil, fmt.Errorf("auth.oidc.roles[%d]: set one of group and email", i)
		}
		if r := RolePermissions(m.Role); r == nil || m.Role == RoleWorker {
			return nil, fmt.Errorf("auth.oidc.roles[%d].role %q: one of viewer, operator, approver, admin", i, m.Role)
		}
	}
	if opts.Scopes == nil {
		opts.Scopes = []string{oidc.ScopeOpenID, "email", "profile", "groups"}
	}
	if opts.GroupsClaim == "" {
		opts.GroupsClaim = "groups"
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Store == nil || opts.Auth == nil {
		return nil, errors.New("auth.oidc: needs the daemon's store")
	}
	return &OIDC{o: opts}, nil
}

func (s *OIDC) providerOf(ctx context.Context) (*oidc.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider != nil {
		return s.provider, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, s.o.Issuer)
	if err != nil {
		return nil, err
	}
	s.provider = p
	return p, nil
}

func (s *OIDC) config(r *http.Request, p *oidc.Provider) *oauth2.Config {
	redirect := s.o.RedirectURL
	if redirect == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		redirect = scheme + "://" + r.Host + AuthCallbackPath
	}
	return &oauth2.Config{ClientID: s.o.ClientID, ClientSecret: s.o.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: redirect, Scopes: s.o.Scopes}
}

// ServeHTTP serves the sign-in's paths.
func (s *OIDC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case AuthConfigPath:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprint(w, `{"oidc":true}`)
	case AuthLoginPath:
		s.login(w, r)
	case AuthCallbackPath:
		s.callback(w, r)
	case AuthLogoutPath:
		s.logout(w, r)
	default:
		http.NotFound(w, r)
	}
}

func randomString() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// login sends the browser to the provider, with a state, a nonce and a
// PKCE verifier kept in a cookie of its own for the way back (SameSite
// Lax: the way back is a navigation from the provider's site).
func (s *OIDC) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "claudectl: GET only", http.StatusMethodNotAllowed)
		return
	}
	p, err := s.providerOf(r.Context())
	if err != nil {
		s.o.Logger.Warn("sign-in: the identity provider did not answer", "issuer", s.o.Issuer, "err", err)
		s.page(w, http.StatusBadGateway, "The identity provider does not answer", "The daemon could not reach "+s.o.Issuer+". Try again later, or log in with a token.")
		return
	}
	state, nonce, verifier := randomString(), randomString(), oauth2.GenerateVerifier()
	http.SetCookie(w, &http.Cookie{Name: stateCookie, Value: state + "." + nonce + "." + verifier, Path: "/auth/",
		MaxAge: 600, HttpOnly: true, Secure: s.o.Secure, SameSite: http.SameSiteLaxMode})
	u := s.config(r, p).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// claims are what the daemon reads of an ID token.
type claims struct {
	Subject string `json:"sub"`
	Email   string `json:"email"`
	Name    string `json:"preferred_username"`
}

// roleOf maps a person to a role: the first mapping that matches.
func (s *OIDC) roleOf(email string, groups []string) string {
	for _, m := range s.o.Roles {
		switch {
		case m.Email != "" && email != "" && strings.EqualFold(m.Email, email):
			return m.Role
		case m.Group == "*" || (m.Group != "" && slices.Contains(groups, m.Group)):
			return m.Role
		}
	}
	return ""
}

func (s *OIDC) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c, err := r.Cookie(stateCookie)
	http.SetCookie(w, &http.Cookie{Name: stateCookie, Path: "/auth/", MaxAge: -1, HttpOnly: true, Secure: s.o.Secure, SameSite: http.SameSiteLaxMode})
	if e := q.Get("error"); e != "" {
		s.page(w, http.StatusForbidden, "Sign-in refused", "The identity provider said: "+clip(e)+" "+clip(q.Get("error_description")))
		return
	}
	parts := []string{}
	if err == nil {
		parts = strings.Split(c.Value, ".")
	}
	if len(parts) != 3 || subtle.ConstantTimeCompare([]byte(parts[0]), []byte(q.Get("state"))) != 1 {
		s.page(w, http.StatusBadRequest, "Sign-in failed", "This sign-in was not started here, or took longer than ten minutes: start again.")
		return
	}
	nonce, verifier := parts[1], parts[2]
	p, err := s.providerOf(r.Context())
	if err != nil {
		s.page(w, http.StatusBadGateway, "The identity provider does not answer", err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	tok, err := s.config(r, p).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		s.o.Logger.Warn("sign-in: exchanging the code failed", "issuer", s.o.Issuer, "err", err)
		s.page(w, http.StatusBadGateway, "Sign-in failed", "The identity provider refused to exchange the code: start again.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.Verifier(&oidc.Config{ClientID: s.o.ClientID}).Verify(ctx, raw)
	if err != nil || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		s.o.Logger.Warn("sign-in: the ID token did not verify", "issuer", s.o.Issuer, "err", err)
		s.page(w, http.StatusBadRequest, "Sign-in failed", "The identity provider's answer did not verify: start again.")
		return
	}
	var cl claims
	var all map[string]any
	if err := idt.Claims(&cl); err != nil || idt.Claims(&all) != nil {
		s.page(w, http.StatusBadRequest, "Sign-in failed", "The ID token's claims are unreadable.")
		return
	}
	var groups []string
	if g, ok := all[s.o.GroupsClaim].([]any); ok {
		for _, v := range g {
			if s, ok := v.(string); ok && len(groups) < store.MaxGroups {
				groups = append(groups, s)
			}
		}
	}
	role := s.roleOf(cl.Email, groups)
	who := cmp.Or(cl.Email, cl.Name, cl.Subject)
	if role == "" {
		s.o.Logger.Warn("sign-in refused: nobody mapped this person to a role", "email", clip(cl.Email), "subject", clip(cl.Subject),
			"groups", clip(strings.Join(groups, ",")), "fix", "add their email or a group of theirs to auth.oidc.roles")
		s.page(w, http.StatusForbidden, "Not allowed here", fmt.Sprintf(
			"The identity provider knows you as %s, but this daemon gives that person no role: ask its admin to add your email or one of your groups to auth.oidc.roles.", clip(who)))
		return
	}
	user := userName(who)
	u := &store.User{Name: user, Subject: clip(idt.Issuer + " " + cl.Subject), Email: cl.Email, Groups: groups}
	if err := s.o.Store.PutUser(ctx, u); err != nil {
		s.o.Logger.Warn("sign-in: storing the user failed", "user", user, "err", err)
		s.page(w, http.StatusInternalServerError, "Sign-in failed", "The daemon could not store your sign-in: try again.")
		return
	}
	secret := NewTokenSecret()
	short := make([]byte, 4)
	rand.Read(short)
	t := &store.Token{Name: "signin-" + hex.EncodeToString(short) + "-" + clipName(user, 40), User: user, Role: role,
		Hash: HashToken(secret), ExpiresAt: time.Now().Add(s.o.SessionTTL), CreatedBy: "oidc"}
	if err := s.o.Store.CreateToken(ctx, t); err != nil {
		s.o.Logger.Warn("sign-in: storing its token failed", "user", user, "err", err)
		s.page(w, http.StatusInternalServerError, "Sign-in failed", "The daemon could not store your sign-in: "+err.Error())
		return
	}
	if err := s.o.Auth.Reload(ctx); err != nil {
		s.page(w, http.StatusInternalServerError, "Sign-in failed", "The daemon could not load your sign-in: try again.")
		return
	}
	s.o.Store.AddAudit(context.WithoutCancel(ctx), &store.AuditEntry{User: user, Token: t.Name, ClientKind: "page",
		Remote: r.RemoteAddr, Action: "SignIn", Detail: fmt.Sprintf("role %s via %s (email %s, groups %s)", role, s.o.Issuer, cl.Email,
			strings.Join(groups, ",")), Outcome: "ok"})
	ttl := int(s.o.SessionTTL / time.Second)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: secret, Path: "/", MaxAge: ttl, HttpOnly: true,
		Secure: s.o.Secure, SameSite: http.SameSiteStrictMode})
	http.SetCookie(w, &http.Cookie{Name: CSRFCookie, Value: csrfOf(secret), Path: "/", MaxAge: ttl,
		Secure: s.o.Secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/#/inbox", http.StatusSeeOther)
}

// logout revokes the sign-in's token and forgets its cookies; it takes
// the CSRF header as the API does.
func (s *OIDC) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "claudectl: POST only", http.StatusMethodNotAllowed)
		return
	}
	c, err := r.Cookie(SessionCookie)
	if err == nil && csrfOK(r, c.Value) {
		if t := s.o.Auth.lookup(c.Value); t != nil && t.RevokedAt.IsZero() {
			if _, err := s.o.Store.RevokeToken(r.Context(), t.Name, t.Name); err == nil {
				s.o.Auth.Reload(r.Context())
			}
		}
	} else if err == nil {
		http.Error(w, "claudectl: signing out needs the "+CSRFHeader+" header", http.StatusForbidden)
		return
	}
	for _, name := range []string{SessionCookie, CSRFCookie} {
		http.SetCookie(w, &http.Cookie{Name: name, Path: "/", MaxAge: -1, HttpOnly: name == SessionCookie, Secure: s.o.Secure,
			SameSite: http.SameSiteStrictMode})
	}
	w.WriteHeader(http.StatusNoContent)
}

// page answers a sign-in with a short page of its own: what happened and
// a way back.
func (s *OIDC) page(w http.ResponseWriter, code int, title, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintf(w, `<!doctype html><meta charset="utf-8"><title>claudectl: %s</title><h1>%s</h1><p id="why">%s</p><p><a href="/">Back to the login</a></p>`,
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(body))
}

// csrfOf is the CSRF value of a sign-in's token: derived from it, so that
// the daemon keeps nothing more, and telling nothing of it.
func csrfOf(secret string) string {
	h := sha256.Sum256([]byte("claudectl csrf\x00" + secret))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// csrfOK reports whether r carries the CSRF header of the sign-in secret.
func csrfOK(r *http.Request, secret string) bool {
	got := r.Header.Get(CSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(csrfOf(secret))) == 1
}

// userName is how a signed-in person is named: their email, else their
// name or subject, cut to a user name's length, control characters out.
func userName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
	return clipName(s, store.MaxNameBytes)
}

// clipName cuts s to n bytes at a character boundary.
func clipName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
