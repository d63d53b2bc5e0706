package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The formats a webhook's body takes.
const (
	FormatJSON  = "json"  // claudectl's own JSON (Payload)
	FormatSlack = "slack" // {"text": ...}: Slack's, Mattermost's and Rocket.Chat's incoming webhooks
	FormatNtfy  = "ntfy"  // ntfy.sh: the text as the body, a Title and Tags header
)

// SignatureHeader carries a webhook's signature: "t=UNIX_SECONDS,v1=HEX",
// HEX the HMAC-SHA256, with the webhook's secret, of t + "." + body.
const SignatureHeader = "Claudectl-Signature"

// A Webhook is one target of notify.webhooks.
type Webhook struct {
	// Name names it in the delivery log ("webhook:NAME").
	Name string
	URL  string
	// Events it wants (Events); empty means all.
	Events []string
	// Format of its body: FormatJSON (the default), FormatSlack, FormatNtfy.
	Format string
	// Secret signs each delivery (SignatureHeader); nil sends none.
	Secret []byte
	// Timeout bounds one attempt; zero means 10 s.
	Timeout time.Duration
	// Attempts is how many times a delivery is tried; zero means 5.
	Attempts int
}

// wants reports whether w asks for events of kind.
func (w *Webhook) wants(kind string) bool {
	return kind == EventTest || len(w.Events) == 0 || slices.Contains(w.Events, kind)
}

// CheckWebhook checks w as the settings give it: a name, an http(s) URL,
// known events and format. Whether its address is a public one is known
// only when it is dialled.
func CheckWebhook(w *Webhook) error {
	if w.Name == "" || strings.ContainsAny(w.Name, " \t\n:/") || len(w.Name) > 64 {
		return fmt.Errorf("name %q: a short name without spaces, ':' or '/'", w.Name)
	}
	u, err := url.Parse(w.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("url %q: an http or https URL", w.URL)
	}
	for _, e := range w.Events {
		if !slices.Contains(Events, e) {
			return fmt.Errorf("event %q: one of %s", e, strings.Join(Events, ", "))
		}
	}
	switch w.Format {
	case "", FormatJSON, FormatSlack, FormatNtfy:
	default:
		return fmt.Errorf("format %q: %q, %q or %q", w.Format, FormatJSON, FormatSlack, FormatNtfy)
	}
	if w.Timeout < 0 || w.Attempts < 0 || w.Attempts > 20 {
		return fmt.Errorf("timeout and attempts: a positive timeout, 1 to 20 attempts")
	}
	return nil
}

// Sign returns the SignatureHeader value of body sent at t with secret:
// "t=UNIX_SECONDS,v1=HEX", HEX the HMAC-SHA256 of t + "." + body. A
// receiver recomputes it and refuses a t too far from its clock, which
// stops a captured delivery from being replayed later (Stripe's scheme).
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify checks a SignatureHeader value against body and secret, and that
// its time is within tolerance of now: what a receiver does.
func Verify(header string, secret, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return fmt.Errorf("notify: signature %q is not t=UNIX_SECONDS,v1=HEX", header)
	}
	t := time.Unix(sec, 0)
	if d := now.Sub(t); d > tolerance || d < -tolerance {
		return fmt.Errorf("notify: signature time %s is %s from now, more than %s", t.UTC().Format(time.RFC3339), d.Round(time.Second), tolerance)
	}
	want := Sign(secret, body, t)
	if !hmac.Equal([]byte(want[strings.Index(want, "v1=")+3:]), []byte(sig)) {
		return fmt.Errorf("notify: signature does not match the body")
	}
	return nil
}

// Payload is the body of a FormatJSON delivery.
type Payload struct {
	Event string    `json:"event"`
	Time  time.Time `json:"time"`
	// Text is the event in words, as chat formats show it.
	Text    string          `json:"text"`
	Session *PayloadSession `json:"session,omitempty"`
	Request *PayloadRequest `json:"request,omitempty"`
	Detail  string          `json:"detail,omitempty"`
	// URL opens the session in the page (notify.page_url), when set.
	URL string `json:"url,omitempty"`
}

