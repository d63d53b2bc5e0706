package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOIDCSignInChromium signs a person in to the page in real headless
// Chromium (e2e/oidc.mjs) with OpenID Connect against Ory Hydra, a real
// provider the test starts on loopback (make hydra builds it): the
// authorization code flow with PKCE, the role from the groups Hydra
// vouches for, the HttpOnly SameSite=Strict cookie, the CSRF header the
// page's requests must carry, signing out (the sign-in's token revoked),
// and a person no mapping names turned away. Hydra leaves the login and
// consent screens to the site that runs it: the test's are a form that
// takes a user name, and a consent that grants what was asked with an
// email and groups per user, both through Hydra's admin API.
func TestOIDCSignInChromium(t *testing.T) {
	chromium := os.Getenv("CLAUDECTL_TEST_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	hydra := os.Getenv("CLAUDECTL_TEST_HYDRA")
	if hydra == "" {
		hydra = "../.tools/bin/hydra"
	}
	cli := os.Getenv("CLAUDECTL_TEST_CLI")
	missing := func(what string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing (make test installs it)", what)
		}
		t.Skipf("%s is missing: run make test, which installs it", what)
	}
	for _, f := range []struct{ what, path string }{{"Chromium (" + chromium + ")", chromium}, {"Ory Hydra (make hydra)", hydra},
		{"web/node_modules (npm ci in web/)", "node_modules/playwright-core"}} {
		if _, err := os.Stat(f.path); err != nil {
			missing(f.what)
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node")
	}
	if cli == "" {
		missing("the Claude Code CLI (CLAUDECTL_TEST_CLI)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()

	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	publicAddr, adminAddr, daemonAddr := free(), free(), free()
	// The provider is "localhost", the daemon "127.0.0.1": two sites, as
	// in life (sites ignore ports), so that what a browser sends from one
	// to the other is what it would send across the web.
	issuer, admin, base := "http://localhost:"+port(publicAddr), "http://"+adminAddr, "http://"+daemonAddr

	// The login and consent screens.
	screens, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	loginApp := &http.Server{Handler: loginConsent(t, admin)}
	go loginApp.Serve(screens)
	defer loginApp.Close()
	screensURL := "http://" + screens.Addr().String()

	h := exec.CommandContext(ctx, hydra, "serve", "all", "--dev", "--sqa-opt-out")
	h.Env = append(os.Environ(), "DSN=memory", "SECRETS_SYSTEM=claudectl-e2e-secret-of-32-bytes!!", "URLS_SELF_ISSUER="+issuer,
		"URLS_LOGIN="+screensURL+"/login", "URLS_CONSENT="+screensURL+"/consent",
		"SERVE_PUBLIC_HOST=127.0.0.1", "SERVE_PUBLIC_PORT="+port(publicAddr), "SERVE_ADMIN_HOST=127.0.0.1", "SERVE_ADMIN_PORT="+port(adminAddr),
		"LOG_LEVEL=warn")
	var hlog bytes.Buffer
	h.Stdout, h.Stderr = &hlog, &hlog
	h.WaitDelay = 5 * time.Second
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		h.Process.Kill()
		h.Wait()
		if t.Failed() {
			t.Logf("hydra's log:\n%s", hlog.String())
		}
	}()
	waitOK(t, ctx, admin+"/health/ready")
	const secret = "claudectl-client-secret"
	postJSON(t, ctx, http.MethodPost, admin+"/admin/clients", map[string]any{
		"client_id": "claudectl", "client_secret": secret, "redirect_uris": []string{base + "/auth/callback"},
		"grant_types": []string{"authorization_code"}, "response_types": []string{"code"}, "scope": "openid email profile groups",
		"token_endpoint_auth_method": "client_secret_basic"}, nil)

	secretFile := filepath.Join(dir, "client-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	settings, _ := json.Marshal(map[string]any{"auth": map[string]any{"oidc": map[string]any{
		"issuer": issuer, "client_id": "claudectl", "client_secret_file": secretFile,
		"roles": []map[string]string{{"group": "approvers", "role": "approver"}, {"email": "vera@example.com", "role": "viewer"}},
	}}})
	settingsFile := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(settingsFile, settings, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "claudectl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/claudectl/claudectl/cmd/claudectl").CombinedOutput(); err != nil {
		t.Fatalf("building claudectl: %v\n%s", err, out)
	}
	dataDir := filepath.Join(dir, "data")
	serve := exec.CommandContext(ctx, bin, "serve", "--config", settingsFile, "--listen", daemonAddr, "--data-dir", dataDir, "--cli", cli)
	var slog bytes.Buffer
	serve.Stdout, serve.Stderr = &slog, &slog
	serve.Cancel = func() error { return serve.Process.Signal(syscall.SIGTERM) }
	serve.WaitDelay = 30 * time.Second
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		serve.Process.Signal(syscall.SIGTERM)
		serve.Wait()
		if t.Failed() {
			t.Logf("the daemon's log:\n%s", slog.String())
		}
	}()
	waitOK(t, ctx, base+"/auth/config")
	token, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, node, "e2e/oidc.mjs")
	cmd.Env = append(os.Environ(), "BASE="+base, "ISSUER="+issuer, "CHROMIUM="+chromium, "SHOTS="+os.Getenv("CLAUDECTL_WEB_SHOTS"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("e2e/oidc.mjs:\n%s", out.String())
	if err != nil || !strings.Contains(out.String(), "\nPASS\n") {
		t.Fatalf("the sign-in's end-to-end script failed: %v", err)
	}

	// The audit trail names who signed in, with the role Hydra's groups
	// gave them; the turned-away person got no token.
	var audit struct {
		Entries []struct{ User, Token, Action, Detail, ClientKind string }
	}
	call(t, ctx, base, strings.TrimSpace(string(token)), "AuthService/ListAudit", map[string]any{}, &audit)
	signIns := map[string]string{}
	for _, e := range audit.Entries {
		if e.Action == "SignIn" {
			signIns[e.User] = e.Detail
		}
	}
	if !strings.HasPrefix(signIns["alice@example.com"], "role approver via "+issuer) || !strings.HasPrefix(signIns["vera@example.com"], "role viewer") || len(signIns) != 2 {
		t.Errorf("the audit's sign-ins: %v", signIns)
	}
	var tokens struct {
		Tokens []struct{ Name, User, Role, CreatedBy, RevokedAt string }
	}
	call(t, ctx, base, strings.TrimSpace(string(token)), "AuthService/ListTokens", map[string]any{"includeRevoked": true}, &tokens)
	for _, tk := range tokens.Tokens {
		if tk.CreatedBy != "oidc" || !strings.HasPrefix(tk.Name, "signin-") {
			t.Errorf("a token that no sign-in made: %+v", tk)
		}
		if tk.User == "alice@example.com" && tk.RevokedAt == "" {
			t.Errorf("alice signed out, her sign-in's token is not revoked: %+v", tk)
		}
	}
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func waitOK(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never answered 200", u)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// postJSON sends body as JSON with method to u and decodes the answer
// into out (when not nil); anything but 2xx fails the test.
func postJSON(t *testing.T, ctx context.Context, method, u string, body, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %s\n%s", method, u, resp.Status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, u, err, data)
		}
	}
}

// call makes a Connect call to the daemon with a bearer token.
func call(t *testing.T, ctx context.Context, base, token, method string, body, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/claudectl.v1."+method, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s\n%s", method, resp.Status, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %v\n%s", method, err, data)
	}
}

