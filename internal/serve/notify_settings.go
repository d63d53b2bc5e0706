package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/notify"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// NotifySettings are the notify.* settings: how the daemon reaches people
// (package notify).
type NotifySettings struct {
	// Webhooks are notify.webhooks; each one's secret is read by the
	// command from its SecretFile into Secret.
	Webhooks []Webhook
	// AllowPrivateTargets is notify.allow_private_targets: webhooks and
	// push endpoints may be on loopback and private networks.
	AllowPrivateTargets bool
	// PushSubject is notify.push_subject, the VAPID contact ("" for
	// mailto:claudectl@HOST).
	PushSubject string
	// PageURL is notify.page_url, the page's address for links in
	// webhooks.
	PageURL string
}

// A Webhook is one of notify.webhooks.
type Webhook struct {
	notify.Webhook
	SecretFile string
}

func init() {
	configSections = append(configSections, "notify")
	configKeys = append(configKeys, notifyKeys...)
}

// webhookJSON is a webhook as the settings file writes it.
type webhookJSON struct {
	Name       string   `json:"name"`
	URL        string   `json:"url"`
	Events     []string `json:"events"`
	Format     string   `json:"format"`
	SecretFile string   `json:"secret_file"`
	Timeout    string   `json:"timeout"`
	Attempts   int      `json:"attempts"`
}

// routeJSON is a route as the settings file writes it.
type routeJSON struct {
	Name          string   `json:"name"`
	Tools         []string `json:"tools"`
	Dirs          []string `json:"dirs"`
	Sessions      []string `json:"sessions"`
	Ask           []string `json:"ask"`
	Approvals     int      `json:"approvals"`
	EscalateAfter string   `json:"escalate_after"`
	EscalateTo    []string `json:"escalate_to"`
	ExpireAfter   string   `json:"expire_after"`
	OnExpiry      string   `json:"on_expiry"`
}

// strictJSON decodes raw into v, refusing unknown fields.
func strictJSON(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// optDuration parses a duration of a setting's object, "" for zero.
func optDuration(what, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s %q: a duration > 0 such as \"10m\"", what, s)
	}
	return d, nil
}