// PayloadSession is the session an event is about.
type PayloadSession struct {
	ID       string `json:"id"`
	Cwd      string `json:"cwd,omitempty"`
	Terminal bool   `json:"terminal,omitempty"`
}

// PayloadRequest is the request an event is about.
type PayloadRequest struct {
	ID          string          `json:"id"`
	Tool        string          `json:"tool"`
	Summary     string          `json:"summary,omitempty"`
	Description string          `json:"description,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
	Route       string          `json:"route,omitempty"`
	Asked       []string        `json:"asked,omitempty"`
	Approvals   []string        `json:"approvals,omitempty"`
	Needed      int             `json:"approvals_needed,omitempty"`
	ExpiresAt   *time.Time      `json:"expires_at,omitempty"`
}

// maxInputBytes bounds the tool input a JSON delivery carries.
const maxInputBytes = 16 << 10

// payload returns e as the JSON body.
func payload(e *Event, pageURL string) Payload {
	p := Payload{Event: e.Kind, Time: e.At.UTC(), Text: e.text(), Detail: e.Detail}
	if e.SessionID != "" {
		p.Session = &PayloadSession{ID: e.SessionID, Cwd: e.Cwd, Terminal: e.Terminal}
		if pageURL != "" {
			p.URL = strings.TrimRight(pageURL, "/") + "/#/s/" + url.PathEscape(e.SessionID)
		}
	}
	if e.isRequest() {
		r := &PayloadRequest{ID: e.RequestID, Tool: e.Tool, Summary: Summary(e.Tool, e.Input), Description: e.Description,
			Approvals: e.Approvals}
		if len(e.Input) <= maxInputBytes && json.Valid(e.Input) {
			r.Input = e.Input
		}
		if rt := e.Routing; rt != nil {
			r.Route, r.Asked, r.Needed = rt.Route, rt.Asked(e.Escalated), rt.Approvals
		}
		if !e.ExpiresAt.IsZero() {
			t := e.ExpiresAt.UTC()
			r.ExpiresAt = &t
		}
		p.Request = r
	}
	return p
}

// request builds w's delivery of e: its body in w's format, signed.
func (w *Webhook) request(ctx context.Context, e *Event, pageURL string, now time.Time) (*http.Request, error) {
	var body []byte
	var err error
	h := http.Header{}
	switch w.Format {
	case FormatSlack:
		text := e.text()
		if p := payload(e, pageURL); p.URL != "" {
			text += "\n<" + p.URL + "|Open in claudectl>"
		}
		body, err = json.Marshal(map[string]string{"text": text})
		h.Set("Content-Type", "application/json")
	case FormatNtfy:
		body = []byte(e.body())
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Title", e.title())
		h.Set("Tags", "robot")
		if e.isRequest() {
			h.Set("Priority", "high")
		}
		if p := payload(e, pageURL); p.URL != "" {
			h.Set("Click", p.URL)
		}
	default:
		body, err = json.Marshal(payload(e, pageURL))
		h.Set("Content-Type", "application/json")
	}
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = h
	req.Header.Set("User-Agent", "claudectl-webhook/1")
	req.Header.Set("Claudectl-Event", e.Kind)
	if len(w.Secret) > 0 {
		req.Header.Set(SignatureHeader, Sign(w.Secret, body, now))
	}
	return req, nil
}

// post sends one attempt of w's delivery of e with client; it returns the
// status, and an *HTTPError for a status outside 2xx.
func (w *Webhook) post(ctx context.Context, client *http.Client, e *Event, pageURL string) (int, error) {
	req, err := w.request(ctx, e, pageURL, time.Now())
	if err != nil {
		return 0, err
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return res.StatusCode, &HTTPError{Status: res.StatusCode, Body: string(answer), RetryAfter: retryAfter(res)}
	}
	return res.StatusCode, nil
}
