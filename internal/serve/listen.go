package serve

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
)

// A ListenError is an address the daemon cannot listen on. When it is in
// use, Daemon says whether a claudectl daemon answers there (one with
// another data directory: one with the same is a *LockedError, found
// first).
type ListenError struct {
	Addr   string
	Err    error // net.Listen's
	InUse  bool  // the address is in use (EADDRINUSE)
	Daemon bool  // what uses it answers as a claudectl daemon
}

func (e *ListenError) Error() string {
	switch {
	case e.Daemon:
		return fmt.Sprintf("%s is in use: another claudectl daemon serves there", e.Addr)
	case e.InUse:
		return fmt.Sprintf("%s is in use by another program", e.Addr)
	}
	return fmt.Sprintf("cannot listen on %s: %v", e.Addr, e.Err)
}

func (e *ListenError) Unwrap() error { return e.Err }

// listenOn listens on addr; an address in use is a *ListenError saying
// whether a claudectl daemon answers there.
func listenOn(ctx context.Context, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	le := &ListenError{Addr: addr, Err: err, InUse: errors.Is(err, syscall.EADDRINUSE)}
	if le.InUse {
		le.Daemon = answersAsDaemon(ctx, addr)
	}
	return nil, le
}

// probeTimeout bounds the look at what answers on an address in use.
const probeTimeout = 2 * time.Second

// answersAsDaemon reports whether a claudectl daemon answers at addr,
// over HTTP or HTTPS: its Health RPC, a path only claudectl serves,
// refuses a call without the token in its own words (no token is sent,
// and a certificate is not checked: nothing is trusted to the answer).
func answersAsDaemon(ctx context.Context, addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // ":7777", "0.0.0.0:7777": this machine answers too
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // no proxy: the address is this machine's
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for _, scheme := range []string{"http", "https"} {
		url := scheme + "://" + net.JoinHostPort(host, port) + "/" + claudectlv1connect.HealthServiceName + "/Health"
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
		if err != nil {
			return false
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		var body struct {
			Code string `json:"code"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized && err == nil && body.Code == "unauthenticated" {
			return true
		}
	}
	return false
}