var notifyKeys = []configKey{
	{"notify.webhooks", `an array of webhooks, such as [{"name": "ops", "url": "https://hooks.example.com/claude", "events": ["permission_request"], "format": "json", "secret_file": "webhook-secret"}]`, func(c *Settings, raw json.RawMessage, p *configParser) error {
		var ws []webhookJSON
		if err := strictJSON(raw, &ws); err != nil {
			return fmt.Errorf("invalid value %s for notify.webhooks: %v (keys: name, url, events, format, secret_file, timeout, attempts)",
				clip(string(raw)), strings.TrimPrefix(err.Error(), "json: "))
		}
		c.Notify.Webhooks = nil
		for i, w := range ws {
			hook := Webhook{Webhook: notify.Webhook{Name: w.Name, URL: w.URL, Events: w.Events, Format: w.Format, Attempts: w.Attempts}}
			var err error
			if hook.Timeout, err = optDuration("timeout", w.Timeout); err == nil {
				err = notify.CheckWebhook(&hook.Webhook)
			}
			if err == nil && slices.ContainsFunc(c.Notify.Webhooks, func(o Webhook) bool { return o.Name == w.Name }) {
				err = fmt.Errorf("name %q is used by an earlier webhook", w.Name)
			}
			if err == nil && w.SecretFile != "" {
				hook.SecretFile, err = p.path(jsonQuote(w.SecretFile))
			}
			if err != nil {
				return fmt.Errorf("invalid notify.webhooks[%d]: %v", i, err)
			}
			c.Notify.Webhooks = append(c.Notify.Webhooks, hook)
		}
		return nil
	}},
	{"notify.allow_private_targets", "true or false (default false)", func(c *Settings, raw json.RawMessage, _ *configParser) error {
		var b *bool
		if json.Unmarshal(raw, &b) != nil || b == nil {
			return errBadValue
		}
		c.Notify.AllowPrivateTargets = *b
		return nil
	}},
	{"notify.push_subject", `a mailto: or https: URL push services may contact about the daemon's pushes, such as "mailto:ops@example.com"`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		s, err := jsonString(raw)
		if err != nil || (!strings.HasPrefix(s, "mailto:") && !strings.HasPrefix(s, "https://")) || len(s) < 9 {
			return errBadValue
		}
		c.Notify.PushSubject = s
		return nil
	}},
	{"notify.page_url", `the page's address as people open it, such as "https://claude.example.com", for links in webhooks`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		s, err := jsonString(raw)
		if err != nil {
			return err
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return errBadValue
		}
		c.Notify.PageURL = s
		return nil
	}},
	{"permissions.routes", `an array of routes, the first that matches applies, such as [{"name": "pushes", "tools": ["Bash(git push:*)"], "ask": ["group:ops"], "approvals": 2, "escalate_after": "10m", "escalate_to": ["carol"], "expire_after": "1h"}]`, func(c *Settings, raw json.RawMessage, p *configParser) error {
		var rs []routeJSON
		if err := strictJSON(raw, &rs); err != nil {
			return fmt.Errorf("invalid value %s for permissions.routes: %v (keys: name, tools, dirs, sessions, ask, approvals, escalate_after, escalate_to, expire_after, on_expiry)",
				clip(string(raw)), strings.TrimPrefix(err.Error(), "json: "))
		}
		var routes []permission.Route
		for i, r := range rs {
			rt := permission.Route{Name: r.Name, Tools: r.Tools, Sessions: r.Sessions, Ask: r.Ask, Approvals: r.Approvals,
				EscalateTo: r.EscalateTo, OnExpiry: r.OnExpiry}
			var err error
			if rt.EscalateAfter, err = optDuration("escalate_after", r.EscalateAfter); err == nil {
				rt.ExpireAfter, err = optDuration("expire_after", r.ExpireAfter)
			}
			for _, d := range r.Dirs {
				if err != nil {
					break
				}
				var dir string
				dir, err = p.path(jsonQuote(d))
				rt.Dirs = append(rt.Dirs, dir)
			}
			if err != nil {
				return fmt.Errorf("invalid permissions.routes[%d]: %v", i, err)
			}
			routes = append(routes, rt)
		}
		if _, err := permission.NewRouter(routes, homeDir(p.getenv)); err != nil {
			return fmt.Errorf("invalid permissions.routes: %v", err)
		}
		c.Routes = routes
		return nil
	}},
	{"permissions.groups", `an object of groups of users that routes ask as "group:NAME", such as {"ops": ["alice", "bob"]}`, func(c *Settings, raw json.RawMessage, _ *configParser) error {
		var gs map[string][]string
		if json.Unmarshal(raw, &gs) != nil || gs == nil {
			return errBadValue
		}
		for g, users := range gs {
			if g == "" || strings.ContainsAny(g, " \t\n,:") {
				return fmt.Errorf("invalid group name %q in permissions.groups: a name without spaces, ',' or ':'", g)
			}
			for _, u := range users {
				if u == "" || strings.ContainsAny(u, " \t\n,") {
					return fmt.Errorf("invalid user %q in permissions.groups.%s", u, g)
				}
			}
		}
		c.Groups = gs
		return nil
	}},
}

// jsonQuote is s as a JSON string.
func jsonQuote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// startNotifier starts the daemon's notifier (package notify): Web Push
// with the store's devices, the settings' webhooks. A store that keeps no
// devices still serves the webhooks.
func startNotifier(ctx context.Context, s *Settings, db store.Store, auth *apiserver.Auth, log *slog.Logger) (*notify.Notifier, error) {
	o := &notify.Options{AllowPrivateTargets: s.Notify.AllowPrivateTargets, PushSubject: s.Notify.PushSubject,
		PageURL: s.Notify.PageURL, Access: auth, Logger: log}
	if ns, ok := db.(store.Notifications); ok {
		o.Store = ns
	}
	for _, w := range s.Notify.Webhooks {
		o.Webhooks = append(o.Webhooks, w.Webhook)
	}
	n, err := notify.New(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("starting notifications: %w", err)
	}
	if len(o.Webhooks) > 0 {
		names := make([]string, len(o.Webhooks))
		for i, w := range o.Webhooks {
			names[i] = w.Name
		}
		log.Info("webhooks", "targets", strings.Join(names, ", "), "allow_private_targets", s.Notify.AllowPrivateTargets)
	}
	return n, nil
}

// daemonNotifier is n as the daemon's Notifier, nil for none (a nil
// *notify.Notifier in the interface would not be nil).
func daemonNotifier(n *notify.Notifier) daemon.Notifier {
	if n == nil {
		return nil
	}
	return n
}