// loginConsent serves Hydra's login and consent screens: a form that takes
// a user name, and a consent that grants the scopes asked for, with the
// user's email and groups in the ID token.
func loginConsent(t *testing.T, admin string) http.Handler {
	groups := map[string][]string{"alice": {"approvers", "staff"}, "vera": {"staff"}, "mallory": {"outsiders"}}
	accept := func(w http.ResponseWriter, r *http.Request, kind, challenge string, body any) {
		b, _ := json.Marshal(body)
		u := admin + "/admin/oauth2/auth/requests/" + kind + "/accept?" + kind + "_challenge=" + url.QueryEscape(challenge)
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPut, u, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		var out struct {
			RedirectTo string `json:"redirect_to"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
			http.Error(w, "hydra refused the "+kind+": "+resp.Status, http.StatusBadGateway)
			return
		}
		http.Redirect(w, r, out.RedirectTo, http.StatusFound)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Sign in</title><form method="post" action="/login">
<input type="hidden" name="challenge" value="%s"><label>User <input name="user"></label><button type="submit">Sign in</button></form>`,
			html.EscapeString(r.URL.Query().Get("login_challenge")))
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		accept(w, r, "login", r.FormValue("challenge"), map[string]any{"subject": r.FormValue("user")})
	})
	mux.HandleFunc("GET /consent", func(w http.ResponseWriter, r *http.Request) {
		challenge := r.URL.Query().Get("consent_challenge")
		resp, err := http.Get(admin + "/admin/oauth2/auth/requests/consent?consent_challenge=" + url.QueryEscape(challenge))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		var cr struct {
			Subject        string   `json:"subject"`
			RequestedScope []string `json:"requested_scope"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&cr); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		accept(w, r, "consent", challenge, map[string]any{"grant_scope": cr.RequestedScope, "session": map[string]any{
			"id_token": map[string]any{"email": cr.Subject + "@example.com", "email_verified": true, "groups": groups[cr.Subject]}}})
	})
	return mux
}
