package notify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// The daemon calls URLs that people configure (webhooks) and that clients
// hand it (a device's push endpoint). Without a guard, whoever may set one
// could make the daemon POST to what only it can reach: a service on
// loopback, the cloud's metadata address, the office network. So the
// address actually dialled is checked, after DNS: a name that resolves to
// a public address when the URL is checked and to 127.0.0.1 when it is
// dialled (DNS rebinding) is caught where it matters, at connect(2).

// A PrivateTargetError is a delivery refused because its address is not
// a public one.
type PrivateTargetError struct {
	Addr netip.Addr
	What string // "loopback", "private", "link-local", ...
}

func (e *PrivateTargetError) Error() string {
	return fmt.Sprintf("%s is a %s address: refused, the daemon calls public addresses only (notify.allow_private_targets: true allows it)",
		e.Addr, e.What)
}

// cgnat is RFC 6598's shared address space, which carriers use as private.
var special = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\""},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (shared)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
}

// classify says why a is not a public address, "" when it is one.
func classify(a netip.Addr) string {
	a = a.Unmap()
	// NAT64's well-known prefix carries an IPv4 address: judge that one.
	if nat64 := netip.MustParsePrefix("64:ff9b::/96"); nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	}
	for _, s := range special {
		if s.prefix.Contains(a) {
			return s.what
		}
	}
	return ""
}

// guardControl is a net.Dialer's Control: it refuses to connect to an
// address that is not public. It runs for each address the dialler tries,
// after resolution.
func guardControl(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("notify: dialling %q: %w", address, err)
	}
	if what := classify(ap.Addr()); what != "" {
		return &PrivateTargetError{Addr: ap.Addr().Unmap(), What: what}
	}
	return nil
}

// newClient returns the HTTP client deliveries use: private addresses
// refused at dial time unless allowPrivate, no proxy from the environment
// (the guard would judge the proxy's address, not the target's), no
// redirect followed (a 3xx is a failed delivery, so that a target cannot
// send the daemon elsewhere), each attempt bounded by the caller's
// context.
func newClient(allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = guardControl
	}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           d.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          64,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return fmt.Errorf("%w to %s: not followed", errRedirected, req.URL.Redacted())
		},
	}
}

// An HTTPError is a delivery a target answered with a status outside 2xx.
type HTTPError struct {
	Status     int
	Body       string        // the start of its answer
	RetryAfter time.Duration // what its Retry-After said, 0 for nothing
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("answered HTTP %d %s", e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		msg += ": " + clipLine(e.Body, 200)
	}
	return msg
}

// retryable reports whether a failed attempt is worth another: a network
// failure, a timeout, 408, 425, 429 or 5xx; never a refused address, a
// redirect or another 4xx, which the same request would meet again.
func retryable(err error) bool {
	var pe *PrivateTargetError
	if errors.As(err, &pe) || errors.Is(err, ErrGone) {
		return false
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status == 408 || he.Status == 425 || he.Status == 429 || he.Status >= 500
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, errRedirected)
}

// errRedirected is wrapped by the error of a delivery its target
// redirected.
var errRedirected = errors.New("redirected")

// retryAfter reads a Retry-After header in seconds (a date is ignored).
func retryAfter(res *http.Response) time.Duration {
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// clipLine is s on one line, at most n bytes.
func clipLine(s string, n int) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' || c == '\t' {
			b[i] = ' '
		}
	}
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
